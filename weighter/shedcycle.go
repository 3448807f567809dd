package weighter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// SessionCloser is a Target that can close one of its sessions (an HAProxy
// backend; IPVS cannot).
type SessionCloser interface {
	// CloseSession closes s if it is still the session that was listed (same
	// ID and Serial); one that ended meanwhile gives an error wrapping
	// ErrSessionGone and closes nothing.
	CloseSession(ctx context.Context, s ShedSession) error
}

// ErrSessionGone: the session to close had ended (or its ID names another
// session now). Nothing was closed, and nothing needed to be.
var ErrSessionGone = errors.New("session already gone")

// ShedOutcome is what became of one planned shed.
type ShedOutcome string

// Outcomes of a ShedResult.
const (
	ShedClosed ShedOutcome = "closed" // the session was closed
	ShedGone   ShedOutcome = "gone"   // it had ended meanwhile: nothing to do
	ShedFailed ShedOutcome = "failed" // the target could not close it
)

// ShedResult is one shed of a cycle and what became of it.
type ShedResult struct {
	Shed
	Outcome ShedOutcome
	Err     error // set when Failed, and when Gone (why)
}

// ShedUnit is the unit of the session rates shedding reads: the fast
// signal's bytes of the counted direction per second.
const ShedUnit = "B/s"

// planSheds plans the cycle's sheds from the weight plan and the fast
// signal: the servers' whole loads (calibration factor × local byte rate),
// the sessions with their rates, the plan's hold and the data's age. While
// the fast signal does not carry the loads there are no per-session rates
// to go by, and no server stays hot through such a cycle.
func planSheds(b *Weigher, now time.Time, p Plan, sig *Signal) *ShedPlan {
	if sig == nil || sig.Pipeline == PipelineExternal || sig.Pipeline == "" {
		why := "no per-session rates (the fast signal does not carry the loads)"
		if sig != nil && sig.FastReason != "" {
			why = fmt.Sprintf("no per-session rates (fast signal %s: %s)", sig.Fast, sig.FastReason)
		}
		sp := b.Shedder.skip(now, why)
		return &sp
	}
	if !b.Shedder.newRead(sig.FastAt) {
		// Dumps are spaced by the stream count (every ~6 s at 10,000
		// streams): a server must stay hot for `for` reads, not for one
		// read seen by `for` cycles.
		return &ShedPlan{Time: now, Reason: "no new show sess dump since the last cycle"}
	}
	in := ShedInput{Hold: p.Hold, HoldReason: p.Reason, DataAge: sig.FastAge,
		MaxAge: time.Duration(b.Controller.Policy().MaxAge), Unit: ShedUnit, Sessions: sig.Sessions,
		Pins: p.Pins.InForce()}
	if p.Settling {
		// The clients are still reconnecting after a reset: a server
		// looks hot or cold by who came back first, and a read that
		// spans the restart lost bytes.
		in.Hold, in.HoldReason = true, "the clients are reconnecting after a reset"
	}
	for _, s := range p.Servers {
		if s.Action == ActionSkip {
			continue // drained, in maintenance or down: not the engine's, and no place to send a session
		}
		sv := ShedServer{Name: s.Server, Load: math.NaN(), Factor: 1}
		if f, ok := sig.Servers[s.Server]; ok {
			sv.Load, sv.Factor = f.Factor*f.Local, f.Factor
		}
		in.Servers = append(in.Servers, sv)
	}
	sp := b.Shedder.Plan(now, in)
	return &sp
}

// skip records a cycle in which the servers could not be looked at: no
// server stays hot through it, and nothing is closed.
func (s *Shedder) skip(now time.Time, reason string) ShedPlan {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget(now)
	clear(s.streaks)
	return ShedPlan{Time: now, Reason: reason}
}

// cancel drops the plan's sheds, saying why: they were not tried.
func (p *ShedPlan) cancel(why string) {
	if p == nil || len(p.Sheds) == 0 {
		return
	}
	p.Reason = fmt.Sprintf("%d planned not closed: %s", len(p.Sheds), why)
	p.Sheds = nil
}

// dryRunSheds commits a dry run's sheds as if they were closed, so that a
// shadow run's "would shed" lines keep to max_per_minute and the cooldowns
// as a real run would (its sessions stay open, so it would otherwise plan
// the same one again every `for` cycles).
func dryRunSheds(b *Weigher, p *ShedPlan) {
	if p == nil || len(p.Sheds) == 0 {
		return
	}
	b.Shedder.Commit(p.Time, sessionsOf(p.Sheds))
}

// closeSheds closes the plan's sessions, after the weights are written so
// that the clients' reconnections are placed by them. A session that ended
// meanwhile is no failure; one the target could not close fails the cycle
// as a target error. The closed ones count against the caps and cooldowns;
// the failed ones against max_per_minute (a close that timed out may have
// happened).
func closeSheds(ctx context.Context, b *Weigher, c *Cycle) (string, error) {
	p := c.Plan.Shed
	if p == nil || len(p.Sheds) == 0 {
		return ResultOK, nil
	}
	closer, ok := b.Target.(SessionCloser)
	if !ok {
		p.cancel("the target cannot close sessions")
		return ResultTargetError, errors.New("shed: the target cannot close sessions")
	}
	var closed []ShedSession
	var errs []error
	failed := 0
	for _, sh := range p.Sheds {
		r := ShedResult{Shed: sh, Outcome: ShedClosed}
		switch err := closer.CloseSession(ctx, sh.Session); {
		case err == nil:
			closed = append(closed, sh.Session)
		case errors.Is(err, ErrSessionGone):
			r.Outcome, r.Err = ShedGone, err
		default:
			r.Outcome, r.Err = ShedFailed, err
			failed++
			errs = append(errs, fmt.Errorf("shed session %s: %w", sh.Session.ID, err))
		}
		c.Sheds = append(c.Sheds, r)
	}
	b.Shedder.Commit(p.Time, closed)
	b.Shedder.tried(p.Time, failed)
	if len(errs) > 0 {
		return ResultTargetError, errors.Join(errs...)
	}
	return ResultOK, nil
}

func sessionsOf(sheds []Shed) []ShedSession {
	out := make([]ShedSession, len(sheds))
	for i, sh := range sheds {
		out[i] = sh.Session
	}
	return out
}

// shedSessionJSON is ShedSession with lower-case keys, the age in seconds
// and a rate that is null when not measured.
type shedSessionJSON struct {
	ID         string   `json:"id"`
	Serial     uint64   `json:"serial"`
	Server     string   `json:"server"`
	Client     string   `json:"client"`
	AgeSeconds float64  `json:"age_seconds"`
	Rate       *float64 `json:"rate"`
}

// MarshalJSON writes the session as once's JSON output carries it.
func (s ShedSession) MarshalJSON() ([]byte, error) {
	out := shedSessionJSON{ID: s.ID, Serial: s.Serial, Server: s.Server, Client: s.Client, AgeSeconds: s.Age.Seconds()}
	if !math.IsNaN(s.Rate) && !math.IsInf(s.Rate, 0) {
		out.Rate = &s.Rate
	}
	return json.Marshal(out)
}
