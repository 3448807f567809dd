package peers

import (
	"regexp"
	"time"
	"unicode/utf8"
)

// summaryEvery is the time within which a peer's changes are said at most
// logChanges times; the daemon's cycle log summarises a run at the same
// pace (daemon/cyclelog.go).
const summaryEvery = 10 * time.Minute

// logChanges is how many of a peer's changes are said within summaryEvery;
// more are counted, and summarised with the state the peer is in at its
// first ask after that time. A peer that flaps (it answers about as slowly
// as the timeout, one of two hosts behind its name is broken) would
// otherwise be logged at every poll.
const logChanges = 4

// logChange says what fetch found of the peer at url: left out (problem),
// or added (""), when say; first, the summary of the changes left unsaid.
func (p *Set) logChange(url, problem string, say bool, unsaid int) {
	switch {
	case unsaid == 0:
	case problem == "":
		p.log.Warn("peer flapping", "peer", url, "changes", unsaid,
			"within", summaryEvery, "now", "added", "effect", "changes not logged one by one")
	default:
		p.log.Warn("peer flapping", "peer", url, "changes", unsaid,
			"within", summaryEvery, "now", "left out", "reason", problem, "effect", "changes not logged one by one")
	}
	switch {
	case !say || unsaid > 0: // the summary said the state
	case problem == "":
		p.log.Info("peer readings added to the fast signal", "peer", url)
	default:
		p.log.Warn("peer left out of the fast signal", "peer", url, "reason", problem)
	}
}

// sayChange reports whether a change (changed) is said, and how many were
// left unsaid in the time that ended at now. Called under pr.mu.
func (pr *peer) sayChange(now time.Time, changed bool) (say bool, unsaid int) {
	if now.Sub(pr.window) >= summaryEvery {
		unsaid = pr.unsaid
		pr.window, pr.said, pr.unsaid = now, 0, 0
	}
	switch {
	case !changed:
	case pr.said < logChanges:
		pr.said++
		say = true
	default:
		pr.unsaid++
	}
	return say, unsaid
}

// digits are what changes between two reports of the same reason: garbage
// values, a connection's local port.
var digits = regexp.MustCompile(`[0-9]+`)

// sameReason reports whether a and b say the same, numbers aside.
func sameReason(a, b string) bool {
	return digits.ReplaceAllLiteralString(a, "#") == digits.ReplaceAllLiteralString(b, "#")
}

// maxProblem bounds why a peer is left out: the text quotes what the peer
// sent (a server name, a status line, a JSON path), and goes to the log and,
// each cycle, to every server's reason in the plan.
const maxProblem = 512

// clipProblem cuts why to maxProblem bytes, on a character boundary.
func clipProblem(why string) string {
	if len(why) <= maxProblem {
		return why
	}
	cut := maxProblem
	for cut > 0 && !utf8.RuneStart(why[cut]) {
		cut--
	}
	return why[:cut] + "…"
}

// logStale says once when a peer's reading of backend goes stale, and once
// when it is fresh again.
func (p *Set) logStale(pr *peer, backend string, stale bool, age float64) {
	pr.mu.Lock()
	changed := pr.stale[backend] != stale
	pr.stale[backend] = stale
	pr.mu.Unlock()
	switch {
	case !changed:
	case stale:
		p.log.Warn("peer's reading stale", "peer", pr.url, "backend", backend,
			"age_seconds", age, "effect", "left out of the fast signal")
	default:
		p.log.Info("peer's reading fresh again", "peer", pr.url, "backend", backend)
	}
}
