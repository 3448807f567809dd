package daemon

import (
	"fmt"
	"strings"
	"testing"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// With restore_on_exit and two HAProxy processes, one that hangs at exit
// (it accepts and never answers) must not cost the other its restore: each
// backend's restore has its own timeout. They shared one, which the hung
// HAProxy's backend, restored first, used up.
func TestHungHAProxyAtExitDoesNotStopTheOthersRestore(t *testing.T) {
	backend := func(name string) string {
		return testenv.HAProxyDefaults + fmt.Sprintf("\nbackend %s\n  balance roundrobin\n  server s1 127.0.0.1:%d weight 10\n  server s2 127.0.0.1:%d weight 20\n",
			name, testenv.FreePort(t), testenv.FreePort(t))
	}
	hung, up := testenv.StartHAProxy(t, backend("a")), testenv.StartHAProxy(t, backend("b"))
	yml := fmt.Sprintf("listen: \"\"\ninterval: 1h\ntimeout: 1s\nrestore_on_exit: true\nhaproxy: {socket: %s, timeout: 1s}\nbackends:\n"+
		"  - name: a\n    source: {haproxy: {counter: bytes_in}}\n"+
		"  - name: b\n    haproxy: {socket: %s}\n    source: {haproxy: {counter: bytes_in}}\n", hung.Socket, up.Socket)
	cfg, err := config.Parse("test.yml", []byte(yml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(cfg, Options{Notifier: n})
	r := startDaemon(t, d, n)
	testenv.WaitFor(t, "the start-up weights of both backends", func() bool {
		return d.startWeights.has("a") && d.startWeights.has("b")
	})
	hc, ctx := restoreClient(t, d, up.Socket)
	// The daemon's drain on the HAProxy that answers, as its cycles would write it.
	mustSetWeights(ctx, t, hc.Backend("b"), weighter.Change{Server: "s1", Weight: 0})
	hung.Freeze()
	defer hung.Thaw()
	err = r.stop()
	if err == nil || !strings.Contains(err.Error(), "backend a:") || strings.Contains(err.Error(), "backend b:") {
		t.Errorf("Run returned %v, want the failed restore of a alone", err)
	}
	if got := mustWeights(ctx, t, hc.Backend("b")); got["s1"] != 10 || got["s2"] != 20 {
		t.Errorf("b after exit: %v, want its start-up weights s1=10 s2=20 back", got)
	}
}
