package daemon

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// The fast pipeline's state changes are logged at info once each: the fast
// signal dead and alive again, the calibrating source failing and back, the
// calibration expired and back; the servers concerned at debug.
func TestSignalChangesAreLoggedOnce(t *testing.T) {
	var out, debug strings.Builder
	l := &cycleLog{log: slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})), ready: true}
	now := time.Unix(1_800_000_000, 0)
	calibrated := map[string]weighter.FastInput{"s1": {Factor: 1, Calibrated: true}, "s2": {Factor: 1, Calibrated: true}}
	expired := map[string]weighter.FastInput{"s1": {Factor: 1, Note: "fast 1 B/s / 1 sess; calibration expired (newest usable external point 10m2s old); fast signal alone"},
		"s2": {Factor: 1, Calibrated: true}}
	steps := []struct {
		sig  weighter.Signal
		want string // the info line's message, "" for none
	}{
		{weighter.Signal{Pipeline: weighter.PipelineCalibrated, Fast: weighter.FastLive, Calibrate: true, ExternalFetched: true, Servers: calibrated}, ""},
		{weighter.Signal{Pipeline: weighter.PipelineExternal, Fast: weighter.FastDead, FastReason: "dump failed", Calibrate: true, ExternalFetched: true}, "fast signal dead"},
		{weighter.Signal{Pipeline: weighter.PipelineExternal, Fast: weighter.FastDead, FastReason: "dump failed", Calibrate: true, ExternalFetched: true}, ""},
		{weighter.Signal{Pipeline: weighter.PipelineCalibrated, Fast: weighter.FastLive, Calibrate: true, Servers: calibrated}, "fast signal alive again"},
		{weighter.Signal{Pipeline: weighter.PipelineCalibrated, Fast: weighter.FastLive, Calibrate: true, ExternalFetched: true, ExternalError: "prometheus down", Servers: calibrated}, "calibrating source failing"},
		{weighter.Signal{Pipeline: weighter.PipelineCalibrated, Fast: weighter.FastLive, Calibrate: true, ExternalFetched: true, ExternalError: "prometheus down", Servers: calibrated}, ""},
		{weighter.Signal{Pipeline: weighter.PipelineCalibrated, Fast: weighter.FastLive, Calibrate: true, ExternalAge: 10 * time.Minute, Servers: expired, Expired: []string{"s1"}}, "calibration expired"},
		{weighter.Signal{Pipeline: weighter.PipelineCalibrated, Fast: weighter.FastLive, Calibrate: true, Servers: expired, Expired: []string{"s1"}}, ""},
		{weighter.Signal{Pipeline: weighter.PipelineCalibrated, Fast: weighter.FastLive, Calibrate: true, ExternalFetched: true, Servers: calibrated}, "calibrating source back"},
	}
	for i, st := range steps {
		out.Reset()
		sig := st.sig
		l.cycle(weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Plan: weighter.Plan{Time: now}, Signal: &sig}, now, true)
		got := ""
		for _, line := range strings.SplitAfter(out.String(), "\n") {
			if strings.Contains(line, "level=DEBUG") {
				debug.WriteString(line)
			} else {
				got += line
			}
		}
		if st.want == "" {
			assert.Empty(t, got, "step %d", i)
			continue
		}
		assert.Equal(t, 1, strings.Count(got, "\n"), "step %d: one line\n%s", i, got)
		assert.Contains(t, got, `msg="`+st.want+`"`, "step %d", i)
	}
	assert.Contains(t, debug.String(), `msg="calibration expired" server=s1`)
	assert.Contains(t, debug.String(), `msg="calibration back" server=s1`)
	assert.Contains(t, out.String(), `msg="calibrating source back" calibrated_again=1`, "one line for the cycle: the calibration is back too")
}

// A dump that leaves unreadable streams out is said once when it starts (with
// the count and the first reason) and once when every stream reads again; the
// dumps in between, skipping or not, say nothing more.
func TestSkippedStreamsAreLoggedOnce(t *testing.T) {
	var out strings.Builder
	l := &cycleLog{log: slog.New(slog.NewTextHandler(&out, nil)), ready: true}
	now := time.Unix(1_800_000_000, 0)
	live := func(streams, skipped int) weighter.Signal {
		s := weighter.Signal{Pipeline: weighter.PipelineFast, Fast: weighter.FastLive, Streams: streams, Skipped: skipped, Reader: "sessions"}
		if skipped > 0 {
			s.SkipReason = `session dump line 78: invalid server name "(null)"`
		}
		return s
	}
	for i, st := range []struct {
		sig  weighter.Signal
		want string
	}{
		{live(40, 0), ""},
		{live(40, 1), "streams left out of the fast signal"},
		{live(41, 2), ""},
		{weighter.Signal{Pipeline: weighter.PipelineFast, Fast: weighter.FastLive, Reader: "kernel"}, ""}, // no dump: says nothing either way
		{live(40, 0), "every stream read again"},
		{live(40, 0), ""},
	} {
		out.Reset()
		sig := st.sig
		l.cycle(weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Plan: weighter.Plan{Time: now}, Signal: &sig}, now, true)
		if st.want == "" {
			assert.Empty(t, out.String(), "step %d", i)
			continue
		}
		assert.Equal(t, 1, strings.Count(out.String(), "\n"), "step %d: one line\n%s", i, out.String())
		assert.Contains(t, out.String(), `msg="`+st.want+`"`, "step %d", i)
		if i == 1 {
			assert.Contains(t, out.String(), "skipped=1")
			assert.Contains(t, out.String(), `(null)`)
		}
	}
}

// A cycle whose one info line says both that the calibration expired and
// that weights were written names each count once: a record with two
// "servers" keys is one a log pipeline keeps the last of.
func TestCalibrationExpiredBesideAWriteHasNoDuplicateKey(t *testing.T) {
	var out strings.Builder
	l := &cycleLog{log: slog.New(slog.NewTextHandler(&out, nil)), ready: true, expired: map[string]bool{}}
	now := time.Unix(1_800_000_000, 0)
	sig := weighter.Signal{Pipeline: weighter.PipelineCalibrated, Fast: weighter.FastLive, Calibrate: true, ExternalAge: 10 * time.Minute,
		Servers: map[string]weighter.FastInput{"s1": {Factor: 1}, "s2": {Factor: 1, Calibrated: true}}, Expired: []string{"s1"}}
	plan := weighter.Plan{Time: now, Servers: []weighter.ServerPlan{
		{Server: "s1", Current: 100, New: 120, Action: weighter.ActionSet}, {Server: "s2", Current: 100, New: 100}}}
	l.cycle(weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Plan: plan, Signal: &sig, Applied: true,
		Written: []weighter.Change{{Server: "s1", Weight: 120}}}, now, true)
	got := out.String()
	assert.Equal(t, 1, strings.Count(got, "\n"), got)
	assert.Contains(t, got, `msg="calibration expired"`)
	assert.Contains(t, got, "uncalibrated=1")
	assert.Contains(t, got, "written=1 servers=2")
	assert.Equal(t, 1, strings.Count(got, " servers="), got)
}
