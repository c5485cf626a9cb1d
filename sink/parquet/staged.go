package parquet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
)

// PendingDir holds one record per (batch, partition, attempt) that staged
// files: the upload ids, written before any byte is uploaded, so that an
// attempt that never reaches the sink log can be found and aborted without
// listing uploads (MinIO lists none by prefix).
const PendingDir = "_sink_pending/"

// pendingVersion is the format version of a pending record.
const pendingVersion = 1

// Upload is one staged file: the multipart upload that makes the object
// Key when completed, and its parts. On a filesystem the upload is a hidden
// "_<name>.<uploadId>-<n>.inprogress" file renamed at completion.
type Upload struct {
	Key      string          `json:"key"`
	UploadID string          `json:"uploadId"`
	Parts    []objstore.Part `json:"parts,omitempty"`
}

// pendingRecord is _sink_pending/<batch>/<partition>-<attempt>.json.
type pendingRecord struct {
	Version   int             `json:"version"`
	QueryID   string          `json:"queryId"`
	BatchID   ids.BatchID     `json:"batchId"`
	Partition ids.PartitionID `json:"partition"`
	Uploads   []Upload        `json:"uploads"`
}

func pendingKey(batchID ids.BatchID, partition ids.PartitionID, attempt string) string {
	return fmt.Sprintf("%s%d/%04d-%s.json", PendingDir, batchID, partition, attempt)
}

func newAttemptID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// stagedFile is what a descriptor carries: the upload, and the pending
// record that names it (so Commit deletes the committed attempt's records
// without reading them).
type stagedFile struct {
	Upload
	Pending string `json:"pending,omitempty"`
}

// descriptor encodes a staged file for the reduce result's file list: the
// scheduler passes these strings, unread, from the reduce tasks to Commit.
// A plain key (no leading '{') is a file written visibly by a store without
// Multipart.
func descriptor(u Upload, pending string) (string, error) {
	b, err := json.Marshal(stagedFile{Upload: u, Pending: pending})
	return string(b), err
}

func parseDescriptor(s string) (Upload, bool, error) {
	f, staged, err := parseStaged(s)
	return f.Upload, staged, err
}

// parseStaged decodes a descriptor; staged is false for a plain key.
func parseStaged(s string) (stagedFile, bool, error) {
	if !strings.HasPrefix(s, "{") {
		return stagedFile{Upload: Upload{Key: s}}, false, nil
	}
	var f stagedFile
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		return stagedFile{}, false, fmt.Errorf("staged file descriptor %q: %w", s, err)
	}
	if f.Key == "" || f.UploadID == "" || len(f.Parts) == 0 {
		return stagedFile{}, false, fmt.Errorf("staged file descriptor %q: key, uploadId and parts are required", s)
	}
	if f.Pending != "" && !strings.HasPrefix(f.Pending, PendingDir) {
		return stagedFile{}, false, fmt.Errorf("staged file descriptor %q: pending record %q is not under %s", s, f.Pending, PendingDir)
	}
	return f, true, nil
}

