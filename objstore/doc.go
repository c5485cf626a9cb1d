// Package objstore is the one storage interface every durable part of
// Sluice writes through (checkpoint, state files, sinks, bad records), with
// a local-filesystem backend for labs, an S3 backend for production and an
// in-memory backend for logic tests.
//
// It owns: the Store contract (objstore.go), the backends (FS, S3, Mem),
// opening a store from a URI (Open, ParseURI), scoping a store under a key
// prefix (Prefixed), and decorators for tests and diagnostics: Counting
// (request and byte counts, call traces for golden tests of write order)
// and Faulty (fault injection, including lost responses). Streaming
// (stream.go) is an optional capability, Streamer, found through
// GetReader, PutReader and PutWriter, which fall back to Get and Put.
// Ranged reads (ranged.go) are another, RangeReader (a GET with a Range
// header; ReadAt on a file), found through OpenReaderAt, an io.ReaderAt
// for readers that need random access (Parquet's footer, then its column
// chunks) without holding the object; it falls back to Get. Ranged
// streams (rangestream.go), RangeStreamer, read a byte range as a stream
// (a file source's split of a large file) through GetRangeReader, which
// falls back to a ranged read, a skipped stream or Get.
//
// Multipart (multipart.go) is an optional capability, found by type
// assertion: stage an object invisibly (S3 multipart upload; on the
// filesystem hidden "_<name>.<upload>-<n>.inprogress" files that no
// "*.parquet" glob matches) and make it visible atomically later, from any
// process, idempotently. FS, S3, Mem and the decorators implement it.
// Listing staged uploads (staged.go) is a further capability,
// StagedLister, found through StagedListerOf: the filesystem lists its
// hidden parts, so a writer needs no record of an upload to find it
// again; S3 cannot (listing uploads by prefix is unreliable), and a
// decorator answers for the store it wraps.
//
// It knows nothing about checkpoints or queries, and it must not interpret
// keys beyond treating them as slash-separated paths. Backends keep no
// package-level state; loggers are injected.
//
// A note on keys: the filesystem backend (and S3 servers backed by a POSIX
// filesystem, such as versitygw) cannot hold both a key "a" and a key
// "a/b", because "a" would have to be a file and a directory. Callers
// should never make one key a path prefix directory of another.
package objstore
