package haproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// ErrBadReply means HAProxy (or whatever listens on the socket) answered with
// something that is not a runtime API reply: garbage, a truncated reply, or silence.
var ErrBadReply = errors.New("bad reply from haproxy runtime api")

// promptSep ends every reply in prompt mode. HAProxy writes the command's output,
// a newline, then the "> " prompt; none of the commands we send print "\n> " themselves.
const promptSep = "\n> "

// exchange sends cmds over one connection and returns one reply per command
// (roundTrip, which calls it, also records how the socket answered).
//
// It speaks the socket protocol directly rather than through client-native's
// ExecuteRaw, because ExecuteRaw (v5.1.27) dials unix sockets only, uses a fixed
// 30 s deadline with no context, silently returns whatever it read when the read
// fails (a hung or truncated reply looks like success), retries the whole command
// once, and hands back one undelimited string for a `;`-joined batch. Here the
// session switches to prompt mode, sends every command on its own line in a single
// write, and splits the replies on the prompt, so each reply belongs to exactly one
// command and a missing reply is detected.
func (c *Client) exchange(ctx context.Context, cmds []string) ([]string, error) {
	return c.exchangeWith(ctx, cmds, nil)
}

// exchangeWith is exchange; a batch of writes (sent) is read past ctx's
// deadline once on the socket, and timed (batch.go).
func (c *Client) exchangeWith(ctx context.Context, cmds []string, sent *batchIO) ([]string, error) {
	for _, cmd := range cmds {
		if strings.ContainsAny(cmd, "\n;") {
			return nil, fmt.Errorf("haproxy: command %q contains a separator", cmd)
		}
	}
	if c.trace != nil {
		c.trace(cmds)
	}
	if c.cfg.Master {
		return c.exchangeMaster(ctx, cmds, sent)
	}
	var req bytes.Buffer
	req.WriteString("prompt\nset severity-output number\n")
	for _, cmd := range cmds {
		req.WriteString(cmd)
		req.WriteByte('\n')
	}
	req.WriteString("quit\n")
	var raw []string
	wrote, err := c.converseOn(ctx, sent, req.Bytes(), func(r io.Reader, extend func()) (err error) {
		raw, err = readReplies(sent.timed(r), len(cmds)+2, extend)
		return err
	})
	if err != nil {
		return nil, err
	}
	if wrote != nil {
		return nil, c.ioError(ctx, "write", wrote)
	}
	return raw[2:], nil
}

// converse sends req over a new connection while read reads the reply
// (extend pushes the read deadline on): with a batch bigger than the socket
// buffers, HAProxy stops reading until its replies are read, and a
// write-then-read would stall. The timeout bounds each read and each write
// chunk, not the whole reply: HAProxy answers a long batch piece by piece
// (weights on a 1,000-server random or consistent-hash backend cost it
// ~3 ms each), and only silence should fail. ctx bounds the total. A failed
// read is the error, as it says more than the write's; wrote is the write's
// error when the read succeeded.
func (c *Client) converse(ctx context.Context, req []byte, read func(r io.Reader, extend func()) error) (wrote, err error) {
	return c.converseOn(ctx, nil, req, read)
}

// converseOn is converse; with sent, ctx bounds the dial only: from the
// first byte sent on, the write and the read run under sent's own bound
// (batch.go), as HAProxy works through whatever reached it. A dial that
// fails sent nothing: its error is a *nothingSent.
func (c *Client) converseOn(ctx context.Context, sent *batchIO, req []byte, read func(r io.Reader, extend func()) error) (wrote, err error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, &nothingSent{err: err}
	}
	defer conn.Close()
	if sent != nil {
		var cancel context.CancelFunc
		ctx, cancel = sent.detach(ctx)
		defer cancel()
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	done := make(chan error, 1)
	go func() { done <- c.writeChunks(ctx, conn, req) }()
	// Each reply read pushes the write deadline on too: a writer blocked on a
	// full socket is woken only once half the send buffer has drained (unix
	// sockets: ~100 kB), which on a slow backend takes longer than a timeout
	// while HAProxy is answering, command after command.
	extend := func() {
		c.push(ctx, conn.SetReadDeadline)
		c.push(ctx, conn.SetWriteDeadline)
	}
	if err := read(conn, extend); err != nil {
		conn.Close() // unblocks the writer, if it is still writing
		<-done
		var cut *cutAfter
		if errors.As(err, &cut) {
			return nil, &cutAfter{replies: cut.replies, err: c.ioError(ctx, "read", err)}
		}
		return nil, c.ioError(ctx, "read", err)
	}
	return <-done, nil
}

// writeChunk is small enough that HAProxy, working through a batch, frees room
// for it well within a timeout (~130 commands).
const writeChunk = 4 << 10

