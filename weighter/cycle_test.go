package weighter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeSource returns fixed loads, or an error when err is set.
type fakeSource struct {
	loads map[string]float64
	err   error
	calls int
	given []ServerState // the servers the last Fetch was handed
}

func (f *fakeSource) Fetch(_ context.Context, servers []ServerState) (Loads, error) {
	f.calls++
	f.given = servers
	if f.err != nil {
		return nil, f.err
	}
	now := time.Unix(1_800_000_000, 0)
	out := Loads{}
	for name, v := range f.loads {
		out[name] = Series{{Time: now, Value: v}}
	}
	return out, nil
}

// fakeTarget keeps weights in a map and records every SetWeights batch.
type fakeTarget struct {
	mu       sync.Mutex
	weights  map[string]int
	readErr  error
	failOn   map[string]bool // servers whose write fails (attributed)
	writeErr error           // a whole-batch failure
	batches  [][]Change
}

func (f *fakeTarget) Servers(context.Context) ([]ServerState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return nil, f.readErr
	}
	var out []ServerState
	for _, name := range slices.Sorted(maps.Keys(f.weights)) {
		out = append(out, ServerState{Name: name, Weight: f.weights[name], InitialWeight: 1,
			Admin: AdminReady, Operational: "up"})
	}
	return out, nil
}

func (f *fakeTarget) SetWeights(_ context.Context, changes []Change) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches = append(f.batches, slices.Clone(changes))
	if f.writeErr != nil {
		return f.writeErr
	}
	var errs []error
	for _, ch := range changes {
		if f.failOn[ch.Server] {
			errs = append(errs, &ServerError{Server: ch.Server, Err: errors.New("no such server")})
			continue
		}
		f.weights[ch.Server] = ch.Weight
	}
	return errors.Join(errs...)
}

// testPolicy turns the guards off so that the written weights are exactly the
// weighting function's output: 1/load, lightest server at 256.
func testPolicy() Policy {
	p := DefaultPolicy()
	p.Deadband, p.MaxStep, p.PanicThreshold, p.MaxAge = 0, 0, 0, 0
	return p
}

func newTestBackend(t *testing.T, loads map[string]float64, weights map[string]int) (*Weigher, *fakeSource, *fakeTarget) {
	t.Helper()
	c, err := NewController(testPolicy())
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeSource{loads: loads}
	tgt := &fakeTarget{weights: weights}
	return &Weigher{Name: "be_app", Source: src, Target: tgt, Controller: c}, src, tgt
}

var now = time.Unix(1_800_000_000, 0)

// The source is handed the servers the cycle read from the target, the same
// the plan is made for: a source that matches by address or reads each
// server's fast signal keeps no copy of the target's reads of its own.
func TestRunCycleHandsTheSourceTheServersItRead(t *testing.T) {
	b, src, tgt := newTestBackend(t, map[string]float64{"a": 1, "b": 2}, map[string]int{"a": 100, "b": 100})
	read, err := tgt.Servers(context.Background()) // what the cycle reads, before it writes
	require.NoError(t, err)
	c := RunCycle(context.Background(), b, now, true)
	require.NoError(t, c.Err)
	assert.Equal(t, read, src.given)
	assert.Equal(t, read, c.Servers, "the cycle keeps its read")

	tgt.readErr = errors.New("socket gone")
	c = RunCycle(context.Background(), b, now, true)
	assert.Nil(t, c.Servers, "no read, no servers")
}

func TestRunCycleAppliesPlan(t *testing.T) {
	b, _, tgt := newTestBackend(t, map[string]float64{"s1": 10, "s2": 20, "s3": 40},
		map[string]int{"s1": 1, "s2": 1, "s3": 1})
	c := RunCycle(context.Background(), b, now, true)
	if c.Result != ResultOK || c.Err != nil {
		t.Fatalf("result %s, err %v", c.Result, c.Err)
	}
	// limited-proportions, L=4: mean 23.3, floor 5.8 clips nothing; weights ∝ 1/load.
	want := map[string]int{"s1": 256, "s2": 128, "s3": 64}
	if !maps.Equal(tgt.weights, want) {
		t.Fatalf("weights %v, want %v", tgt.weights, want)
	}
	if len(c.Written) != 3 || len(tgt.batches) != 1 {
		t.Fatalf("written %v in %d batches, want 3 changes in 1 batch", c.Written, len(tgt.batches))
	}
	if c.Plan.Backend != "be_app" {
		t.Errorf("plan backend %q", c.Plan.Backend)
	}
}

func TestRunCycleDryRunWritesNothing(t *testing.T) {
	b, _, tgt := newTestBackend(t, map[string]float64{"s1": 10, "s2": 20}, map[string]int{"s1": 1, "s2": 1})
	c := RunCycle(context.Background(), b, now, false)
	if c.Result != ResultOK || len(tgt.batches) != 0 || c.Written != nil {
		t.Fatalf("dry run: result %s, batches %v, written %v", c.Result, tgt.batches, c.Written)
	}
	if got := len(c.Plan.Changes()); got != 2 {
		t.Fatalf("dry-run plan has %d changes, want 2", got)
	}
}

