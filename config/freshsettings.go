package config

import (
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// FreshSettings are the backend's values that shape its Fresh source: the
// daemon builds its pipeline from them, and the simulator its model of the
// daemon, so the two cannot drift apart.
func (b *Backend) FreshSettings() weighter.FreshSettings {
	p, w := b.CalibrationPolicy()
	return weighter.FreshSettings{Calibrate: b.Calibrates(), Calibration: p, StepWindow: w.FromStep,
		Refresh: time.Duration(b.Calibration.Refresh)}
}
