// Package statestore keeps the versioned state of each state partition of a
// stateful operator, durable in the checkpoint so that any process can load
// exactly the version a batch needs.
//
// Version v of a partition is its state after batch v-1 committed (as in
// Spark): batch N opens version N and commits version N+1. Every committed
// version is in the checkpoint as a delta file (the changes from v-1), and
// every SnapshotInterval versions also as a snapshot (the whole state):
//
//	state/<op>/<partition>/<v>.delta
//	state/<op>/<partition>/<v>.snapshot
//
// A batch that leaves a partition unchanged writes no file for it, so a
// version with no delta means "same as the version before".
//
// Files carry a magic number, a format version and a CRC-32C checksum.
// Rewriting a version (a re-run batch) writes the same bytes. They are
// written and read by streaming (file_stream.go, objstore.Streamer) with
// bounded buffers, so the pebble provider's partitions are bounded by disk,
// not memory; both providers read each other's files.
//
// Memory is bounded by a MemoryLimit shared by a process's in-memory
// providers (ErrMemoryLimit says to switch to pebble), and providers that
// cache partitions locally implement Cache, so an executor releases the
// partitions reassigned elsewhere.
//
// This package performs I/O only through objstore.Store, except the pebble
// provider's local cache under its DataDir, which can always be rebuilt
// from the checkpoint.
package statestore
