package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
)

// DefaultHAProxyVersion is the HAProxy StartHAProxy and StartHAProxyMaster
// run: Debian 12's own package, `haproxy` in PATH.
const DefaultHAProxyVersion = "2.6"

// haproxyVersions are the branches the integration tests cover: every
// HAProxy a Debian user has (12's package, 13's, sid's, experimental's).
var haproxyVersions = []string{DefaultHAProxyVersion, "3.0", "3.2", "3.4"}

// HAProxyVersions lists the HAProxy versions the integration tests run
// against, oldest first: "2.6" is Debian 12's /usr/sbin/haproxy, the others
// are Debian's newer packages fetched by tools/haproxy-versions.sh.
func HAProxyVersions() []string {
	return append([]string(nil), haproxyVersions...)
}

// fetchHint says how to get the versions a test found missing.
const fetchHint = "run tools/haproxy-versions.sh (make test runs it; it needs " +
	"apt-get install debootstrap and deb.debian.org), or point HAPROXY_VERSIONS_DIR at its cache"

// HAProxyVersionsDir is where tools/haproxy-versions.sh keeps the fetched
// versions: $HAPROXY_VERSIONS_DIR, by default
// ${XDG_CACHE_HOME:-~/.cache}/haproxy-weighter/haproxy, as in the script.
func HAProxyVersionsDir() (string, error) {
	if d := os.Getenv("HAPROXY_VERSIONS_DIR"); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the fetched HAProxy versions (set HAPROXY_VERSIONS_DIR): %w", err)
	}
	return filepath.Join(base, "haproxy-weighter", "haproxy"), nil
}

// HAProxyBinary returns the command that runs HAProxy version: `haproxy`
// from PATH for DefaultHAProxyVersion, the fetched version's wrapper
// (<dir>/bin/haproxy-<version>) for the others. It fails the test, saying
// how to get it, when the binary is missing or is another version than asked
// (a PATH haproxy that is not 2.6 would label every result wrongly).
func HAProxyBinary(t testing.TB, version string) string {
	t.Helper()
	path, err := haproxyBinary(version)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return path
}

// checked remembers each binary's `-v` check: one exec per binary and test process.
var checked sync.Map // path -> error

func haproxyBinary(version string) (string, error) {
	path, err := locateHAProxy(version)
	if err != nil {
		return "", err
	}
	if v, ok := checked.Load(path); ok {
		if v != nil {
			return "", v.(error)
		}
		return path, nil
	}
	err = checkHAProxyVersion(path, version)
	checked.Store(path, err)
	if err != nil {
		return "", err
	}
	return path, nil
}

// locateHAProxy finds the executable of version without running it.
func locateHAProxy(version string) (string, error) {
	known := false
	for _, v := range haproxyVersions {
		known = known || v == version
	}
	if !known {
		return "", fmt.Errorf("HAProxy %q is not a tested version (%v)", version, haproxyVersions)
	}
	if version == DefaultHAProxyVersion {
		path, err := exec.LookPath("haproxy")
		if err != nil {
			return "", fmt.Errorf("haproxy not found in PATH (install it: apt-get install haproxy): %w", err)
		}
		return path, nil
	}
	dir, err := HAProxyVersionsDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "bin", "haproxy-"+version)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("HAProxy %s is not fetched (%w): %s", version, err, fetchHint)
	}
	return path, nil
}

// versionLine matches `haproxy -v`'s first line: "HAProxy version 3.2.26-1 2026/10/14 - …"
// (2.6 says "HAProxy version 2.6.12-1+deb12u3 2025/…").
var versionLine = regexp.MustCompile(`(?m)^HAProxy version (\d+\.\d+)\.`)

// checkHAProxyVersion runs `path -v` and checks that it is the version asked for.
func checkHAProxyVersion(path, version string) error {
	// The fetched ones run with the trixie root's libraries and warn on
	// stderr that libpcre2 has no version information; only stdout counts.
	out, err := exec.Command(path, "-v").Output()
	if err != nil {
		return fmt.Errorf("%s -v: %w (%s)", path, err, fetchHint)
	}
	m := versionLine.FindSubmatch(out)
	if m == nil {
		return fmt.Errorf("%s -v printed no HAProxy version: %q", path, out)
	}
	if string(m[1]) != version {
		hint := fetchHint
		if version == DefaultHAProxyVersion {
			hint = "the tests take Debian 12's haproxy package (apt-get install haproxy) from PATH"
		}
		return fmt.Errorf("%s is HAProxy %s, not %s: %s", path, m[1], version, hint)
	}
	return nil
}
