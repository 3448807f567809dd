package weighter

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
)

func mustPinner(t testing.TB, p PinPolicy) *Pinner {
	t.Helper()
	pn, err := NewPinner(p)
	require.NoError(t, err)
	return pn
}

// pinServers are servers that all can take a pin, with the given loads and factor 1.
func pinServers(loads ...float64) []PinServer {
	out := make([]PinServer, len(loads))
	for i, l := range loads {
		out[i] = PinServer{Name: name(i), Load: l, Factor: 1, Pinnable: true}
	}
	return out
}

// carbon is the carbon world: four caches, eight long-lived connections,
// two 2,000/s relays on s1 and six 100/s ones, two per other server.
func carbon() PinInput {
	in := PinInput{Servers: pinServers(4000, 200, 200, 200), Table: PinTable{Name: "be", Size: 100}, Unit: "/s"}
	in.Clients = []Client{{Addr: "10.0.0.1", Rate: 2000, Conns: 1}, {Addr: "10.0.0.2", Rate: 2000, Conns: 1}}
	in.Sessions = []ShedSession{{ID: "0x1", Server: "s1", Client: "10.0.0.1:1", Rate: 2000}, {ID: "0x2", Server: "s1", Client: "10.0.0.2:1", Rate: 2000}}
	for i := range 6 {
		addr := fmt.Sprintf("10.0.1.%d", i)
		in.Clients = append(in.Clients, Client{Addr: addr, Rate: 100, Conns: 1})
		in.Sessions = append(in.Sessions, ShedSession{ID: fmt.Sprintf("0x1%d", i), Server: name(1 + i/2), Client: addr + ":1", Rate: 100})
	}
	return in
}

func TestPinnerSplitsTwoHeavyClientsOfOneServer(t *testing.T) {
	pn := mustPinner(t, DefaultPin())
	p := pn.Plan(now, carbon())
	t.Logf("%+v", p)
	require.Len(t, p.Pins, 2, p.Reason)
	assert.NotEqual(t, p.Pins[0].Server, p.Pins[1].Server, "the two relays on different caches")
	assert.Equal(t, p.Pins, p.Changes.Set)
	assert.Empty(t, p.Changes.Clear)
	assert.InDelta(t, 4000/1150.0, p.Imbalance, 1e-9)
	assert.Less(t, p.Projected, 2.0)
	_ = math.NaN
	_ = time.Second
	_ = duration.Duration(0)
}
