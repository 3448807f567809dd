package lvs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/cloudflare/ipvs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/ownzero"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

var exampleServers = map[string]string{"node-1": "10.0.2.1:2003", "node-2": "10.0.2.2:2003"}

func newTestService(t *testing.T, f *fakeConn, servers map[string]string) *Service {
	t.Helper()
	return newRecordingService(t, f, servers, nil)
}

// newRecordingService is newTestService recording its quiesces in zeroes
// (nil: a record of its own), as the daemon's Services share one.
func newRecordingService(t *testing.T, f *fakeConn, servers map[string]string, zeroes *ownzero.Record) *Service {
	t.Helper()
	s, err := newService(Config{Service: "udp://10.0.0.1:2003", Servers: servers}, f, zeroes, nil)
	require.NoError(t, err)
	return s
}

func TestServersNamesDestinations(t *testing.T) {
	f := newFake(dr("10.0.2.2:2003", 50), dr("10.0.2.1:2003", 100), dr("10.0.2.3:2003", 0))
	s := newTestService(t, f, exampleServers)

	got, err := s.Servers(context.Background())
	require.NoError(t, err)
	want := []weighter.ServerState{
		{Name: "10.0.2.3:2003", Address: "10.0.2.3:2003", Weight: 0, InitialWeight: 0, Admin: weighter.AdminReady, Operational: "up", Sessions: 7},
		{Name: "node-1", Address: "10.0.2.1:2003", Weight: 100, InitialWeight: 100, Admin: weighter.AdminReady, Operational: "up", Sessions: 7},
		{Name: "node-2", Address: "10.0.2.2:2003", Weight: 50, InitialWeight: 50, Admin: weighter.AdminReady, Operational: "up", Sessions: 7},
	}
	assert.Equal(t, want, got)
}

// TestServersSessions: IPVS counts every new connection inactive, and only
// TCP and SCTP move it to active once established; a UDP flow stays inactive
// for its whole life. So UDP sessions are active + inactive (inactive alone in
// practice), and TCP's are the active ones (its inactive are closing).
func TestServersSessions(t *testing.T) {
	tcp := ipvs.Service{Address: netip.MustParseAddr("10.0.0.1"), Port: 80, Protocol: ipvs.TCP, Family: ipvs.INET}
	for _, tc := range []struct {
		service          string
		svc              ipvs.Service
		active, inactive uint32
		want             int
	}{
		{"udp://10.0.0.1:2003", udpService, 0, 5, 5},
		{"tcp://10.0.0.1:80", tcp, 3, 5, 3},
	} {
		f := &fakeConn{svc: tc.svc, dests: []ipvs.Destination{dr("10.0.2.1:2003", 100)}, active: tc.active, inactive: tc.inactive}
		s, err := newService(Config{Service: tc.service}, f, nil, nil)
		require.NoError(t, err)
		got, err := s.Servers(context.Background())
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, tc.want, got[0].Sessions, tc.service)
	}
}

func TestServersKeepsFirstSeenWeightAsInitial(t *testing.T) {
	f := newFake(dr("10.0.2.1:2003", 100))
	s := newTestService(t, f, exampleServers)
	require.NoError(t, s.SetWeights(context.Background(), []weighter.Change{{Server: "node-1", Weight: 30}}))

	got, err := s.Servers(context.Background())
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, 30, got[0].Weight)
	assert.Equal(t, 30, got[0].InitialWeight, "first read happened after the write")

	require.NoError(t, s.SetWeights(context.Background(), []weighter.Change{{Server: "node-1", Weight: 60}}))
	got, err = s.Servers(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 60, got[0].Weight)
	assert.Equal(t, 30, got[0].InitialWeight)
}

// TestServersForgetsDestinationsThatLeft: a destination removed and later
// added again (keepalived after a failed health check, a redeploy) is a new
// real server whose initial weight is the one it comes back with; and the
// addresses of servers long gone are not kept for the life of the daemon.
func TestServersForgetsDestinationsThatLeft(t *testing.T) {
	f := newFake(dr("10.0.2.1:2003", 100), dr("10.0.2.2:2003", 100))
	s := newTestService(t, f, exampleServers)
	_, err := s.Servers(context.Background())
	require.NoError(t, err)

	f.dests = f.dests[1:]
	_, err = s.Servers(context.Background())
	require.NoError(t, err)
	s.mu.Lock()
	assert.Len(t, s.initial, 1, "first-seen weights kept")
	s.mu.Unlock()

	f.dests = append(f.dests, dr("10.0.2.1:2003", 50))
	got, err := s.Servers(context.Background())
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "node-1", got[0].Name)
	assert.Equal(t, 50, got[0].InitialWeight)
}

