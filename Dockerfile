# syntax=docker/dockerfile:1
# Multi-stage build: a static mqtarget binary on a distroless base, running as a non-root user.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/mqtarget ./cmd/mqtarget

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mqtarget /usr/local/bin/mqtarget
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/mqtarget"]