// stage writes one partition's files as multipart uploads: it creates
// every upload, records their ids in a pending record, then encodes each
// file (write(i, w) for keys[i]) straight into its upload, a part each
// time s.partSize bytes are buffered (see partWriter). On a store that
// lists its staged uploads (objstore.StagedLister: the filesystem) no
// record is written: Commit and Prepare find an attempt's uploads by
// listing. It returns the descriptors, sorted by key.
func (s *Sink) stage(ctx context.Context, mp objstore.Multipart, queryID string, batchID ids.BatchID, partition ids.PartitionID, keys []string, write func(i int, w io.Writer) error) ([]string, error) {
	rec := pendingRecord{Version: pendingVersion, QueryID: queryID, BatchID: batchID, Partition: partition}
	for _, key := range keys {
		id, err := mp.CreateMultipart(ctx, key)
		if err != nil {
			return nil, err
		}
		rec.Uploads = append(rec.Uploads, Upload{Key: key, UploadID: id})
	}
	recKey := ""
	if _, listed := objstore.StagedListerOf(s.store); !listed {
		doc, err := json.Marshal(rec)
		if err != nil {
			return nil, err
		}
		recKey = pendingKey(batchID, partition, newAttemptID())
		if err := s.store.Put(ctx, recKey, append(doc, '\n')); err != nil {
			return nil, fmt.Errorf("record pending uploads: %w", err)
		}
	}
	out := make([]string, len(keys))
	for i, u := range rec.Uploads {
		var err error
		if u.Parts, err = uploadStreamed(ctx, mp, u.Key, u.UploadID, s.partSize, func(w io.Writer) error { return write(i, w) }); err != nil {
			return nil, err
		}
		if out[i], err = descriptor(u, recKey); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// uploadStreamed runs write into a partWriter on the upload and returns
// the parts it sent.
func uploadStreamed(ctx context.Context, mp objstore.Multipart, key, uploadID string, partSize int, write func(w io.Writer) error) ([]objstore.Part, error) {
	pw := newPartWriter(ctx, mp, key, uploadID, partSize)
	if err := write(pw); err != nil {
		return nil, err
	}
	return pw.Close()
}

// partWriter is an io.Writer into a multipart upload: it buffers up to
// size bytes and sends them as the next part when the buffer is full, and
// the rest as the last part at Close. A file's bytes in memory are one
// part, whatever its size; every part but the last has exactly size
// bytes (S3 needs at least 5 MiB). The buffer grows with what is written
// (a small file, most of them, never allocates a whole part: eight 8 MiB
// buffers per batch made a window-closing no-data batch take 60 ms).
type partWriter struct {
	ctx      context.Context
	mp       objstore.Multipart
	key      string
	uploadID string
	size     int
	buf      []byte
	parts    []objstore.Part
	err      error
}

func newPartWriter(ctx context.Context, mp objstore.Multipart, key, uploadID string, size int) *partWriter {
	if size <= 0 {
		size = objstore.DefaultPartSize
	}
	return &partWriter{ctx: ctx, mp: mp, key: key, uploadID: uploadID, size: size}
}

func (w *partWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	written := 0
	for len(p) > 0 {
		n := min(w.size-len(w.buf), len(p))
		w.buf = append(w.buf, p[:n]...)
		p = p[n:]
		written += n
		if len(w.buf) == w.size {
			if err := w.send(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// send uploads the buffer as the next part.
func (w *partWriter) send() error {
	part, err := w.mp.UploadPart(w.ctx, w.key, w.uploadID, len(w.parts)+1, w.buf)
	if err != nil {
		w.err = fmt.Errorf("upload part %d of %s: %w", len(w.parts)+1, w.key, err)
		return w.err
	}
	w.parts = append(w.parts, part)
	w.buf = w.buf[:0]
	return nil
}

// Close sends what is buffered as the last part (a file whose size is a
// multiple of the part size has no shorter last part) and returns the
// parts.
func (w *partWriter) Close() ([]objstore.Part, error) {
	if w.err != nil {
		return nil, w.err
	}
	if len(w.buf) > 0 || len(w.parts) == 0 {
		if err := w.send(); err != nil {
			return nil, err
		}
	}
	w.buf = nil
	return w.parts, nil
}

// complete makes a logged batch's staged files visible. It is idempotent:
// an upload already completed is recognised (see objstore.Multipart).
func (s *Sink) complete(ctx context.Context, e LogEntry) error {
	if len(e.Uploads) == 0 {
		return nil
	}
	mp, ok := s.store.(objstore.Multipart)
	if !ok {
		return fmt.Errorf("complete sink batch %d: %s logs staged uploads but the store has no multipart support", e.BatchID, s.path())
	}
	// A few at a time: a batch has one file per (partition, date).
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	errs := make([]error, len(e.Uploads))
	for i, u := range e.Uploads {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := mp.CompleteMultipart(ctx, u.Key, u.UploadID, u.Parts); err != nil {
				errs[i] = fmt.Errorf("complete %s: %w", u.Key, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("complete sink batch %d: %w", e.BatchID, err)
	}
	return nil
}

// finish makes a logged batch's staged files visible and resolves its
// pending records (on a store that lists its staged uploads: the other
// uploads staged beside its files, see sweepStaged). e is durable: from
// here on a restart completes it too.
//
// mine are the records of the attempt e logs (every upload they name is in
// e). They are deleted without being read (one request on a store that
// deletes many keys at once), at the same time as the completion: once
// the log entry names an upload, its record is not needed to find it. A
// logged batch whose uploads are not all complete has no commits/N (the
// scheduler writes it after Commit returns), so it is re-run, and its
// re-run completes them from the entry (Commit(b, nil)). A failure to
// delete them is logged, not returned: the next sweep deletes them. Also
// at the same time the other records of batches up to e's are swept (see
// sweep).
func (s *Sink) finish(ctx context.Context, l logLayout, queryID string, e LogEntry, mine []string) error {
	if len(e.Files) == 0 && len(mine) == 0 {
		// Nothing to complete, and an attempt of an empty batch stages
		// nothing; what an abandoned attempt of another split staged is
		// swept by the next commit with files (it reaches every batch up
		// to its own) or the next start.
		return nil
	}
	skip := make(map[string]bool, len(mine))
	for _, k := range mine {
		skip[k] = true
	}
	swept, deleted := make(chan error, 1), make(chan error, 1)
	go func() {
		err := s.sweep(ctx, l, queryID, e.BatchID, &e, skip)
		if lister, ok := objstore.StagedListerOf(s.store); ok && err == nil {
			err = s.sweepStaged(ctx, lister, l, queryID, e.BatchID, &e, fileDirs(e.Files))
		}
		swept <- err
	}()
	go func() { deleted <- s.deleteRecords(ctx, mine) }()
	err := s.complete(ctx, e)
	if serr := <-swept; serr != nil {
		err = errors.Join(err, fmt.Errorf("commit sink batch %d: %w", e.BatchID, serr))
	}
	if derr := <-deleted; derr != nil {
		s.logger.Warn("pending upload records of a committed batch left for the next sweep", "batch", e.BatchID, "err", derr)
	}
	return err
}

// deleteRecords deletes pending records: in one request on a store that
// deletes many keys at once, else in parallel.
func (s *Sink) deleteRecords(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	if bd, ok := s.store.(objstore.BatchDeleter); ok {
		if err := bd.DeleteMany(ctx, keys); err != nil {
			return fmt.Errorf("delete pending upload records: %w", err)
		}
		return nil
	}
	if _, err := objstore.DeleteAll(ctx, s.store, keys, 8); err != nil {
		return fmt.Errorf("delete pending upload records: %w", err)
	}
	return nil
}

// sweep resolves the pending records of batches up to upTo (all if
// upTo < 0), except those in skip: uploads its log entry names are
// completed (a restart may find the log written and the completion not
// done), every other upload is aborted, and the record is deleted. A batch
// without a log entry is one whose attempts never committed: all its
// uploads are aborted, unless it is newer than upTo. done (nil: none) is
// the entry the caller is completing: its batch is not completed here,
// and its uploads are not aborted.
func (s *Sink) sweep(ctx context.Context, l logLayout, queryID string, upTo ids.BatchID, done *LogEntry, skip map[string]bool) error {
	keys, err := s.store.List(ctx, PendingDir)
	if err != nil {
		return fmt.Errorf("list pending uploads: %w", err)
	}
	byBatch := map[ids.BatchID][]string{}
	for _, k := range keys {
		if skip[k] {
			continue
		}
		num, _, ok := strings.Cut(strings.TrimPrefix(k, PendingDir), "/")
		n, err := ids.ParseBatchID(num)
		if !ok || err != nil || n < 0 {
			continue
		}
		if upTo >= 0 && n > upTo {
			continue
		}
		byBatch[n] = append(byBatch[n], k)
	}
	batches := make([]ids.BatchID, 0, len(byBatch))
	for n := range byBatch {
		batches = append(batches, n)
	}
	slices.Sort(batches)
	mp, _ := s.store.(objstore.Multipart)
	for _, n := range batches {
		logged, err := s.loggedUploads(ctx, l, n, done, queryID)
		if err != nil {
			return err
		}
		for _, k := range byBatch[n] {
			data, err := s.store.Get(ctx, k)
			if errors.Is(err, objstore.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("read pending uploads %s: %w", k, err)
			}
			var rec pendingRecord
			if err := json.Unmarshal(data, &rec); err != nil || rec.Version != pendingVersion {
				s.logger.Warn("unreadable pending upload record left in place", "key", k, "err", err)
				continue
			}
			if rec.QueryID != queryID {
				continue // another query's (a shared path in a lab)
			}
			for _, u := range rec.Uploads {
				if logged[u.UploadID] || mp == nil {
					continue
				}
				if err := mp.AbortMultipart(ctx, u.Key, u.UploadID); err != nil {
					return fmt.Errorf("abort unlogged upload of %s: %w", u.Key, err)
				}
			}
			if err := s.store.Delete(ctx, k); err != nil && !errors.Is(err, objstore.ErrNotExist) {
				return fmt.Errorf("delete pending upload record: %w", err)
			}
		}
	}
	return nil
}

// sweepStaged is sweep on a store that lists its staged uploads (no
// pending records): the uploads of queryID's files (named by FileName)
// staged under prefixes, of batches up to upTo (all if upTo < 0), are
// completed if their batch's log entry names them and aborted otherwise.
// done is as for sweep. Commit lists the directories of its batch's files
// (an abandoned attempt of the batch staged beside them; a straggler of an
// older batch found there goes too), Prepare the whole sink.
func (s *Sink) sweepStaged(ctx context.Context, lister objstore.StagedLister, l logLayout, queryID string, upTo ids.BatchID, done *LogEntry, prefixes []string) error {
	byBatch := map[ids.BatchID][]objstore.StagedUpload{}
	for _, prefix := range prefixes {
		ups, err := lister.ListStaged(ctx, prefix)
		if err != nil {
			return fmt.Errorf("list staged uploads: %w", err)
		}
		for _, u := range ups {
			n, _, ok := parseFileName(path.Base(u.Key), queryID)
			if !ok || (upTo >= 0 && n > upTo) {
				continue
			}
			byBatch[n] = append(byBatch[n], u)
		}
	}
	batches := make([]ids.BatchID, 0, len(byBatch))
	for n := range byBatch {
		batches = append(batches, n)
	}
	slices.Sort(batches)
	mp, ok := s.store.(objstore.Multipart)
	if !ok {
		return nil
	}
	for _, n := range batches {
		logged, err := s.loggedUploads(ctx, l, n, done, queryID)
		if err != nil {
			return err
		}
		for _, u := range byBatch[n] {
			if logged[u.UploadID] {
				continue
			}
			if err := mp.AbortMultipart(ctx, u.Key, u.UploadID); err != nil {
				return fmt.Errorf("abort unlogged upload of %s: %w", u.Key, err)
			}
		}
	}
	return nil
}

// fileDirs returns the prefixes that list the directories of keys, sorted:
// "window_date=D/part-" for a file under window_date=D/, "part-" for one at
// the root.
func fileDirs(keys []string) []string {
	var out []string
	for _, k := range keys {
		dir, _ := path.Split(k)
		out = append(out, dir+"part-")
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// loggedUploads returns the upload ids batch n's sink log entry records
// when the entry is this query's, completing the entry's uploads first
// (done, the entry just written, is complete already); none when the
// entry is absent or another query's.
func (s *Sink) loggedUploads(ctx context.Context, l logLayout, n ids.BatchID, done *LogEntry, queryID string) (map[string]bool, error) {
	logged := map[string]bool{}
	var e LogEntry
	var err error
	if done != nil && n == done.BatchID {
		e = *done
	} else {
		e, _, err = s.lookup(ctx, l, n)
	}
	switch {
	case err == nil && e.QueryID == queryID:
		if done == nil || n != done.BatchID {
			if err := s.complete(ctx, e); err != nil {
				return nil, err
			}
		}
		for _, u := range e.Uploads {
			logged[u.UploadID] = true
		}
	case err == nil, errors.Is(err, objstore.ErrNotExist):
	default:
		return nil, err
	}
	return logged, nil
}
