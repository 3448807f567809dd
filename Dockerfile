# haproxy-weighter container image: a static binary on an empty base, run as non-root.
#   docker build -t haproxy-weighter --build-arg VERSION=$(git describe --tags --always) .
# The image holds only /haproxy-weighter and CA certificates (for HTTPS Graphite/Prometheus).
# Run it as a sidecar next to HAProxy, sharing the admin socket through a volume: see
# examples/kubernetes/ and examples/compose/. (No Docker engine runs in CI: the tests check
# instead that the same static binary runs alone in an empty root — examples/container_test.go.)

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/haproxy-weighter/haproxy-weighter/cmd.Version=${VERSION}" \
      -o /out/haproxy-weighter ./cmd/haproxy-weighter \
 && /out/haproxy-weighter version

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/haproxy-weighter /haproxy-weighter
# 65532 = "nonroot" of distroless images; add HAProxy's group (99 in the official image)
# with --group-add / supplementalGroups so the admin socket can be reached.
USER 65532:65532
EXPOSE 9842
ENTRYPOINT ["/haproxy-weighter"]
CMD ["run", "--config", "/etc/haproxy-weighter/config.yaml"]
