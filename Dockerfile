# syntax=docker/dockerfile:1
# Multi-stage build: a static mqtarget binary on a distroless base, running as a non-root user.
#   docker build --build-arg VERSION=v1.2.3 --build-arg REVISION=$(git rev-parse HEAD) -t mqtarget .
# VERSION and REVISION land in `mqtarget -version`, mqtarget_build_info, /config, /stats and the image's labels.
# .dockerignore keeps .git out of the context, so the Go toolchain has no VCS information to embed:
# REVISION (internal/version.Revision) stands in for it; without the build arg it stays "unknown".
ARG VERSION=devel
ARG REVISION=unknown

FROM golang:1.26-bookworm AS build
ARG VERSION
ARG REVISION
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath \
    -ldflags="-s -w -X github.com/mqtarget/mqtarget/internal/version.Version=${VERSION} -X github.com/mqtarget/mqtarget/internal/version.Revision=${REVISION}" \
    -o /out/mqtarget ./cmd/mqtarget

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION
ARG REVISION
LABEL org.opencontainers.image.title="mqtarget" \
      org.opencontainers.image.description="HTTP endpoints that publish to message brokers (NSQ, RocketMQ, STOMP, Kafka, NATS JetStream, AMQP 0-9-1, MQTT), for load-testing them" \
      org.opencontainers.image.source="https://github.com/mqtarget/mqtarget" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/mqtarget /usr/local/bin/mqtarget
USER nonroot:nonroot
EXPOSE 8080
# Distroless has no shell or curl: the binary checks itself. /healthz, not /readyz: a broker being down
# is for readiness, restarting mqtarget does not bring it back.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/mqtarget", "healthcheck", "-timeout", "2s", "127.0.0.1:8080"]
ENTRYPOINT ["/usr/local/bin/mqtarget"]
