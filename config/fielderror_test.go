package config

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/errs"
	"github.com/haproxy-weighter/haproxy-weighter/sources"
)

// Each problem is a FieldError carrying where it is (path and line) as
// values, which callers (FlagsError, the messages) read without parsing text.
func TestProblemsCarryPathAndLine(t *testing.T) {
	data := "interval: 1ms\nbackends:\n  - name: be\n    source:\n      prometheus:\n        url: http://127.0.0.1:9090\n" +
		"        server_map: {n.1: \"s 1\"}\n    limiting_factor: 1\n"
	_, err := Parse("c.yml", []byte(data), noEnv)
	var ce *Error
	require.ErrorAs(t, err, &ce)
	type where struct {
		Path string
		Line int
	}
	var got []where
	for _, leaf := range errs.Leaves(errors.Unwrap(ce)) {
		var fe *FieldError
		require.ErrorAs(t, leaf, &fe)
		got = append(got, where{fe.Path, fe.Line})
	}
	assert.Equal(t, []where{
		{"interval", 1},
		{"backends[0].source.prometheus.query", 5}, // not written: the line of the mapping it is missing from
		{"backends[0].source.prometheus.server_map.n.1", 7},
		{"backends[0].limiting_factor", 8},
	}, got)
}

// A source written through a merge key gets its kind's defaults and its
// problems' lines; a bare 0 is a zero duration wherever the type takes one
// (the socket's timeout too), and an anchored 0 is left to the decoder, as its
// aliases may stand where an integer is wanted.
func TestMergeKeysAndZeroDurations(t *testing.T) {
	data := "haproxy: {socket: /run/s.sock, timeout: 0}\nbase: &p {url: \"http://127.0.0.1:9090\", query: up, timeout: 0}\n"
	_, err := Parse("c.yml", []byte(data+"backends:\n  - name: be\n    source: {prometheus: {<<: *p}}\n"), noEnv)
	assert.EqualError(t, err, `c.yml:2: unknown key "base"`)

	data = "haproxy: {socket: /run/s.sock, timeout: 0}\nbackends:\n  - name: be\n    source:\n      prometheus: &p {url: \"http://127.0.0.1:9090\", query: up, range: 0}\n" +
		"  - name: be2\n    source: {prometheus: {<<: *p, server_label: instance}}\n"
	c, err := Parse("c.yml", []byte(data), noEnv)
	require.NoError(t, err)
	p := c.Backends[1].Source.Config().(*sources.PrometheusConfig)
	assert.Equal(t, "instance", p.ServerLabel)
	assert.Equal(t, "up", p.Query)
	assert.Equal(t, sources.DefaultPrometheusConfig().Timeout, p.Timeout)

	_, err = Parse("c.yml", []byte("interval: &z 0\nbackends:\n  - name: be\n    max_weight: *z\n    source: {haproxy: {counter: bytes_in}}\n"), noEnv)
	assert.EqualError(t, err, "c.yml:1: interval: invalid duration (want e.g. 10s, 1m30s)")
}

// A source's several problems come as one message of several lines; it is
// at the line of its first key like a single problem (the backend's line
// before, as the pattern that found the key read one line only).
func TestSourceProblemsAtTheSourceLine(t *testing.T) {
	_, err := Parse("c.yml", []byte("backends:\n  - name: b\n    source: {prometheus: {url: 'ftp://x'}}\n"), noEnv)
	assert.EqualError(t, err, "c.yml:3: backends[0] (b): source: prometheus: url: must be an absolute http or https URL\nquery: must be set")
	// A problem of what a merge key brings in is at the backend that merges it.
	data := "backends:\n  - &b\n    name: a\n    source: {prometheus: {url: 'http://x', query: up, range: 1m}}\n  - <<: *b\n    name: c\n"
	_, err = Parse("c.yml", []byte(data), noEnv)
	assert.ErrorContains(t, err, "c.yml:5: backends[1] (c): source: prometheus: step: must be > 0 with range")
}

// A problem a validator outside this package finds (the socket, a source
// kind, an IPVS service, the policy, the shed block) is at the line of the
// key it names, written in block style on a line of its own, and its path
// goes down to that key.
func TestOutsideProblemsAtTheirKeysLine(t *testing.T) {
	data := `haproxy:
  socket: /run/s.sock
  timeout: -1s
backends:
  - name: p
    source:
      prometheus:
        url: http://127.0.0.1:9090
        query: up
        range: -1m
        server_regex: "("
  - name: g
    source:
      graphite:
        url: ftp://g
        target: x
        retries: 11
  - name: v
    ipvs:
      service: "tcp://10.0.0.1"
    source:
      prometheus: {url: "http://127.0.0.1:9090", query: up}
    calibration:
      hold: 0s
  - name: s
    source:
      haproxy:
        counter: bytes_in
    drain_above: 10
    resume_below: 20
    shed:
      min_age: -1s
`
	_, err := Parse("c.yml", []byte(data), noEnv)
	var ce *Error
	require.ErrorAs(t, err, &ce)
	got := map[string]int{}
	for _, leaf := range errs.Leaves(errors.Unwrap(ce)) {
		var fe *FieldError
		require.ErrorAs(t, leaf, &fe)
		got[fe.Path] = fe.Line
	}
	assert.Equal(t, map[string]int{
		"haproxy.timeout":                     3,
		"backends[0].source.prometheus.range": 10, // the first of the source's problems
		"backends[1].source.graphite.url":     15,
		"backends[2].ipvs.service":            20,
		"backends[2].calibration.hold":        24,
		"backends[3].resume_below":            30,
		"backends[3].shed":                    31, // the fast signal is off (drain_above)
		"backends[3].shed.min_age":            32,
	}, got)
}
