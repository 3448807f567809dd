package daemon

import (
	"context"
	"errors"
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
	log := slog.New(unquoteHandler{d.log.Handler()}).With("component", "web")
	// A client's failed handshake (a scanner, a scraper without the CA) is
	// its problem, which it reports; here it is detail, not one line each on stderr.
	srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	err := web.Serve(ln, srv, &web.FlagConfig{WebConfigFile: &path}, log)
	if err == nil || errors.Is(err, http.ErrServerClosed) || path == "" {
		return err
	}
	// Not wrapped, as in CheckWebConfig: it may be the file's decoding error.
	return fmt.Errorf("serve with web config file %s: %s", path, yamlQuoted.ReplaceAllString(err.Error(), ""))
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

// unquoteHandler drops the values yaml quotes from what exporter-toolkit
// logs: while the file is broken it logs its decoding error at each request
// (and the TLS handshake's at each connection), a password hash included.
type unquoteHandler struct{ slog.Handler }

func (h unquoteHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, yamlQuoted.ReplaceAllString(r.Message, ""), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if v := a.Value.Resolve(); v.Kind() == slog.KindString || v.Kind() == slog.KindAny {
			a.Value = slog.StringValue(yamlQuoted.ReplaceAllString(v.String(), ""))
		}
		out.AddAttrs(a)
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h unquoteHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return unquoteHandler{h.Handler.WithAttrs(attrs)}
}

func (h unquoteHandler) WithGroup(name string) slog.Handler {
	return unquoteHandler{h.Handler.WithGroup(name)}
}
