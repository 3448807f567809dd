package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// A backend that wants pins and finds HAProxy unreadable (a restart) tries
// again within pinRetryEvery, for pinRetryFor after its last ok cycle: its
// pins went with the old process and its clients come back in seconds. Any
// other failure, or a backend without pins, waits for its schedule.
func TestPinRetryAfterHAProxyFails(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	require.Equal(t, weighter.ResultOK, f.r.step(ctx).Result)
	failed := weighter.Cycle{Result: weighter.ResultTargetError}
	now := f.clock.Now()
	assert.True(t, f.r.pinRetry(failed, now).IsZero(), "no Pinner: the schedule")

	pn, err := weighter.NewPinner(weighter.DefaultPin())
	require.NoError(t, err)
	f.r.unit.Backend.Pinner = pn
	assert.True(t, f.r.pinRetry(failed, now).IsZero(), "a Pinner that wants no pin: the schedule")

	in := weighter.PinInput{Table: weighter.PinTable{Name: "be", Size: 100}}
	for _, s := range []string{"s1", "s2"} {
		in.Servers = append(in.Servers, weighter.PinServer{Name: s, Load: 1000, Factor: 1, Pinnable: true})
	}
	in.Clients = []weighter.Client{{Addr: "10.0.0.1", Rate: 800, Conns: 1}}
	require.NotEmpty(t, pn.Plan(now, in).Changes.Set)
	require.NotEmpty(t, pn.Wanted())

	assert.Equal(t, now.Add(pinRetryEvery), f.r.pinRetry(failed, now), "HAProxy unreadable, pins wanted: soon")
	assert.True(t, f.r.pinRetry(weighter.Cycle{Result: weighter.ResultSourceError}, now).IsZero(), "a source error: the schedule")
	assert.True(t, f.r.pinRetry(weighter.Cycle{Result: weighter.ResultOK}, now).IsZero())
	later := now.Add(pinRetryFor + time.Second)
	assert.True(t, f.r.pinRetry(failed, later).IsZero(), "down for longer than a restart: the schedule")
}
