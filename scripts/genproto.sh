#!/usr/bin/env bash
# Regenerates the Go code of proto/*.proto into proto/sluicepb with pinned
# generators. Usage: scripts/genproto.sh [OUT_DIR]   (default proto/sluicepb)
#
# protoc itself comes from the system (apt-get install protobuf-compiler);
# the Go plugins are installed at the pinned versions into a cache folder
# outside the repository. The generated files name the protoc version, so
# regenerating with another protoc changes their headers: the pinned one is
# PROTOC_VERSION below.
set -euo pipefail
cd "$(dirname "$0")/.."

PROTOC_VERSION=3.21.12
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2

out="${1:-proto/sluicepb}"
if ! command -v protoc >/dev/null; then
  echo "genproto: protoc not found (apt-get install -y protobuf-compiler)" >&2
  exit 2
fi
have=$(protoc --version | awk '{print $2}')
if [ "$have" != "$PROTOC_VERSION" ]; then
  echo "genproto: protoc $have found, the committed code was generated with $PROTOC_VERSION" >&2
  exit 3
fi

cache="${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}/protoc-plugins"
bin="$cache/go-$PROTOC_GEN_GO_VERSION-grpc-$PROTOC_GEN_GO_GRPC_VERSION"
if [ ! -x "$bin/protoc-gen-go" ] || [ ! -x "$bin/protoc-gen-go-grpc" ]; then
  mkdir -p "$bin"
  GOBIN="$bin" GOFLAGS=-mod=mod go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
  GOBIN="$bin" GOFLAGS=-mod=mod go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
fi

mkdir -p "$out"
PATH="$bin:$PATH" protoc -I proto \
  --go_out="$out" --go_opt=paths=source_relative \
  --go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
  proto/*.proto
