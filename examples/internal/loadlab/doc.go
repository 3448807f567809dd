// Package loadlab holds the pieces of the load experiments under examples/ (the demo and
// the balance benchmark): sink servers that count what they receive, a generator of
// long-lived connections with heavy-tailed rates, child processes that never outlive
// the program, and HAProxy's runtime socket. Everything listens and dials on 127.0.0.1.
package loadlab
