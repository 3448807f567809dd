package haproxy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// timedBatch is a batch handed to the socket at start whose replies came
// from first to last.
func timedBatch(start time.Time, first, last time.Duration) *batchIO {
	return &batchIO{start: start, first: start.Add(first), last: start.Add(last)}
}

// TestPaceHoldsOnlyWhatCannotEndInTime: no pace known, nothing is held; a
// batch that would not end by the deadline is held, the next one is sent
// when it ends within its bound; a pace learnt in a busy spell relaxes with
// each hold, so it cannot hold back every batch after it.
func TestPaceHoldsOnlyWhatCannotEndInTime(t *testing.T) {
	var p pace
	assert.False(t, p.hold(1000, time.Millisecond, time.Second), "no pace known: sent")

	// 1,000 commands answered over 1 s: 1 ms each.
	p.learn(timedBatch(time.Now(), 0, time.Second), 1000, 1000)
	assert.False(t, p.hold(100, 200*time.Millisecond, time.Second), "100 ms of 200: sent")
	assert.True(t, p.hold(1000, 200*time.Millisecond, time.Second), "1 s of 200 ms: held")
	assert.False(t, p.hold(1000, 200*time.Millisecond, time.Second), "held before, ends within its bound: sent")

	// A pace 100 times too slow for the time left and its bound: held,
	// until the holds have relaxed it into the bound.
	p = pace{}
	p.learn(timedBatch(time.Now(), 0, 100*time.Second), 1000, 1000)
	holds := 0
	for p.hold(1000, 200*time.Millisecond, time.Second) {
		holds++
		assert.Less(t, holds, 50)
	}
	assert.Greater(t, holds, 2)

	// A batch cut at its bound: 100 of 1,000 answered in the 2 s since the
	// first reply is 20 ms a command at least, not the 2 ms its replies' span
	// over all 1,000 would say.
	p = pace{}
	b := &batchIO{start: time.Now().Add(-2 * time.Second)}
	b.first, b.last = b.start, b.start.Add(2*time.Second)
	p.learn(b, 1000, 100)
	assert.GreaterOrEqual(t, p.perCmd, 20*time.Millisecond)
}
