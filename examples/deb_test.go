package examples

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDebPackage builds the .deb with `make deb` (nfpm through `go run`, cached after the
// first build), installs it with dpkg on this machine, checks what it installed, and
// purges it again. It needs root, as CI has.
func TestDebPackage(t *testing.T) {
	t.Parallel()
	dpkg := requireTool(t, "dpkg", "apt-get install dpkg")
	makeBin := requireTool(t, "make", "apt-get install make")
	if os.Geteuid() != 0 {
		t.Fatal("installing the .deb needs root (CI runs as root): run the tests as root")
	}
	dist := t.TempDir()
	mk := exec.Command(makeBin, "deb", "DIST="+dist, "GO="+goTool(), "DEB_WORK="+filepath.Join(dist, "work"))
	mk.Dir = ".."
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make deb: %v\n%s", err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(dist, "haproxy-weighter_*.deb"))
	if len(debs) != 1 {
		t.Fatalf("make deb produced %v, want one haproxy-weighter_*.deb", debs)
	}
	contents := run(t, time.Minute, "dpkg-deb", "--contents", debs[0])
	for _, f := range []string{"./usr/bin/haproxy-weighter", "./lib/systemd/system/haproxy-weighter.service", "./etc/haproxy-weighter/config.yaml",
		"./usr/share/doc/haproxy-weighter/changelog.gz", "./usr/share/doc/haproxy-weighter/copyright",
		"./usr/share/man/man1/haproxy-weighter.1.gz", "./usr/share/man/man1/haproxy-weighter-run.1.gz", "./usr/share/lintian/overrides/haproxy-weighter",
		"./" + bashCompletion, "./" + zshCompletion, "./" + fishCompletion} {
		if !strings.Contains(contents, f) {
			t.Errorf("package lacks %s:\n%s", f, contents)
		}
	}

	t.Cleanup(func() {
		if out, err := runErr(2*time.Minute, dpkg, "--purge", "haproxy-weighter"); err != nil {
			t.Errorf("dpkg --purge: %v\n%s", err, out)
		}
		for _, f := range []string{"/usr/bin/haproxy-weighter", "/lib/systemd/system/haproxy-weighter.service", "/etc/haproxy-weighter/config.yaml"} {
			if _, err := os.Stat(f); err == nil {
				t.Errorf("%s still there after dpkg --purge", f)
			}
		}
		if _, err := runErr(time.Minute, "getent", "passwd", "haproxy-weighter"); err == nil {
			t.Errorf("user haproxy-weighter still there after dpkg --purge")
		}
	})
	run(t, 2*time.Minute, dpkg, "-i", debs[0])

	out := run(t, time.Minute, "/usr/bin/haproxy-weighter", "version")
	if !strings.HasPrefix(out, "haproxy-weighter ") {
		t.Errorf("haproxy-weighter version: %q", out)
	}
	unit, err := os.ReadFile("/lib/systemd/system/haproxy-weighter.service")
	want, _ := os.ReadFile(unitPath)
	if err != nil || string(unit) != string(want) {
		t.Errorf("installed unit differs from %s (err %v)", unitPath, err)
	}
	// The example config is a conffile, readable by the service user only, and valid.
	if fi, err := os.Stat("/etc/haproxy-weighter/config.yaml"); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("/etc/haproxy-weighter/config.yaml: %v %v, want mode 0640", fi, err)
	}
	run(t, time.Minute, "/usr/bin/haproxy-weighter", "validate", "/etc/haproxy-weighter/config.yaml")
	conffiles := run(t, time.Minute, "dpkg-query", "--control-show", "haproxy-weighter", "conffiles")
	if !strings.Contains(conffiles, "/etc/haproxy-weighter/config.yaml") {
		t.Errorf("config.yaml is not a conffile: %q", conffiles)
	}
	run(t, time.Minute, "getent", "passwd", "haproxy-weighter")
}

// TestDebLintian runs lintian (with --pedantic) on the package: it must report nothing. The two
// deliberate exceptions are overridden in packaging/lintian-overrides, with the reason, and
// listed in the README.
func TestDebLintian(t *testing.T) {
	lintian := requireTool(t, "lintian", "apt-get install lintian")
	deb, _ := buildDebs(t)
	out, err := runErr(5*time.Minute, lintian, "--pedantic", "--fail-on", "error,warning,info,pedantic", deb)
	var tags []string
	for _, line := range strings.Split(out, "\n") {
		if len(line) > 2 && line[1] == ':' && strings.ContainsRune("EWIPX", rune(line[0])) {
			tags = append(tags, line)
		}
	}
	if err != nil || len(tags) > 0 {
		t.Errorf("lintian %s: %v\n%s\nfix the package, or override a deliberate exception in packaging/lintian-overrides with the reason and list it in the README", deb, err, out)
	}
}
