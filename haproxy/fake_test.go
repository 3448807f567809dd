package haproxy

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/errs"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// fakeSocket is a unix socket server that answers every request with a fixed
// reply (or not at all), for fault injection. It records each request.
type fakeSocket struct {
	path  string
	reply func(req string) string
	hang  bool          // never answer
	drip  time.Duration // pause between the replies of a request

	mu       sync.Mutex
	requests []string
}

func startFake(t *testing.T, hang bool, reply func(req string) string) *fakeSocket {
	t.Helper()
	f := &fakeSocket{path: filepath.Join(t.TempDir(), "fake.sock"), reply: reply, hang: hang}
	l, err := net.Listen("unix", f.path)
	require.NoError(t, err)
	done := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(done); l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); f.serve(conn, done) }()
		}
	}()
	return f
}

func (f *fakeSocket) serve(conn net.Conn, done <-chan struct{}) {
	defer conn.Close()
	var req strings.Builder
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		req.WriteString(sc.Text() + "\n")
		if sc.Text() == "quit" {
			break
		}
	}
	f.mu.Lock()
	f.requests = append(f.requests, req.String())
	f.mu.Unlock()
	if f.hang {
		<-done
		return
	}
	if f.drip == 0 {
		_, _ = conn.Write([]byte(f.reply(req.String())))
		return
	}
	for _, part := range strings.SplitAfter(f.reply(req.String()), promptSep) {
		select {
		case <-done:
			return
		case <-time.After(f.drip):
		}
		_, _ = conn.Write([]byte(part))
	}
}

func (f *fakeSocket) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

func fakeClient(t *testing.T, path string) *Client {
	c, err := New(Config{Socket: path, Timeout: duration.Duration(300 * time.Millisecond)})
	require.NoError(t, err)
	return c
}

// prompts answers every line of a prompt-mode request with body, as HAProxy would.
func prompts(body string) func(string) string {
	return func(req string) string {
		n := strings.Count(req, "\n") - 1 // every line but quit
		return strings.Repeat("\n> ", 2) + strings.Repeat(body+"\n> ", n-2)
	}
}

func TestBadReplies(t *testing.T) {
	stateLine := "2 be 1 s1 127.0.0.1 2 0 1 1 0 1 0 2 0 0 0 0 - 19001 - 0 0 - - 0"
	cases := map[string]func(string) string{
		"not haproxy":      func(string) string { return "HTTP/1.1 400 Bad Request\r\n\r\n" },
		"garbage replies":  prompts("lorem ipsum"),
		"bad format":       prompts("2\n# be_id\n" + stateLine),
		"short line":       prompts("1\n# be_id\n2 be 1 s1 127.0.0.1 2 0 1"),
		"weight too big":   prompts("1\n" + strings.Replace(stateLine, " 0 1 1 ", " 0 900 1 ", 1)),
		"other backend":    prompts("1\n" + strings.Replace(stateLine, " be ", " other ", 1)),
		"truncated":        func(req string) string { return "\n> \n> 1\n# be_id be_name\n2 be 1 s1 127.0." },
		"empty then close": func(string) string { return "" },
	}
	for name, reply := range cases {
		t.Run(name, func(t *testing.T) {
			f := startFake(t, false, reply)
			_, err := fakeClient(t, f.path).Backend("be").Servers(testCtx(t))
			require.ErrorIs(t, err, ErrBadReply)
			assert.Len(t, f.seen(), 1, "no retry")
		})
	}
}

func TestBadReplyToWritesIsPerServerAndNotRetried(t *testing.T) {
	f := startFake(t, false, prompts("lorem ipsum"))
	err := fakeClient(t, f.path).Backend("be").SetWeights(testCtx(t),
		[]weighter.Change{{Server: "s1", Weight: 3}, {Server: "s2", Weight: 4}})
	require.ErrorIs(t, err, ErrBadReply)
	var se *weighter.ServerError
	require.ErrorAs(t, err, &se)
	reqs := f.seen()
	require.Len(t, reqs, 1, "one round trip, nothing written after the bad reply")
	assert.Equal(t, "prompt\nset severity-output number\nset server be/s1 weight 3\nset server be/s2 weight 4\n"+
		"show servers state be\nquit\n", reqs[0])
}

func TestSilentSocketTimesOut(t *testing.T) {
	f := startFake(t, true, nil)
	c := fakeClient(t, f.path)
	_, err := c.Backend("be").Servers(testCtx(t))
	require.Error(t, err)
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "timeout error, got %v", err)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)

	err = c.Backend("be").SetWeights(testCtx(t), []weighter.Change{{Server: "s1", Weight: 3}})
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.Len(t, f.seen(), 2, "no retry")
}

func TestSlowButSteadyReplyIsNotATimeout(t *testing.T) {
	// 6 replies 100 ms apart take longer than the 300 ms timeout, but none of the
	// gaps does: the timeout bounds silence, not the whole batch.
	f := startFake(t, false, prompts(""))
	f.drip = 100 * time.Millisecond
	err := fakeClient(t, f.path).Backend("be").SetWeights(testCtx(t),
		[]weighter.Change{{Server: "s1", Weight: 3}, {Server: "s2", Weight: 4}, {Server: "s3", Weight: 5}})
	// The fake's read-back is empty, so the weights are not confirmed; but no timeout.
	require.Error(t, err)
	assert.NotErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.ErrorIs(t, err, ErrBadReply)
}

