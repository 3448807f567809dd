package metrics

// newDesired creates the series that compare a plan with what HAProxy has:
// the weight the plan wants beside server_weight (the weight HAProxy has),
// in every mode, and what a dry run would have written.
func (m *Metrics) newDesired() {
	m.desired = gaugeVec("server_desired_weight",
		"Weight the last plan wants for the server; server_weight is the one HAProxy (or IPVS) has. "+
			"They differ while a change is held back (deadband, max_step) or in a dry run.", "backend", "server")
	m.dryRun = gaugeVec("dry_run",
		"1 when the backend runs dry (dry_run, run --dry-run): it plans and exports and writes nothing.", "backend")
	m.dryRunWrites = counterVec("dry_run_weight_writes_total",
		"Weight writes a dry run held back: one per server each time the weight the plan wants for it changes "+
			"(HAProxy's weights do not move, so a change still wanted is not counted again).", "backend")
}

// SetDryRun exports whether the backend runs dry.
func (m *Metrics) SetDryRun(backend string, dry bool) {
	m.dryRun.WithLabelValues(backend).Set(b2f(dry))
	m.dryRunWrites.WithLabelValues(backend)
}

// AddDryRunWrites counts n weight writes a dry run held back.
func (m *Metrics) AddDryRunWrites(backend string, n int) {
	if n > 0 {
		m.dryRunWrites.WithLabelValues(backend).Add(float64(n))
	}
}
