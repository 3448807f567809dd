package examples

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The maintainer scripts are checked by running dpkg itself: two builds of the package (versions
// debVersionA and debVersionB) are installed, upgraded, removed and purged with `dpkg --root`
// into a throwaway root. dpkg chroots into that root to run the scripts, so they run against a
// copy of this machine's essential packages (sh, coreutils, perl-base, adduser, dpkg and
// init-system-helpers' real deb-systemd-helper and deb-systemd-invoke) and a systemctl stand-in
// that records every call. The root has /run/systemd/system, so the scripts take their
// "systemd is running" path, unless a test removes it.

const (
	debVersionA = "1.0.0~test1"
	debVersionB = "1.0.0~test2"
	debUnit     = "haproxy-weighter.service"
	// wantsLink is where `systemctl enable` puts the unit ([Install] WantedBy=multi-user.target).
	wantsLink = "/etc/systemd/system/multi-user.target.wants/" + debUnit
	maskLink  = "/etc/systemd/system/" + debUnit
	// stubActive exists while the stand-in considers the unit running.
	stubActive = "/run/systemctl-stub/" + debUnit + ".active"
	stubLog    = "/systemctl.log"
)

// systemctlStub replaces /usr/bin/systemctl in the root. It appends its arguments to
// /systemctl.log and keeps just enough state for deb-systemd-invoke and the test: a unit is
// enabled when its WantedBy= symlinks exist, masked when /etc/systemd/system/<unit> points at
// /dev/null, running while /run/systemctl-stub/<unit>.active exists.
const systemctlStub = `#!/bin/sh
echo "$*" >>/systemctl.log
[ "$1" = --version ] && { echo "systemd 252 (252)"; exit 0; }
verb='' unit='' now=''
for a in "$@"; do
    case $a in
    --now) now=1 ;;
    -*) ;;
    *) if [ -z "$verb" ]; then verb=$a; elif [ -z "$unit" ]; then unit=$a; fi ;;
    esac
done
active=/run/systemctl-stub/$unit.active
links() {
    for t in $(sed -n 's/^WantedBy=//p' "/lib/systemd/system/$unit" 2>/dev/null); do
        echo "/etc/systemd/system/$t.wants/$unit"
    done
}
case $verb in
is-enabled)
    if [ "$(readlink "/etc/systemd/system/$unit")" = /dev/null ]; then echo masked; exit 1; fi
    for l in $(links); do [ -L "$l" ] && { echo enabled; exit 0; }; done
    echo disabled; exit 1 ;;
is-active)
    [ -e "$active" ] && { echo active; exit 0; }
    echo inactive; exit 3 ;;
start | restart) mkdir -p /run/systemctl-stub && : >"$active" ;;
stop) rm -f "$active" ;;
enable | preset)
    for l in $(links); do mkdir -p "$(dirname "$l")" && ln -sf "/lib/systemd/system/$unit" "$l"; done
    [ -n "$now" ] && mkdir -p /run/systemctl-stub && : >"$active" ;;
disable)
    for l in $(links); do rm -f "$l"; done
    [ -n "$now" ] && rm -f "$active" ;;
esac
exit 0
`

var (
	debsOnce sync.Once
	debs     []string
	debsErr  error
)

// buildDebs builds the package twice with `make deb`, as versions debVersionA and debVersionB,
// once per test run.
func buildDebs(t *testing.T) (a, b string) {
	t.Helper()
	makeBin := requireTool(t, "make", "apt-get install make")
	debsOnce.Do(func() {
		dist := filepath.Join(tmpRoot, "debs")
		for _, v := range []string{debVersionA, debVersionB} {
			// Its own DEB_WORK: nothing else building a package in this tree writes into it.
			mk := exec.Command(makeBin, "deb", "DIST="+dist, "GO="+goTool(), "DEB_VERSION="+v, "DEB_WORK="+filepath.Join(tmpRoot, "debwork-"+v))
			mk.Dir = ".."
			if out, err := mk.CombinedOutput(); err != nil {
				debsErr = fmt.Errorf("make deb DEB_VERSION=%s: %v\n%s", v, err, out)
				return
			}
			got, _ := filepath.Glob(filepath.Join(dist, "haproxy-weighter_"+v+"_*.deb"))
			if len(got) != 1 {
				debsErr = fmt.Errorf("make deb DEB_VERSION=%s produced %v", v, got)
				return
			}
			debs = append(debs, got[0])
		}
	})
	if debsErr != nil {
		t.Fatal(debsErr)
	}
	return debs[0], debs[1]
}

// debRoot is a throwaway root holding a copy of this machine's essential packages plus adduser,
// their dpkg records, its users and groups, the systemctl stand-in, and /run/systemd/system.
func debRoot(t *testing.T) string {
	t.Helper()
	requireTool(t, "dpkg-query", "apt-get install dpkg")
	root := t.TempDir()
	// Merged /usr: /bin, /lib, ... are symlinks into /usr, as on this machine.
	for _, d := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		if target, err := os.Readlink("/" + d); err == nil && !filepath.IsAbs(target) {
			must(t, os.MkdirAll(filepath.Join(root, target), 0o755))
			must(t, os.Symlink(target, filepath.Join(root, d)))
		}
	}
	pkgs := essentialPackages(t)
	for _, p := range strings.Split(run(t, time.Minute, "dpkg-query", append([]string{"-L"}, pkgs...)...), "\n") {
		if strings.HasPrefix(p, "/") {
			copyIntoRoot(t, root, p)
		}
	}
	// dpkg's records of those packages, so Depends: adduser is satisfied in the root.
	admin := filepath.Join(root, "var/lib/dpkg")
	for _, d := range []string{"info", "updates", "triggers", "alternatives"} {
		must(t, os.MkdirAll(filepath.Join(admin, d), 0o755))
	}
	writeFile(t, filepath.Join(admin, "status"), run(t, time.Minute, "dpkg-query", append([]string{"-s"}, pkgs...)...))
	for _, f := range []string{"available", "diversions", "statoverride"} {
		writeFile(t, filepath.Join(admin, f), "")
	}
	for _, p := range pkgs {
		lists, _ := filepath.Glob("/var/lib/dpkg/info/" + p + "*.list")
		for _, l := range lists {
			if n := strings.TrimSuffix(filepath.Base(l), ".list"); n == p || strings.HasPrefix(n, p+":") {
				copyIntoRoot(t, root, l)
			}
		}
	}
	// This machine's /etc (users, groups, PAM, nsswitch), as the packages' scripts left it.
	must(t, filepath.WalkDir("/etc", func(p string, _ fs.DirEntry, err error) error {
		if err == nil {
			copyIntoRoot(t, root, p)
		}
		return nil
	}))
	for _, d := range []string{"tmp", "var/tmp", "var/log", "var/cache", "dev", "run/systemd/system", "etc/systemd/system"} {
		must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	must(t, os.Chmod(filepath.Join(root, "tmp"), 0o1777))
	// /dev/null: the character device if this machine lets root make one, else a plain file.
	null := filepath.Join(root, "dev/null")
	if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		writeFile(t, null, "")
	}
	must(t, os.Chmod(null, 0o666))
	stub := filepath.Join(root, "usr/bin/systemctl")
	_ = os.Remove(stub)
	must(t, os.WriteFile(stub, []byte(systemctlStub), 0o755))
	return root
}

