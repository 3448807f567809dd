package sim

import "math/rand/v2"

// HAProxy's weight scale: an effective weight is the user weight times
// BE_WEIGHT_SCALE, and SRV_EWGHT_MAX = 256 × BE_WEIGHT_SCALE (src/lb_fwlc.c).
const (
	beWeightScale = 16
	srvEWeightMax = 256 * beWeightScale
)

// server is one backend server as the balancer sees it.
type server struct {
	name    string
	up      bool    // in the backend (false once removed or before it joins)
	weight  int     // current user weight, 0..256; 0 = no new connections
	active  int     // open connections
	load    float64 // sum of the open connections' rates
	queued  uint64  // when it was last (re)queued in the leastconn tree
	swrr    int     // smooth weighted roundrobin current weight
	picked  int     // connections placed on it (for connection shares)
	integ   float64 // integral of load over time (the server's counter)
	connSec float64 // integral of open connections over time
	last    float64 // time integ was last brought up to date
}

// lcKey is the position of a server in HAProxy's leastconn tree (fwlc_queue_srv):
// 0 when it has no connection, else (active+1) × SRV_EWGHT_MAX / eweight, in
// integer arithmetic.
func lcKey(s *server) int {
	if s.active == 0 {
		return 0
	}
	return (s.active + 1) * srvEWeightMax / (s.weight * beWeightScale)
}

// pickLeastconn returns the server HAProxy's weighted leastconn gives the next
// connection: the lowest key, and among equal keys the one queued first (the
// ebtree keeps duplicates in insertion order, and a server is requeued at the end
// each time it takes or releases a connection or its weight changes, which makes
// ties go round-robin). -1 when no server has a weight.
func pickLeastconn(servers []*server) int {
	best, bestKey := -1, 0
	for i, s := range servers {
		if !s.up || s.weight <= 0 {
			continue
		}
		k := lcKey(s)
		if best < 0 || k < bestKey || (k == bestKey && s.queued < servers[best].queued) {
			best, bestKey = i, k
		}
	}
	return best
}

// pickRoundrobin is smooth weighted round robin: every eligible server's current
// value grows by its weight, the largest (first on ties) wins and gives back the
// total. Weights 5,1,1 give a a b a c a a. -1 when no server has a weight.
func pickRoundrobin(servers []*server) int {
	best, total := -1, 0
	for i, s := range servers {
		if !s.up || s.weight <= 0 {
			continue
		}
		s.swrr += s.weight
		total += s.weight
		if best < 0 || s.swrr > servers[best].swrr {
			best = i
		}
	}
	if best >= 0 {
		servers[best].swrr -= total
	}
	return best
}

// pickRandom2 is HAProxy's `balance random(2)` (get_server_rnd in
// src/backend.c): two draws, each a server with probability proportional to
// its weight (the consistent-hash ring holds points in proportion to the
// effective weight), and of the two the one with fewer connections per
// weight (served × other's eweight compared); on a tie, or when both draws
// are the same server, the second draw. -1 when no server has a weight.
func pickRandom2(rng *rand.Rand) picker {
	return func(servers []*server) int {
		total := 0
		for _, s := range servers {
			if s.up && s.weight > 0 {
				total += s.weight
			}
		}
		if total == 0 {
			return -1
		}
		draw := func() int {
			u := rng.IntN(total)
			for i, s := range servers {
				if !s.up || s.weight <= 0 {
					continue
				}
				if u < s.weight {
					return i
				}
				u -= s.weight
			}
			return -1
		}
		prev := draw()
		cur := draw()
		if prev != cur && servers[cur].active*servers[prev].weight > servers[prev].active*servers[cur].weight {
			cur = prev
		}
		return cur
	}
}
