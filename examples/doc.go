// Package examples holds no code of the product: it is the home of the operations
// examples (systemd unit, container sidecar manifests, Grafana dashboard, Prometheus
// alerts, the demo program) and of the tests that check them against the real tools
// — systemd-analyze, promtool, dpkg, haproxy and the built binary — run by `make test`.
package examples