// essentialPackages lists the installed packages that are Essential or of Priority required,
// plus adduser, and everything they depend on.
func essentialPackages(t *testing.T) []string {
	t.Helper()
	installed := map[string]bool{}
	deps := map[string]string{}
	var todo []string
	for _, line := range strings.Split(run(t, time.Minute, "dpkg-query", "-W", "-f", "${db:Status-Abbrev}|${Package}|${Priority}|${Essential}|${Pre-Depends}, ${Depends}\n"), "\n") {
		f := strings.SplitN(line, "|", 5)
		if len(f) != 5 || !strings.HasPrefix(f[0], "ii") {
			continue
		}
		installed[f[1]], deps[f[1]] = true, f[4]
		if f[2] == "required" || f[3] == "yes" || f[1] == "adduser" {
			todo = append(todo, f[1])
		}
	}
	seen := map[string]bool{}
	var pkgs []string
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[p] {
			continue
		}
		seen[p] = true
		pkgs = append(pkgs, p)
		for _, dep := range strings.Split(deps[p], ",") {
			for _, alt := range strings.Split(dep, "|") { // the first installed alternative
				name, _, _ := strings.Cut(strings.TrimSpace(alt), " ")
				name, _, _ = strings.Cut(name, ":")
				if installed[name] {
					todo = append(todo, name)
					break
				}
			}
		}
	}
	return pkgs
}

