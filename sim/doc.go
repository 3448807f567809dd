// Package sim is a seeded, discrete-time model of one HAProxy backend carrying
// long-lived connections of very different rates. It places each new connection
// the way HAProxy does (weighted leastconn, smooth weighted roundrobin or
// random(2)), feeds the daemon's own cycle (weighter.RunCycle) HAProxy's fast
// signal calibrated by the delayed, averaged loads a monitoring system would show
// it, or those loads alone, and scores how evenly the load ends up
// spread, side by side with the strategies people use instead (plain leastconn and
// roundrobin, an agent-check feedback agent) and an oracle lower bound.
//
// Every strategy of one run sees the same connection stream (same arrival times,
// lifetimes and rates), so their figures differ only by placement.
//
// The command haproxy-weighter-sim (cmd/haproxy-weighter-sim) runs it. The daemon,
// cmd/haproxy-weighter, does not link this package or its plotting libraries (a
// test there checks its imports).
package sim
