package daemon

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// A session to shed that is found ended cycle after cycle (its connection
// still listed: it lives on in a process the close does not reach) is said
// once at info, once more at warn, then at debug only; another session is
// said on its own; and one found ended again after goneForget is said anew.
func TestShedGoneSaidOnce(t *testing.T) {
	var logs testenv.SyncBuffer
	l := &cycleLog{log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	at := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	gone := func(id string) {
		sh := weighter.Shed{Session: weighter.ShedSession{ID: id, Serial: 7, Server: "s1", Client: "10.0.0.7:4000", Rate: 58000}}
		l.sheds(weighter.Cycle{Applied: true, Plan: weighter.Plan{Shed: &weighter.ShedPlan{Time: at, Sheds: []weighter.Shed{sh}}},
			Sheds: []weighter.ShedResult{{Shed: sh, Outcome: weighter.ShedGone, Err: errors.New("no such session")}}})
		at = at.Add(2 * time.Second)
	}
	for range 30 { // a minute of 2 s cycles
		gone("0x1")
	}
	out := logs.String()
	t.Log(out)
	assert.Equal(t, 1, strings.Count(out, `level=INFO msg="session to shed already ended"`))
	assert.Equal(t, 1, strings.Count(out, "level=WARN"))
	assert.Equal(t, 2, strings.Count(out, "\n"), "one line at info, one at warn")

	gone("0x2")
	assert.Equal(t, 2, strings.Count(logs.String(), `level=INFO msg="session to shed already ended`), "another session is said")
	at = at.Add(goneForget + time.Second)
	gone("0x1")
	assert.Equal(t, 3, strings.Count(logs.String(), `level=INFO msg="session to shed already ended`), "said anew after goneForget")
}
