# The foldline CLI with the function and sink binaries of manifests/ built
# in, for CI jobs and clusters that deploy without a Go toolchain:
#
#   docker build -t foldline .
#   docker run --rm -v ~/.config/foldline:/config:ro -e FOLDLINE_CONFIG=/config/config.yaml \
#     foldline deploy --binaries /binaries --binaries-key /binaries.pub /manifests
#
# The binaries' index is signed with a key made in the build stage, which
# the image does not carry; its public key, /binaries.pub, verifies it.
# Within an image that is a check of the folder against the image itself:
# the image's own integrity is its digest.
#
# The image is FROM scratch: the CLI and the binaries are static (CGO off),
# and need only the CA certificates copied in (for TLS to Pulsar and
# Cassandra). Build arguments: GO_IMAGE (the toolchain image), GOOS/GOARCH
# (the functions workers' platform, default linux/amd64).
ARG GO_IMAGE=golang:1.26-bookworm

FROM ${GO_IMAGE} AS build
ARG GOOS=linux
ARG GOARCH=amd64
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# foldline build builds from the git-tracked files only, and the build
# context has no .git (.dockerignore): every file of the context is a
# source, so it is all added to a new repository's index.
RUN CGO_ENABLED=0 go build -trimpath -ldflags=-w -o /out/foldline ./admin/cmd/foldline \
 && git init -q && git add --all \
 && /out/foldline build --goos "$GOOS" --goarch "$GOARCH" --signing-key /out/binaries.key --out /out/binaries manifests/ \
 && mkdir -p /out/tmp /out/home

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/foldline /foldline
COPY --from=build /out/binaries /binaries
COPY --from=build /out/binaries.key.pub /binaries.pub
COPY --from=build --chown=65534:65534 /out/tmp /tmp
COPY --from=build --chown=65534:65534 /out/home /home
COPY manifests /manifests
ENV HOME=/home TMPDIR=/tmp
USER 65534:65534
ENTRYPOINT ["/foldline"]
CMD ["--help"]
