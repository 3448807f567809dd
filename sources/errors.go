// Package sources reads per-server load series from monitoring systems: Graphite
// (render API), Prometheus (HTTP query API) and HAProxy's own statistics. Each source
// implements weighter.Source.
package sources

import (
	"errors"
	"fmt"
)

// Kinds of source failure a caller can tell apart with errors.Is.
var (
	// ErrUnreachable: the source could not be reached (connection refused, timeout, DNS).
	ErrUnreachable = errors.New("source unreachable")
	// ErrBadReply: the source answered with something that is not a valid reply.
	ErrBadReply = errors.New("bad reply from source")
	// ErrQuery: the source rejected the query (Graphite HTTP 400, PromQL error).
	ErrQuery = errors.New("query rejected by source")
	// ErrNoData: the query was valid but matched no series.
	ErrNoData = errors.New("no data")
)

// Error is a source failure with its context. URL and query never carry credentials.
type Error struct {
	Kind   error  // one of ErrUnreachable, ErrBadReply, ErrQuery, ErrNoData
	Source string // "graphite", "prometheus", "haproxy"
	URL    string // redacted: no user info, no secret query parameters
	Query  string
	Err    error // underlying cause, may be nil
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: %v (url %q, query %q)", e.Source, e.Kind, e.URL, e.Query)
	if e.URL == "" { // HAProxy's own statistics: no URL, the query is the command
		msg = fmt.Sprintf("%s: %v (%s)", e.Source, e.Kind, e.Query)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrNoData) and friends work.
func (e *Error) Is(target error) bool { return target == e.Kind }

func (e *Error) Unwrap() error { return e.Err }
