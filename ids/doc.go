// Package ids owns the identifiers every part of a query's micro-batches
// shares: the batch id (BatchID), a batch's number in the checkpoint's
// offsets and commits logs, and the partition id (PartitionID), a
// state/shuffle partition. Each is a type of its own so that passing one
// where the other is meant does not compile.
//
// Both encode as plain numbers (JSON, text, log values), as the int64 and
// int they replace did: the checkpoint's files, the sink logs and the
// protobuf fields are unchanged. Conversions to and from the protobuf
// integer fields happen at the gRPC boundary only (package cluster).
//
// This package performs no I/O and imports no other sluice package.
package ids
