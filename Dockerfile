# haproxy-weighter container image: a static binary on an empty base, run as non-root.
#   docker build -t haproxy-weighter \
#     --build-arg VERSION=$(git describe --tags --always) --build-arg REVISION=$(git rev-parse HEAD) .
# The image holds only /haproxy-weighter and CA certificates (for HTTPS Graphite/Prometheus).
# Run it as a sidecar next to HAProxy, sharing the admin socket through a volume: see
# examples/kubernetes/ and examples/compose/. (No Docker engine runs in CI: the tests check
# instead that the same static binary runs alone in an empty root — examples/container_test.go.)
#
# The daemon listens on 127.0.0.1:9842 unless the config says otherwise: in a pod, the config
# must set `listen: 0.0.0.0:9842` for the kubelet's probes and Prometheus to reach it. The
# command does not pass --listen, because the flag would override the config's `listen`.

# The OCI labels' values (org.opencontainers.image.version, .revision, .source).
ARG VERSION=dev
ARG REVISION=unknown
ARG SOURCE=https://github.com/haproxy-weighter/haproxy-weighter

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/haproxy-weighter/haproxy-weighter/cmd.Version=${VERSION}" \
      -o /out/haproxy-weighter ./cmd/haproxy-weighter \
 && /out/haproxy-weighter version

FROM scratch
ARG VERSION
ARG REVISION
ARG SOURCE
LABEL org.opencontainers.image.title="haproxy-weighter" \
      org.opencontainers.image.description="Sets HAProxy (or IPVS) server weights from measured load; runs as a sidecar sharing HAProxy's admin socket" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/haproxy-weighter /haproxy-weighter
# 65532 = "nonroot" of distroless images; add HAProxy's group (99 in the official image)
# with --group-add / supplementalGroups so the admin socket can be reached.
USER 65532:65532
EXPOSE 9842
ENTRYPOINT ["/haproxy-weighter"]
CMD ["run", "--config", "/etc/haproxy-weighter/config.yaml"]