// TestSetWeightsKeepsDirectRoute is the reason for read-modify-write: the
// kernel (and the fake) replace every field on update.
func TestSetWeightsKeepsDirectRoute(t *testing.T) {
	f := newFake(dr("10.0.2.1:2003", 100), dr("10.0.2.2:2003", 100), dr("10.0.2.3:2003", 100))
	s := newTestService(t, f, exampleServers)

	err := s.SetWeights(context.Background(), []weighter.Change{
		{Server: "node-1", Weight: 37}, {Server: "10.0.2.3:2003", Weight: 0},
	})
	require.NoError(t, err)

	require.Len(t, f.updates, 2)
	assert.Equal(t, dr("10.0.2.1:2003", 37), f.updates[0], "only Weight differs from what was read")
	assert.Equal(t, dr("10.0.2.3:2003", 0), f.updates[1])
	assert.Equal(t, []ipvs.Destination{dr("10.0.2.1:2003", 37), dr("10.0.2.2:2003", 100), dr("10.0.2.3:2003", 0)}, f.dests)
	for _, d := range f.dests {
		assert.Equal(t, ipvs.DirectRoute, d.FwdMethod, d.Address)
	}
}

// TestBlindUpdateWouldMasquerade shows the fake is faithful enough for the
// test above to mean something: a destination built from scratch loses
// DirectRoute.
func TestBlindUpdateWouldMasquerade(t *testing.T) {
	f := newFake(dr("10.0.2.1:2003", 100))
	a := netip.MustParseAddr("10.0.2.1")
	require.NoError(t, f.UpdateDestination(udpService, ipvs.Destination{Address: a, Port: 2003, Family: ipvs.INET, Weight: 37}))
	assert.Equal(t, ipvs.Masquerade, f.dests[0].FwdMethod)
}

func TestSetWeightsPerServerErrors(t *testing.T) {
	f := newFake(dr("10.0.2.1:2003", 100), dr("10.0.2.2:2003", 100), dr("10.0.2.3:2003", 100))
	f.failOn = map[netip.Addr]error{netip.MustParseAddr("10.0.2.2"): fmt.Errorf("netlink receive: %w", syscall.EPERM)}
	s := newTestService(t, f, exampleServers)

	err := s.SetWeights(context.Background(), []weighter.Change{
		{Server: "node-2", Weight: 20},
		{Server: "node-9", Weight: 20},
		{Server: "10.0.2.3:2003", Weight: 40},
	})
	require.Error(t, err)

	var failed []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var se *weighter.ServerError
		require.ErrorAs(t, e, &se)
		failed = append(failed, se.Server)
	}
	assert.Equal(t, []string{"node-2", "node-9"}, failed)
	assert.ErrorIs(t, err, syscall.EPERM)
	assert.ErrorContains(t, err, `server node-9: no destination named "node-9" in ipvs service udp://10.0.0.1:2003`)
	assert.Equal(t, uint32(40), f.dests[2].Weight, "the good change is still written")
	assert.Equal(t, uint32(100), f.dests[0].Weight)
}

// TestSetWeightsRefusesBadBatch: a weight out of range or a server changed
// twice means a bug upstream; half of a buggy plan is no better, so nothing
// is written (as the HAProxy writer does), and the error is not made of
// ServerErrors only, so weighter.RunCycle counts none of the changes written.
func TestSetWeightsRefusesBadBatch(t *testing.T) {
	for name, tc := range map[string]struct {
		changes []weighter.Change
		want    []string
	}{
		"weight too big": {[]weighter.Change{{Server: "node-2", Weight: 20}, {Server: "node-1", Weight: 257}},
			[]string{"ipvs: service udp://10.0.0.1:2003: nothing written: 1 of 2 changes refused", "server node-1: invalid weight: 257 outside 0..256"}},
		"negative weight": {[]weighter.Change{{Server: "node-1", Weight: -1}, {Server: "node-2", Weight: 20}},
			[]string{"nothing written: 1 of 2 changes refused", "server node-1: invalid weight: -1 outside 0..256"}},
		"server twice": {[]weighter.Change{{Server: "node-1", Weight: 20}, {Server: "node-2", Weight: 20}, {Server: "node-1", Weight: 30}},
			[]string{"nothing written: 1 of 3 changes refused", "server node-1: more than one change in the batch (weight 30)"}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(dr("10.0.2.1:2003", 100), dr("10.0.2.2:2003", 100))
			s := newTestService(t, f, exampleServers)
			err := s.SetWeights(context.Background(), tc.changes)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w)
			}
			assert.Empty(t, f.updates, "nothing is written")
			onlyServerErrors := true
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var se *weighter.ServerError
				onlyServerErrors = onlyServerErrors && errors.As(e, &se)
			}
			assert.False(t, onlyServerErrors, "a batch-level error must say that nothing was written")
		})
	}
}

