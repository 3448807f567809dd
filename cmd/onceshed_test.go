package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func shedTestCycle(applied bool) weighter.Cycle {
	s := weighter.ShedSession{ID: "0x55d0c3a1e800", Serial: 42, Server: "s3", Client: "10.0.0.7:51234", Age: 14 * time.Minute, Rate: 3100}
	sh := weighter.Shed{Session: s, Ratio: 2.1, After: 1.2, Cycles: 2,
		Reason: "shed session 0x55d0c3a1e800 (client 10.0.0.7:51234, 3,100 B/s, age 14m) from s3: 2.1× mean for 2 cycles"}
	c := weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Applied: applied, Plan: weighter.Plan{Backend: "be",
		Function: "limited-proportions", Servers: []weighter.ServerPlan{{Server: "s3", Load: 1, Current: 100, New: 100, Action: weighter.ActionKeep}},
		Shed: &weighter.ShedPlan{Server: "s3", Sheds: []weighter.Shed{sh}, Mean: 1}}}
	if applied {
		gone := sh
		gone.Session.ID, gone.Reason = "0x1", "shed session 0x1 (…) from s3"
		c.Sheds = []weighter.ShedResult{{Shed: sh, Outcome: weighter.ShedClosed},
			{Shed: gone, Outcome: weighter.ShedGone, Err: weighter.ErrSessionGone}}
	}
	return c
}

func TestOncePrintsSheds(t *testing.T) {
	var out bytes.Buffer
	if err := printTables(&out, []weighter.Cycle{shedTestCycle(false)}, false); err != nil {
		t.Fatal(err)
	}
	want := "would shed session 0x55d0c3a1e800 (client 10.0.0.7:51234, 3,100 B/s, age 14m) from s3: 2.1× mean for 2 cycles\n"
	if !strings.HasSuffix(out.String(), want) {
		t.Errorf("dry run: got\n%s\nwant it to end with\n%s", out.String(), want)
	}

	out.Reset()
	if err := printTables(&out, []weighter.Cycle{shedTestCycle(true)}, true); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"\nshed session 0x55d0c3a1e800 (client 10.0.0.7:51234, 3,100 B/s, age 14m) from s3: 2.1× mean for 2 cycles\n",
		"\nnot needed: shed session 0x1 (…) from s3: it had already ended\n",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("--apply: got\n%s\nwant a line %q", out.String(), line)
		}
	}
	if strings.Contains(out.String(), "would shed") {
		t.Errorf("--apply printed a dry run's line:\n%s", out.String())
	}

	out.Reset()
	c := shedTestCycle(false)
	c.Plan.Shed = &weighter.ShedPlan{Reason: "no server above 1.75× mean"}
	if err := printTables(&out, []weighter.Cycle{c}, false); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "shed: none (no server above 1.75× mean)\n") {
		t.Errorf("no shed: got\n%s", out.String())
	}
}

func TestOnceJSONCarriesSheds(t *testing.T) {
	var out bytes.Buffer
	c := shedTestCycle(true)
	c.Sheds = append(c.Sheds, weighter.ShedResult{Shed: weighter.Shed{Session: weighter.ShedSession{ID: "0x2", Rate: math.NaN()}},
		Outcome: weighter.ShedFailed, Err: errors.New("socket closed")})
	if err := printJSON(&out, []weighter.Cycle{c}); err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Plan struct {
			Shed struct {
				Server string
				Sheds  []struct {
					Session struct {
						ID         string  `json:"id"`
						Serial     uint64  `json:"serial"`
						Client     string  `json:"client"`
						AgeSeconds float64 `json:"age_seconds"`
						Rate       *float64
					}
					Reason string
				}
			}
		}
		Sheds []struct {
			Session struct {
				ID   string `json:"id"`
				Rate *float64
			}
			Outcome, Error string
		}
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	p := got[0].Plan.Shed
	if p.Server != "s3" || len(p.Sheds) != 1 || p.Sheds[0].Session.ID != "0x55d0c3a1e800" || p.Sheds[0].Session.Serial != 42 ||
		p.Sheds[0].Session.AgeSeconds != 840 || p.Sheds[0].Session.Rate == nil || *p.Sheds[0].Session.Rate != 3100 {
		t.Errorf("plan.shed: %+v\n%s", p, out.String())
	}
	s := got[0].Sheds
	if len(s) != 3 || s[0].Outcome != "closed" || s[1].Outcome != "gone" || s[2].Outcome != "failed" ||
		s[2].Error != "socket closed" || s[2].Session.Rate != nil {
		t.Errorf("sheds: %+v\n%s", s, out.String())
	}
}