func TestCanceledContextStopsRoundTrip(t *testing.T) {
	f := startFake(t, true, nil)
	c, err := New(Config{Socket: f.path, Timeout: duration.Duration(time.Hour)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once the request has arrived, so the read is what gets interrupted.
		for len(f.seen()) == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	_, err = c.Backend("be").Servers(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

func TestNoSocket(t *testing.T) {
	_, err := fakeClient(t, filepath.Join(t.TempDir(), "none.sock")).Backend("be").Servers(testCtx(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "dial")
}

func TestReadBackMismatchIsPerServer(t *testing.T) {
	// Accepts every write, but the read-back still shows s2 at weight 1.
	state := "1\n# be_id be_name srv_id srv_name\n" +
		"2 be 1 s1 127.0.0.1 2 0 3 1 0 1 0 2 0 0 0 0 - 19001 - 0 0 - - 0\n" +
		"2 be 2 s2 127.0.0.1 2 0 1 1 0 1 0 2 0 0 0 0 - 19002 - 0 0 - - 0"
	f := startFake(t, false, func(string) string { return "\n> \n> \n> \n> " + state + "\n> " })
	err := fakeClient(t, f.path).Backend("be").SetWeights(testCtx(t),
		[]weighter.Change{{Server: "s1", Weight: 3}, {Server: "s2", Weight: 4}})
	var se *weighter.ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "s2", se.Server)
	assert.Contains(t, err.Error(), "read back 1")
	assert.NotContains(t, err.Error(), "server s1")
}

// TestNamesHAProxyCannotHaveSendNothing: HAProxy names are [A-Za-z0-9._:-]. The
// CLI unescapes a backslash (`set server be/s\2` sets s2, checked on 2.6.12) and
// a line ending in "<<" starts a payload that swallows the following commands,
// so any other character must be refused before anything is sent.
func TestNamesHAProxyCannotHaveSendNothing(t *testing.T) {
	f := startFake(t, false, prompts(""))
	c := fakeClient(t, f.path)
	for _, name := range []string{`s\2`, "s<<", `s"1`, "s'1", "s\x00", "é"} {
		err := c.Backend("be").SetWeights(testCtx(t), []weighter.Change{{Server: name, Weight: 3}})
		require.Error(t, err, "server %q", name)
		_, err = c.Backend(name).Servers(testCtx(t))
		require.Error(t, err, "backend %q", name)
		_, err = c.Stats(testCtx(t), name)
		require.Error(t, err, "backend %q", name)
	}
	assert.Empty(t, f.seen(), "nothing sent")
}

// TestRefusedBatchIsNotAttributedToSomeServers: when validation refuses a batch,
// nothing is sent, so the error must not read as "only these servers failed"
// (a caller such as weighter.RunCycle records every server not named by a
// *ServerError leaf as written). Duplicates are refused too: the later write
// would silently win and the read-back would blame the earlier one.
func TestRefusedBatchIsNotAttributedToSomeServers(t *testing.T) {
	f := startFake(t, false, prompts(""))
	b := fakeClient(t, f.path).Backend("be")
	for name, changes := range map[string][]weighter.Change{
		"invalid weight": {{Server: "s1", Weight: 3}, {Server: "s2", Weight: 999}},
		"invalid name":   {{Server: "s1", Weight: 3}, {Server: "s 2", Weight: 4}},
		"duplicate":      {{Server: "s1", Weight: 3}, {Server: "s2", Weight: 4}, {Server: "s1", Weight: 5}},
	} {
		err := b.SetWeights(testCtx(t), changes)
		require.Error(t, err, name)
		var se *weighter.ServerError
		require.ErrorAs(t, err, &se, name)
		batch := false
		for _, leaf := range errs.Leaves(err) {
			batch = batch || !errors.As(leaf, &se)
		}
		assert.True(t, batch, "%s: no leaf says the whole batch failed: %v", name, err)
		assert.Contains(t, err.Error(), "nothing written", name)
	}
	assert.Empty(t, f.seen(), "nothing sent")
}

// TestMasterSocketSaysSo: the master CLI (haproxy -W -S) answers every command
// with "master> Unknown command..." (HAProxy 2.6.12) and never with "\n> ", so
// the error must name the likely mistake, not just "truncated".
func TestMasterSocketSaysSo(t *testing.T) {
	f := startFake(t, false, func(req string) string {
		return strings.Repeat("master> Unknown command, but maybe one of the following ones is a better match:\n  help\n\n", 4) + "master> "
	})
	_, err := fakeClient(t, f.path).Backend("be").Servers(testCtx(t))
	require.ErrorIs(t, err, ErrBadReply)
	assert.Contains(t, err.Error(), "master CLI")
}
