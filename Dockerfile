# syntax=docker/dockerfile:1
#
# Images of database-apiserver and database-controller: static Go binaries (CGO_ENABLED=0) on
# distroless/static, running as the nonroot user 65532 that the manifests in artifacts/deploy
# require. One builder stage, one final stage per binary:
#
#   docker build --target apiserver  -t database-apiserver:v0.1.0 .
#   docker build --target controller -t database-controller:v0.1.0 .
#
# or `make images`. The builder compiles for the target platform without emulation
# (docker buildx build --platform linux/amd64,linux/arm64 ...).

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
# The toolchain of the image, never one downloaded because go.mod asks for a newer patch.
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    export GOOS=$TARGETOS GOARCH=$TARGETARCH \
    && go build -trimpath -ldflags="-s -w" -o /out/database-apiserver ./cmd/apiserver \
    && go build -trimpath -ldflags="-s -w" -o /out/database-controller ./cmd/controller

FROM gcr.io/distroless/static:nonroot AS apiserver
COPY --from=build /out/database-apiserver /usr/local/bin/database-apiserver
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/database-apiserver"]

FROM gcr.io/distroless/static:nonroot AS controller
COPY --from=build /out/database-controller /usr/local/bin/database-controller
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/database-controller"]
