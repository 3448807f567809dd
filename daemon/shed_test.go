package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func shedUnit(t *testing.T, p weighter.ShedPolicy) *managedBackend {
	t.Helper()
	s, err := weighter.NewShedder(p)
	if err != nil {
		t.Fatal(err)
	}
	return &managedBackend{Backend: &weighter.Weigher{Name: "be", Shedder: s}}
}

// A reload that keeps the shed policy keeps the Shedder (its caps and
// cooldowns); one that changes it starts afresh; one that turns it off
// sheds no more.
func TestReloadKeepsTheShedderOfAnUnchangedPolicy(t *testing.T) {
	p := weighter.DefaultShed()
	old, same := shedUnit(t, p), shedUnit(t, p)
	keepShedder(old, same)
	if same.Backend.Shedder != old.Backend.Shedder {
		t.Error("same policy: the reload dropped the Shedder's state")
	}
	p.MaxPerMinute++
	changed := shedUnit(t, p)
	fresh := changed.Backend.Shedder
	keepShedder(old, changed)
	if changed.Backend.Shedder != fresh {
		t.Error("changed policy: the reload kept the old Shedder")
	}
	off := &managedBackend{Backend: &weighter.Weigher{Name: "be"}}
	keepShedder(old, off)
	if off.Backend.Shedder != nil {
		t.Error("shed removed: the reload kept a Shedder")
	}
}

// A reload that changes the shed policy must not free max_per_minute: the
// new Shedder goes on counting the old one's sheds of the last minute.
func TestReloadChangingTheShedPolicyKeepsTheCap(t *testing.T) {
	p := weighter.DefaultShed()
	p.For, p.MaxPerMinute, p.MaxShare, p.MinAge = 1, 1, 1, 0
	old := shedUnit(t, p)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old.Backend.Shedder.Commit(t0, []weighter.ShedSession{{ID: "0x1", Serial: 1, Server: "s1", Client: "10.0.0.1:4000"}})
	p.Above = 1.5
	changed := shedUnit(t, p)
	keepShedder(old, changed)
	plan := changed.Backend.Shedder.Plan(t0.Add(10*time.Second), weighter.ShedInput{
		Servers: []weighter.ShedServer{{Name: "s1", Load: 1000}, {Name: "s2", Load: 100}, {Name: "s3", Load: 100}},
		Sessions: []weighter.ShedSession{
			{ID: "0x2", Serial: 2, Server: "s1", Client: "10.0.0.2:4000", Age: time.Hour, Rate: 500},
			{ID: "0x3", Serial: 3, Server: "s1", Client: "10.0.0.3:4000", Age: time.Hour, Rate: 100},
		},
	})
	if len(plan.Sheds) != 0 || !strings.Contains(plan.Reason, "max_per_minute 1") {
		t.Errorf("a changed policy freed max_per_minute: sheds %v, reason %q", plan.Sheds, plan.Reason)
	}
}

// A backend whose runner is stuck at a reload starts a new Shedder; it still
// counts the stuck one's sheds of the last minute.
func TestReloadPastAStuckRunnerKeepsTheCap(t *testing.T) {
	p := weighter.DefaultShed()
	p.For, p.MaxPerMinute, p.MaxShare, p.MinAge = 1, 1, 1, 0
	old, next := shedUnit(t, p), shedUnit(t, p)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old.Backend.Shedder.Commit(t0, []weighter.ShedSession{{ID: "0x1", Serial: 1, Server: "s1", Client: "10.0.0.1:4000"}})
	other := shedUnit(t, p)
	other.Backend.Name = "other"
	inheritStuckShedders([]*managedBackend{old}, []string{"be"}, []*managedBackend{other, next})
	in := weighter.ShedInput{
		Servers:  []weighter.ShedServer{{Name: "s1", Load: 1000}, {Name: "s2", Load: 100}, {Name: "s3", Load: 100}},
		Sessions: []weighter.ShedSession{{ID: "0x2", Serial: 2, Server: "s1", Client: "10.0.0.2:4000", Age: time.Hour, Rate: 100}},
	}
	if plan := next.Backend.Shedder.Plan(t0.Add(10*time.Second), in); len(plan.Sheds) != 0 || !strings.Contains(plan.Reason, "max_per_minute 1") {
		t.Errorf("the stuck runner's sheds were forgotten: sheds %v, reason %q", plan.Sheds, plan.Reason)
	}
	if next.Backend.Shedder == old.Backend.Shedder {
		t.Error("the new unit shares the stuck runner's Shedder")
	}
	if plan := other.Backend.Shedder.Plan(t0.Add(10*time.Second), in); len(plan.Sheds) != 1 {
		t.Errorf("another backend took over be's cap: %q", plan.Reason)
	}
}

// The fast reader lists the open streams (costly at 10,000 streams) only for
// a backend that sheds, and a reload that keeps the reader follows the new
// shed block either way.
func TestOnlyASheddingBackendListsOpenStreams(t *testing.T) {
	const head = "listen: \"\"\nhaproxy: {socket: /run/test.sock}\nbackends:\n  - name: be\n" +
		"    source: {haproxy: {counter: bytes_in}}\n"
	const shed = "    shed: {above: 1.5}\n"
	asked := func(units []*managedBackend) bool {
		t.Helper()
		if len(units) != 1 || units[0].fast == nil || units[0].fast.chain == nil {
			t.Fatalf("want one unit with an HAProxy fast reader, got %+v", units)
		}
		return units[0].fast.chain.ListsOpen()
	}
	plain := buildUnits(t, head)
	if asked(plain) {
		t.Error("a backend without shed asks for the open streams")
	}
	shedding := buildUnits(t, head+shed)
	if !asked(shedding) {
		t.Error("a shedding backend does not ask for the open streams")
	}

	on := buildUnits(t, head+shed)
	keepControllers(plain, on)
	if on[0].fast != plain[0].fast {
		t.Fatal("the reload did not keep the fast reader")
	}
	if !asked(on) {
		t.Error("shed added by a reload: the kept reader does not ask for the open streams")
	}
	off := buildUnits(t, head)
	keepControllers(on, off)
	if asked(off) {
		t.Error("shed removed by a reload: the kept reader still asks for the open streams")
	}
}
