package haproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// A batch of weights (SetWeights) is finished once sent, or not sent.
//
// HAProxy's CLI reads a request a line at a time and runs each line before
// the next; when the client goes, it drops the lines it had not reached
// (HAProxy 2.6, measured: 2,000 weights sent and the connection closed at
// once, 2 applied), and a last line without its newline is never run. A
// batch cut at the cycle's deadline in the middle of HAProxy's work on it
// (a busy box, or ~3 ms a weight on a 1,000-server random or consistent-hash
// backend) was thus applied in part: the weights HAProxy had reached, which
// the cycle counted as not written, and which the next cycle then took for
// weights changed outside. So:
//
//   - Before sending, a batch is weighed against the time the cycle has
//     left, at the pace HAProxy answered the backend's batches before: one that
//     would not end in time is not sent, and the cycle writes nothing (and
//     says so). The pace is learnt from batches only (the reads' replies are
//     dumps, not one short reply a command) and believes a slower batch at
//     once, a faster one a quarter at a time: a busy box slows every batch,
//     and one quick batch does not prove it over; a batch cut at its bound
//     (below) teaches it too. Only a batch sent measures the pace again, so
//     one held back relaxes it (pace.hold), and the batch after one held
//     back is sent if, at the pace, it ends within its bound: finished late,
//     not cut.
//   - Once its first byte is on the socket, the batch is written and read to
//     the end under its own bound, not the cycle's: the cycle's deadline
//     plus the socket's timeout, with
//     every stall still bounded by the timeout. Cutting it there would not
//     undo what HAProxy already applied; finishing it leaves every weight
//     verified. A shutdown does not cut it either: the restore comes after.
//   - A batch cut even so (HAProxy hung for a timeout, or restarted) is an
//     *weighter.UnconfirmedError that names every weight sent, so the next
//     cycle takes a server at a weight it sent for its own write, and a 0
//     sent counts as the daemon's own drain (ownzero).

// batchIO is how one batch of writes goes: its bound once sent, and when
// its replies came (for the pace).
type batchIO struct {
	estimate time.Duration // the batch's time at the known pace; 0: not known
	timeout  time.Duration // the socket's timeout: slack past the bound
	start    time.Time     // when the batch was handed to the socket
	bound    time.Time     // the deadline detach set; zero before
	// first and last are when the first and the newest bytes of the
	// replies came.
	first, last time.Time
}

// detach returns the context the batch runs under once sent: not ctx's
// cancel, and a deadline a timeout past ctx's (without one, past the
// estimate's end).
func (b *batchIO) detach(ctx context.Context) (context.Context, context.CancelFunc) {
	end, ok := ctx.Deadline()
	if !ok {
		end = time.Now().Add(b.estimate)
	}
	b.bound = end.Add(b.timeout)
	return context.WithDeadline(context.WithoutCancel(ctx), b.bound)
}

// timed wraps r to note when the replies come; a nil b (not a batch)
// returns r.
func (b *batchIO) timed(r io.Reader) io.Reader {
	if b == nil {
		return r
	}
	return &timedReader{r: r, b: b}
}

type timedReader struct {
	r io.Reader
	b *batchIO
}

func (t *timedReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		now := time.Now()
		if t.b.first.IsZero() {
			t.b.first = now
		}
		t.b.last = now
	}
	return n, err
}

// pace is how fast HAProxy answered a backend's newest batches: the time to
// its first reply, and then per command.
type pace struct {
	mu     sync.Mutex
	known  bool
	setup  time.Duration
	perCmd time.Duration
	held   bool // the newest batch was held back
}

// estimate is how long a batch of n commands takes at the pace, and whether
// the pace is known.
func (p *pace) estimate(n int) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.setup + time.Duration(n)*p.perCmd, p.known
}