// TestSetWeightsDestinationVanished: keepalived removes a real server between
// the read and the write. The kernel answers ENOENT; the destination must not
// come back, the other change is still written, and the error says which
// service and server, and what happened.
func TestSetWeightsDestinationVanished(t *testing.T) {
	f := newFake(dr("10.0.2.1:2003", 100), dr("10.0.2.2:2003", 100))
	s := newTestService(t, f, exampleServers)
	f.beforeUpdate = func(f *fakeConn) {
		f.dests = slices.DeleteFunc(f.dests, func(d ipvs.Destination) bool { return d.Address == netip.MustParseAddr("10.0.2.1") })
		f.beforeUpdate = nil
	}

	err := s.SetWeights(context.Background(), []weighter.Change{{Server: "node-1", Weight: 30}, {Server: "node-2", Weight: 40}})
	var se *weighter.ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "node-1", se.Server)
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.EqualError(t, err, "server node-1: ipvs: service udp://10.0.0.1:2003: destination 10.0.2.1:2003 is gone "+
		"(removed since it was read), not re-added: netlink receive: no such file or directory")
	assert.Equal(t, []ipvs.Destination{dr("10.0.2.2:2003", 40)}, f.dests)
}

// TestSetWeightsErrorsNameService: a failed write and a cycle deadline hit
// between writes say which service, which destination, and that nothing was
// written for that server.
func TestSetWeightsErrorsNameService(t *testing.T) {
	f := newFake(dr("10.0.2.1:2003", 100), dr("10.0.2.2:2003", 100))
	f.failOn = map[netip.Addr]error{netip.MustParseAddr("10.0.2.1"): fmt.Errorf("netlink receive: %w", syscall.EPERM)}
	s := newTestService(t, f, exampleServers)
	ctx, cancel := context.WithCancel(context.Background())
	f.beforeUpdate = func(*fakeConn) { cancel() } // the deadline passes during the first write

	err := s.SetWeights(ctx, []weighter.Change{{Server: "node-1", Weight: 30}, {Server: "node-2", Weight: 40}})
	assert.EqualError(t, err, "server node-1: ipvs: service udp://10.0.0.1:2003: update destination 10.0.2.1:2003: netlink receive: operation not permitted\n"+
		"server node-2: ipvs: service udp://10.0.0.1:2003: weight of 10.0.2.2:2003 not written: context canceled")
	assert.ErrorIs(t, err, context.Canceled)
}

func TestServiceNotFound(t *testing.T) {
	f := newFake()
	_, err := newService(Config{Service: "udp://10.0.0.1:2004"}, f, nil, nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.ESRCH)
	assert.ErrorContains(t, err, "ipvs: service udp://10.0.0.1:2004 not found in the kernel")
}

func TestServiceRemovedLater(t *testing.T) {
	f := newFake(dr("10.0.2.1:2003", 100))
	s := newTestService(t, f, exampleServers)
	f.svc = ipvs.Service{FWMark: 1, Family: ipvs.INET} // the service under us is gone

	_, err := s.Servers(context.Background())
	assert.ErrorContains(t, err, "not found in the kernel")
	err = s.SetWeights(context.Background(), []weighter.Change{{Server: "node-1", Weight: 5}})
	assert.ErrorContains(t, err, "not found in the kernel")
	assert.Empty(t, f.updates)
}

func TestAmbiguousBareAddress(t *testing.T) {
	f := newFake(dr("10.0.2.1:2003", 100), dr("10.0.2.1:2004", 100))
	s := newTestService(t, f, map[string]string{"node-1": "10.0.2.1"})
	_, err := s.Servers(context.Background())
	assert.EqualError(t, err, `ipvs: destinations 10.0.2.1:2003 and 10.0.2.1:2004 of udp://10.0.0.1:2003 both map to server "node-1"; map them by ip:port`)
}

func TestCanceledContext(t *testing.T) {
	f := newFake(dr("10.0.2.1:2003", 100))
	s := newTestService(t, f, exampleServers)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.SetWeights(ctx, []weighter.Change{{Server: "node-1", Weight: 5}})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, f.updates)
}

func TestCloseClosesConn(t *testing.T) {
	f := newFake()
	s := newTestService(t, f, nil)
	require.NoError(t, s.Close())
	assert.True(t, f.closed)
}

