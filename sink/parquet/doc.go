// Package parquet is the exactly-once Parquet file sink (append mode) and
// the readers tests and operators use to check what it wrote.
//
// It owns the layout of a sink path: the data files and the sink log. It
// writes only through objstore.Store (rooted at the sink path); it does not
// plan batches, decide what is emitted, or touch the checkpoint.
//
// # Files
//
// Each (batch, state partition) writes at most one file per directory
// (with the small outputs of the partitions after it, see Gathered small
// outputs), named by FileName:
//
//	[window_date=YYYY-MM-DD/]part-<batch:05d>-<partition:04d>-<queryID>.snappy.parquet
//
// With PartitionBy "window_date" rows go to Hive-style directories by the UTC
// date of window_start (a null window_start goes to
// window_date=__HIVE_DEFAULT_PARTITION__); otherwise files sit at the root.
// The full query id is in the name, so two queries never write the same
// object. The bytes are a function of (schema, rows): one row group, snappy
// pages, and a constant created_by ("sluice") instead of the library's
// version string, so a re-run, in any process or build, rewrites each object
// with identical bytes. Zero rows write no file.
//
// # Gathered small outputs
//
// The sink is a sink.Gatherer: a reduce task whose partition's rows are
// estimated at no more than GatherBelow (Options.GatherBelow, 64 KiB by
// default, at most 4 MiB over the batch's partitions; zero on a store
// without Multipart) hands them to the driver instead of staging a file,
// and the driver stages the gathered partitions (WriteGathered) before the
// log entry: consecutive partitions, up to 8 MiB estimated per group, each
// group written as its first partition's rows would be (one file per
// directory, named for that partition). A no-data batch that closes a few
// windows over 8 partitions stages one file per date, not eight. A
// partition whose rows were gathered writes no file of its own, so a name
// is never used twice in a batch; an abandoned attempt that split the
// batch otherwise is never logged, so its files are aborted, never seen.
//
// # Streamed files
//
// No file is held whole in memory. A task encodes a file straight into
// its staged upload: a part is sent each time 8 MiB (objstore.
// DefaultPartSize; S3 needs 5 MiB but the last) are buffered, and the
// rest at the end, so a file of any size is one part's bytes in memory;
// on a store without Multipart it is streamed through objstore.PutWriter.
// The writer holds a row group's encoded pages until the group is
// complete, and a file is one row group, so a file whose rows are
// estimated above 8 MiB has its pages spooled to temporary files
// (Options.SpoolDir, default os.TempDir(); removed after the file). The
// bytes are those of encoding into one buffer. driver compact writes its
// new files the same way.
//
// Readers (ReadCommitted, ReadAllFiles, driver compact) open a file
// through objstore.OpenReaderAt: one ranged read of its last 1 MiB (the
// whole file when smaller, so a small file is one GET; the footer of a
// larger one), then the column chunks in ranged reads of at
// most 1 MiB per column (readBuffer). A store without
// objstore.RangeReader is read whole.
//
// Columns keep the output schema's order and are all optional: string is
// BYTE_ARRAY (STRING), long INT64, double DOUBLE, boolean BOOLEAN, timestamp
// INT64 TIMESTAMP(MICROS, isAdjustedToUTC=true). ReadFile maps those back,
// and also accepts INT32, FLOAT, plain BYTE_ARRAY and millisecond or
// nanosecond timestamps from other writers.
//
// # Invisible until commit
//
// On a store with objstore.Multipart (S3, the local filesystem) a reduce
// task stages each file: it creates a multipart upload per file, records
// the upload ids in _sink_pending/<N>/<partition>-<attempt>.json (before
// any byte is sent: listing uploads is unreliable, MinIO lists none by
// prefix), then encodes each file into its upload, in parts (see Streamed
// files). On a store that lists its staged uploads (objstore.StagedLister:
// the filesystem, whose staged parts are files) no record is written:
// Commit lists the directories of its batch's files and Prepare the whole
// path, and the file name (see Files) says which query and batch an
// upload belongs to; records older builds left are still resolved.
//
// Nothing is visible: S3 does not list or serve an upload before
// completion, and the filesystem keeps the parts as
// "_<name>.<upload>-<n>.inprogress", a name Spark, Hive and Trino skip
// (leading '_') and no "*.parquet" glob matches (DuckDB's glob reads '_'
// names). The driver's Commit writes the log entry with the uploads and
// their part ETags, then completes them (the files appear) while it aborts
// every other upload recorded (or listed) for batches up to N and deletes
// the records. The logged attempt's records are named by its descriptors,
// so they are deleted without being read (one DeleteObjects request on
// S3), at the same time as the completion: once the entry names an upload
// its record is not needed to find it (a batch whose completion was cut
// short has no commits/N, so the scheduler re-runs it and the re-run's
// Commit completes the entry's uploads). Another attempt's record is
// deleted after its uploads are aborted. Prepare, on every driver start, completes
// the uploads of any logged batch again (idempotent: a completed upload is
// recognised by its multipart ETag, "<md5 of the part md5s>-<parts>") and
// aborts those of batches without a log entry. So a reader that lists the
// directory sees each committed file once and nothing else, at every
// instant, even when a re-run reads different data. A task of an abandoned
// attempt that starts an upload after that is aborted at the next commit
// (on the filesystem: the next commit with a file in its directory); a
// bucket lifecycle rule (AbortIncompleteMultipartUpload, e.g. 7 days) is
// the backstop for uploads a crash leaves before their record is written.
//
// # The sink log
//
// Batch N's file list is a small JSON document, written with
// create-if-absent after every partition's files are staged:
//
//	{"version":2,"queryId":"...","batchId":N,"files":[sorted keys],
//	 "uploads":[{"key":"...","uploadId":"...","parts":[{"n":1,"etag":"\"...\"","size":B}]}]}
//
// Format versions: 1 (files written visibly by the tasks, no uploads) is
// still read; 2 is written since staged files; 3 marks compacted entries
// (N.compact) and replacement records, which a build reading only 1 and 2
// refuses. Files of version-1 batches
// that never committed may remain in the directory; they are not cleaned.
//
// The path's first query writes the primary log, _sink_log/<N>, as Spark
// writes _spark_metadata/<N>. A batch whose entry is there is committed
// (Committed returns true and the scheduler skips it); a re-run's Commit
// finds the entry already there and succeeds. A batch newer than every
// entry the log held at Prepare or since is not looked up, by Committed or
// before Commit's create-if-absent: only a fenced driver's entry could be
// there, and the create-if-absent finds it (its uploads are completed,
// the offered ones aborted).
//
// A query with another id that finds the primary log written by someone
// else has lost its checkpoint (or shares the path by mistake). Spark would
// silently skip its batches 0..N because their ids are in the log, losing
// the replay. Sluice instead:
//
//   - in production, refuses (Prepare, and Commit if Prepare was skipped)
//     with an error matching ErrForeignSinkLog that names both query ids and
//     the path;
//   - in a lab, logs a warning and gives the new query its own secondary
//     log, _sink_log/<queryID>/<N>. Its files carry its own id, so the
//     replay writes the windows again, next to the first run's (the lesson
//     of a deleted checkpoint), and the log records them.
//
// A query's log is its secondary log if that has entries, else the primary
// log if it is empty or the query's own, else a new secondary log. Every
// entry in one log has one query id, a file is listed by exactly one entry,
// and a reader that follows the log (ReadCommitted) never sees a file twice.
// A reader that lists the directory (ListDirectory, ReadAllFiles) sees the
// same files: staged files of batches that never committed are invisible.
//
// # Compaction and cleanup
//
// Like Spark's FileStreamSinkLog, every Options.CompactInterval-th entry
// (batch N with (N+1) % interval == 0) is written as <N>.compact, format
// version 3: the batch's own files and uploads, plus "compacted", the files
// of every earlier batch of the log (by batch), the files replacements
// added, and the replacement records folded in. Readers list the log, read
// the newest compacted entry and the entries after it (lookups of batch N
// try N and N.compact). After a compacted entry commits, a background
// cleanup deletes every entry older than the newest compacted entry at or
// before the last MinBatchesToRetain batches (never an entry of a batch
// with pending uploads), and the replacement records the newest compacted
// entry folded in. A batch older than every entry left is committed.
// A reader that finds a listed object gone lists again.
//
// # Replacements (driver compact)
//
// CompactDates rewrites the files of closed window_date= partitions. A
// replacement record, _sink_log/[<queryID>/]replace-<date>-<n>, lists the
// files removed and added, state pending then done; it never takes a batch
// number. A reader applies a record once done or once every added file
// exists (else the removed files still do). On the local filesystem the
// date's directory is exchanged with a staged one (renameat2), so a
// directory lister sees one set; elsewhere the new files are staged
// uploads completed after the record is written and the old ones deleted
// right after, so a lister can briefly see both. One run at a time holds
// the lease LockKey.
//
// A store without Multipart (a custom decorator) gets the old behaviour:
// files written with Put by the tasks, visible before the commit.
//
// Committed needs Prepare (the query id picks the log); WritePartition and
// Commit carry the query id in sink.Batch and work on any instance, as
// executors construct their own Sink.
package parquet
