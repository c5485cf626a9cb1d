// Package statestore keeps the versioned state of each state partition of a
// stateful operator, durable in the checkpoint so that any process can load
// exactly the version a batch needs.
//
// Version v of a partition is its state after batch v-1 committed (as in
// Spark): batch N opens version N and commits version N+1. Every committed
// version is in the checkpoint as a delta file (the changes from v-1),
// written by the batch, and about every SnapshotInterval versions also as a
// snapshot (the whole state), written in the background by the process that
// holds the partition once the version has committed (Maintainer,
// RunMaintenance: Spark's maintenance task), never on the batch path:
//
//	state/<op>/<partition>/<v>-<attempt>.delta
//	state/<op>/<partition>/<v>-<attempt>.snapshot
//
// <attempt> names the batch attempt that wrote the file (AttemptID: a hash
// of the driver run, the batch and the accepted map attempts, derived alike
// by the driver and the executor), so two attempts of a batch that both
// change a partition write different files. Names without an attempt
// (<v>.delta, format 1) are still read.
//
// A batch that leaves a partition unchanged writes no file for it, so a
// version with no delta means "same as the version before".
//
// Files belong to a commit: the driver records in commits/N (the "state"
// field, CommitRecord) which partitions wrote a delta and a snapshot for
// version N+1 and the attempt that wrote them. Loading follows the
// records, from the version asked back to the snapshot they name, reading
// exactly the recorded names: a file of an attempt no record lists (an
// abandoned attempt, whether or not the committed re-run changed the
// partition) is never loaded, and a listed file that is missing is an
// error naming the object (ErrCorrupt), never "unchanged". A version
// cached in memory or in a local pebble database is reused only if the
// record agrees that it was (or was not) made by a delta and, if it was,
// that the delta's attempt is the cached one; otherwise it is reloaded
// from the checkpoint. A snapshot written in the background carries the
// name of the delta that made its version, and is used only when the
// record names that delta's attempt (never because a file is there).
// Below the oldest record (an older checkpoint, or
// records removed with the log) files are taken as listed, and two
// attempts' files for a version the load reads there are an error. Cleanup follows the
// records too: it reads them, deletes the files of attempts they do not
// list, and everything at or below the newest recorded snapshot at or
// below the oldest version kept (but that snapshot); it runs before the
// log's own cleanup, so the records it needs still exist, and a cleanup
// stopped between the two leaves a checkpoint that loads (a base snapshot
// needs no delta of its own version).

// Files carry a magic number, a format version and a CRC-32C checksum.
// Format 1 holds puts and deletions sorted by key; format 2, for deltas
// only, adds one range deletion as the first entry: every key below a
// bound, applied before the rest. Keys start with their window's bound
// (agg/key.go), so a batch that evicts closed windows (Store.EvictBelow)
// records one entry instead of a deletion per group. A delta without a
// range deletion, and every snapshot, is written as format 1, the bytes
// older builds wrote; a build that reads only format 1 refuses format 2
// instead of misreading it. Rewriting a version (a re-run batch) writes
// the same bytes. They are
// written and read by streaming (file_stream.go, objstore.Streamer) with
// bounded buffers, so the pebble provider's partitions are bounded by disk,
// not memory; both providers read each other's files.
//
// The in-memory provider keeps a partition's rows in hash tables whose
// keys and values sit in chunks of bytes, with no Go pointer per row
// (memtable.go), one table per window bound when the keys start with one
// (MemoryOptions.BoundPrefix), so evicting closed windows drops their
// tables. A batch changes the tables in place; an aborted batch that
// changed them drops the partition, and the next Open loads it from the
// checkpoint.
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
