package haproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// startSlowRuntime puts a socket in front of a real HAProxy's runtime socket
// that passes each request line on perLine after the one before: HAProxy
// working slowly through a batch (a busy box; ~3 ms a weight on a
// 1,000-server random or consistent-hash backend). Replies come back as
// HAProxy writes them. When the client goes (a reply cannot be passed on),
// the lines not passed on yet are dropped with the connection, as HAProxy
// drops the commands it had not reached when its client closed.
func startSlowRuntime(t *testing.T, socket string, perLine time.Duration) string {
	t.Helper()
	return startRuntimeProxy(t, socket, perLine, false)
}

// startMuteRuntime puts a socket in front of a real HAProxy's runtime socket
// that passes every request on at once and every reply nowhere: HAProxy
// applies the commands, and its client, hearing nothing, gives up after its
// timeout (replies lost on a hung proxy or network).
func startMuteRuntime(t *testing.T, socket string) string {
	t.Helper()
	return startRuntimeProxy(t, socket, 0, true)
}

func startRuntimeProxy(t *testing.T, socket string, perLine time.Duration, mute bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "slow.sock")
	l, err := net.Listen("unix", path)
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			client, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { slowPass(client, socket, perLine, mute) })
		}
	})
	return path
}

func slowPass(client net.Conn, socket string, perLine time.Duration, mute bool) {
	defer client.Close()
	up, err := net.Dial("unix", socket)
	if err != nil {
		return
	}
	defer up.Close()
	var replies io.Writer = client
	if mute {
		replies = io.Discard
	}
	gone := make(chan struct{})
	go func() {
		// A reply that cannot reach the client ends the session, and with
		// it every line not passed on yet.
		_, _ = io.Copy(replies, up)
		close(gone)
		up.Close()
	}()
	in := bufio.NewReader(client)
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return
		}
		select {
		case <-gone:
			return
		case <-time.After(perLine):
		}
		if _, err := io.WriteString(up, line); err != nil {
			return
		}
	}
}

// bigBackend is a configuration with one roundrobin backend of n servers,
// all at weight 10 (one address: nothing connects to them).
func bigBackend(t *testing.T, name string, n int) string {
	var cfg strings.Builder
	cfg.WriteString(testenv.HAProxyDefaults + "backend " + name + "\n  balance roundrobin\n")
	port := testenv.FreePort(t)
	for i := range n {
		fmt.Fprintf(&cfg, "  server s%04d 127.0.0.1:%d weight 10\n", i, port)
	}
	return cfg.String()
}

// spread gives server i the load base+(i*k)%7: a different weight per
// server, and a different pattern for each k.
func spread(n, k int) fixedLoads {
	loads := fixedLoads{}
	for i := range n {
		loads[fmt.Sprintf("s%04d", i)] = float64(1 + (i*k)%7)
	}
	return loads
}

