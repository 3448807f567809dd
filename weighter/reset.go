package weighter

// ReasonReset is the note of a server whose weight HAProxy reset to the
// configuration's together with every other weight the daemon wrote.
const ReasonReset = "every weight back to the configuration's (HAProxy restarted or reloaded): weighted again from them, not the old ones re-applied"

// forgetResetWeights drops what the Controller wrote when HAProxy reset
// every weight it wrote to the configuration's at once: a new process (a
// restart, or a reload without a server-state file). The written weights
// were fitted to connections that process no longer counts: a restarted
// HAProxy has closed them, and a reloaded one leaves them to the old worker
// and places the next connections by its own counts, all 0. Put back on a
// backend of empty servers, weights fitted to the old placement split the
// reconnecting clients in their proportions, which nothing in the new
// placement calls for (measured on a real HAProxy: a restart's 240
// reconnecting clients ended less even than under plain leastconn, and
// stayed so). So the cycle starts again from the weights HAProxy holds, as
// at the daemon's start, and max_step counts from them. A weight changed
// outside on its own (an operator, another tool) is still set back: it is
// not a reset of the whole backend.
//
// A reset is told by the weights alone: every weightable server holds its
// configured weight now, and of those with a weight the Controller wrote
// (> 0) at least two (one, when it is the only one) differ from it. It reports whether it found one, and notes it on those servers.
func (c *Controller) forgetResetWeights(ws []work, servers []ServerState) bool {
	ours, changed := 0, 0
	for k, i := range c.roster.order {
		w, s := &ws[k], &servers[i]
		if !w.weightable() {
			continue
		}
		if s.InitialWeight <= 0 || s.Weight != s.InitialWeight {
			return false
		}
		if w.mem.written > 0 {
			ours++
			if w.mem.written != s.Weight {
				changed++
			}
		}
	}
	if ours == 0 || changed < min(2, ours) {
		return false
	}
	for k := range ws {
		if w := &ws[k]; w.weightable() && w.mem.written > 0 {
			w.mem.written = -1
			w.note = ReasonReset
		}
	}
	return true
}
