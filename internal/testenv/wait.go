package testenv

import (
	"testing"
	"time"
)

// WaitFor polls cond until it holds, failing the test after 10 s. cond runs
// on the test's goroutine, so it may fail the test itself (require).
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling period
	}
}
