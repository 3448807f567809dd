# haproxy-weighter — build, test, demo.
# `make test` is the one test command (README, .ci/run); it runs every test, with -race.

GO        ?= go
BIN       := bin/haproxy-weighter
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X github.com/haproxy-weighter/haproxy-weighter/cmd.Version=$(VERSION)
# TAGS: the daemon speaks HTTP/1.1 only (to Prometheus, Graphite, its peers, and on /metrics):
# net/http's bundled HTTP/2 would be 0.56 MB of a binary that never uses it.
TAGS      := nethttpomithttp2

.PHONY: all build test test-go test-ipvs haproxy-versions lint bench fuzz demo deb clean

all: build

# build: the daemon (bin/haproxy-weighter, no simulator: see the README's Benchmarks) and the
# simulator (bin/haproxy-weighter-sim), both static.
SIM_BIN   := bin/haproxy-weighter-sim
build:
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/haproxy-weighter
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w -X main.version=$(VERSION)' -o $(SIM_BIN) ./cmd/haproxy-weighter-sim

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

# test-go runs unit and integration tests (real HAProxy, Prometheus, Graphite started by the tests).
# It first fetches the newer HAProxy versions (haproxy-versions); a failed fetch still runs the
# tests: those of a missing version fail and say how to fetch it.
test-go:
	-bash tools/haproxy-versions.sh
	$(GO) test -race -count=1 -timeout 30m ./...

# haproxy-versions: HAProxy 3.0 (trixie), 3.2 (sid) and 3.4 (experimental) from deb.debian.org
# into ~/.cache/haproxy-weighter/haproxy, for the tests that run every version besides Debian 12's
# 2.6 (docs/testing.md); ~2 min the first time, ~2 s once cached. HAPROXY_VERSIONS_ARGS=--refresh
# fetches them again.
haproxy-versions:
	bash tools/haproxy-versions.sh $(HAPROXY_VERSIONS_ARGS)

test: lint test-go test-ipvs

# test-ipvs boots a real Linux kernel with ip_vs (Debian's user-mode-linux, fetched into
# ~/.cache on first use) with a static test binary as init; see lvs/README.md.
test-ipvs:
	CGO_ENABLED=0 $(GO) test -tags ipvskernel -count=1 -timeout 5m ./lvs/kerneltest/

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# demo: real HAProxy + sinks + traffic, first without then with weighting (~2 min); see examples/demo.
# The picture goes to bin/demo.png; DEMO_PNG=examples/demo/demo.png refreshes the tracked one.
demo: build
	GO=$(GO) DEMO_PNG='$(DEMO_PNG)' bash examples/demo/demo.sh $(DEMO_ARGS)

# bench-balance: the README quick start's weighter against leastconn alone and an oracle,
# with real HAProxy and Prometheus (3 seeds × 5 min, ~16 min; not part of make test).
# BENCH_ARGS="-scenario long-lived-burst -seeds 1,2,3,4": the production world (hour-long
# clients from their own addresses, three heavy ones at 180 s; leastconn, the quick start, the
# quick start + shed, each of those two pinning (the stick table in their HAProxy), oracle; ~7 min
# a seed). Prints the figures and writes them to
# bin/bench-balance.txt; see docs/research/bench-balance.md.
.PHONY: bench-balance
bench-balance: build
	GO=$(GO) bash examples/benchbalance/bench.sh $(BENCH_ARGS)

# bench-carbon: the README's Graphite config (examples/config/graphite-carbon.yaml) against 8 real
# carbon-relays, each one long-lived connection from its own address, two heavy ones (2,000
# datapoints/s) starting on one of 4 real carbon-caches behind HAProxy 2.6 with the pin table;
# leastconn, default, default + shed, default + pin + shed one after the other (~6.5 min each,
# ~27 min; not part of make test). Needs graphite-carbon, graphite-web, python3-gunicorn.
# Prints max/mean per minute and datapoints lost; writes bin/bench-carbon.txt;
# see docs/research/pinning-bench.md. CARBON_ARGS passes flags (e.g. -arms pin+shed -duration 3m).
.PHONY: bench-carbon
bench-carbon: build
	$(GO) run ./examples/carbonbench -weighter $(BIN) -out bin/bench-carbon.txt $(CARBON_ARGS)