// copyIntoRoot copies path p of this machine (a directory, symlink or file) to root+p.
func copyIntoRoot(t *testing.T, root, p string) {
	t.Helper()
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return // excluded from this machine's install (e.g. dpkg path-exclude of docs)
	}
	must(t, err)
	dst := filepath.Join(root, p)
	if fi.IsDir() {
		must(t, os.MkdirAll(dst, fi.Mode().Perm()))
		return
	}
	must(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	if _, err := os.Lstat(dst); err == nil {
		return
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(p)
		must(t, err)
		must(t, os.Symlink(target, dst))
		return
	}
	if !fi.Mode().IsRegular() {
		return
	}
	data, err := os.ReadFile(p)
	must(t, err)
	must(t, os.WriteFile(dst, data, fi.Mode().Perm()))
	must(t, os.Chmod(dst, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// rootDpkg runs dpkg --root on root and returns the systemctl calls the maintainer scripts made.
func rootDpkg(t *testing.T, root string, args ...string) []string {
	t.Helper()
	calls, _ := rootDpkgOutput(t, root, args...)
	return calls
}

// rootDpkgOutput is rootDpkg that also returns dpkg's output (the scripts' stdout and stderr).
func rootDpkgOutput(t *testing.T, root string, args ...string) (calls []string, output string) {
	t.Helper()
	dpkg := requireTool(t, "dpkg", "apt-get install dpkg")
	cmd := exec.Command(dpkg, append([]string{"--root=" + root}, args...)...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("dpkg %s:\n%s", strings.Join(args, " "), out)
	return takeSystemctlCalls(t, root), string(out)
}

// takeSystemctlCalls returns and clears the stand-in's log.
func takeSystemctlCalls(t *testing.T, root string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, stubLog))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	must(t, err)
	defer os.Remove(f.Name())
	defer f.Close()
	var calls []string
	for s := bufio.NewScanner(f); s.Scan(); {
		calls = append(calls, s.Text())
	}
	return calls
}

// inRoot runs a command chrooted into root, as an administrator would on that machine.
func inRoot(t *testing.T, root string, args ...string) string {
	t.Helper()
	chroot := requireTool(t, "chroot", "apt-get install coreutils")
	return run(t, time.Minute, chroot, append([]string{root}, args...)...)
}

func exists(root, p string) bool {
	_, err := os.Lstat(filepath.Join(root, p))
	return err == nil
}

func fileHas(t *testing.T, root, p, prefix string) bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, p))
	must(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}

func wantCalls(t *testing.T, step string, got, want []string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: systemctl calls\n got  %q\n want %q", step, got, want)
	}
}

func requireDebRoot(t *testing.T) {
	t.Helper()
	requireTool(t, "dpkg", "apt-get install dpkg")
	requireTool(t, "deb-systemd-helper", "apt-get install init-system-helpers")
	requireTool(t, "adduser", "apt-get install adduser")
	if os.Geteuid() != 0 {
		t.Fatal("dpkg --root chroots to run the maintainer scripts, which needs root (CI runs as root): run the tests as root")
	}
}