// hold reports whether a batch of n commands is held back, with left to the
// deadline and grace past it (its bound once sent): when it would not end by
// the deadline at the pace, unless the batch before was held and this one
// ends within its bound. Each hold relaxes the pace by a quarter: only a
// batch sent measures it again, and a pace learnt in a busy spell must not
// hold back every batch after it.
func (p *pace) hold(n int, left, grace time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	estimate := p.setup + time.Duration(n)*p.perCmd
	switch {
	case !p.known || estimate <= left:
		p.held = false
	case p.held && estimate <= left+grace:
		p.held = false // sent: it ends within its bound, and measures the pace
	default:
		p.held = true
		p.setup, p.perCmd = p.setup*3/4, p.perCmd*3/4
	}
	return p.held
}

// learn takes in a batch of n commands, of which answered were answered:
// all (finished), or fewer when the batch was cut at its bound (then the
// pace is at least the time since the first reply over those answered). A
// batch without a reply tells nothing of the pace.
func (p *pace) learn(b *batchIO, n, answered int) {
	if b.first.IsZero() || n <= 0 {
		return
	}
	setup, perCmd := b.first.Sub(b.start), b.last.Sub(b.first)/time.Duration(n)
	if answered < n {
		perCmd = time.Since(b.first) / time.Duration(max(answered, 1))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.known {
		p.known, p.setup, p.perCmd = true, setup, perCmd
		return
	}
	p.setup, p.perCmd = slowFirst(p.setup, setup), slowFirst(p.perCmd, perCmd)
}

// slowFirst moves old to new at once when new is slower, else a quarter of
// the way.
func slowFirst(old, new time.Duration) time.Duration {
	if new >= old {
		return new
	}
	return old - (old-new)/4
}

// nothingSent is an error of a batch of which no byte reached HAProxy.
type nothingSent struct{ err error }

func (e *nothingSent) Error() string { return e.err.Error() }
func (e *nothingSent) Unwrap() error { return e.err }

// sent reports whether err may have come after some of the batch reached
// HAProxy.
func sent(err error) bool {
	var none *nothingSent
	return err != nil && !errors.As(err, &none)
}

// ErrNoTimeForBatch: the cycle had too little time left for its batch of
// weights, at the pace HAProxy answered the batches before; nothing was sent.
var ErrNoTimeForBatch = errors.New("nothing sent: too little time left before the cycle's deadline")

// batch is roundTrip for a batch of writes: with mayHold, sent only if it
// ends before ctx's deadline at the pace (its backend's); once sent,
// written and read to the end under its own bound (see above).
func (c *Client) batch(ctx context.Context, cmds []string, pace *pace, mayHold bool) ([]string, error) {
	estimate, _ := pace.estimate(len(cmds))
	if dl, ok := ctx.Deadline(); ok && mayHold {
		if left := time.Until(dl); pace.hold(len(cmds), left, c.cfg.timeout()) {
			return nil, &nothingSent{err: fmt.Errorf("%w (%d commands take ~%s at the pace of the last batches, %s left)",
				ErrNoTimeForBatch, len(cmds), estimate.Round(time.Millisecond), max(left, 0).Round(time.Millisecond))}
		}
	}
	b := &batchIO{estimate: estimate, timeout: c.cfg.timeout(), start: time.Now()}
	replies, err := c.exchangeWith(ctx, cmds, b)
	var cut *cutAfter
	switch {
	case err == nil:
		pace.learn(b, len(cmds), len(cmds))
	case !b.bound.IsZero() && !time.Now().Before(b.bound):
		// Not the cycle's deadline: the batch's own, which the bare
		// "context deadline exceeded" would not tell from it. HAProxy
		// kept answering (a silence is cut sooner): its pace is this slow.
		if errors.As(err, &cut) {
			pace.learn(b, len(cmds), max(cut.replies-2, 0)) // less the session set-up's two
		}
		err = fmt.Errorf("batch sent, not read to the end within %s past the cycle's deadline (haproxy timeout): %w", b.timeout, err)
	}
	c.noteHealth(ctx, err)
	return replies, err
}
