package cmd

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// once -o json wrote the applied changes as {"Server": .., "Weight": ..}, the
// only capitalised keys in the output, so `jq .[].written[].server` found nothing.
func TestOnceJSONKeys(t *testing.T) {
	cycles := []weighter.Cycle{{
		Backend: "be", Result: weighter.ResultOK, Applied: true,
		Written: []weighter.Change{{Server: "s1", Weight: 42}},
		Plan: weighter.Plan{Backend: "be", Imbalance: math.NaN(), Servers: []weighter.ServerPlan{
			{Server: "s1", Load: math.NaN(), Current: 10, New: 42, Action: weighter.ActionSet},
		}},
	}}
	var buf bytes.Buffer
	if err := printJSON(&buf, cycles); err != nil {
		t.Fatal(err)
	}
	var out []struct {
		Written []map[string]any `json:"written"`
		Plan    struct {
			Imbalance float64          `json:"imbalance"`
			Servers   []map[string]any `json:"servers"`
		} `json:"plan"`
	}
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	w := out[0].Written[0]
	if w["server"] != "s1" || w["weight"] != 42.0 || len(w) != 2 {
		t.Errorf("written %v, want {server: s1, weight: 42}", w)
	}
	if s := out[0].Plan.Servers[0]; s["load"] != nil || s["server"] != "s1" {
		t.Errorf("server %v: a NaN load must be null", s)
	}
}

// A cycle that failed before planning printed "servers": null, which
// `jq '.[].plan.servers[]'` cannot iterate.
func TestOnceJSONFailedCycleHasEmptyServers(t *testing.T) {
	var buf bytes.Buffer
	if err := printJSON(&buf, []weighter.Cycle{{Backend: "be", Result: weighter.ResultTargetError}}); err != nil {
		t.Fatal(err)
	}
	var out []struct {
		Plan struct {
			Servers json.RawMessage `json:"servers"`
		} `json:"plan"`
	}
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if got := string(out[0].Plan.Servers); got != "[]" {
		t.Errorf("servers %s, want []", got)
	}
}
