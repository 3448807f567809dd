// Package e2e holds the end-to-end tests: they build the haproxy-weighter binary
// and run it against a real HAProxy and a real Prometheus or Graphite, started by
// the tests on 127.0.0.1 (internal/testenv). There is no non-test code here.
package e2e
