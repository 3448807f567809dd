package cmd

import (
	"fmt"
	"io"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// printShed writes a shedding backend's sessions to close (a dry run: "would
// shed …"), what became of each (--apply), or why none.
func printShed(w io.Writer, c weighter.Cycle) {
	p := c.Plan.Shed
	if p == nil {
		return
	}
	if len(p.Sheds) == 0 {
		fmt.Fprintf(w, "shed: none (%s)\n", p.Reason)
		return
	}
	if !c.Applied {
		for _, sh := range p.Sheds {
			fmt.Fprintln(w, sh.DryRun())
		}
		return
	}
	for _, r := range c.Sheds {
		switch r.Outcome {
		case weighter.ShedClosed:
			fmt.Fprintln(w, r.Reason)
		case weighter.ShedGone:
			fmt.Fprintf(w, "not needed: %s: it had already ended\n", r.Reason)
		default:
			fmt.Fprintf(w, "failed: %s: %v\n", r.Reason, r.Err)
		}
	}
}

// shedResultJSON is a tried shed in once's JSON output.
type shedResultJSON struct {
	Session weighter.ShedSession `json:"session"`
	Outcome weighter.ShedOutcome `json:"outcome"`
	Reason  string               `json:"reason"`
	Error   string               `json:"error,omitempty"`
}

func shedResults(rs []weighter.ShedResult) []shedResultJSON {
	var out []shedResultJSON
	for _, r := range rs {
		j := shedResultJSON{Session: r.Session, Outcome: r.Outcome, Reason: r.Reason}
		if r.Err != nil {
			j.Error = r.Err.Error()
		}
		out = append(out, j)
	}
	return out
}
