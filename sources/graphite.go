package sources

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	promconfig "github.com/prometheus/common/config"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/field"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// GraphiteConfig configures a Graphite render API source. Start from
// DefaultGraphiteConfig; New fills an empty From and a zero Timeout with the defaults.
type GraphiteConfig struct {
	// URL is the Graphite base URL ("https://graphite:8080", or with a Hosted
	// Graphite API key in the path or query string); "/render" is appended unless present.
	URL string `yaml:"url"`
	// Target is a render target with wildcards and functions, one series per server.
	Target string `yaml:"target"`
	From   string `yaml:"from"`
	Until  string `yaml:"until"`
	// ServerNode picks the server name from the dotted metric path, like aliasByNode.
	ServerNode *int `yaml:"server_node"`
	// ServerRegex's first capture group (or the group named "server") is the server name.
	ServerRegex string `yaml:"server_regex"`
	// ServerMap maps names (after ServerNode/ServerRegex) to server names; others are dropped.
	ServerMap map[string]string `yaml:"server_map"`
	// HTTP is the client's settings in Prometheus' own schema, as for Prometheus.
	HTTP promconfig.HTTPClientConfig `yaml:",inline"`
	// Legacy holds the keys earlier releases took (tls, headers).
	Legacy LegacyHTTP `yaml:",inline"`
	// Timeout bounds each HTTP attempt.
	Timeout duration.Duration `yaml:"timeout"`
	// Retries is how many times a failed request (network error, 5xx) is retried.
	Retries int `yaml:"retries"`
}

// DefaultGraphiteConfig returns the defaults: from -5min, timeout 5s, 2
// retries, and Prometheus' HTTP client defaults (follow_redirects, enable_http2).
func DefaultGraphiteConfig() GraphiteConfig {
	return GraphiteConfig{From: "-5min", Timeout: duration.Duration(5 * time.Second), Retries: 2, HTTP: promconfig.DefaultHTTPClientConfig}
}

// Deprecated lists the keys of earlier releases set, with what replaces each.
func (c GraphiteConfig) Deprecated() []error { return c.Legacy.Deprecated(c.HTTP) }

// SetDirectory makes the relative paths of the HTTP settings relative to
// dir (the configuration file's), as Prometheus does; the deprecated tls
// keeps its paths relative to the working directory, as before.
func (c *GraphiteConfig) SetDirectory(dir string) { c.HTTP.SetDirectory(dir) }

// Validate checks the configuration; messages name the yaml field.
func (c GraphiteConfig) Validate() error {
	var errs []error
	if err := validateURL(c.URL); err != nil {
		errs = append(errs, err)
	}
	if strings.TrimSpace(c.Target) == "" {
		errs = append(errs, field.Errorf("target", "target: must be set"))
	}
	if c.Timeout < 0 {
		errs = append(errs, field.Errorf("timeout", "timeout: must not be negative"))
	}
	if c.Retries < 0 || c.Retries > 10 {
		errs = append(errs, field.Errorf("retries", "retries: %d not in 0..10", c.Retries))
	}
	if _, err := newNameRules(c.ServerNode, c.ServerRegex, c.ServerMap); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.Legacy.resolve(c.HTTP); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("graphite: %w", err)
	}
	return nil
}

// validateURL accepts absolute http(s) URLs. The URL itself is never echoed: it may
// hold an API key.
func validateURL(raw string) error {
	if raw == "" {
		return field.Errorf("url", "url: must be set")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return field.Errorf("url", "url: must be an absolute http or https URL")
	}
	return nil
}

// Graphite reads server loads from the Graphite render API. It implements weighter.Source.
type Graphite struct {
	cfg    GraphiteConfig
	rules  *nameRules
	asm    *assembler
	http   *http.Client // shared by the retrying clients of all fetches
	render *url.URL     // full render URL with the query
	shown  string       // render URL as shown in errors and logs
	red    *redactor
	log    *slog.Logger
	// counterCheck is set once the rates the target takes have been checked
	// (checkCounters).
	counterCheck atomic.Bool
}

