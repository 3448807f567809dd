package testenv

import (
	"context"
	"testing"
	"time"
)

// WaitFor polls cond until it holds, failing the test after 10 s. cond runs
// on the test's goroutine, so it may fail the test itself (require).
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	WaitWithin(t, 10*time.Second, what, cond)
}

// WaitWithin polls cond until it holds, failing the test (Fatalf) when limit
// passes first. The polling period grows with limit (limit/500, between 5 and
// 50 ms): a short wait answers quickly, a long one whose cond asks a process
// over HTTP does not busy a shared machine. Like WaitFor, cond runs on the
// test's goroutine.
func WaitWithin(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	period := min(max(limit/500, 5*time.Millisecond), 50*time.Millisecond)
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(period) // polling period, not a wait for an outcome
	}
}

// Context is a context that ends after limit or when the test ends, so that
// a call to a real process that hangs fails the test instead of holding it
// until go test's own timeout.
func Context(t testing.TB, limit time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	return ctx
}
