#!/bin/sh
# Regenerates the Go code for the worker protocol messages. Needs protoc
# (Debian: protobuf-compiler) and the plugins matching go.mod:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.5
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
set -eu
cd "$(dirname "$0")"
protoc -I . -I /usr/include \
  --go_out=. --go_opt=paths=source_relative \
  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
  function_details.proto instance_control.proto
