package weighter

import "time"

// FreshSettings are the configured values that shape a backend's Fresh
// source. The daemon and the simulator both take them from the backend's
// configuration (config.Backend.FreshSettings) and build the FreshConfig
// with Config, so that the simulator runs the pipeline the daemon runs.
type FreshSettings struct {
	// Calibrate: the external source calibrates the fast signal (else it
	// only stands in for it while the fast signal is not live).
	Calibrate   bool
	Calibration CalibrationPolicy
	// StepWindow: the calibration window is the external series' step
	// (Graphite), not Calibration.Window.
	StepWindow bool
	// Refresh is how often the external source is asked while the fast
	// signal is live.
	Refresh time.Duration
}

// Config returns the configuration of a Fresh source with these settings,
// reading the fast signal from fast and calibrating by (or falling back to)
// external. Its clock (Now, Sleep) and FirstWait are the caller's.
func (s FreshSettings) Config(fast LocalReader, external Source) FreshConfig {
	return FreshConfig{Fast: fast, External: external, Calibrate: s.Calibrate, Calibration: s.Calibration,
		StepWindow: s.StepWindow, Refresh: s.Refresh}
}
