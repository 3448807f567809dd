//go:build ipvskernel

package kerneltest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// umlHowTo says how to provide the kernel when it cannot be fetched.
const umlHowTo = "install it (apt-get install user-mode-linux), or let the test fetch it " +
	"(needs apt-get and dpkg-deb, Debian 12), or point IPVS_UML_DIR at a directory holding " +
	"the extracted package (usr/bin/linux.uml, usr/lib/uml/modules/)"

// uml is an extracted user-mode-linux package.
type uml struct {
	kernel  string // usr/bin/linux.uml
	modules string // usr/lib/uml/modules/<version>
}

// findUML returns the kernel from IPVS_UML_DIR, the installed package, or the
// user cache, fetching it into the cache with apt-get when it is nowhere.
func findUML(t *testing.T) uml {
	t.Helper()
	roots := []string{os.Getenv("IPVS_UML_DIR"), "/", cacheDir(t)}
	if roots[0] != "" {
		roots = roots[:1] // an explicit directory must work on its own
	}
	for _, root := range roots {
		if u, err := umlAt(root); err == nil {
			return u
		}
	}
	if os.Getenv("IPVS_UML_DIR") != "" {
		t.Fatalf("no user-mode-linux kernel under IPVS_UML_DIR=%s: %s", roots[0], umlHowTo)
	}
	return fetchUML(t, roots[2])
}

func cacheDir(t *testing.T) string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "haproxy-weighter", "user-mode-linux")
}

func umlAt(root string) (uml, error) {
	u := uml{kernel: filepath.Join(root, "usr/bin/linux.uml")}
	if _, err := os.Stat(u.kernel); err != nil {
		return uml{}, err
	}
	vers, err := filepath.Glob(filepath.Join(root, "usr/lib/uml/modules/*/modules.dep"))
	if err != nil || len(vers) != 1 {
		return uml{}, fmt.Errorf("want one modules.dep under %s, found %d", root, len(vers))
	}
	u.modules = filepath.Dir(vers[0])
	return u, nil
}

// fetchUML downloads the Debian package and extracts it into dir; it writes
// to a temporary directory and renames, so a half-done fetch is never used.
func fetchUML(t *testing.T, dir string) uml {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatalf("user-mode-linux cache: %v", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "fetch-")
	if err != nil {
		t.Fatalf("user-mode-linux cache: %v", err)
	}
	defer os.RemoveAll(tmp)
	t.Logf("fetching user-mode-linux into %s", dir)
	run(ctx, t, tmp, "apt-get", "download", "user-mode-linux")
	debs, _ := filepath.Glob(filepath.Join(tmp, "user-mode-linux_*.deb"))
	if len(debs) != 1 {
		t.Fatalf("apt-get download user-mode-linux left %d packages: %s", len(debs), umlHowTo)
	}
	run(ctx, t, tmp, "dpkg-deb", "-x", debs[0], filepath.Join(tmp, "root"))
	if err := os.Rename(filepath.Join(tmp, "root"), dir); err != nil && !os.IsExist(err) {
		t.Fatalf("user-mode-linux cache: %v", err)
	}
	u, err := umlAt(dir)
	if err != nil {
		t.Fatalf("extracted user-mode-linux is unusable: %v: %s", err, umlHowTo)
	}
	return u
}

func run(ctx context.Context, t *testing.T, dir, name string, args ...string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s not found: %s", name, umlHowTo)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s\n%s", name, strings.Join(args, " "), err, out, umlHowTo)
	}
}

// moduleOrder returns the modules (paths relative to the modules directory)
// to load for want, dependencies first, from modules.dep, where each line
// lists a module's dependencies with the deepest last.
func moduleOrder(modulesDep []byte, want ...string) ([]string, error) {
	deps := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(modulesDep))
	for sc.Scan() {
		mod, rest, ok := strings.Cut(sc.Text(), ":")
		if ok {
			deps[mod] = strings.Fields(rest)
		}
	}
	var order []string
	seen := map[string]bool{}
	for _, w := range want {
		d, ok := deps[w]
		if !ok {
			return nil, fmt.Errorf("module %s not in modules.dep", w)
		}
		for i := len(d) - 1; i >= 0; i-- {
			if !seen[d[i]] {
				seen[d[i]] = true
				order = append(order, d[i])
			}
		}
		if !seen[w] {
			seen[w] = true
			order = append(order, w)
		}
	}
	return order, nil
}
