// Package sockdiag reads HAProxy's connections to a backend's servers from
// the kernel's TCP socket table (NETLINK_SOCK_DIAG, INET_DIAG with tcp_info:
// what `ss -ti` shows) and turns them into the fast local signal: per server,
// cumulative bytes of both directions and open connections; per connection,
// its 4-tuple, inode and rate between two reads.
//
// Reading the table costs HAProxy nothing (the kernel answers; no HAProxy
// thread waits), and its format is a kernel ABI, unlike `show sess all`
// (docs/research/haproxy-stream-counters.md). docs/sockdiag.md has the design: which
// counters, how connections are counted across reads, how HAProxy's sockets
// are told from others', and what happens outside HAProxy's network
// namespace.
package sockdiag
