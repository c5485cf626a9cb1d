// Package file is the file source: JSON-lines files in a directory (an
// objstore.Store whose root is that directory), with Spark's file source
// rules: every file not yet taken is read, whatever its name, oldest
// modification time first (ties by name; latestFirst reverses the order),
// at most maxFilesPerTrigger per batch, with Spark's cache of unread files:
// the rest of a capped batch's listing, when it is at least a fifth of the
// cap, is what the next batches take (Offset.Unread; not with latestFirst
// or availableNow).
//
// An offset (format version 3) is
//
//	{"version":3,"files":[...],"sizes":[...],"splitBytes":B,"seen":{"name":mtimeMs,...},"newestMs":N,"unread":{"ms":M,"name":"..."}}
//
// files are the batch that ends there (a re-run reads exactly them), sizes
// their sizes as listed and splitBytes the size larger files are cut to
// (so a re-run cuts the same read tasks); seen
// is every file taken so far, so the set survives restarts through the
// checkpoint's offsets/N entries. maxFileAge (default 7d) is relative to
// newestMs, the newest modification time taken: after the first batch a
// file older than newestMs - maxFileAge is ignored, and seen drops such
// names, which keeps it bounded by the files of one maxFileAge window. With
// latestFirst and maxFilesPerTrigger both set, maxFileAge is ignored and
// seen is not pruned (as in Spark). A Latest offset holds only files: those
// available and not taken. Version-1 offsets ({"lastFile","files"}, name
// order) are read: names at or before lastFile count as taken.
//
// Listing: without fullListingInterval every trigger lists the whole
// directory. With it, the driver lists the whole directory at its first
// trigger and then once per interval; triggers between list only the keys
// after the directory of the newest file taken (objstore.ListInfoAfter),
// and remember the files listed and not yet taken, so their cost follows
// the new files, not the files already taken. A file landing under an
// older key is found at the next full listing (docs/query.md states the
// rule). Next reuses the listing Latest made when it covers the limit.
//
// Splits: one read task per file, except that a file larger than the
// batch's splitBytes (min(128 MiB, max(4 MiB, batch bytes /
// minPartitions)), Spark's maxSplitBytes rule) is cut into byte ranges of
// equal size. A range reads the lines that start in it: it starts after
// the first newline at or past its first byte and reads through the line
// that crosses its end. Splits depend only on the end offset. An offset of
// version 2 (no sizes) gives one task per file.
//
// Reading: a file or a range is streamed (objstore.GetReader,
// GetRangeReader) and split into lines as it arrives, with a
// ReadBufferBytes buffer; a line is bounded by MaxLineBytes. A record's
// position is its file and line number; a range that starts past the
// file's first byte gives byte offsets, which ResolveOffsets turns into
// line numbers for the records a map task sets aside. cleanSource: archive
// copies by streaming too.
//
// Progress (ProgressOffset) shows an offset over ProgressOffsetMaxBytes
// compact: the first files, the counts, newestMs; offsets/N has it whole.
//
// Names whose path has a segment starting with '.' or '_' are not data. A
// store without modification times (no objstore.InfoLister) gives name
// order.
//
// After a batch commits, Commit applies cleanSource to its files: delete,
// or archive (moved under sourceArchiveDir at the same relative path).
// Failures are logged by the scheduler, not fatal; a batch whose clean-up
// a crash interrupted is not cleaned again.
//
// It owns planning, reading and cleaning; it writes to the directory only
// to clean it, and keeps no history beyond what the offsets carry.
package file