// TestSlowBatchIsFinishedOrNotSent: a cycle whose deadline falls in the
// middle of its batch (HAProxy slow to work through 600 weights) used to cut
// the batch there: HAProxy had applied the weights it reached, the cycle
// counted none written, and the next cycle took its own weights for an
// operator's ("re-apply (changed outside: reload?)"). Now a batch is sent
// only if, at the pace of the batches before, it ends before the deadline
// (else nothing is written, and the error says so; the batch after is sent
// if it ends within its bound, to measure the pace again), and once sent it is read
// to the end past the cycle's deadline and verified: HAProxy holds every
// weight of the batch or none, and the next cycle re-applies nothing.
func TestSlowBatchIsFinishedOrNotSent(t *testing.T) {
	const n = 600
	h := testenv.StartHAProxy(t, bigBackend(t, "be_big", n))
	slow := startSlowRuntime(t, h.Socket, time.Millisecond)

	for _, tc := range []struct {
		name string
		// fresh: the cut cycle's batch goes through a new client's
		// Backend, which knows no pace yet and so sends it.
		fresh bool
	}{{"first batch of a backend", true}, {"backend that knows the pace", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ctrl, err := weighter.NewController(weighter.DefaultPolicy())
			require.NoError(t, err)
			c := newClient(t, slow).Backend("be_big")
			be := &weighter.Weigher{Name: "be_big", Target: c, Controller: ctrl, Source: spread(n, 1)}
			now := time.Now()

			cyc := weighter.RunCycle(testCtx(t), be, now, true)
			require.NoError(t, cyc.Err)
			require.Greater(t, len(cyc.Written), n/2, "plan: %+v", cyc.Plan.Servers[:3])
			before := testenv.Weights(t, h.Socket, "be_big")

			// The next cycle's loads move most weights; its deadline comes
			// 200 ms into the batch, long before HAProxy is through it
			// (over 514 ms: a line a millisecond).
			be.Source = spread(n, 3)
			write := c
			if tc.fresh {
				write = newClient(t, slow).Backend("be_big")
			}
			be.Target = deadlineAtWrite{RuntimeBackend: write, in: 200 * time.Millisecond}
			cyc = weighter.RunCycle(testCtx(t), be, now.Add(time.Minute), true)
			changes := cyc.Plan.Changes()
			require.Greater(t, len(changes), n/2)
			after := testenv.Weights(t, h.Socket, "be_big")
			applied := 0
			for _, ch := range changes {
				if after[ch.Server] == ch.Weight && before[ch.Server] != ch.Weight {
					applied++
				}
			}
			if tc.fresh {
				assert.NoError(t, cyc.Err, "a batch sent is finished")
				assert.Equal(t, len(changes), applied, "every weight of the batch applied")
				assert.Len(t, cyc.Written, len(changes))
			} else {
				assert.ErrorContains(t, cyc.Err, "nothing sent")
				assert.Zero(t, applied, "no weight of the batch applied")
				assert.Equal(t, before, after)
				assert.Empty(t, cyc.Written)

				// The next batch, which at the pace ends within its bound (the
				// deadline and the client's 5 s), is sent (only a batch sent
				// measures the pace again) and finished.
				be.Source = spread(n, 4)
				cyc = weighter.RunCycle(testCtx(t), be, now.Add(90*time.Second), true)
				assert.NoError(t, cyc.Err, "the batch after one held back is sent and finished")
				assert.Len(t, cyc.Written, len(cyc.Plan.Changes()))
			}

			// The next cycle (loads moved again) finds HAProxy as the daemon
			// left it: no weight of its own to set back.
			be.Target, be.Source = c, spread(n, 5)
			cyc = weighter.RunCycle(testCtx(t), be, now.Add(2*time.Minute), true)
			require.NoError(t, cyc.Err)
			assert.Empty(t, reapplied(cyc.Plan), "its own writes taken for an operator's")
		})
	}
}

// deadlineAtWrite is a Backend whose cycle's deadline comes in after its
// batch of weights starts: a cycle that read its servers and loads in time
// and has that long left to write, however long the read took.
type deadlineAtWrite struct {
	*RuntimeBackend
	in time.Duration
}

func (d deadlineAtWrite) SetWeights(ctx context.Context, changes []weighter.Change) error {
	ctx, cancel := context.WithTimeout(ctx, d.in)
	defer cancel()
	return d.RuntimeBackend.SetWeights(ctx, changes)
}

// splitTarget reads through one Backend and writes through another.
type splitTarget struct{ read, write weighter.Target }

func (s splitTarget) Servers(ctx context.Context) ([]weighter.ServerState, error) {
	return s.read.Servers(ctx)
}

func (s splitTarget) SetWeights(ctx context.Context, changes []weighter.Change) error {
	return s.write.SetWeights(ctx, changes)
}

