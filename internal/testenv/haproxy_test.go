package testenv

import (
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
)

// fatalTB records Fatalf instead of failing the real test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestMissingHAProxyFailsWithInstallHint(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); StartHAProxy(f, "") }()
	<-done
	if want := "apt-get install haproxy"; !strings.Contains(f.msg, want) {
		t.Fatalf("message %q does not say %q", f.msg, want)
	}
}

func TestStartKillRestart(t *testing.T) {
	h := StartHAProxy(t, HAProxyDefaults)
	if h.PID() == 0 {
		t.Fatal("no pid")
	}
	h.Kill()
	if _, err := net.Dial("unix", h.Socket); err == nil {
		t.Fatal("socket still answers after Kill")
	}
	h.Restart()
	if err := showInfo(h.Socket); err != nil {
		t.Fatalf("after Restart: %v", err)
	}
	if _, err := net.Dial("tcp", h.TCPSocket); err != nil {
		t.Fatalf("tcp socket: %v", err)
	}
}
