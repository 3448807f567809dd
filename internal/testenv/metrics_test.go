package testenv

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// hintTB records Fatalf instead of failing the real test.
type hintTB struct {
	testing.TB
	msg string
}

func (h *hintTB) Helper() {}

func (h *hintTB) Fatalf(format string, args ...any) {
	h.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestMissingMetricsServerFailsWithInstallHint(t *testing.T) {
	h := &hintTB{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); metricsBinary(h, "no-such-metrics-server") }()
	<-done
	if !strings.Contains(h.msg, MetricsInstallHint) {
		t.Fatalf("message %q does not say %q", h.msg, MetricsInstallHint)
	}
}