func TestRunCycleSourceErrorKeepsWeights(t *testing.T) {
	b, src, tgt := newTestBackend(t, nil, map[string]int{"s1": 7, "s2": 9})
	src.err = errors.New("connection refused")
	c := RunCycle(context.Background(), b, now, true)
	if c.Result != ResultSourceError || !errors.Is(c.Err, src.err) {
		t.Fatalf("result %s, err %v", c.Result, c.Err)
	}
	if len(tgt.batches) != 0 || tgt.weights["s1"] != 7 {
		t.Fatalf("weights touched on source error: %v %v", tgt.batches, tgt.weights)
	}
}

func TestRunCycleTargetReadErrorSkipsFetch(t *testing.T) {
	b, src, tgt := newTestBackend(t, map[string]float64{"s1": 1}, map[string]int{"s1": 1})
	tgt.readErr = errors.New("socket: connection refused")
	c := RunCycle(context.Background(), b, now, true)
	if c.Result != ResultTargetError || src.calls != 0 || len(tgt.batches) != 0 {
		t.Fatalf("result %s, fetches %d, batches %d", c.Result, src.calls, len(tgt.batches))
	}
}

func TestRunCyclePartialWriteFailure(t *testing.T) {
	b, _, tgt := newTestBackend(t, map[string]float64{"s1": 10, "s2": 20}, map[string]int{"s1": 1, "s2": 1})
	tgt.failOn = map[string]bool{"s2": true}
	c := RunCycle(context.Background(), b, now, true)
	if c.Result != ResultTargetError || c.Err == nil {
		t.Fatalf("result %s, err %v", c.Result, c.Err)
	}
	if !slices.Equal(c.Written, []Change{{Server: "s1", Weight: 256}}) {
		t.Fatalf("written %v, want only s1=256", c.Written)
	}
}

func TestRunCycleWholeWriteFailureWritesNothing(t *testing.T) {
	b, _, tgt := newTestBackend(t, map[string]float64{"s1": 10, "s2": 20}, map[string]int{"s1": 1, "s2": 1})
	tgt.writeErr = errors.New("broken pipe")
	c := RunCycle(context.Background(), b, now, true)
	if c.Result != ResultTargetError || c.Written != nil {
		t.Fatalf("result %s, written %v", c.Result, c.Written)
	}
}

func TestRunCycleHoldOnLowCoverage(t *testing.T) {
	// Only one of three servers has data: coverage 1/3 < min_coverage 0.5.
	b, _, tgt := newTestBackend(t, map[string]float64{"s1": 10},
		map[string]int{"s1": 5, "s2": 5, "s3": 5})
	c := RunCycle(context.Background(), b, now, true)
	if c.Result != ResultSkippedCoverage || len(tgt.batches) != 0 {
		t.Fatalf("result %s, batches %v", c.Result, tgt.batches)
	}
}

func TestRunCycleReappliesAfterReload(t *testing.T) {
	b, _, tgt := newTestBackend(t, map[string]float64{"s1": 10, "s2": 20}, map[string]int{"s1": 1, "s2": 1})
	RunCycle(context.Background(), b, now, true)
	// An HAProxy reload puts the configured weights back.
	tgt.weights = map[string]int{"s1": 1, "s2": 1}
	// The cycle that finds it keeps them (its read spans the restart) ...
	c := RunCycle(context.Background(), b, now.Add(10*time.Second), true)
	if c.Result != ResultOK || !c.Plan.Settling || len(c.Written) != 0 {
		t.Fatalf("reset cycle: result %s, settling %v, written %v", c.Result, c.Plan.Settling, c.Written)
	}
	// ... and the next, the open connections steady, weights again.
	c = RunCycle(context.Background(), b, now.Add(20*time.Second), true)
	want := map[string]int{"s1": 256, "s2": 128}
	if c.Result != ResultOK || !maps.Equal(tgt.weights, want) {
		t.Fatalf("after reload: result %s, weights %v, want %v", c.Result, tgt.weights, want)
	}
}

// BenchmarkRunCycle is one applied cycle of 100 servers against in-memory fakes:
// the daemon's own cost per backend and interval, without I/O.
func BenchmarkRunCycle(b *testing.B) {
	loads, weights := map[string]float64{}, map[string]int{}
	for i := range 100 {
		name := "srv" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		loads[name], weights[name] = float64(1+i%17), 1+i%200
	}
	c, err := NewController(testPolicy())
	if err != nil {
		b.Fatal(err)
	}
	be := &Weigher{Name: "be", Source: &fakeSource{loads: loads}, Target: &fakeTarget{weights: weights}, Controller: c}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if cy := RunCycle(ctx, be, now.Add(time.Duration(i)*time.Second), true); cy.Result != ResultOK {
			b.Fatal(cy.Result, cy.Err)
		}
	}
}

