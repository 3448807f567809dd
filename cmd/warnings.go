package cmd

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/haproxy-weighter/haproxy-weighter/config"
)

// logWarnings logs, once per load, what loading cfg found that did not stop
// it (deprecated keys).
func logWarnings(log *slog.Logger, cfg *config.Config) {
	for _, w := range cfg.Warnings {
		log.Warn("configuration", "warning", w)
	}
}

// printWarnings writes cfg's warnings one per line, for validate.
func printWarnings(w io.Writer, cfg *config.Config) {
	for _, line := range cfg.Warnings {
		fmt.Fprintln(w, line)
	}
}
