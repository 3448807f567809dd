// Package fastsignal is an HAProxy backend's fast signal: each server's
// live bytes and connections, read every cycle from the best of three
// readers that works (chain.go): the kernel's socket table (package
// sockdiag), `show sess all` (sessions.go), `show stat`'s byte counters
// (stat.go), and below them the source alone. For a backend that sheds it
// also lists the open connections with their rates and finds the HAProxy
// stream of each one a plan may close. AnswerInBackground has a calibrating
// metrics source answer outside the cycle (async.go).
//
// The daemon builds one Chain per HAProxy backend (NewHAProxyChain) and
// hands it to package assemble as the backend's weighter.LocalReader; the
// design is docs/sockdiag.md.
package fastsignal
