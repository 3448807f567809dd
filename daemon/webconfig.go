package daemon

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"

	"github.com/prometheus/exporter-toolkit/web"
)

// serveWeb serves srv on ln with the TLS and basic authentication of the
// web configuration file (exporter-toolkit's format, as Prometheus and its
// exporters read it with --web.config.file), or in plain HTTP without one.
// exporter-toolkit reads the file again at each request and TLS handshake,
// so a new certificate or password takes effect without a restart.
func (d *Daemon) serveWeb(srv *http.Server, ln net.Listener) error {
	path := d.config().WebConfigFile
	log := d.log.With("component", "web")
	// A client's failed handshake (a scanner, a scraper without the CA) is
	// its problem, which it reports; here it is detail, not one line each on stderr.
	srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	return web.Serve(ln, srv, &web.FlagConfig{WebConfigFile: &path}, log)
}

// CheckWebConfig reads the web configuration file at path and the
// certificates it names, as the listener will; "" is no file. The daemon
// checks it before listening, so that a bad file is a start-up error rather
// than a listener that fails every request, and validate checks it too.
func CheckWebConfig(path string) error {
	if path == "" {
		return nil
	}
	if err := web.Validate(path); err != nil {
		// Not wrapped: yaml's messages quote the value that did not decode,
		// a basic_auth_users password hash too, and this one reaches
		// validate's output and the log.
		return fmt.Errorf("web config file %s: %s", path, yamlQuoted.ReplaceAllString(err.Error(), ""))
	}
	return nil
}

// yamlQuoted is a value as yaml quotes it in an error: " `value`".
var yamlQuoted = regexp.MustCompile(" `[^`]*`")
