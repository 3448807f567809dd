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
// and the shipped daemon, on the same scenario and connections; the shipped
// daemon's row alone is marked default, after the baselines.
func RunDefault(sc Scenario, strategies []Strategy) (*Report, error) {
	pipelines := pipelinesOf(withGapBaselines(strategies))
	at := 0
	for at < len(pipelines) && isBaseline(pipelines[at].Name) {
		at++
	}
	for i := range pipelines {
		pipelines[i].Default = false
	}
	rep, err := simulate(sc, slices.Insert(pipelines, at, ShippedPipeline()))
	if err != nil {
		return nil, err
	}
	rep.shippedInterval = ShippedPipeline().interval(sc)
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
