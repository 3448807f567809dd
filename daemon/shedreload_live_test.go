package daemon

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// TestShedReachesTheOldWorker: the daemon on the master CLI, started after
// a reload left the whale and every other client on the old worker, sheds
// the whale: its stream is found in the old worker (the socket table counts
// that worker's connections, the new worker has no such stream) and closed
// there; no other client is touched, the new worker is never asked for the
// stream, and nothing is said of a session that had already ended.
func TestShedReachesTheOldWorker(t *testing.T) {
	front, hcfg, servers := shedBackendConfig(t)
	h := testenv.StartHAProxyMaster(t, hcfg)
	hc, err := haproxy.New(haproxy.Config{Socket: h.Socket, Master: true})
	require.NoError(t, err)
	hb := hc.Backend("be")
	// As TestShedMovesTheWhale: the whale and 19 ordinary clients on one
	// server, 20 on two others, none on the last.
	sc := openWhaleScene(t, front, hb, servers)
	whale, hot, staying := sc.whale, sc.hot, sc.staying
	old := h.Worker()
	h.Reload() // every client stays on the old worker

	counted := testenv.StartCommandCounter(t, h.Socket)
	var logs testenv.SyncBuffer
	yml := fmt.Sprintf("listen: \"\"\ninterval: 1s\njitter: 0\nhaproxy: {socket: %s, master: true}\nbackends:\n  - name: be\n"+
		"    source: {haproxy: {counter: bytes_in}}\n"+
		"    shed: {above: 2.2, for: 2, max_per_minute: 2, max_share: 0.02, min_age: 1s, cooldown: 2m, progress: 0.2}\n", counted.Socket)
	cfg, err := config.Parse("shed.yml", []byte(yml), nil)
	require.NoError(t, err)
	d := New(cfg, Options{Registry: prometheus.NewRegistry(),
		Log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	runDaemon(t, d)
	select {
	case <-whale.Done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the whale was not shed within 30 s; shedding said:\n%s", recordsText(shedRecords(t, &logs)))
	}
	var shed shedRecord
	testenv.WaitFor(t, "the shed in the log", func() bool {
		for _, r := range shedRecords(t, &logs) {
			if r.Msg == "session shed" {
				shed = r
				return true
			}
		}
		return false
	})
	t.Logf("shed %s (client %s) from %s: %s", shed.Session, shed.Client, shed.Server, shed.Reason)
	assert.Equal(t, whale.Conn.LocalAddr().String(), shed.Client)
	assert.Equal(t, hot, shed.Server)
	assert.True(t, strings.HasSuffix(shed.Session, "@!"+strconv.Itoa(old)), "the stream is named by the old worker %d", old)
	for i, c := range staying {
		assert.False(t, c.Closed.Load(), "ordinary client %d was closed", i)
	}
	for _, r := range shedRecords(t, &logs) {
		assert.NotEqual(t, "session to shed already ended", r.Msg, "session %s", r.Session)
	}
	id, _, _ := strings.Cut(shed.Session, "@!")
	for _, line := range counted.Lines() {
		if strings.Contains(line, id) {
			assert.True(t, strings.HasPrefix(line, fmt.Sprintf("@!%d ", old)), "%q: the old worker's stream asked of another process", line)
		}
	}
}
