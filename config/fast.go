package config

import (
	"fmt"
	"math"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Defaults of the fast signal and its calibration (docs/research/fresh-by-default.md).
const (
	// DefaultFastInterval is the interval when a backend reads HAProxy's fast
	// signal: data age is what limits the weighting (the simulator sweep), and
	// one `show sess all` every 2 s costs HAProxy well under 1 % of a core up to
	// some 10,000 streams (docs/research/haproxy-stream-counters.md).
	DefaultFastInterval = 2 * time.Second
	// DefaultRefresh is how often the external source is asked while the fast
	// signal carries the weights: 15 s is the usual Prometheus scrape interval
	// and finer than any Graphite retention in use, so a point rarely changes
	// between two asks, while the calibration's 5 min half-life makes one
	// missed point cost nothing. Range queries and Graphite return every point
	// since the last ask anyway.
	DefaultRefresh = 15 * time.Second
	// DefaultCalibrationWindow is the window assumed when the source's
	// configuration does not say it (a query without a range selector): the
	// README's rate(...[1m]). A wrong window biases a server's factor only
	// while its load changes within the window, and the start log says it.
	DefaultCalibrationWindow = time.Minute
	// FastOn and FastOff are the values of fast_signal; FastKernel,
	// FastSessions and FastStat turn it on with one reader of an HAProxy
	// backend's, pinned, instead of the chain that starts at the kernel's
	// socket table (package fastsignal): for servers the socket table
	// cannot tell apart (one address in two backends, Compose's separate
	// network namespaces) and for benchmarks that compare the readers.
	FastOn       = "on"
	FastOff      = "off"
	FastKernel   = "kernel"
	FastSessions = "sessions"
	FastStat     = "stat"
	// intervalAuto marks an interval the file did not set: it becomes
	// DefaultFastInterval or DefaultInterval once the backends are known.
	intervalAuto duration.Duration = math.MinInt64
)

// Calibration is a backend's `calibration:` block: how the external metric
// calibrates the fast signal. The defaults are the research's; only window
// is commonly set, when the source's configuration does not say it.
type Calibration struct {
	// Window is the span each external point averages over; 0 infers it
	// from the source (the query's range, Graphite's step).
	Window    duration.Duration `yaml:"window"`
	HalfLife  duration.Duration `yaml:"half_life"`
	Hold      duration.Duration `yaml:"hold"`
	MaxFactor float64           `yaml:"max_factor"`
	// Refresh is how often the external source is asked while the fast
	// signal carries the weights.
	Refresh duration.Duration `yaml:"refresh"`
}

// DefaultCalibration returns the calibration defaults.
func DefaultCalibration() Calibration {
	p := weighter.DefaultCalibration(0)
	return Calibration{HalfLife: duration.Duration(p.HalfLife), Hold: duration.Duration(p.Hold), MaxFactor: p.MaxFactor, Refresh: duration.Duration(DefaultRefresh)}
}

func (c Calibration) validate() []*FieldError {
	var problems []*FieldError
	if c.Window < 0 {
		problems = append(problems, keyed(fmt.Errorf("calibration: window must be >= 0 (0 = from the source), got %s", c.Window), "calibration", "window")...)
	}
	if c.HalfLife < 0 {
		problems = append(problems, keyed(fmt.Errorf("calibration: half_life must be >= 0, got %s", c.HalfLife), "calibration", "half_life")...)
	}
	if c.Hold <= 0 {
		problems = append(problems, keyed(fmt.Errorf("calibration: hold must be > 0, got %s", c.Hold), "calibration", "hold")...)
	}
	if !(c.MaxFactor > 1) || math.IsInf(c.MaxFactor, 0) {
		problems = append(problems, keyed(fmt.Errorf("calibration: max_factor must be > 1, got %g", c.MaxFactor), "calibration", "max_factor")...)
	}
	if c.Refresh <= 0 {
		problems = append(problems, keyed(fmt.Errorf("calibration: refresh must be > 0, got %s", c.Refresh), "calibration", "refresh")...)
	}
	return problems
}

// newBackend returns a backend with every default, as the file's decoder
// and the flags start from.
func newBackend() Backend {
	return Backend{Policy: weighter.DefaultPolicy(), FastSignal: FastOn, Calibration: DefaultCalibration()}
}

// UsesFastSignal reports whether the backend weighs by HAProxy's fast local
// signal (FastSignal says why not).
func (b *Backend) UsesFastSignal() bool {
	on, _ := b.FastSignalState()
	return on
}

// FastSignalState reports whether the backend weighs by HAProxy's fast local
// signal (for IPVS, its live connection counts) and, when not, why: it needs
// fast_signal on and a source the fast signal can stand for (not a session
// count); an IPVS service, which has no byte counters, a source that
// calibrates (its load per connection). It is also off when drain_above or
// connection_life is set: drain thresholds are in the source's unit, not in
// bytes per connection, and connection_life estimates from stale loads what
// the fast signal reads live.
func (b *Backend) FastSignalState() (on bool, why string) {
	switch {
	case b.IPVS != nil && !b.Calibrates():
		return false, "IPVS has no per-connection byte counters (its connection counts need a source that calibrates: " + calibratingKinds() + ")"
	case b.FastSignal == FastOff:
		return false, "fast_signal: off"
	case b.Source.Kind() == "":
		return false, "no source"
	case b.DrainAbove > 0:
		return false, "drain_above is in the source's unit"
	case b.ConnectionLife > 0:
		return false, "connection_life is set"
	}
	if _, ok := b.Source.fastBytes(); !ok {
		return false, "the source is not a byte counter"
	}
	return true, ""
}

// FastBytes is the traffic direction the fast signal weighs.
func (b *Backend) FastBytes() weighter.Bytes {
	if b.Source.Kind() == "" {
		return weighter.BytesBoth
	}
	d, _ := b.Source.fastBytes()
	return d
}

// Calibrates reports whether the backend's source calibrates the fast signal
// (an external metric), rather than only standing in for it.
func (b *Backend) Calibrates() bool {
	return b.Source.calibrates()
}

// CalibrationPolicy returns the calibration of the backend, its window
// (from the calibration block, else from the source) and where the window
// came from. When neither says it, the window is DefaultCalibrationWindow
// and how says so: the daemon logs it at start.
func (b *Backend) CalibrationPolicy() (p weighter.CalibrationPolicy, w Window) {
	p = weighter.DefaultCalibration(0)
	p.HalfLife, p.Hold, p.MaxFactor = time.Duration(b.Calibration.HalfLife), time.Duration(b.Calibration.Hold), b.Calibration.MaxFactor
	switch {
	case b.Calibration.Window > 0:
		w = Window{Span: time.Duration(b.Calibration.Window), How: "calibration.window"}
	default:
		w = b.Source.window()
	}
	if w.Span == 0 && !w.FromStep {
		w = Window{Span: DefaultCalibrationWindow, Assumed: true,
			How: fmt.Sprintf("assumed: the source does not say its window (no range selector in the query); set calibration.window (default %s)", DefaultCalibrationWindow)}
	}
	p.Window = w.Span
	return p, w
}

// resolveInterval gives an interval the file or flags left unset its
// default: DefaultFastInterval when a backend reads the fast signal, which
// is worth reading often, else DefaultInterval.
func (c *Config) resolveInterval() {
	if c.Interval != intervalAuto {
		return
	}
	c.Interval = duration.Duration(DefaultInterval)
	for i := range c.Backends {
		if c.Backends[i].UsesFastSignal() {
			c.Interval = duration.Duration(DefaultFastInterval)
		}
	}
}

// validateFast checks fast_signal and the calibration block.
func (b *Backend) validateFast() []*FieldError {
	var problems []*FieldError
	switch b.FastSignal {
	case FastOn, FastOff:
	case FastKernel, FastSessions, FastStat:
		if b.IPVS != nil {
			problems = append(problems, keyed(fmt.Errorf("fast_signal: %s is a reader of HAProxy's; an IPVS service has one fast signal, its connection counts (on or off)", b.FastSignal), "fast_signal")...)
		}
	default:
		problems = append(problems, keyed(fmt.Errorf("fast_signal: want %s, %s, or one reader pinned: %s, %s or %s; got %q",
			FastOn, FastOff, FastKernel, FastSessions, FastStat, b.FastSignal), "fast_signal")...)
	}
	return append(problems, b.Calibration.validate()...)
}
