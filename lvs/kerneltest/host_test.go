//go:build ipvskernel

package kerneltest

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Console markers the guest prints; the host looks for exactly these.
const (
	markerPass = "IPVS-KERNEL-TEST: PASS"
	markerFail = "IPVS-KERNEL-TEST: FAIL"
)

// Paths inside the guest.
const (
	guestModules  = "/modules"
	guestIPVSADM  = "/usr/sbin/ipvsadm"
	guestLibs     = "/lib/ipvsadm"
	bootTimeLimit = 2 * time.Minute
)

// TestIPVSKernel boots user-mode Linux with this binary as /init and reads
// the verdict of the guest (guest_test.go) from the console.
func TestIPVSKernel(t *testing.T) {
	u := findUML(t)
	fs := initramfs{}
	fs.file("/init", 0o755, readFile(t, staticSelf(t)))
	fs.chr("/dev/console", 5, 1)
	fs.chr("/dev/null", 1, 3)
	fs.dirs("proc")
	fs.dirs("sys")
	addModules(t, fs, u.modules)
	addIPVSADM(t, fs)
	img, err := fs.gzip()
	if err != nil {
		t.Fatalf("build initramfs: %v", err)
	}
	dir := t.TempDir()
	initrd := filepath.Join(dir, "initrd.gz")
	if err := os.WriteFile(initrd, img, 0o644); err != nil {
		t.Fatal(err)
	}
	out := boot(t, u.kernel, initrd, dir)
	t.Logf("guest console:\n%s", out)
	switch {
	case strings.Contains(out, markerPass):
	case strings.Contains(out, markerFail):
		t.Fatalf("the guest's checks failed (see the console above)")
	default:
		t.Fatalf("the guest printed no verdict: it did not boot or crashed (see the console above)")
	}
}

// boot runs the kernel until the guest powers off. UML forks helper
// processes, so the whole process group is killed on timeout.
func boot(t *testing.T, kernel, initrd, tmp string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bootTimeLimit)
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The kernel passes GODEBUG to init as an environment variable: the
	// guest's Go runtime must not use AVX (see seccomp_test.go).
	cmd := exec.CommandContext(ctx, self, "mem=256M", "initrd="+initrd,
		"con0=fd:0,fd:1", "con=null", "quiet", "GODEBUG=cpu.all=off")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, envUMLExec+"="+kernel) // TMPDIR: UML's memory file
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	start := time.Now()
	err = cmd.Run()
	t.Logf("user-mode linux ran %.1fs (exit: %v)", time.Since(start).Seconds(), err)
	if ctx.Err() != nil {
		t.Errorf("user-mode linux did not power off within %v", bootTimeLimit)
	}
	return out.String()
}

// staticSelf returns a static build of this test binary: itself when it is
// static already (make test-ipvs builds it with CGO_ENABLED=0), else a fresh
// go test -c. A dynamic binary cannot be /init: the initramfs has no libc.
func staticSelf(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if isStatic(t, self) {
		return self
	}
	out := filepath.Join(t.TempDir(), "init")
	cmd := exec.Command("go", "test", "-c", "-tags", "ipvskernel", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("this test binary is dynamic and a static rebuild failed (run make test-ipvs): %v\n%s", err, b)
	}
	return out
}

func isStatic(t *testing.T, path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

func addModules(t *testing.T, fs initramfs, dir string) {
	t.Helper()
	order, err := moduleOrder(readFile(t, filepath.Join(dir, "modules.dep")),
		"kernel/net/netfilter/ipvs/ip_vs.ko", "kernel/net/netfilter/ipvs/ip_vs_wrr.ko")
	if err != nil {
		t.Fatalf("user-mode-linux modules: %v", err)
	}
	for i, m := range order {
		name := fmt.Sprintf("%s/%02d-%s", guestModules, i, filepath.Base(m))
		fs.file(name, 0o644, readFile(t, filepath.Join(dir, m)))
	}
}

// addIPVSADM copies the host's ipvsadm and the shared libraries ldd finds
// for it; the program interpreter keeps its absolute path, which is baked
// into the binary.
func addIPVSADM(t *testing.T, fs initramfs) {
	t.Helper()
	bin, err := exec.LookPath("ipvsadm")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/ipvsadm"); err != nil {
			t.Fatalf("ipvsadm not found: install it (apt-get install ipvsadm)")
		}
	}
	fs.file(guestIPVSADM, 0o755, readFile(t, bin))
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v (is libc-bin installed?)", bin, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			fs.file(guestLibs+"/"+f[0], 0o755, readFile(t, f[2]))
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			fs.file(f[0], 0o755, readFile(t, f[0]))
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
