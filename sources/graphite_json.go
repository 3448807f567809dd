package sources

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// graphiteSeries is one element of a render API JSON reply:
// {"target": "node-1", "tags": {...}, "datapoints": [[1.5, 1796028450], [null, 1796028460]]}.
// Tags are not decoded: the name rules work on the target, and skipping them is cheaper.
type graphiteSeries struct {
	Target     string              `json:"target"`
	Datapoints []graphiteDatapoint `json:"datapoints"`
}

// graphiteDatapoint is [value, timestamp]; value may be null.
type graphiteDatapoint [2]*float64

// parseGraphite decodes a render reply into raw series; nulls become NaN (and are
// skipped later). It is pure, for fuzzing.
func parseGraphite(body []byte) ([]rawSeries, error) {
	var reply []graphiteSeries
	if err := json.Unmarshal(body, &reply); err != nil {
		return nil, fmt.Errorf("decode render json: %w", err)
	}
	out := make([]rawSeries, 0, len(reply))
	for _, s := range reply {
		pts, err := graphitePoints(s.Datapoints)
		if err != nil {
			return nil, fmt.Errorf("series %q: %w", s.Target, err)
		}
		out = append(out, rawSeries{name: s.Target, points: pts})
	}
	return out, nil
}

func graphitePoints(dps []graphiteDatapoint) (weighter.Series, error) {
	pts := make(weighter.Series, 0, len(dps))
	for _, dp := range dps {
		if dp[1] == nil {
			return nil, fmt.Errorf("datapoint without timestamp")
		}
		ts := *dp[1]
		if math.IsNaN(ts) || ts < 0 || ts > 1<<40 {
			return nil, fmt.Errorf("datapoint timestamp %v out of range", ts)
		}
		v := math.NaN()
		if dp[0] != nil {
			v = *dp[0]
		}
		pts = append(pts, weighter.Point{Time: time.Unix(int64(ts), 0).UTC(), Value: v})
	}
	return pts, nil
}
