package sources

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/field"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// PrometheusConfig configures a Prometheus HTTP API source. Start from
// DefaultPrometheusConfig; New fills an empty ServerLabel and a zero Timeout.
type PrometheusConfig struct {
	URL string `yaml:"url"`
	// Query is PromQL returning one series per server.
	Query string `yaml:"query"`
	// Range, when set, makes a range query over [now-Range, now] with Step; the
	// aggregation then happens in the weighter. Zero means an instant query.
	Range duration.Duration `yaml:"range"`
	Step  duration.Duration `yaml:"step"`
	// ServerLabel is the label whose value names the server.
	ServerLabel string `yaml:"server_label"`
	// ServerRegex rewrites the label value: its first capture group (or the group
	// named "server") is the server name, e.g. `^([^:]+):\d+$` for instance="node-3:9100".
	ServerRegex string `yaml:"server_regex"`
	// ServerMap maps names (after ServerRegex) to server names; others are dropped.
	ServerMap map[string]string `yaml:"server_map"`
	// HTTP is the client's settings in Prometheus' own schema, written inline
	// as in a scrape config: basic_auth, authorization, oauth2, tls_config,
	// proxy_url, follow_redirects, http_headers.
	HTTP promconfig.HTTPClientConfig `yaml:",inline"`
	// Legacy holds the keys earlier releases took (tls, headers).
	Legacy LegacyHTTP `yaml:",inline"`
	// Timeout bounds one query, request and evaluation. Prometheus is given
	// four fifths of it, so that a query too slow ends with its own error.
	Timeout duration.Duration `yaml:"timeout"`
}

// DefaultPrometheusConfig returns the defaults: label "server", timeout 5s,
// and Prometheus' HTTP client defaults (follow_redirects, enable_http2).
func DefaultPrometheusConfig() PrometheusConfig {
	return PrometheusConfig{ServerLabel: "server", Timeout: duration.Duration(5 * time.Second), HTTP: promconfig.DefaultHTTPClientConfig}
}

// maxPoints is Prometheus' own limit on points per series in a range query.
const maxPoints = 11000

// Deprecated lists the keys of earlier releases set, with what replaces each.
func (c PrometheusConfig) Deprecated() []error { return c.Legacy.Deprecated(c.HTTP) }

// SetDirectory makes the relative paths of the HTTP settings relative to
// dir (the configuration file's), as Prometheus does; the deprecated tls
// keeps its paths relative to the working directory, as before.
func (c *PrometheusConfig) SetDirectory(dir string) { c.HTTP.SetDirectory(dir) }

// Validate checks the configuration; messages name the yaml field.
func (c PrometheusConfig) Validate() error {
	var errs []error
	if err := validateURL(c.URL); err != nil {
		errs = append(errs, err)
	}
	if strings.TrimSpace(c.Query) == "" {
		errs = append(errs, field.Errorf("query", "query: must be set"))
	}
	if c.ServerLabel == "" {
		errs = append(errs, field.Errorf("server_label", "server_label: must be set"))
	} else if !model.LabelName(c.ServerLabel).IsValid() {
		errs = append(errs, field.Errorf("server_label", "server_label: %q is not a valid label name", c.ServerLabel))
	}
	errs = append(errs, c.validateRange()...)
	if c.Timeout < 0 {
		errs = append(errs, field.Errorf("timeout", "timeout: must not be negative"))
	}
	if _, err := newNameRules(nil, c.ServerRegex, c.ServerMap); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.Legacy.resolve(c.HTTP); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("prometheus: %w", err)
	}
	return nil
}

func (c PrometheusConfig) validateRange() []error {
	switch {
	case c.Range < 0:
		return []error{field.Errorf("range", "range: must not be negative")}
	case c.Range == 0 && c.Step != 0:
		return []error{field.Errorf("step", "step: only valid with range")}
	case c.Range == 0:
		return nil
	case c.Step <= 0:
		return []error{field.Errorf("step", "step: must be > 0 with range")}
	case c.Step > c.Range:
		return []error{field.Errorf("step", "step: must not exceed range")}
	case c.Range/c.Step > maxPoints:
		return []error{field.Errorf("step", "step: range/step must be at most %d points", maxPoints)}
	}
	return nil
}

