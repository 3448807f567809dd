package testenv

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// ReadWeights is each server's current weight in backend, as HAProxy at
// socket has it: srv_uweight of `show servers state <backend>`. It reads
// the socket itself, not through the package under test, so that a test of
// what the daemon wrote does not trust the daemon's own reader.
func ReadWeights(socket, backend string) (map[string]int, error) {
	out, err := RuntimeCommand(socket, "show servers state "+backend)
	if err != nil {
		return nil, err
	}
	return ParseWeights(out)
}

// Weights is ReadWeights, failing the test when HAProxy does not answer
// or answers something else than a servers state.
func Weights(t testing.TB, socket, backend string) map[string]int {
	t.Helper()
	w, err := ReadWeights(socket, backend)
	if err != nil {
		t.Fatalf("weights of %s: %v", backend, err)
	}
	return w
}

// ParseWeights reads srv_name and srv_uweight from the text of `show
// servers state`, by the columns its header line names.
func ParseWeights(state string) (map[string]int, error) {
	lines := strings.Split(strings.TrimSpace(state), "\n")
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != "1" || !strings.HasPrefix(lines[1], "# ") {
		return nil, fmt.Errorf("not a servers state (version 1 and a header): %.200q", state)
	}
	col := map[string]int{}
	for i, name := range strings.Fields(strings.TrimPrefix(lines[1], "# ")) {
		col[name] = i
	}
	name, okName := col["srv_name"]
	weight, okWeight := col["srv_uweight"]
	if !okName || !okWeight {
		return nil, fmt.Errorf("servers state header without srv_name and srv_uweight: %q", lines[1])
	}
	out := map[string]int{}
	for _, line := range lines[2:] {
		f := strings.Fields(line)
		if len(f) <= max(name, weight) {
			return nil, fmt.Errorf("servers state line with %d fields: %q", len(f), line)
		}
		w, err := strconv.Atoi(f[weight])
		if err != nil {
			return nil, fmt.Errorf("servers state line %q: srv_uweight: %w", line, err)
		}
		out[f[name]] = w
	}
	return out, nil
}