// writeChunks writes p a chunk at a time, pushing the write deadline on before
// each: like a read, a write times out when HAProxy stops taking commands, not
// when a batch bigger than the socket buffers takes longer than one timeout.
func (c *Client) writeChunks(ctx context.Context, conn net.Conn, p []byte) error {
	for len(p) > 0 {
		c.push(ctx, conn.SetWriteDeadline)
		n, err := conn.Write(p[:min(len(p), writeChunk)])
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// push sets a deadline one timeout from now (or ctx's, if sooner). If ctx is
// done meanwhile it sets it in the past again: AfterFunc may have run already.
func (c *Client) push(ctx context.Context, set func(time.Time) error) {
	_ = set(c.deadline(ctx))
	if ctx.Err() != nil {
		_ = set(time.Unix(1, 0))
	}
}

// deadline is one timeout from now, or ctx's deadline if that comes first.
func (c *Client) deadline(ctx context.Context) time.Time {
	deadline := time.Now().Add(c.cfg.timeout())
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		return d
	}
	return deadline
}

// dial connects with the configured timeout, bounded by ctx, and sets the
// deadline for the dial and the first write.
func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	deadline := c.deadline(ctx)
	d := net.Dialer{Deadline: deadline}
	conn, err := d.DialContext(ctx, c.cfg.network(), c.cfg.Socket)
	if err != nil {
		return nil, fmt.Errorf("haproxy: dial %s: %w", c.cfg.Socket, err)
	}
	if err := conn.SetDeadline(deadline); err != nil {
		conn.Close()
		return nil, fmt.Errorf("haproxy: set deadline on %s: %w", c.cfg.Socket, err)
	}
	return conn, nil
}

func (c *Client) ioError(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("haproxy: %s %s: %w", op, c.cfg.Socket, ctx.Err())
	}
	// The connection's deadline is ctx's when that comes first, and its
	// timeout may fire a moment before ctx says it is done: ctxFirst.
	return fmt.Errorf("haproxy: %s %s: %w", op, c.cfg.Socket, ctxFirst(ctx, err))
}

// ctxFirst reports a read that timed out at the context's deadline as the
// context's error: the socket deadline is the context's, and it can fire a
// moment before the context's own timer marks it done.
func ctxFirst(ctx context.Context, err error) error {
	var ne net.Error
	if dl, ok := ctx.Deadline(); ok && errors.As(err, &ne) && ne.Timeout() && !time.Now().Before(dl) {
		return fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
	}
	return err
}

// cutAfter is a round trip that failed after HAProxy had answered its first
// replies (of the request's lines, the session set-up included): those
// commands ran, on a process that may be gone since. It reads as err.
type cutAfter struct {
	replies int
	err     error
}

func (e *cutAfter) Error() string { return e.err.Error() }
func (e *cutAfter) Unwrap() error { return e.err }

// readReplies reads until n prompts have arrived (then the rest is "quit") or the
// connection ends. Fewer than n replies is a truncated reply, a *cutAfter.
// extend, if not nil, is called before each read (to push the read deadline on).
func readReplies(r io.Reader, n int, extend func()) ([]string, error) {
	var buf bytes.Buffer
	chunk := make([]byte, 32<<10)
	seen, scanned := 0, 0
	for seen < n {
		if extend != nil {
			extend()
		}
		k, err := r.Read(chunk)
		buf.Write(chunk[:k])
		if buf.Len() > maxReply {
			return nil, fmt.Errorf("%w: reply larger than %d MB after %d of %d prompts (%.80q)",
				ErrBadReply, maxReply>>20, seen, n, buf.Bytes()[:80])
		}
		// Count only in new bytes, plus the tail a separator may straddle from
		// (too short to hold a whole separator counted before).
		from := max(scanned-len(promptSep)+1, 0)
		seen += bytes.Count(buf.Bytes()[from:], []byte(promptSep))
		scanned = buf.Len()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &cutAfter{replies: seen, err: fmt.Errorf("after %d bytes: %w", buf.Len(), err)}
		}
	}
	replies, err := splitReplies(buf.String(), n)
	if err != nil && seen < n {
		return nil, &cutAfter{replies: seen, err: err}
	}
	return replies, err
}

// splitReplies cuts prompt-mode output into n replies, one per command.
func splitReplies(out string, n int) ([]string, error) {
	parts := strings.Split(out, promptSep)
	if strings.HasPrefix(out, "master> ") {
		// The master CLI prompts "master> " and knows none of the commands.
		return nil, fmt.Errorf("%w: this is HAProxy's master CLI: set master: true, or point socket at a worker's stats socket (level admin) (%.80q)",
			ErrBadReply, out)
	}
	if len(parts)-1 < n {
		return nil, fmt.Errorf("%w: truncated: %d of %d replies (%d bytes: %.80q)",
			ErrBadReply, len(parts)-1, n, len(out), out)
	}
	replies := parts[:n]
	for i, p := range replies {
		replies[i] = strings.TrimRight(p, "\n")
	}
	return replies, nil
}

// maxReply bounds what one round trip reads (`show stat` takes ~0.45 kB per
// server: 32 MB is some 70,000 servers): the timeout only cuts silence, so it
// would not stop a peer that never stops talking.
const maxReply = 32 << 20