// Prometheus reads server loads with PromQL. It implements weighter.Source.
type Prometheus struct {
	cfg   PrometheusConfig
	api   v1.API
	rules *nameRules
	asm   *assembler
	shown string
	red   *redactor
	log   *slog.Logger
	now   func() time.Time // tests pin the evaluation time
}

// NewPrometheus validates cfg and builds the source. log may be nil.
func NewPrometheus(cfg PrometheusConfig, log *slog.Logger) (*Prometheus, error) {
	def := DefaultPrometheusConfig()
	if cfg.ServerLabel == "" {
		cfg.ServerLabel = def.ServerLabel
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = def.Timeout
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log = orDiscard(log)
	u, red, hc, err := connect("prometheus", cfg.URL, cfg.HTTP, cfg.Legacy, time.Duration(cfg.Timeout))
	if err != nil {
		return nil, err
	}
	client, err := api.NewClient(api.Config{Address: cfg.URL, Client: hc})
	if err != nil {
		return nil, fmt.Errorf("prometheus: %w", red.Error(err))
	}
	rules, _ := newNameRules(nil, cfg.ServerRegex, cfg.ServerMap)
	log = log.With("source", "prometheus")
	return &Prometheus{
		cfg: cfg, api: v1.NewAPI(client), rules: rules, red: red, asm: newAssembler(log, red, rules),
		shown: red.URL(u), log: log, now: time.Now,
	}, nil
}

// Fetch runs the query and returns the series per server.
func (p *Prometheus) Fetch(ctx context.Context, _ []weighter.ServerState) (weighter.Loads, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(p.cfg.Timeout))
	defer cancel()
	val, err := p.query(ctx)
	if err != nil {
		return nil, p.fail(p.kind(ctx, err), p.withDetail(err))
	}
	raw, err := p.series(val)
	if err != nil {
		return nil, p.fail(ErrBadReply, err)
	}
	if len(raw) == 0 {
		return nil, p.fail(ErrNoData, errors.New("query returned no series"))
	}
	loads := p.asm.assemble(raw)
	if len(loads) == 0 {
		// One series' labels tell a wrong server_label, server_regex or
		// server_map from data that is all NaN.
		return nil, p.fail(ErrNoData, fmt.Errorf("%d series, none with a server name and a valid sample (server_label %q; first series %s)",
			len(raw), p.cfg.ServerLabel, firstMetric(val)))
	}
	return loads, nil
}

func (p *Prometheus) query(ctx context.Context) (model.Value, error) {
	now := p.now()
	var (
		val      model.Value
		warnings v1.Warnings
		err      error
	)
	// Prometheus gets a fifth less than we wait (our timeout, or the caller's
	// deadline if sooner), so that a query too slow for it ends with its
	// "query timed out" reply, in time for us to read it, rather than with our
	// deadline, which reads like an unreachable server.
	budget := time.Duration(p.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(d))
	}
	limit := v1.WithTimeout(promTimeout(budget * 4 / 5))
	if p.cfg.Range == 0 {
		val, warnings, _, err = p.api.Query(ctx, p.cfg.Query, now, limit)
	} else {
		r := v1.Range{Start: now.Add(-time.Duration(p.cfg.Range)), End: now, Step: time.Duration(p.cfg.Step)}
		val, warnings, _, err = p.api.QueryRange(ctx, p.cfg.Query, r, limit)
	}
	p.red.refresh() // the secret files as the request read them
	if len(warnings) > 0 {
		p.log.Warn("query warnings", "query", p.cfg.Query, "url", p.shown, "warnings", p.red.String(strings.Join(warnings, "; ")))
	}
	return val, err
}