// TestSetWeightsLeavesDestinationQuiescedMeanwhile: keepalived's
// inhibit_on_failure (or an operator's `ipvsadm -e … -w 0`) quiesces a
// destination by weight 0, once, when its check fails. If that happens
// between the cycle's read and its write (while the source is queried), the
// write must not put a weight back: keepalived would not set 0 again, and a
// dead server would stay in rotation. A destination the daemon quiesced
// itself is resumed as planned, also through a Service built by a reload.
func TestSetWeightsLeavesDestinationQuiescedMeanwhile(t *testing.T) {
	f := newFake(dr("10.0.2.1:2003", 100), dr("10.0.2.2:2003", 100), dr("10.0.2.3:2003", 100))
	zeroes := &ownzero.Record{} // the daemon's, which every Service it builds shares
	s := newRecordingService(t, f, exampleServers, zeroes)
	ctx := context.Background()
	require.NoError(t, s.SetWeights(ctx, []weighter.Change{{Server: "10.0.2.3:2003", Weight: 0}}), "the daemon drains .3")
	_, err := s.Servers(ctx)
	require.NoError(t, err)

	f.dests[1].Weight = 0 // keepalived: node-2's check failed
	reloaded := newRecordingService(t, f, exampleServers, zeroes)
	err = reloaded.SetWeights(ctx, []weighter.Change{
		{Server: "node-1", Weight: 37}, {Server: "node-2", Weight: 50}, {Server: "10.0.2.3:2003", Weight: 60}})
	var se *weighter.ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "node-2", se.Server)
	assert.ErrorContains(t, err, "weight 0")
	assert.Equal(t, []uint32{37, 0, 60}, []uint32{f.dests[0].Weight, f.dests[1].Weight, f.dests[2].Weight})
}

// TestSetWeightsLeavesAnotherRecordsQuiesce: a quiesce written through a
// Service with another record (another daemon in the process, a tool) is
// someone else's: the record is its owner's, not the package's.
func TestSetWeightsLeavesAnotherRecordsQuiesce(t *testing.T) {
	f := newFake(dr("10.0.2.1:2003", 100), dr("10.0.2.4:2003", 100))
	ctx := context.Background()
	other := newTestService(t, f, exampleServers)
	require.NoError(t, other.SetWeights(ctx, []weighter.Change{{Server: "10.0.2.4:2003", Weight: 0}}))
	err := newTestService(t, f, exampleServers).SetWeights(ctx, []weighter.Change{{Server: "10.0.2.4:2003", Weight: 60}})
	var se *weighter.ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, uint32(0), f.dests[1].Weight)
}

// TestSetWeightsQuiesceRecordEndsWhenWeightComesBack: the daemon quiesced a
// destination, something else gave it a weight again (keepalived after a
// failed and recovered check) and the cycle read it so; a 0 set after that
// is not the daemon's and is not lifted.
func TestSetWeightsQuiesceRecordEndsWhenWeightComesBack(t *testing.T) {
	f := newFake(dr("10.0.2.1:2003", 100), dr("10.0.2.4:2003", 100))
	s := newTestService(t, f, exampleServers)
	ctx := context.Background()
	require.NoError(t, s.SetWeights(ctx, []weighter.Change{{Server: "10.0.2.4:2003", Weight: 0}}))
	f.dests[1].Weight = 100
	_, err := s.Servers(ctx)
	require.NoError(t, err)
	f.dests[1].Weight = 0
	err = s.SetWeights(ctx, []weighter.Change{{Server: "10.0.2.4:2003", Weight: 60}})
	var se *weighter.ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, uint32(0), f.dests[1].Weight)
}

// TestServersSayWhichZeroIsOwn: a read says which weight 0 is this
// process's own quiesce, so that the cycles resume it and leave
// keepalived's alone.
func TestServersSayWhichZeroIsOwn(t *testing.T) {
	f := newFake(dr("10.0.2.1:2003", 100), dr("10.0.2.4:2003", 100))
	s := newTestService(t, f, exampleServers)
	ctx := context.Background()
	require.NoError(t, s.SetWeights(ctx, []weighter.Change{{Server: "10.0.2.4:2003", Weight: 0}}))
	f.dests[0].Weight = 0 // keepalived
	got, err := s.Servers(ctx)
	require.NoError(t, err)
	own := map[string]bool{}
	for _, st := range got {
		own[st.Address] = st.OwnZero
	}
	assert.Equal(t, map[string]bool{"10.0.2.1:2003": false, "10.0.2.4:2003": true}, own)
}
