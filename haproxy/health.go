package haproxy

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Health is what the newest exchange with HAProxy through a Client showed:
// whether the socket answered as a runtime API does. A command HAProxy
// refused ("No such backend", "Permission denied") is an answer: the socket
// is up. An exchange its caller cancelled (not one that ran out of time)
// tells nothing and is not recorded.
type Health struct {
	// Known is false until the first exchange ended.
	Known bool
	// Err is nil when the socket answered, else why it did not (dial, I/O,
	// timeout, a reply that is not the runtime API's).
	Err error
	// At is when the exchange ended.
	At time.Time
}

// health is a Client's newest Health.
type health struct {
	mu sync.Mutex
	h  Health
}

// Health returns what the newest exchange through c showed. Every backend
// of c shares it: one socket is one HAProxy process.
func (c *Client) Health() Health {
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	return c.health.h
}

// Socket is the runtime socket c talks to.
func (c *Client) Socket() string { return c.cfg.Socket }

func (c *Client) noteHealth(ctx context.Context, err error) {
	var msg haproxyMessage
	switch {
	case err != nil && errors.Is(ctx.Err(), context.Canceled):
		return // a reload or shutdown cut it: nothing learnt about the socket
	case errors.As(err, &msg):
		err = nil // HAProxy answered, with a refusal
	case errors.Is(err, ErrStreamDumpUnsafe):
		err = nil // HAProxy answered; the dump was held back (sessions_guard.go)
	}
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	c.health.h = Health{Known: true, Err: err, At: time.Now()}
}

// roundTrip is exchange, recording how the socket answered.
func (c *Client) roundTrip(ctx context.Context, cmds []string) ([]string, error) {
	replies, err := c.exchange(ctx, cmds)
	c.noteHealth(ctx, err)
	return replies, err
}

// dumpSessions is dumpOnce, recording how the socket answered.
func (c *Client) dumpSessions(ctx context.Context, cmd string, keep func(*Session) bool) (sessionDump, error) {
	d, err := c.dumpOnce(ctx, cmd, keep)
	c.noteHealth(ctx, err)
	return d, err
}
