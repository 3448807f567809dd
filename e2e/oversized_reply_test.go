package e2e

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// oversizedReply is a Prometheus reply of 50 MB: a query that matches a
// whole fleet, valid JSON from end to end.
func oversizedReply(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(`{"status":"success","data":{"resultType":"vector","result":[`)
	for i := 0; b.Len() < 50<<20; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"metric":{"__name__":"datapoints_received_total","server":"fleet-%08d","job":"ingest"},"value":[1700000000,"%d"]}`, i, i)
	}
	b.WriteString(`]}}`)
	return b.Bytes()
}

// gzipped is data compressed, for a server that sends gzip unasked.
func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write(data)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

// replies a fake Prometheus can give; the test switches between them.
const (
	replyNormal        = iota // the four servers' loads
	replyLength               // 50 MB with its Content-Length
	replyChunked              // 50 MB chunked, no length said
	replyGzip                 // 50 MB gzip-compressed, sent unasked
	replyGzipLength           // the same with the compressed length
	replyOversizedLast        // marker: the last kind
)

// sizedProm is a Prometheus that answers what mode says. Normal replies
// carry the time of the request, so that the points are fresh.
func sizedProm(t *testing.T, mode *atomic.Int32) *httptest.Server {
	huge := oversizedReply(t)
	zipped := gzipped(t, huge)
	t.Logf("oversized reply: %d bytes, %d gzip-compressed", len(huge), len(zipped))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch mode.Load() {
		case replyNormal:
			var b strings.Builder
			now := time.Now().Unix()
			for i, s := range servers {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"metric":{"server":%q},"value":[%d,"%v"]}`, s, now, loads[s])
			}
			fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[%s]}}`, b.String())
		case replyLength:
			w.Header().Set("Content-Length", strconv.Itoa(len(huge)))
			_, _ = w.Write(huge) // the client may stop reading
		case replyChunked:
			for rest := huge; len(rest) > 0; rest = rest[min(len(rest), 64<<10):] {
				if _, err := w.Write(rest[:min(len(rest), 64<<10)]); err != nil {
					return // the client stopped reading
				}
				w.(http.Flusher).Flush() // no Content-Length: net/http chunks
			}
		case replyGzip, replyGzipLength:
			w.Header().Set("Content-Encoding", "gzip")
			if mode.Load() == replyGzipLength {
				w.Header().Set("Content-Length", strconv.Itoa(len(zipped)))
			}
			_, _ = w.Write(zipped)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// rssKB is the process's resident set (VmRSS) and its peak (VmHWM), in kB.
func rssKB(t *testing.T, pid int) (rss, peak int) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss, _ = strconv.Atoi(f[1])
		case "VmHWM:":
			peak, _ = strconv.Atoi(f[1])
		}
	}
	require.NotZero(t, rss, "VmRSS in /proc/%d/status", pid)
	return rss, peak
}

// TestOversizedRepliesKeepMemoryBounded: replies of 50 MB (with a
// Content-Length, chunked, gzip-compressed with and without a length) are
// refused without filling the daemon's memory: its RSS after several of
// each, and its peak RSS while they came, stay within twice its steady
// state, and it weighs again once the replies are back to normal.
func TestOversizedRepliesKeepMemoryBounded(t *testing.T) {
	h := testenv.StartHAProxy(t, haproxyConfig(t))
	var mode atomic.Int32
	prom := sizedProm(t, &mode)
	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cfg := writeConfig(t, echoConfig(listen, h.Socket, prom.URL, ""))
	d := startDaemon(t, listen, "--config", cfg)
	pid := d.cmd.Process.Pid

	ok := `haproxy_weighter_cycles_total{backend="be_ingest",result="ok"}`
	srcErr := `haproxy_weighter_cycles_total{backend="be_ingest",result="source_error"}`
	testenv.WaitWithin(t, 30*time.Second, "ten good cycles (steady state)", func() bool { return d.metric(ok) >= 10 })
	steady, steadyPeak := rssKB(t, pid)
	t.Logf("steady state: VmRSS %d kB (peak %d kB)", steady, steadyPeak)

	for m := int32(replyLength); m < replyOversizedLast; m++ {
		mode.Store(m)
		base := d.metric(srcErr)
		testenv.WaitWithin(t, 60*time.Second, fmt.Sprintf("three refused replies of kind %d", m), func() bool { return d.metric(srcErr) >= base+3 })
		rss, peak := rssKB(t, pid)
		t.Logf("after three 50 MB replies of kind %d: VmRSS %d kB (peak %d kB)", m, rss, peak)
	}
	after, peak := rssKB(t, pid)
	assert.LessOrEqual(t, after, 2*steady, "VmRSS after the oversized replies (kB), against twice the steady state's %d kB", steady)
	assert.LessOrEqual(t, peak, 2*steady, "VmHWM, the peak while they came (kB), against twice the steady state's %d kB", steady)
	assert.Contains(t, d.logs.String(), "reply larger than 32 MiB", "the refusal is said")

	mode.Store(replyNormal)
	base := d.metric(ok)
	testenv.WaitWithin(t, 30*time.Second, "good cycles again", func() bool { return d.metric(ok) >= base+2 })
	t.Logf("summary: steady %d kB, after %d kB (%.2fx), peak %d kB", steady, after, float64(after)/float64(steady), peak)
}
