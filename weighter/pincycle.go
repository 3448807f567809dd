package weighter

import (
	"cmp"
	"math"
	"time"
)

// planPins plans the cycle's pins from the weight plan (a server it drains
// this cycle cannot take a pin), the servers as read, the fast signal's
// clients and connections, and the pin table as read.
func planPins(b *Weigher, now time.Time, p Plan, servers []ServerState, sig *Signal, table PinTable, tableErr error) *PinPlan {
	in := PinInput{Table: table, TableErr: tableErr, Hold: p.Hold, HoldReason: p.Reason, Unit: ShedUnit}
	if sig != nil && sig.Pipeline != PipelineExternal && sig.Pipeline != "" {
		in.Clients, in.Sessions = sig.Clients, sig.Sessions
	}
	planned := make(map[string]ServerPlan, len(p.Servers))
	for _, s := range p.Servers {
		planned[s.Server] = s
	}
	for _, st := range servers {
		sv := PinServer{Name: st.Name, Load: math.NaN(), Factor: 1, Conns: st.Sessions}
		sp, inPlan := planned[st.Name]
		if inPlan {
			sv.Load = sp.Load
		}
		if sig != nil {
			if f, ok := sig.Servers[st.Name]; ok && sig.Pipeline != PipelineExternal {
				sv.Load, sv.Factor = f.Factor*f.Local, f.Factor
			}
		}
		weight := st.Weight
		if inPlan && sp.Action == ActionSet {
			weight = sp.New
		}
		switch {
		case st.Admin != AdminReady:
			sv.Why = string(st.Admin)
		case st.Operational != "up":
			sv.Why = cmp.Or(st.Operational, "not up")
		case inPlan && sp.Action == ActionSet && sp.New == 0:
			sv.Why = "drained by this cycle"
		case weight <= 0:
			sv.Why = "weight 0"
		case inPlan && sp.Action == ActionSkip:
			sv.Why = cmp.Or(sp.Reason, "skipped")
		default:
			sv.Pinnable = true
		}
		in.Servers = append(in.Servers, sv)
	}
	pp := b.Pinner.Plan(now, in)
	return &pp
}