// TestDebScriptsLifecycle: install, enable by hand, upgrade, remove, purge — the service keeps
// running and stays enabled across the upgrade, stops on remove, and purge leaves nothing.
func TestDebScriptsLifecycle(t *testing.T) {
	requireDebRoot(t)
	debA, debB := buildDebs(t)
	root := debRoot(t)
	// HAProxy's group, as Debian's haproxy package creates it: the service user joins it.
	if !fileHas(t, root, "/etc/group", "haproxy:") {
		inRoot(t, root, "groupadd", "--system", "haproxy")
	}

	// A fresh install creates the user but neither enables nor starts the service: the
	// shipped config names a placeholder backend.
	calls := rootDpkg(t, root, "-i", debA)
	wantCalls(t, "install", calls, []string{"--system daemon-reload"})
	if exists(root, wantsLink) || exists(root, stubActive) {
		t.Errorf("install: the service was enabled or started")
	}
	if !fileHas(t, root, "/etc/passwd", "haproxy-weighter:") || !fileHas(t, root, "/etc/group", "haproxy-weighter:") {
		t.Errorf("install: no haproxy-weighter user and group")
	}
	if fi, err := os.Stat(filepath.Join(root, "/etc/haproxy-weighter/config.yaml")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("install: config.yaml %v %v, want mode 0640", fi, err)
	}
	if owner := inRoot(t, root, "stat", "-c", "%U:%G", "/etc/haproxy-weighter/config.yaml"); strings.TrimSpace(owner) != "root:haproxy-weighter" {
		t.Errorf("install: config.yaml owned by %q, want root:haproxy-weighter", owner)
	}

	// The administrator edits the config and enables the service.
	inRoot(t, root, "systemctl", "enable", "--now", debUnit)
	takeSystemctlCalls(t, root)

	calls = rootDpkg(t, root, "-i", debB)
	wantCalls(t, "upgrade", calls, []string{"--system daemon-reload", "try-restart " + debUnit})
	if !exists(root, wantsLink) {
		t.Errorf("upgrade: the service is no longer enabled (%s gone)", wantsLink)
	}
	if !exists(root, stubActive) {
		t.Errorf("upgrade: the service is no longer running")
	}
	if v := inRoot(t, root, "dpkg-query", "-W", "-f", "${Version}", "haproxy-weighter"); v != debVersionB {
		t.Errorf("upgrade: installed version %q, want %s", v, debVersionB)
	}
	if groups := inRoot(t, root, "id", "-nG", "haproxy-weighter"); !strings.Contains(" "+strings.TrimSpace(groups)+" ", " haproxy ") {
		t.Errorf("upgrade: user haproxy-weighter is in groups %q, want haproxy among them", groups)
	}

	calls = rootDpkg(t, root, "-r", "haproxy-weighter")
	wantCalls(t, "remove", calls, []string{"stop " + debUnit, "daemon-reload", "--system daemon-reload"})
	if exists(root, stubActive) {
		t.Errorf("remove: the service still runs")
	}
	if l, _ := os.Readlink(filepath.Join(root, maskLink)); l != "/dev/null" {
		t.Errorf("remove: %s -> %q, want a mask (-> /dev/null)", maskLink, l)
	}
	if !fileHas(t, root, "/etc/passwd", "haproxy-weighter:") || !exists(root, "/etc/haproxy-weighter/config.yaml") {
		t.Errorf("remove: the user or the config is gone; only purge removes them")
	}

	calls = rootDpkg(t, root, "-P", "haproxy-weighter")
	wantCalls(t, "purge", calls, []string{"daemon-reload", "daemon-reload"})
	for _, p := range []string{wantsLink, maskLink, "/etc/haproxy-weighter", "/var/lib/systemd/deb-systemd-helper-enabled/" + debUnit + ".dsh-also", "/usr/bin/haproxy-weighter", "/lib/systemd/system/" + debUnit} {
		if exists(root, p) {
			t.Errorf("purge: %s is still there", p)
		}
	}
	if fileHas(t, root, "/etc/passwd", "haproxy-weighter:") || fileHas(t, root, "/etc/group", "haproxy-weighter:") {
		t.Errorf("purge: the haproxy-weighter user or group is still there")
	}
}

