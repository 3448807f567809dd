package sources

import (
	"bytes"
	"compress/gzip"
	"context"
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

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
)

// TestTooLongContentLengthIsRefusedUnread: a reply that says it is longer
// than the limit is refused on its headers. The server sends none of the
// body it announced and waits for the client to go: a client that read the
// body would wait until its timeout and fail as unreachable instead. Graphite
// does not ask again: the same query would get the same reply.
func TestTooLongContentLengthIsRefusedUnread(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Length", strconv.Itoa(50<<20))
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)

	g, err := NewGraphite(graphiteAt(srv.URL, func(c *GraphiteConfig) {
		c.Target, c.Retries, c.Timeout = "x", 2, duration.Duration(time.Minute)
	}), nil)
	require.NoError(t, err)
	_, err = g.Fetch(context.Background(), nil)
	require.ErrorIs(t, err, ErrBadReply)
	assert.ErrorContains(t, err, "http 200 with content-length 52428800: reply larger than 32 MiB")
	assert.Equal(t, int32(1), asked.Load(), "requests for one fetch")

	p, err := NewPrometheus(promAt(srv.URL, "x", func(c *PrometheusConfig) { c.Timeout = duration.Duration(time.Minute) }), nil)
	require.NoError(t, err)
	_, err = p.Fetch(context.Background(), nil)
	require.ErrorIs(t, err, ErrBadReply)
	assert.ErrorContains(t, err, "reply larger than 32 MiB")
}

// TestUnsizedReplyIsCountedBeforeItIsRead: a chunked reply longer than
// what is kept in memory, and within the limit, reaches the decoder whole
// and intact through the temporary file, which is gone afterwards, as it is
// after a chunked reply over the limit.
func TestUnsizedReplyIsCountedBeforeItIsRead(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	const points = 200000 // about 5 MiB of JSON, over inMemory
	var reply bytes.Buffer
	reply.WriteString(`[{"target":"tcp.node-1.rx","datapoints":[`)
	for i := range points {
		if i > 0 {
			reply.WriteByte(',')
		}
		fmt.Fprintf(&reply, "[%d.5,%d]", i, 1796028450+i)
	}
	reply.WriteString(`]}]`)
	require.Greater(t, reply.Len(), inMemory)
	var huge atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		body := reply.Bytes()
		if huge.Load() {
			body = bytes.Repeat([]byte(" "), maxBody+1)
		}
		for len(body) > 0 { // flushed piece by piece: chunked, no length
			n := min(len(body), 64<<10)
			if _, err := w.Write(body[:n]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			body = body[n:]
		}
	}))
	t.Cleanup(srv.Close)

	g, err := NewGraphite(graphiteAt(srv.URL, func(c *GraphiteConfig) {
		c.Target, c.ServerNode, c.From, c.Timeout = "tcp.*.rx", intp(1), "-1y", duration.Duration(time.Minute)
	}), nil)
	require.NoError(t, err)
	loads, err := g.Fetch(context.Background(), nil)
	require.NoError(t, err)
	require.Len(t, loads["node-1"], points)
	assert.Equal(t, float64(points-1)+0.5, loads["node-1"][points-1].Value)
	assertEmptyDir(t, tmp)

	huge.Store(true)
	_, err = g.Fetch(context.Background(), nil)
	require.ErrorIs(t, err, ErrBadReply)
	assert.ErrorContains(t, err, "http 200: reply larger than 32 MiB")
	assertEmptyDir(t, tmp)
}

func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "files left in %s", dir)
}

// TestGzipIsNeitherAskedNorInflated: the client asks for no compression and
// inflates none it gets unasked, so a gzip bomb is the few bytes it is (here
// 50 MiB of JSON in about 50 KiB), a reply the decoder refuses, never 50 MiB
// in memory.
func TestGzipIsNeitherAskedNorInflated(t *testing.T) {
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, err := zw.Write([]byte(`[{"target":"tcp.node-1.rx","datapoints":[` + strings.Repeat("[1.5,1796028450],", 50<<20/17) + `[1.5,1796028450]]}]`))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	var acceptEncoding atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		acceptEncoding.Store(r.Header.Get("Accept-Encoding"))
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(zipped.Bytes())
	}))
	t.Cleanup(srv.Close)
	g, err := NewGraphite(graphiteAt(srv.URL, func(c *GraphiteConfig) { c.Target, c.ServerNode = "tcp.*.rx", intp(1) }), nil)
	require.NoError(t, err)
	_, err = g.Fetch(context.Background(), nil)
	require.ErrorIs(t, err, ErrBadReply)
	assert.ErrorContains(t, err, "decode render json")
	assert.Equal(t, "", acceptEncoding.Load(), "Accept-Encoding sent")
}
