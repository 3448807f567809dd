package testenv

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// StartTwoBalancers starts two real HAProxies in front of the same two
// sinks, each with backend be (leastconn, s1 and s2), and opens clients
// through each: one per server, uploading perClient[i] bytes every 100 ms
// on balancer i. Two daemons peering over them each see half the traffic.
func StartTwoBalancers(t testing.TB, perClient [2]int) [2]*HAProxy {
	t.Helper()
	sinks := [2]string{StartDiscardServer(t), StartDiscardServer(t)}
	var out [2]*HAProxy
	for i := range out {
		b := StartTwoServers(t, sinks, "weight 100")
		for range 2 { // leastconn puts one on each server
			b.Client(t, perClient[i], 100*time.Millisecond)
		}
		out[i] = b.HAProxy
	}
	return out
}

// ServePeer serves, until the test ends, a daemon's /peer/fast answer
// (another instance's) for backend be with server s1 at rate B/s over one
// session, read 0.1 s ago over 1 s, and returns its URL.
func ServePeer(t testing.TB, rate string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"instance":"other","backends":{"be":{"age_seconds":0.1,"span_seconds":1,`+
			`"servers":{"s1":{"bytes_per_second":%s,"sessions":1}}}}}`, rate)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