// TestDebScriptsUpgradeLeavesStoppedServiceAlone: an upgrade restarts only a running service
// (try-restart), so a service the administrator never enabled stays disabled and stopped, and
// a reinstall after remove brings back the administrator's enablement without starting it.
func TestDebScriptsUpgradeLeavesStoppedServiceAlone(t *testing.T) {
	requireDebRoot(t)
	debA, debB := buildDebs(t)
	root := debRoot(t)

	rootDpkg(t, root, "-i", debA)
	calls := rootDpkg(t, root, "-i", debB)
	wantCalls(t, "upgrade", calls, []string{"--system daemon-reload", "try-restart " + debUnit})
	if exists(root, wantsLink) || exists(root, stubActive) {
		t.Errorf("upgrade: a service that was never enabled got enabled or started")
	}

	inRoot(t, root, "systemctl", "enable", debUnit) // enabled, not started
	takeSystemctlCalls(t, root)
	rootDpkg(t, root, "-r", "haproxy-weighter")
	calls = rootDpkg(t, root, "-i", debA)
	wantCalls(t, "reinstall after remove", calls, []string{"daemon-reload", "--system daemon-reload", "try-restart " + debUnit})
	if !exists(root, wantsLink) || exists(root, maskLink) {
		t.Errorf("reinstall after remove: want the unit enabled again and unmasked")
	}
	if exists(root, stubActive) {
		t.Errorf("reinstall after remove: the service was started")
	}
}

// TestDebScriptsWithoutSystemd: in a container without systemd the scripts call no systemctl
// and still install, upgrade and purge.
func TestDebScriptsWithoutSystemd(t *testing.T) {
	requireDebRoot(t)
	debA, debB := buildDebs(t)
	root := debRoot(t)
	must(t, os.Remove(filepath.Join(root, "run/systemd/system")))

	for _, step := range [][]string{{"-i", debA}, {"-i", debB}, {"-r", "haproxy-weighter"}, {"-P", "haproxy-weighter"}} {
		wantCalls(t, "dpkg "+step[0], rootDpkg(t, root, step...), nil)
	}
	if fileHas(t, root, "/etc/passwd", "haproxy-weighter:") {
		t.Errorf("purge: the haproxy-weighter user is still there")
	}
}

// Maintainer scripts of the packages built before the scripts followed dh_installsystemd: the
// prerm stopped and disabled the service on every call, upgrades included.
const (
	legacyPostinst = `#!/bin/sh
set -e
if ! getent passwd haproxy-weighter >/dev/null; then
    adduser --system --group --no-create-home --home /nonexistent \
        --gecos "haproxy-weighter" haproxy-weighter >/dev/null 2>&1 ||
        useradd --system --user-group --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin haproxy-weighter
fi
if getent group haproxy >/dev/null; then
    usermod -a -G haproxy haproxy-weighter || true
fi
chown root:haproxy-weighter /etc/haproxy-weighter/config.yaml
chmod 0640 /etc/haproxy-weighter/config.yaml
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
fi
`
	legacyPrerm = `#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
    systemctl stop haproxy-weighter.service 2>/dev/null || true
    systemctl disable haproxy-weighter.service 2>/dev/null || true
fi
`
	legacyPostrm = `#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
fi
if [ "$1" = "purge" ] && getent passwd haproxy-weighter >/dev/null; then
    deluser --system haproxy-weighter >/dev/null 2>&1 || userdel haproxy-weighter || true
fi
`
)

// legacyDeb builds the package as version 0.9.0 with the legacy maintainer scripts.
func legacyDeb(t *testing.T) string {
	t.Helper()
	makeBin := requireTool(t, "make", "apt-get install make")
	dir := t.TempDir()
	scripts := map[string]string{"postinstall": legacyPostinst, "preremove": legacyPrerm, "postremove": legacyPostrm}
	conf, err := os.ReadFile("../nfpm.yaml")
	must(t, err)
	head, _, ok := strings.Cut(string(conf), "\nscripts:\n")
	if !ok {
		t.Fatal("nfpm.yaml has no scripts: section")
	}
	var b strings.Builder
	b.WriteString(head + "\nscripts:\n")
	for _, name := range []string{"postinstall", "preremove", "postremove"} {
		p := filepath.Join(dir, name+".sh")
		must(t, os.WriteFile(p, []byte(scripts[name]), 0o755))
		b.WriteString("  " + name + ": " + p + "\n")
	}
	config := filepath.Join(dir, "nfpm.yaml")
	writeFile(t, config, b.String())
	mk := exec.Command(makeBin, "deb", "DIST="+dir, "GO="+goTool(), "DEB_VERSION=0.9.0", "NFPM_CONFIG="+config, "DEB_WORK="+filepath.Join(dir, "work"))
	mk.Dir = ".."
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make deb (legacy scripts): %v\n%s", err, out)
	}
	got, _ := filepath.Glob(filepath.Join(dir, "haproxy-weighter_0.9.0_*.deb"))
	if len(got) != 1 {
		t.Fatalf("make deb (legacy scripts) produced %v", got)
	}
	return got[0]
}

