package testenv

import (
	"sync"
	"time"
)

// Clock is a fake clock the test moves by hand, for code that takes a clock
// (Now, and After for its waits) instead of reading the wall clock: a test
// of schedules and time windows then runs instantly and means the same on a
// loaded machine. It starts at a fixed moment (2027-01-15 08:00:00 UTC) so
// that timestamps in failures repeat from run to run.
type Clock struct {
	mu    sync.Mutex
	now   time.Time
	waits chan time.Duration // every After call's duration, in order
	fire  chan time.Time     // what every After returns; Fire sends on it
}

// NewClock returns a Clock at its fixed start.
func NewClock() *Clock {
	return &Clock{now: time.Unix(1_800_000_000, 0), waits: make(chan time.Duration, 100), fire: make(chan time.Time)}
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d (backwards when d < 0).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set puts the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// After records d (read it with Waits) and returns a channel that fires
// only when the test calls Fire: the code under test waits exactly as long
// as the test decides. Up to 100 waits are kept unread; the 101st After
// blocks until the test reads one.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.waits <- d
	return c.fire
}

// Waits yields the duration of every After call, in order: receiving from
// it is how a test learns that the code under test has started waiting.
func (c *Clock) Waits() <-chan time.Duration { return c.waits }

// Fire ends one pending After wait, delivering the clock's time; it blocks
// until the code under test receives it.
func (c *Clock) Fire() { c.fire <- c.Now() }
