package haproxy

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestCutPinBatchIsUnconfirmed: a batch of pins and weights cut after HAProxy
// answered its clear and its weights (HAProxy hung, or restarted) is an
// *weighter.UnconfirmedError naming the weights sent, as a batch of weights
// alone is, and says which command got no reply: the next cycle reads the
// table and the weights again.
func TestCutPinBatchIsUnconfirmed(t *testing.T) {
	changes := []weighter.Change{{Server: "s1", Weight: 3}, {Server: "s2", Weight: 0}}
	pins := weighter.PinChanges{Clear: []string{"10.0.0.1"}, Set: []weighter.Pin{{Client: "10.0.0.2", Server: "s1"}}}
	for name, closeAfter := range map[string]bool{"stalled": false, "closed": true} {
		t.Run(name, func(t *testing.T) {
			c := fakeClient(t, startCutCLI(t, 3, closeAfter)) // the clear and the two weights
			b := c.Backend("be")
			b.keepTableType("ip") // as a Pins read before left them
			b.keepIDs(map[int]string{1: "s1", 2: "s2"})
			err := b.SetWeightsAndPins(testCtx(t), changes, pins)
			var u *weighter.UnconfirmedError
			require.ErrorAs(t, err, &u)
			assert.Equal(t, changes, u.Sent)
			assert.Contains(t, err.Error(), `3 of 6 commands answered, no reply from "show table be data.server_id lt 0" on`)
			var pe *weighter.PinError
			assert.False(t, errors.As(err, &pe), "not attributed per client: %v", err)
		})
	}
}

// TestNoPinsIsSetWeights: without pins, SetWeightsAndPins sends what
// SetWeights sends, nothing more (no table read, no header).
func TestNoPinsIsSetWeights(t *testing.T) {
	f := startFake(t, false, prompts(""))
	b := fakeClient(t, f.path).Backend("be")
	changes := []weighter.Change{{Server: "s1", Weight: 3}}
	errWeights := b.SetWeights(testCtx(t), changes)
	errBoth := b.SetWeightsAndPins(testCtx(t), changes, weighter.PinChanges{})
	assert.Equal(t, errWeights.Error(), errBoth.Error())
	seen := f.seen()
	require.Len(t, seen, 2)
	assert.Equal(t, seen[0], seen[1])
	assert.NotContains(t, seen[1], "table")
}
