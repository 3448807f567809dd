package weighter

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
)

// A reload builds a new Backend around the kept Shedder; a fast read the old
// Backend already planned from is still one read, not a second hot cycle.
func TestShedderCountsAReadOnceAcrossANewBackend(t *testing.T) {
	b, _, tgt := whaleHotOnce(t)
	sh := b.Shedder

	reloaded := &Weigher{Name: b.Name, Source: b.Source, Target: b.Target, Controller: b.Controller, Shedder: sh}
	c := RunCycle(context.Background(), reloaded, now.Add(2*time.Second), true)
	assert.Equal(t, "no new show sess dump since the last cycle", c.Plan.Shed.Reason)
	assert.Empty(t, c.Sheds)
	assert.NotContains(t, tgt.events, "close 0x1")
}

// A reload that changes the shed policy starts a new Shedder; it takes over
// the old one's sheds of the last minute and its client cooldowns, so that
// neither max_per_minute nor a cooldown restarts from nothing.
func TestShedderInheritKeepsCapsAndCooldowns(t *testing.T) {
	b, src, tgt := whaleBackend(t)
	src.at = now
	c := RunCycle(context.Background(), b, now, true)
	require.Len(t, c.Sheds, 1, c.Plan.Shed.Reason)
	require.Equal(t, ShedClosed, c.Sheds[0].Outcome)

	p := b.Shedder.Policy()
	p.Above = 1.4 // an operator's tweak
	p.Cooldown = duration.Duration(10 * time.Minute)
	next, err := NewShedder(p)
	require.NoError(t, err)
	next.Inherit(b.Shedder)
	reloaded := &Weigher{Name: b.Name, Source: b.Source, Target: b.Target, Controller: b.Controller, Shedder: next}

	// The whale's session is still listed (say it reconnected with the
	// same address): the cap of the last minute holds.
	src.at = now.Add(2 * time.Second)
	c = RunCycle(context.Background(), reloaded, now.Add(2*time.Second), true)
	assert.Empty(t, c.Plan.Shed.Sheds)
	assert.Contains(t, c.Plan.Shed.Reason, "max_per_minute 1")

	// A minute on, the cap is free; the whale's client is still cooling down.
	src.at = now.Add(70 * time.Second)
	c = RunCycle(context.Background(), reloaded, now.Add(70*time.Second), true)
	for _, sh := range c.Plan.Shed.Sheds {
		assert.NotEqual(t, "10.0.0.1:5000", sh.Session.Client, "the cooldown restarted with the new policy")
	}
	assert.Equal(t, 1, countEvents(tgt.events, "close 0x1"))
}

// A close that failed may have happened (a timeout after HAProxy took the
// command): it counts against max_per_minute, so that a failing socket is
// not asked to close session after session every cycle.
func TestShedFailedCloseCountsAgainstTheCap(t *testing.T) {
	b, src, tgt := whaleBackend(t)
	tgt.fail = errors.New("socket timeout")
	src.at = now
	c := RunCycle(context.Background(), b, now, true)
	require.Len(t, c.Sheds, 1)
	require.Equal(t, ShedFailed, c.Sheds[0].Outcome)

	src.at = now.Add(2 * time.Second)
	c = RunCycle(context.Background(), b, now.Add(2*time.Second), true)
	assert.Empty(t, c.Plan.Shed.Sheds)
	assert.Contains(t, c.Plan.Shed.Reason, "max_per_minute 1")
	assert.Equal(t, 1, countEvents(tgt.events, "close 0x1"))
}

func countEvents(events []string, e string) int {
	n := 0
	for _, x := range events {
		if x == e {
			n++
		}
	}
	return n
}
