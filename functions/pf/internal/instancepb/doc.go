// Package instancepb holds the protobuf messages and the gRPC service of the
// Pulsar functions worker ↔ instance protocol, generated from this folder's
// .proto files (Foldline's own, wire-compatible with upstream's).
package instancepb

//go:generate ./generate.sh