# bench-fastsignal: what each fast-signal read (kernel socket table, `show sess all`, `show stat`)
# costs a real HAProxy 2.6 and the reader at 1,000, 5,000 and ~10,000 connections (~13 min; not
# part of make test). Prints a Markdown table and writes it to bin/bench-fastsignal.md; see
# docs/benchmarks.md. FASTSIGNAL_ARGS passes flags (e.g. -conns 1000 -duration 20s).
.PHONY: bench-fastsignal
bench-fastsignal:
	@mkdir -p bin
	$(GO) run ./tools/fastsignalbench -out bin/bench-fastsignal.md $(FASTSIGNAL_ARGS)

# soak: the daemon's memory over a long run at 1,000 servers every 1 s on a real HAProxy 2.6 and
# Prometheus (1 h, a row every 10 min; not part of make test). Prints a Markdown table (RSS, heap,
# goroutines, descriptors, CPU, cycle time) and writes it to bin/soak.md; see docs/benchmarks.md.
# SOAK_ARGS passes flags: "-conns 2000" for long-lived connections, "-duration 12m -every 2m" for
# a short run that shows the trend.
.PHONY: soak
soak: build
	$(GO) run ./examples/soak -bin $(BIN) -out bin/soak.md $(SOAK_ARGS)

# deb: dist/haproxy-weighter_<version>_<arch>.deb with nfpm (run through `go run`, so not in go.mod).
NFPM        := $(GO) run github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2
DIST        ?= dist
NFPM_CONFIG ?= nfpm.yaml
DEB_ARCH    ?= $(shell $(GO) env GOARCH)
DEB_VERSION ?= $(subst -,+,$(if $(filter v%,$(VERSION)),$(patsubst v%,%,$(VERSION)),0.0.0~git$(VERSION)))
# DEB_WORK holds what `make deb` builds and generates for the package, the binary included
# (nfpm.yaml reads them from there): builds with their own DEB_WORK can run at once.
DEB_WORK    ?= bin/deb
# The commit's time: the changelog's date and the man pages' (reproducible from one commit).
DEB_EPOCH   ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)
DEB_DATE    ?= $(shell date -u -R -d @$(DEB_EPOCH))
# deb-docs: $(DEB_WORK)/completion/ (bash, zsh, fish) and $(DEB_WORK)/man/ (one gzipped page per
# command), generated from the binary's command tree by tools/gendocs, so they list the flags
# the binary has; packaging/haproxy-weighter.1.extra adds FILES to haproxy-weighter(1).
.PHONY: deb-docs
deb-docs:
	SOURCE_DATE_EPOCH='$(DEB_EPOCH)' $(GO) run ./tools/gendocs -out '$(DEB_WORK)' -version '$(DEB_VERSION)' \
	  -root-extra packaging/haproxy-weighter.1.extra
# The static binary (as `make build` builds it) and the package's changelog (one entry: the
# version and its commit date) go to $(DEB_WORK) too: Debian requires the changelog and the man
# pages compressed, and nfpm does not compress.
deb: deb-docs
	@mkdir -p $(DIST) '$(DEB_WORK)'
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o '$(DEB_WORK)/haproxy-weighter' ./cmd/haproxy-weighter
	printf 'haproxy-weighter (%s) unstable; urgency=medium\n\n  * Built from %s.\n\n -- %s  %s\n' \
	  '$(DEB_VERSION)' '$(VERSION)' 'haproxy-weighter developers <haproxy-weighter@users.noreply.github.com>' \
	  '$(DEB_DATE)' | gzip -9n > '$(DEB_WORK)/changelog.gz'
	DEB_VERSION='$(DEB_VERSION)' DEB_ARCH='$(DEB_ARCH)' DEB_WORK='$(DEB_WORK)' $(NFPM) pkg --packager deb --config $(NFPM_CONFIG) --target $(DIST)/

clean:
	rm -rf bin dist
