package duration

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration reads what yaml.v3 reads into a time.Duration, with the same
// value, and refuses what it refuses with the same error, so that the
// configuration's messages about durations are what they were; the one
// difference is a bare 0.
func TestSameAsTimeDuration(t *testing.T) {
	values := []string{"0", "0s", `"0"`, "'0'", "10s", "1m30s", "1.5h", "-2m", "+3ms", "250us", "1µs", "7ns", "10", "-0",
		"00", "0.0", "1e3", "true", "null", "", "~", "10x", "s3cr3tvalue-longer-than-ten", "[1s]", "{a: 1s}", "!!int 0",
		"!!str 0", "!!str 5s", "!!float 1", "&a 0", "&b 5s", "1h2m3s4ms5us6ns", ".5s", "1..5s"}
	rng := rand.New(rand.NewPCG(1, 2))
	units := []string{"ns", "us", "µs", "ms", "s", "m", "h", "", "d", "x"}
	for range 500 {
		v := ""
		for range 1 + rng.IntN(3) {
			v += fmt.Sprintf("%d", rng.IntN(2000)-200)
			if rng.IntN(4) == 0 {
				v += fmt.Sprintf(".%d", rng.IntN(100))
			}
			v += units[rng.IntN(len(units))]
		}
		values = append(values, v)
	}
	for _, v := range values {
		doc := fmt.Sprintf("line: 1\nd: %s\n", v)
		var got struct {
			Line int
			D    Duration
		}
		var want struct {
			Line int
			D    time.Duration
		}
		gotErr := yaml.Unmarshal([]byte(doc), &got)
		wantErr := yaml.Unmarshal([]byte(doc), &want)
		if v == "0" {
			if gotErr != nil || got.D != 0 {
				t.Errorf("bare 0: %v, %v", got.D, gotErr)
			}
			continue
		}
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || time.Duration(got.D) != want.D {
			t.Errorf("%q: got %v, %v; time.Duration gives %v, %v", v, got.D, gotErr, want.D, wantErr)
		}
	}
}

func TestString(t *testing.T) {
	if got := fmt.Sprintf("%s %v", Duration(90*time.Second), Duration(0)); got != "1m30s 0s" {
		t.Errorf("got %q", got)
	}
}