// TestAcceptedAttributesOnlyWhatNamesServers: a write error names the servers
// that failed, and only an error made of such names lets the others count as
// written; a wrapped Join must not hide its second server behind its first.
func TestAcceptedAttributesOnlyWhatNamesServers(t *testing.T) {
	changes := []Change{{"s1", 10}, {"s2", 20}, {"s3", 30}}
	failed := func(name string) error { return &ServerError{Server: name, Err: errors.New("refused")} }
	for _, tc := range []struct {
		name string
		err  error
		want []Change
	}{
		{"success", nil, changes},
		{"one server", errors.Join(failed("s2")), []Change{{"s1", 10}, {"s3", 30}}},
		{"two servers", errors.Join(failed("s1"), failed("s3")), []Change{{"s2", 20}}},
		{"wrapped join", fmt.Errorf("backend be: %w", errors.Join(failed("s1"), failed("s3"))), []Change{{"s2", 20}}},
		{"wrapped server error", errors.Join(fmt.Errorf("retry: %w", failed("s1"))), []Change{{"s2", 20}, {"s3", 30}}},
		{"whole batch", errors.New("connection refused"), nil},
		{"batch part beside servers", errors.Join(errors.New("nothing written"), failed("s1")), nil},
		{"wrapped batch part", fmt.Errorf("x: %w", errors.Join(failed("s1"), errors.New("read back failed"))), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, accepted(changes, tc.err))
		})
	}
}

// slowSource answers only when its context ends (a Graphite retrying until
// the deadline), with valid loads: a slow source that succeeds in the end.
type slowSource struct{ loads Loads }

func (s slowSource) Fetch(ctx context.Context, _ []ServerState) (Loads, error) {
	<-ctx.Done()
	return s.loads, nil
}

// deadlineTarget fails a write whose context has ended, as a socket write would.
type deadlineTarget struct {
	fakeTarget
}

func (d *deadlineTarget) SetWeights(ctx context.Context, changes []Change) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.fakeTarget.SetWeights(ctx, changes)
}

// TestSlowSourceLeavesTimeToWrite: a source that uses all the time it is
// given must not leave the write an expired context, which could cut a batch
// in the middle (some weights taken, none recorded).
func TestSlowSourceLeavesTimeToWrite(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	loads := Loads{"a": {{Time: at, Value: 10}}, "b": {{Time: at, Value: 40}}}
	target := &deadlineTarget{fakeTarget: fakeTarget{weights: map[string]int{"a": 100, "b": 100}}}
	c, err := NewController(testPolicy())
	require.NoError(t, err)
	be := &Weigher{Name: "be", Source: slowSource{loads: loads}, Target: target, Controller: c}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	cy := RunCycle(ctx, be, at, true)
	require.Equal(t, ResultOK, cy.Result, cy.Err)
	assert.NotEmpty(t, cy.Written)
}

// TestRunCycleNoSeriesMatchesAServer: series that all miss the backend's
// server names (a wrong server_label or server_regex) fail the cycle as a
// source error naming some of each side, rather than hold it quietly as a
// low coverage; nothing is written.
func TestRunCycleNoSeriesMatchesAServer(t *testing.T) {
	loads := map[string]float64{}
	for i := range 7 {
		loads[fmt.Sprintf("node-%d.example:9100", i)] = float64(10 + i)
	}
	b, _, tgt := newTestBackend(t, loads, map[string]int{"s1": 7, "s2": 9})
	c := RunCycle(context.Background(), b, now, true)
	if c.Result != ResultSourceError || !errors.Is(c.Err, ErrNoServerMatch) {
		t.Fatalf("result %s, err %v; want source_error with ErrNoServerMatch", c.Result, c.Err)
	}
	want := `no series name matches a server of the backend: 7 came back, such as "node-0.example:9100", ` +
		`"node-1.example:9100", "node-2.example:9100", "node-3.example:9100", "node-4.example:9100" and 2 more; ` +
		`the backend's 2 servers are "s1", "s2" (check server_label, server_regex, server_map or server_node)`
	assert.Equal(t, want, c.Err.Error())
	assert.Empty(t, tgt.batches, "nothing written")
	assert.Len(t, c.Plan.Servers, 2, "the plan is kept for once to print")

	// One series that matches is enough: the others are unknown servers, logged apart.
	loads["s1"] = 5
	b, _, _ = newTestBackend(t, loads, map[string]int{"s1": 7, "s2": 9})
	if c := RunCycle(context.Background(), b, now, true); errors.Is(c.Err, ErrNoServerMatch) {
		t.Errorf("one matching series: %v", c.Err)
	}
}

// TestResultValuesAreStable pins the result values: they are the
// cycles_total{result} label that alerts match on, the result= of the log and
// the result once prints. ResultTargetError, used for IPVS as well, keeps the
// value from when HAProxy was the only target.
func TestResultValuesAreStable(t *testing.T) {
	assert.Equal(t, []string{"ok", "source_error", "haproxy_error", "skipped_coverage"},
		[]string{ResultOK, ResultSourceError, ResultTargetError, ResultSkippedCoverage})
}
