package main

import (
	"fmt"
	"syscall"
)

// Descriptors, for -scenario many: the bench process holds, per client and arm, the
// client's socket and the sink's end of HAProxy's server connection (the sinks run in
// this process); each arm's HAProxy holds two per client (the client's and the
// server's), in its own process and under its own limit. With 4 arms the bench process
// is the bound: 8 descriptors a client against HAProxy's 2.
const (
	fdsPerClientArmBench   = 2   // client socket + sink socket, in this process
	fdsPerClientArmHAProxy = 2   // frontend + backend connection, in each HAProxy
	fdReserve              = 400 // listeners, HTTP to Prometheus and the weighters, files, clients reconnecting
)

// raiseNoFile raises this process' soft open-file limit to its hard limit (Go does so
// at start-up already; done again so the figure printed is what the run has) and returns
// both.
func raiseNoFile() (soft, hard uint64, err error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, 0, err
	}
	if r.Cur < r.Max {
		r.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
			return 0, 0, err
		}
	}
	return r.Cur, r.Max, nil
}

// manyConns is how many clients -scenario many runs with arms arms under an open-file
// limit of limit, and why, in a sentence for the header.
func manyConns(limit uint64, arms int) (int, string) {
	per := uint64(fdsPerClientArmBench * arms)
	if limit <= fdReserve+per {
		return 1, fmt.Sprintf("open-file limit %d leaves no room beyond %d reserved", limit, fdReserve)
	}
	n := int((limit - fdReserve) / per)
	return n, fmt.Sprintf("%d clients: open-file limit %d (soft raised to the hard limit) − %d reserved, ÷ %d descriptors a client in this process "+
		"(%d arms × client socket + sink socket); each HAProxy holds %d a client (%d) in its own process, under the same limit",
		n, limit, fdReserve, per, arms, fdsPerClientArmHAProxy, fdsPerClientArmHAProxy*n)
}

// haproxyMaxconn is the global maxconn of the arms' HAProxies: 4096 as before, or
// enough for every client twice over (a client reconnecting while its old connection
// closes).
func haproxyMaxconn(conns int) int { return max(4096, 2*conns+100) }