// TestDebScriptsUpgradeFromLegacyPackage: the first upgrade from a package with the legacy
// scripts still loses the service (dpkg runs the old prerm, which disables it); the new postinst
// cannot know whether it was enabled, so it says how to bring it back. The next upgrade keeps it.
func TestDebScriptsUpgradeFromLegacyPackage(t *testing.T) {
	requireDebRoot(t)
	legacy := legacyDeb(t)
	debA, debB := buildDebs(t)
	root := debRoot(t)

	rootDpkg(t, root, "-i", legacy)
	inRoot(t, root, "systemctl", "enable", "--now", debUnit)
	takeSystemctlCalls(t, root)

	calls, out := rootDpkgOutput(t, root, "-i", debA)
	wantCalls(t, "upgrade from the legacy package", calls, []string{
		"stop " + debUnit, "disable " + debUnit, // the legacy prerm
		"daemon-reload",                                    // the legacy postrm
		"--system daemon-reload", "try-restart " + debUnit, // the new postinst
	})
	if !strings.Contains(out, "systemctl enable --now haproxy-weighter") {
		t.Errorf("upgrade from the legacy package: no hint to re-enable the service in dpkg's output:\n%s", out)
	}

	inRoot(t, root, "systemctl", "enable", "--now", debUnit)
	takeSystemctlCalls(t, root)
	calls, out = rootDpkgOutput(t, root, "-i", debB)
	wantCalls(t, "next upgrade", calls, []string{"--system daemon-reload", "try-restart " + debUnit})
	if strings.Contains(out, "systemctl enable --now") {
		t.Errorf("next upgrade: the re-enable hint again:\n%s", out)
	}
	if !exists(root, wantsLink) || !exists(root, stubActive) {
		t.Errorf("next upgrade: the service is not enabled and running")
	}
}

// TestDebScriptsWithoutHAProxyGroup: the unit names SupplementaryGroups=haproxy, and systemd
// refuses to start a unit whose supplementary group does not exist (status=216/GROUP). On a
// machine without that group yet (no HAProxy, or HAProxy configured after this package) the
// install says so and how to clear it where no local HAProxy is wanted (IPVS, a host:port
// socket); once the haproxy package has made the group, the next configure adds the service
// user to it and says nothing.
func TestDebScriptsWithoutHAProxyGroup(t *testing.T) {
	requireDebRoot(t)
	debA, debB := buildDebs(t)
	root := debRoot(t)
	if fileHas(t, root, "/etc/passwd", "haproxy:") {
		inRoot(t, root, "userdel", "haproxy")
	}
	if fileHas(t, root, "/etc/group", "haproxy:") {
		inRoot(t, root, "groupdel", "haproxy")
	}
	unit, err := os.ReadFile(unitPath)
	must(t, err)
	if !strings.Contains(string(unit), "\nSupplementaryGroups=haproxy\n") {
		t.Fatalf("%s no longer names SupplementaryGroups=haproxy: revisit this test", unitPath)
	}

	_, out := rootDpkgOutput(t, root, "-i", debA)
	for _, want := range []string{"no group haproxy", "SupplementaryGroups=", "systemctl edit haproxy-weighter"} {
		if !strings.Contains(out, want) {
			t.Errorf("install without a haproxy group: dpkg's output lacks %q:\n%s", want, out)
		}
	}

	inRoot(t, root, "groupadd", "--system", "haproxy")
	_, out = rootDpkgOutput(t, root, "-i", debB)
	if strings.Contains(out, "no group haproxy") {
		t.Errorf("upgrade with a haproxy group: the hint again:\n%s", out)
	}
	if groups := inRoot(t, root, "id", "-nG", "haproxy-weighter"); !strings.Contains(" "+strings.TrimSpace(groups)+" ", " haproxy ") {
		t.Errorf("upgrade with a haproxy group: user haproxy-weighter is in groups %q, want haproxy among them", groups)
	}
}
