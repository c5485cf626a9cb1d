package jsonbatches

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
)

// PendingDir holds one record per attempt that staged a batch directory.
const PendingDir = "_pending/"

// pendingVersion is the format version of a pending record.
const pendingVersion = 1

type upload struct {
	Key      string          `json:"key"`
	UploadID string          `json:"uploadId"`
	Parts    []objstore.Part `json:"parts,omitempty"`
}

// pendingRecord is _pending/<batch>-<attempt>.json. Uploads are listed in
// the order they are completed (_SUCCESS last). Completing is set, with
// every part's ETag, once all bytes are staged: from then on the attempt is
// the batch's content and a restart completes it; before, a restart aborts
// it.
type pendingRecord struct {
	Version    int         `json:"version"`
	BatchID    ids.BatchID `json:"batchId"`
	Completing bool        `json:"completing"`
	Uploads    []upload    `json:"uploads"`
}

func newAttemptID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// writeStaged writes a batch directory that appears whole or not at all to
// a reader that honours _SUCCESS, and never mixes two attempts for any
// reader: every object is staged (invisible), the attempt is recorded as
// completing, then the parts are completed and _SUCCESS last.
func (w *Writer) writeStaged(ctx context.Context, mp objstore.Multipart, batchID ids.BatchID, encoded [][]byte) error {
	if err := w.resolvePending(ctx, mp); err != nil {
		return fmt.Errorf("write batch %d: %w", batchID, err)
	}
	dir := BatchDir(batchID)
	if _, err := w.store.Get(ctx, dir+SuccessMarker); err == nil {
		// A complete directory from an earlier attempt: readers may have
		// read it already, so it stays (idempotent on the batch id).
		return nil
	} else if !errors.Is(err, objstore.ErrNotExist) {
		return fmt.Errorf("write batch %d: %w", batchID, err)
	}
	// An incomplete directory (written by an older version, or by hand)
	// is cleared first.
	if err := clearDir(ctx, w.store, dir); err != nil {
		return fmt.Errorf("write batch %d: %w", batchID, err)
	}
	keys := make([]string, 0, len(encoded)+1)
	for p := range ids.PartitionID(len(encoded)) {
		keys = append(keys, dir+PartName(p))
	}
	keys = append(keys, dir+SuccessMarker)
	data := append(encoded, nil)
	rec := pendingRecord{Version: pendingVersion, BatchID: batchID}
	for _, k := range keys {
		id, err := mp.CreateMultipart(ctx, k)
		if err != nil {
			return fmt.Errorf("write batch %d: %w", batchID, err)
		}
		rec.Uploads = append(rec.Uploads, upload{Key: k, UploadID: id})
	}
	recKey := fmt.Sprintf("%s%d-%s.json", PendingDir, batchID, newAttemptID())
	if err := putRecord(ctx, w.store, recKey, rec); err != nil {
		return fmt.Errorf("write batch %d: %w", batchID, err)
	}
	for i := range rec.Uploads {
		u := &rec.Uploads[i]
		p, err := mp.UploadPart(ctx, u.Key, u.UploadID, 1, data[i])
		if err != nil {
			return fmt.Errorf("write batch %d: %w", batchID, err)
		}
		u.Parts = []objstore.Part{p}
	}
	rec.Completing = true
	if err := putRecord(ctx, w.store, recKey, rec); err != nil {
		return fmt.Errorf("write batch %d: %w", batchID, err)
	}
	if err := completeRecord(ctx, w.store, mp, recKey, rec); err != nil {
		return fmt.Errorf("write batch %d: %w", batchID, err)
	}
	return nil
}

func putRecord(ctx context.Context, store objstore.Store, key string, rec pendingRecord) error {
	doc, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := store.Put(ctx, key, append(doc, '\n')); err != nil {
		return fmt.Errorf("record staged uploads: %w", err)
	}
	return nil
}

// completeRecord completes a completing record's uploads in order
// (idempotently) and deletes the record.
func completeRecord(ctx context.Context, store objstore.Store, mp objstore.Multipart, key string, rec pendingRecord) error {
	for _, u := range rec.Uploads {
		if err := mp.CompleteMultipart(ctx, u.Key, u.UploadID, u.Parts); err != nil {
			return fmt.Errorf("complete %s: %w", u.Key, err)
		}
	}
	if err := store.Delete(ctx, key); err != nil && !errors.Is(err, objstore.ErrNotExist) {
		return fmt.Errorf("delete staged upload record: %w", err)
	}
	return nil
}

// resolvePending finishes what an earlier driver left: a completing attempt
// is completed, any other is aborted.
func (w *Writer) resolvePending(ctx context.Context, mp objstore.Multipart) error {
	keys, err := w.store.List(ctx, PendingDir)
	if err != nil {
		return fmt.Errorf("list staged uploads: %w", err)
	}
	for _, k := range keys {
		if !strings.HasSuffix(k, ".json") {
			continue
		}
		data, err := w.store.Get(ctx, k)
		if errors.Is(err, objstore.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read staged upload record: %w", err)
		}
		var rec pendingRecord
		if err := json.Unmarshal(data, &rec); err != nil || rec.Version != pendingVersion {
			return fmt.Errorf("staged upload record %s is unreadable (version %d): %v", k, rec.Version, err)
		}
		if rec.Completing {
			if err := completeRecord(ctx, w.store, mp, k, rec); err != nil {
				return err
			}
			continue
		}
		for _, u := range rec.Uploads {
			if err := mp.AbortMultipart(ctx, u.Key, u.UploadID); err != nil {
				return fmt.Errorf("abort %s: %w", u.Key, err)
			}
		}
		if err := w.store.Delete(ctx, k); err != nil && !errors.Is(err, objstore.ErrNotExist) {
			return fmt.Errorf("delete staged upload record: %w", err)
		}
	}
	return nil
}