// NewGraphite validates cfg and builds the source. log may be nil.
func NewGraphite(cfg GraphiteConfig, log *slog.Logger) (*Graphite, error) {
	def := DefaultGraphiteConfig()
	if cfg.From == "" {
		cfg.From = def.From
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = def.Timeout
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log = orDiscard(log)
	_, red, hc, err := connect("graphite", cfg.URL, cfg.HTTP, cfg.Legacy, time.Duration(cfg.Timeout))
	if err != nil {
		return nil, err
	}
	hc.Timeout = time.Duration(cfg.Timeout)
	rules, _ := newNameRules(cfg.ServerNode, cfg.ServerRegex, cfg.ServerMap) // checked by Validate
	log = log.With("source", "graphite")
	g := &Graphite{cfg: cfg, rules: rules, asm: newAssembler(log, red, rules), red: red, log: log}
	g.render = renderURL(cfg)
	g.shown = red.URL(g.render)
	g.http = hc
	return g, nil
}

// renderURL appends /render and the query parameters, keeping the URL's own
// parameters (an API key).
func renderURL(cfg GraphiteConfig) *url.URL {
	u, _ := url.Parse(cfg.URL) // checked by Validate
	// ".../render/" is ".../render", not ".../render/render".
	u.Path = strings.TrimSuffix(u.Path, "/")
	if !strings.HasSuffix(u.Path, "/render") {
		u.Path += "/render"
	}
	q := u.Query()
	q.Set("target", cfg.Target)
	q.Set("from", cfg.From)
	if cfg.Until != "" {
		q.Set("until", cfg.Until)
	}
	q.Set("format", "json")
	u.RawQuery = q.Encode()
	return u
}

// The wait before a retry: exponential from retryWaitMin, or the server's
// Retry-After, at most retryWaitMax.
const (
	retryWaitMin = 100 * time.Millisecond
	retryWaitMax = 2 * time.Second
)

// newClient builds the retrying client of one fetch. It retries what
// retryablehttp's default policy retries (network errors, 429, 5xx; other
// replies are final), but starts no wait that ends past the fetch's deadline
// and none longer than retryWaitMax (a long Retry-After): retryablehttp would
// sleep through it until the cycle's deadline and return "context deadline
// exceeded", losing what Graphite said. Its attempt count is per fetch.
func (g *Graphite) newClient() *retryablehttp.Client {
	attempt := 0
	return &retryablehttp.Client{
		HTTPClient:   g.http,
		RetryMax:     g.cfg.Retries,
		RetryWaitMin: retryWaitMin,
		RetryWaitMax: retryWaitMax,
		Backoff:      retryablehttp.DefaultBackoff,
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
		CheckRetry: func(ctx context.Context, resp *http.Response, err error) (bool, error) {
			wait := retryablehttp.DefaultBackoff(retryWaitMin, retryWaitMax, attempt, resp)
			attempt++
			retry, cerr := retryablehttp.DefaultRetryPolicy(ctx, resp, err)
			if !retry || errors.Is(err, errRedirect) || errors.Is(err, ErrTooLarge) {
				return false, cerr
			}
			if d, ok := ctx.Deadline(); wait > retryWaitMax || (ok && time.Until(d) < wait) {
				g.log.Debug("render request not retried",
					"wait", wait, "cap", retryWaitMax, "url", g.shown, "reason", "the wait would outlast the deadline or retry's cap")
				return false, nil
			}
			return true, nil
		},
		// Logger stays nil: its messages carry the raw URL; we log retries ourselves.
		RequestLogHook: func(_ retryablehttp.Logger, _ *http.Request, attempt int) {
			if attempt > 0 {
				g.log.Debug("retrying render request", "attempt", attempt, "url", g.shown)
			}
		},
	}
}

// Fetch renders the target and returns the series per server.
func (g *Graphite) Fetch(ctx context.Context, _ []weighter.ServerState) (weighter.Loads, error) {
	body, err := g.get(ctx, g.render)
	if err != nil {
		return nil, err
	}
	raw, err := parseGraphite(body)
	if err != nil {
		// The decoder's message says where it choked; the reply's start says
		// what came back (often a login page or a proxy's notice).
		return nil, g.fail(ErrBadReply, fmt.Errorf("%w; reply: %s", err, snippet(g.red, body)))
	}
	if len(raw) == 0 {
		return nil, g.fail(ErrNoData, errors.New("target matched no series"))
	}
	loads := g.asm.assemble(raw)
	if len(loads) == 0 {
		// A target as Graphite named it tells a wrong server_node, server_regex
		// or server_map from data that is all null.
		return nil, g.fail(ErrNoData, fmt.Errorf("%d series, none with a server name and a valid point (first target %q)", len(raw), raw[0].name))
	}
	g.checkCounters(ctx)
	return loads, nil
}

// get renders u (g.render, or another target at the same window) and
// returns the body of a 200 reply.
func (g *Graphite) get(ctx context.Context, u *url.URL) ([]byte, error) {
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, g.fail(ErrUnreachable, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := g.newClient().Do(req)
	g.red.refresh() // the secret files as the request read them
	if errors.Is(err, errRedirect) || errors.Is(err, ErrTooLarge) {
		return nil, g.fail(ErrBadReply, err)
	}
	if err != nil {
		return nil, g.fail(ErrUnreachable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body) // at most maxBody: see limitTransport
	if errors.Is(err, ErrTooLarge) {
		return nil, g.fail(ErrBadReply, err)
	}
	if err != nil {
		return nil, g.fail(ErrUnreachable, fmt.Errorf("read reply: %w", err))
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		return body, nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return nil, g.fail(ErrQuery, fmt.Errorf("http %d: %s", resp.StatusCode, snippet(g.red, body)))
	default:
		return nil, g.fail(ErrBadReply, fmt.Errorf("http %d: %s", resp.StatusCode, snippet(g.red, body)))
	}
}

// fail builds the typed error, with secrets removed from the cause.
func (g *Graphite) fail(kind, cause error) error {
	return &Error{Kind: kind, Source: "graphite", URL: g.shown, Query: g.cfg.Target, Err: g.red.Error(cause)}
}

// snippet is the start of a reply body, on one line, for error messages. It is
// redacted before it is cut, so no prefix of a secret survives.
func snippet(red *redactor, body []byte) string {
	s := strings.Join(strings.Fields(red.String(string(body))), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