// TestBatchWithLostRepliesIsNotChangedOutside: a batch HAProxy applied but
// whose replies were lost fails its cycle (nothing is confirmed written),
// and the next cycle finds the weights it sent: those are its own, applied
// late, not weights changed outside to set back. A weight an operator set
// meanwhile still is.
func TestBatchWithLostRepliesIsNotChangedOutside(t *testing.T) {
	const n = 300
	h, c, be, now, cyc := weighedBigBackend(t, n)
	require.Greater(t, len(cyc.Written), n/2)

	// 300 ms of silence ends the batch's read.
	lost := fakeClient(t, startMuteRuntime(t, h.Socket)).Backend("be_big")
	be.Source, be.Target = spread(n, 3), splitTarget{read: c.Backend("be_big"), write: lost}
	cyc = weighter.RunCycle(testCtx(t), be, now.Add(time.Minute), true)
	var unconfirmed *weighter.UnconfirmedError
	require.ErrorAs(t, cyc.Err, &unconfirmed)
	assert.Empty(t, cyc.Written, "nothing confirmed written")
	changes := cyc.Plan.Changes()
	require.Greater(t, len(changes), n/2)
	assert.Equal(t, changes, unconfirmed.Sent)
	after := testenv.Weights(t, h.Socket, "be_big")
	for _, ch := range changes {
		require.Equal(t, ch.Weight, after[ch.Server], "%s: HAProxy took the batch", ch.Server)
	}

	// An operator changes one server meanwhile.
	op := changes[0].Server
	require.Empty(t, strings.TrimSpace(testenv.Command(t, h.Socket, "set server be_big/"+op+" weight 3")))
	be.Source, be.Target = spread(n, 5), c.Backend("be_big")
	cyc = weighter.RunCycle(testCtx(t), be, now.Add(2*time.Minute), true)
	require.NoError(t, cyc.Err)
	assert.Equal(t, []string{op}, reapplied(cyc.Plan), "only the operator's weight is set back")
}

// TestBatchCutPastItsBoundIsRememberedInPart: a batch still not answered in
// full a timeout past the cycle's deadline is cut after all, and HAProxy
// holds the part it reached. The next cycle takes both parts for its own:
// the servers at the weight sent, and those still at the weight written
// before.
func TestBatchCutPastItsBoundIsRememberedInPart(t *testing.T) {
	const n = 600
	h, c, be, now, _ := weighedBigBackend(t, n)
	before := testenv.Weights(t, h.Socket, "be_big")

	// 100 ms to the deadline, then 300 ms (the client's timeout): cut at
	// 400 ms, with over 514 ms of batch to go.
	slow := fakeClient(t, startSlowRuntime(t, h.Socket, time.Millisecond)).Backend("be_big")
	be.Source = spread(n, 3)
	be.Target = splitTarget{read: c.Backend("be_big"), write: deadlineAtWrite{RuntimeBackend: slow, in: 100 * time.Millisecond}}
	cyc := weighter.RunCycle(testCtx(t), be, now.Add(time.Minute), true)
	var unconfirmed *weighter.UnconfirmedError
	require.ErrorAs(t, cyc.Err, &unconfirmed)
	assert.ErrorContains(t, cyc.Err, "not read to the end within 300ms past the cycle's deadline")
	after := testenv.Weights(t, h.Socket, "be_big")
	applied, untouched := 0, 0
	for _, ch := range unconfirmed.Sent {
		switch after[ch.Server] {
		case ch.Weight:
			applied++
		case before[ch.Server]:
			untouched++
		}
	}
	require.Positive(t, applied, "HAProxy took part of the batch")
	require.Positive(t, untouched, "and not the rest")
	require.Equal(t, len(unconfirmed.Sent), applied+untouched)

	be.Source, be.Target = spread(n, 5), c.Backend("be_big")
	cyc = weighter.RunCycle(testCtx(t), be, now.Add(2*time.Minute), true)
	require.NoError(t, cyc.Err)
	assert.Empty(t, reapplied(cyc.Plan), "its own writes taken for an operator's")
}

// reapplied lists the servers a plan sets back as changed outside.
func reapplied(p weighter.Plan) []string {
	var out []string
	for _, sp := range p.Servers {
		if strings.Contains(sp.Reason, weighter.ReasonReapply) {
			out = append(out, sp.Server)
		}
	}
	return out
}

// weighedBigBackend starts a real HAProxy with backend be_big of n servers
// and runs one cycle that weights it from spread(n, 1): the state both
// lost-reply tests start from.
func weighedBigBackend(t *testing.T, n int) (*testenv.HAProxy, *Client, *weighter.Weigher, time.Time, weighter.Cycle) {
	t.Helper()
	h := testenv.StartHAProxy(t, bigBackend(t, "be_big", n))
	ctrl, err := weighter.NewController(weighter.DefaultPolicy())
	require.NoError(t, err)
	c := newClient(t, h.Socket)
	be := &weighter.Weigher{Name: "be_big", Target: c.Backend("be_big"), Controller: ctrl, Source: spread(n, 1)}
	now := time.Now()
	cyc := weighter.RunCycle(testCtx(t), be, now, true)
	require.NoError(t, cyc.Err)
	return h, c, be, now, cyc
}
