package sim

import (
	"fmt"
	"slices"
	"time"
)

// ShippedName names the row of the daemon as it ships.
const ShippedName = "shipped: fast×calibration"

// ShippedPipeline is the daemon as a configuration that names only its
// source runs it: the fast signal calibrated by the source, with every
// default where package config sets it (interval, calibration, refresh,
// policy); peers' readings added when there are other balancers. The row
// the default run stars.
func ShippedPipeline() Pipeline {
	return Pipeline{Name: ShippedName, Kind: KindWeighter, Input: InputCalibrated, FleetWide: true, Shipped: true, Default: true}
}

// RunDefault is what haproxy-weighter-sim runs without flags: the
// strategies (Run: placement baselines, and weighting by the source alone)
// beside the shipped daemon (RunFleet on the same scenario and connections;
// with one balancer the two models place and score alike), whose row alone
// is marked default, after the baselines.
func RunDefault(sc Scenario, strategies []Strategy) (*Report, error) {
	rep, err := Run(sc, strategies)
	if err != nil {
		return nil, err
	}
	fl, err := RunFleet(sc, []Pipeline{ShippedPipeline()})
	if err != nil {
		return nil, err
	}
	k := slices.IndexFunc(fl.Strategies, func(f Figures) bool { return f.Strategy == ShippedName })
	if k < 0 {
		return nil, fmt.Errorf("the shipped pipeline has no figures")
	}
	at := 0
	for at < len(rep.Strategies) && isBaseline(rep.Strategies[at].Strategy) {
		at++
	}
	for i := range rep.Strategies {
		rep.Strategies[i].Default = false
	}
	rep.Strategies = slices.Insert(rep.Strategies, at, fl.Strategies[k])
	rep.traces = slices.Insert(rep.traces, at, fl.traces[k])
	rep.names = slices.Insert(rep.names, at, ShippedName)
	rep.shippedInterval = ShippedPipeline().interval(sc)
	rep.fillGaps()
	return rep, nil
}

func isBaseline(name string) bool {
	return slices.ContainsFunc(Baselines(), func(st Strategy) bool { return st.Name == name })
}

// shippedNote is the table's footnote for the starred row.
func shippedNote(sc Scenario, interval time.Duration) string {
	return fmt.Sprintf("* = the daemon as it ships: HAProxy's fast signal every %v calibrated by the source, config's defaults\n"+
		"(refresh, calibration, weighter.DefaultPolicy()); the other weighter rows weigh by the source alone every %v", interval, sc.Interval)
}
