package peers

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Matched by address when the balancers share any; by name when they share
// none (they reach the servers at other addresses) or the peer does not say
// them (an older daemon); one server under two names on the peer counts
// once with both names' readings.
func TestPeerMatchFallsBackToNames(t *testing.T) {
	own := map[string]string{"s1": "10.0.0.1:80", "s2": "10.0.0.2:80"}
	r := func(rate float64, addr string) serverRead {
		return serverRead{BytesPerSecond: rate, Sessions: 1, Address: addr}
	}
	swapped := matchPeer(map[string]serverRead{"s1": r(10, "10.0.0.2:80"), "s2": r(20, "10.0.0.1:80")}, own)
	require.Equal(t, 20.0, swapped.of("s1", own["s1"]).BytesPerSecond)
	require.Equal(t, 10.0, swapped.of("s2", own["s2"]).BytesPerSecond)
	elsewhere := matchPeer(map[string]serverRead{"s1": r(10, "192.168.0.2:80"), "s2": r(20, "192.168.0.1:80")}, own)
	require.Equal(t, 10.0, elsewhere.of("s1", own["s1"]).BytesPerSecond)
	older := matchPeer(map[string]serverRead{"s1": r(10, ""), "s2": r(20, "")}, own)
	require.Equal(t, 10.0, older.of("s1", own["s1"]).BytesPerSecond)
	twice := matchPeer(map[string]serverRead{"a": r(10, "10.0.0.1:80"), "b": r(5, "10.0.0.1:80")}, own)
	require.Equal(t, serverRead{BytesPerSecond: 15, Sessions: 2, Address: "10.0.0.1:80"}, twice.of("s1", own["s1"]))
	require.Equal(t, serverRead{}, twice.of("s2", own["s2"]), "a server the peer does not reach")
}

// Two own servers at one address (two server lines to one real server): the
// peer's reading of that address is shared between them, not added to each,
// so the backend's summed load counts it once.
func TestPeerReadingOfASharedOwnAddressIsAddedOnce(t *testing.T) {
	own := map[string]string{"s1": "10.0.0.1:80", "s1b": "10.0.0.1:80", "s2": "10.0.0.2:80"}
	m := matchPeer(map[string]serverRead{
		"p1": {BytesPerSecond: 30, Sessions: 4, Address: "10.0.0.1:80"},
		"p2": {BytesPerSecond: 5, Sessions: 1, Address: "10.0.0.2:80"},
	}, own)
	total := 0.0
	for name, addr := range own {
		total += m.of(name, addr).BytesPerSecond
	}
	require.Equal(t, 35.0, total, "the peer's 35 B/s in all, each address once")
	require.Equal(t, serverRead{BytesPerSecond: 15, Sessions: 2, Address: "10.0.0.1:80"}, m.of("s1b", own["s1b"]))
	require.Equal(t, 5.0, m.of("s2", own["s2"]).BytesPerSecond)
}