// promTimeout is d as Prometheus' timeout parameter accepts it. client_golang
// sends d.String(), and Prometheus rejects a fraction such as "1.6s" (bad_data,
// every query fails), so d is cut to whole seconds, or whole milliseconds
// below one second ("800ms").
func promTimeout(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Truncate(time.Second)
	}
	return max(d.Truncate(time.Millisecond), time.Millisecond)
}

// kind sorts a query failure into the error kinds callers tell apart.
func (p *Prometheus) kind(ctx context.Context, err error) error {
	if errors.Is(err, errRedirect) || errors.Is(err, ErrTooLarge) {
		return ErrBadReply
	}
	var apiErr *v1.Error
	if !errors.As(err, &apiErr) {
		return ErrUnreachable // transport: refused, DNS, TLS, deadline
	}
	switch apiErr.Type {
	case v1.ErrBadData, v1.ErrExec, v1.ErrTimeout, v1.ErrClient:
		return ErrQuery
	case v1.ErrCanceled:
		return ErrUnreachable
	default: // bad_response, server_error
		if ctx.Err() != nil {
			return ErrUnreachable
		}
		return ErrBadReply
	}
}

// withDetail adds the reply body that client_golang keeps aside for non-API errors
// (a proxy's 401 page, a 502), which is what tells an operator what went wrong.
func (p *Prometheus) withDetail(err error) error {
	var apiErr *v1.Error
	if errors.As(err, &apiErr) && apiErr.Detail != "" {
		return fmt.Errorf("%w: %s", err, snippet(p.red, []byte(apiErr.Detail)))
	}
	return err
}

// series turns a vector or matrix into raw series named by the server label.
// Series without the label get an empty name and are dropped by the rules.
// A native histogram is no load: its sample's Value is a meaningless 0.
func (p *Prometheus) series(val model.Value) ([]rawSeries, error) {
	label := model.LabelName(p.cfg.ServerLabel)
	switch v := val.(type) {
	case model.Vector:
		out := make([]rawSeries, 0, len(v))
		for _, s := range v {
			if s.Histogram != nil {
				return nil, histogramError(s.Metric, label)
			}
			pt := weighter.Point{Time: s.Timestamp.Time().UTC(), Value: float64(s.Value)}
			out = append(out, rawSeries{name: string(s.Metric[label]), points: weighter.Series{pt}, labels: s.Metric})
		}
		return out, nil
	case model.Matrix:
		out := make([]rawSeries, 0, len(v))
		for _, s := range v {
			if len(s.Histograms) > 0 {
				return nil, histogramError(s.Metric, label)
			}
			pts := make(weighter.Series, 0, len(s.Values))
			for _, sp := range s.Values {
				pts = append(pts, weighter.Point{Time: sp.Timestamp.Time().UTC(), Value: float64(sp.Value)})
			}
			out = append(out, rawSeries{name: string(s.Metric[label]), points: pts, labels: s.Metric})
		}
		return out, nil
	case nil:
		return nil, errors.New("empty result")
	default:
		return nil, fmt.Errorf("query returned a %s, want a vector or matrix with label %q", val.Type(), label)
	}
}

// firstMetric is the label set of the first series of a vector or matrix.
func firstMetric(val model.Value) string {
	switch v := val.(type) {
	case model.Vector:
		return v[0].Metric.String()
	case model.Matrix:
		return v[0].Metric.String()
	}
	return "?"
}

func histogramError(m model.Metric, label model.LabelName) error {
	return fmt.Errorf("query returned a native histogram (series with %s %q), not a number: "+
		"wrap it in histogram_count(), histogram_sum() or histogram_quantile()", label, m[label])
}

func (p *Prometheus) fail(kind, cause error) error {
	return &Error{Kind: kind, Source: "prometheus", URL: p.shown, Query: p.cfg.Query, Err: p.red.Error(cause)}
}
