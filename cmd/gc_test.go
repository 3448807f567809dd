package cmd

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRunGCPercent: `run` lowers the GC target to runGCPercent when GOGC is
// unset, and leaves an operator's GOGC alone.
func TestRunGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	setRunGC()
	assert.Equal(t, runGCPercent, debug.SetGCPercent(123))
	t.Setenv("GOGC", "123")
	setRunGC()
	assert.Equal(t, 123, debug.SetGCPercent(100), "GOGC set: left alone")
}
