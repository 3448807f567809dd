//go:build ipvskernel

package kerneltest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMain turns the binary into the guest's init when it runs as PID 1, and
// into the kernel launcher when the host test asks (seccomp_test.go).
func TestMain(m *testing.M) {
	if os.Getpid() == 1 {
		guestMain()
	}
	if kernel := os.Getenv(envUMLExec); kernel != "" {
		err := execUML(kernel)
		fmt.Fprintf(os.Stderr, "exec %s: %v\n", kernel, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// guestMain runs the checks, prints the verdict and powers the kernel off.
// PID 1 must never exit (the kernel would panic), so it ends in select{}.
func guestMain() {
	if err := guest(); err != nil {
		fmt.Printf("%s: %v\n", markerFail, err)
	} else {
		fmt.Println(markerPass)
	}
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		fmt.Printf("power off: %v\n", err)
	}
	select {}
}

func guest() error {
	if err := mountAll(); err != nil {
		return err
	}
	if err := checkWithoutIPVS(); err != nil {
		return fmt.Errorf("before ip_vs is loaded: %w", err)
	}
	if err := loadModules(guestModules); err != nil {
		return err
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	return checkWriter()
}

// loopbackUp brings lo up, which also gives it 127.0.0.1. The kernel refuses
// a real server address (EINVAL) while the IPv4 local routing table does not
// exist, and that table appears with the first local address.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	return nil
}

func mountAll() error {
	for _, m := range []struct{ fs, dir string }{{"proc", "/proc"}, {"sysfs", "/sys"}} {
		if err := unix.Mount(m.fs, m.dir, m.fs, 0, ""); err != nil {
			return fmt.Errorf("mount %s: %w", m.dir, err)
		}
	}
	return nil
}

// loadModules inserts the modules in file-name order (the host numbered
// them dependencies first).
func loadModules(dir string) error {
	mods, err := filepath.Glob(filepath.Join(dir, "*.ko"))
	if err != nil || len(mods) == 0 {
		return fmt.Errorf("no modules in %s: %v", dir, err)
	}
	sort.Strings(mods)
	for _, m := range mods {
		if err := insmod(m); err != nil {
			return err
		}
	}
	return nil
}

func insmod(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("insmod %s: %w", filepath.Base(path), err)
	}
	return nil
}
