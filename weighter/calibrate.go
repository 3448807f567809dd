package weighter

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Calibration modes: how a slow external load (the servers' true load, as a
// monitoring system shows it, late and averaged) corrects a fast local one (the
// load this balancer's own connections put on each server, read every cycle).
const (
	// CalibrateRatio multiplies the fast load by c_i = Σ external / Σ local over
	// the same windows (exponentially weighted sums), normalised to mean 1.
	CalibrateRatio = "ratio"
	// CalibrateRatioEWMA multiplies by an EWMA of the per-point ratios
	// external / local, normalised to mean 1 (compared in the simulator; a point
	// with little local traffic weighs as much as any other).
	CalibrateRatioEWMA = "ratio-ewma"
	// CalibrateOffset adds o_i = external − local over the same window (EWMA):
	// load_now ≈ external_t + (local_now − local_t).
	CalibrateOffset = "offset"
)

// CalibrationPolicy says how external points calibrate the fast local load.
type CalibrationPolicy struct {
	Mode string
	// Window is the span each external point averages over, ending at the point's
	// timestamp: the query's rate window (rate(x[30s]) → 30 s), or the bucket of a
	// Graphite point stamped at the bucket's end. The local load is averaged over
	// the same span, so a point's age does not bias the ratio.
	Window time.Duration
	// HalfLife weighs older points down; 0 uses the newest point alone.
	HalfLife time.Duration
	// Hold is how long a server keeps its calibration after its newest usable
	// external point; past it the factor is 1 (offset 0), with a reason.
	Hold time.Duration
	// MaxFactor bounds a ratio to [1/MaxFactor, MaxFactor] × the servers' median
	// before the factors are normalised to mean 1.
	MaxFactor float64
}

// DefaultCalibration is the calibration the simulator recommends (docs/research/fresh-by-default.md):
// ratio of sums with a 5 min half-life, held 10 min, clamped to 4× the median.
func DefaultCalibration(window time.Duration) CalibrationPolicy {
	return CalibrationPolicy{Mode: CalibrateRatio, Window: window, HalfLife: 5 * time.Minute, Hold: 10 * time.Minute, MaxFactor: 4}
}

// Validate reports the first setting that cannot work.
func (p CalibrationPolicy) Validate() error {
	switch p.Mode {
	case CalibrateRatio, CalibrateRatioEWMA, CalibrateOffset:
	default:
		return fmt.Errorf("calibration mode %q (want %s, %s or %s)", p.Mode, CalibrateRatio, CalibrateRatioEWMA, CalibrateOffset)
	}
	switch {
	case p.Window <= 0:
		return errors.New("calibration window must be positive")
	case p.HalfLife < 0 || p.Hold <= 0:
		return errors.New("calibration half-life must not be negative and hold must be positive")
	case !(p.MaxFactor > 1) || math.IsInf(p.MaxFactor, 0):
		return errors.New("calibration max factor must be > 1")
	}
	return nil
}

// Calibration is one server's correction of its fast local load.
type Calibration struct {
	// Factor multiplies the local load (ratio modes); 1 when uncalibrated.
	Factor float64
	// Offset is added to the local load (offset mode); 0 when uncalibrated.
	Offset float64
	// Calibrated is false when the server has no usable external data (never, or
	// not for Hold); Reason then says why, and the fast load is used alone.
	Calibrated bool
	Reason     string
	// Expired is set when the server was calibrated once but its newest
	// usable external point is older than Hold: what the log says, as a
	// state rather than a reason's wording.
	Expired bool
}

// Apply turns a server's local load over the last interval and its mean open
// connections over the same interval into the per-connection load to weight by:
// Factor × local / sessions, or max(Offset + local, 0) / sessions. A server with
// no connection counts as carrying one.
func (c Calibration) Apply(local, sessions float64) float64 {
	if !validLoad(local) {
		return math.NaN()
	}
	if math.IsNaN(sessions) || sessions < 1 {
		sessions = 1
	}
	est := local*c.Factor + c.Offset
	return math.Max(est, 0) / sessions
}

// counterSample is one reading of a server's cumulative local counter. at is
// Unix nanoseconds, not a time.Time: a sample is then 16 bytes instead of 32,
// and a server keeps one per cycle for a calibration window or more (at 1,000
// servers every 1 s, tens of thousands).
type counterSample struct {
	at    int64
	value float64
}

// calServer is what the Calibrator remembers of one server.
type calServer struct {
	hist     []counterSample // local counter readings, oldest first
	num, den float64         // weighted sums of external and local (ratio, offset)
	weight   float64         // weighted count of points (offset, ratio-ewma)
	ratio    float64         // EWMA of per-point ratios (ratio-ewma)
	updated  time.Time       // timestamp of the newest point used (zero: none yet)
	consumed time.Time       // timestamp of the newest point looked at
}

// Calibrator keeps, per server, the history of the fast local counter and the
// calibration the external points give. It is pure: the caller reads both sources
// and passes what it read. Not safe for concurrent use.
type Calibrator struct {
	p       CalibrationPolicy
	servers map[string]*calServer
}

// NewCalibrator validates p and returns an empty Calibrator.
func NewCalibrator(p CalibrationPolicy) (*Calibrator, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Calibrator{p: p, servers: map[string]*calServer{}}, nil
}

func (c *Calibrator) server(name string) *calServer {
	s := c.servers[name]
	if s == nil {
		s = &calServer{}
		c.servers[name] = s
	}
	return s
}

// keep is how much local history is kept at most: long enough to cover a point
// delayed by up to Hold, plus its window. A server whose external points come
// in keeps much less (see Local).
func (c *Calibrator) keep() time.Duration { return c.p.Window + c.p.Hold }

// Local records each server's cumulative local counter (bytes, datapoints: any
// unit, the same every cycle) read at now. A NaN, infinite or negative value is
// ignored; a counter that went backwards (HAProxy reload) restarts the history.
//
// The history is trimmed to what a later external point can still use: a point
// is used once, in order (External skips one not after the newest looked at,
// consumed), and reads the history over its window, so nothing before
// consumed − Window is read again but the one reading that interpolates that
// instant. While the source answers, a server keeps about Window plus the
// source's refresh of readings; keep() bounds it while the source is silent.
// (Trimming at keep() alone held Window + Hold, 11 minutes by default, of
// readings: at 1,000 servers every 1 s, 21 MB of heap that the daemon took
// 11 minutes to reach and then held.)
func (c *Calibrator) Local(now time.Time, counters map[string]float64) {
	at := now.UnixNano()
	for name, v := range counters {
		if !validLoad(v) {
			continue
		}
		s := c.server(name)
		if n := len(s.hist); n > 0 {
			last := s.hist[n-1]
			if at <= last.at {
				continue
			}
			if v < last.value {
				s.hist = s.hist[:0]
			}
		}
		if len(s.hist) == cap(s.hist) {
			// Grow by a quarter, not append's double: a server's history settles
			// at a length and keeps its capacity, so the slack is held for good.
			grown := make([]counterSample, len(s.hist), len(s.hist)+max(16, len(s.hist)/4))
			copy(grown, s.hist)
			s.hist = grown
		}
		s.hist = append(s.hist, counterSample{at: at, value: v})
		oldest := at - int64(c.keep()) // readings before it are not kept (but one, to interpolate it)
		if !s.consumed.IsZero() {
			oldest = max(oldest, s.consumed.Add(-c.p.Window).UnixNano())
		}
		cut := 0
		for cut < len(s.hist)-2 && s.hist[cut+1].at <= oldest {
			cut++
		}
		switch {
		case cap(s.hist) > 64 && cap(s.hist) > 2*(len(s.hist)-cut):
			// Give back what a silent source made the history grow to.
			s.hist = append(make([]counterSample, 0, (len(s.hist)-cut)*5/4), s.hist[cut:]...)
		case cut > 0:
			s.hist = append(s.hist[:0], s.hist[cut:]...)
		}
	}
}

// localMean is the local counter's mean rate over [from, to], interpolated
// between readings; false when the history does not cover the span.
func (s *calServer) localMean(from, to time.Time) (float64, bool) {
	a, okA := s.counterAt(from)
	b, okB := s.counterAt(to)
	if !okA || !okB || !to.After(from) {
		return 0, false
	}
	return (b - a) / to.Sub(from).Seconds(), true
}

func (s *calServer) counterAt(t time.Time) (float64, bool) {
	n, at := len(s.hist), t.UnixNano()
	if n == 0 || at < s.hist[0].at || at > s.hist[n-1].at {
		return 0, false
	}
	k, found := slices.BinarySearchFunc(s.hist, at, func(x counterSample, at int64) int { return cmp.Compare(x.at, at) })
	if found {
		return s.hist[k].value, true
	}
	lo, hi := s.hist[k-1], s.hist[k]
	f := float64(at-lo.at) / float64(hi.at-lo.at)
	return lo.value + f*(hi.value-lo.value), true
}

// External takes the servers' external load series (the true load, all
// balancers' traffic and work that does not pass through this one) and folds
// every point not seen before into the calibration. A point is used only when it
// is valid (finite, not negative), the local history covers its window, and the
// local load over that window is positive; an invalid point, or a server absent
// from loads, leaves the calibration as it was. A point newer than the newest
// local reading waits for a later call.
func (c *Calibrator) External(loads Loads) {
	for name, ser := range loads {
		s := c.server(name)
		for _, pt := range ser {
			if !pt.Time.After(s.consumed) {
				continue
			}
			if n := len(s.hist); n == 0 || pt.Time.UnixNano() > s.hist[n-1].at {
				break // the local side has not reached this point yet
			}
			s.consumed = pt.Time
			if !validLoad(pt.Value) {
				continue
			}
			local, ok := s.localMean(pt.Time.Add(-c.p.Window), pt.Time)
			if !ok || !(local > 0) {
				continue // no new ratio without local traffic to compare with
			}
			c.fold(s, pt.Time, pt.Value, local)
		}
	}
}

// fold adds one aligned (external, local) pair to a server's weighted sums.
func (c *Calibrator) fold(s *calServer, at time.Time, ext, local float64) {
	d, r := 0.0, ext/local
	if !s.updated.IsZero() && c.p.HalfLife > 0 {
		d = math.Exp2(-at.Sub(s.updated).Seconds() / c.p.HalfLife.Seconds())
		s.ratio = d*s.weight*s.ratio/(d*s.weight+1) + r/(d*s.weight+1)
	} else {
		s.ratio = r
	}
	s.num, s.den, s.weight = d*s.num+ext, d*s.den+local, d*s.weight+1
	s.updated = at
}

// Factors returns the calibration of each named server at now. Servers
// calibrated within Hold get their ratio, clamped to [1/MaxFactor, MaxFactor] ×
// the median of those ratios and divided by their mean, so the factors of the
// named servers average 1 (a factor says how a server's load per local byte
// compares with the others'); the rest get factor 1 and a reason. In offset mode
// the offset is the weighted mean of external − local, 0 when uncalibrated.
func (c *Calibrator) Factors(now time.Time, names []string) map[string]Calibration {
	out := make(map[string]Calibration, len(names))
	var cal []string
	var raw []float64
	for _, name := range names {
		s := c.servers[name]
		switch {
		case s == nil || s.updated.IsZero():
			out[name] = Calibration{Factor: 1, Reason: "no calibration yet (no external point aligned with local traffic)"}
		case now.Sub(s.updated) > c.p.Hold:
			out[name] = Calibration{Factor: 1, Expired: true,
				Reason: fmt.Sprintf("calibration expired (newest usable external point %v old)", now.Sub(s.updated).Round(time.Second))}
		case c.p.Mode == CalibrateOffset:
			out[name] = Calibration{Factor: 1, Offset: (s.num - s.den) / s.weight, Calibrated: true}
		default:
			r := s.num / s.den
			if c.p.Mode == CalibrateRatioEWMA {
				r = s.ratio
			}
			if math.IsNaN(r) || math.IsInf(r, 0) || r <= 0 {
				out[name] = Calibration{Factor: 1, Reason: "calibration unusable (external load 0)"}
				continue
			}
			cal, raw = append(cal, name), append(raw, r)
		}
	}
	if len(cal) == 0 {
		return out
	}
	med := median(slices.Clone(raw))
	lo, hi := 1/c.p.MaxFactor, c.p.MaxFactor
	reasons := make([]string, len(raw))
	sum := 0.0
	for i, r := range raw {
		f := r / med
		switch {
		case f > hi:
			f, reasons[i] = hi, fmt.Sprintf("calibration clamped to %g× the median", hi)
		case f < lo:
			f, reasons[i] = lo, fmt.Sprintf("calibration clamped to 1/%g of the median", hi)
		}
		raw[i] = f
		sum += f
	}
	// The calibrated servers average 1, as the uncalibrated ones (factor 1) do.
	for i, name := range cal {
		out[name] = Calibration{Factor: raw[i] * float64(len(raw)) / sum, Calibrated: true, Reason: reasons[i]}
	}
	return out
}

// Forget drops the servers not named (removed from the backend).
func (c *Calibrator) Forget(names []string) {
	for name := range c.servers {
		if !slices.Contains(names, name) {
			delete(c.servers, name)
		}
	}
}
