package objstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Operation names used by Counting and Faulty.
const (
	OpGet         = "get"
	OpPut         = "put"
	OpPutIfAbsent = "put_if_absent"
	OpList        = "list"
	OpDelete      = "delete"

	OpCreateMultipart   = "create_multipart"
	OpUploadPart        = "upload_part"
	OpCompleteMultipart = "complete_multipart"
	OpAbortMultipart    = "abort_multipart"

	OpListStaged = "list_staged"
)

// OpStats counts the calls of one operation. Bytes are the object bytes
// read (get) or written (put, put_if_absent); 0 for list and delete.
// Objects are the keys a list returned.
// Requests include the calls that failed; Errors counts those, and
// Answers the part of them that are expected answers rather than faults
// (ErrNotExist, ErrExists).
type OpStats struct {
	Requests int64
	Bytes    int64
	Errors   int64
	Answers  int64
	Objects  int64
}

// TraceEntry is one recorded call. Key is the key, or the prefix for list.
// Bytes are the bytes read or written (the data passed to a put, even if it
// failed; 0 for a failed get). Err is "" on success, "ErrExists",
// "ErrNotExist" or "ErrInjected" for those sentinels, else the error text.
type TraceEntry struct {
	Op    string
	Key   string
	Bytes int
	Err   string
}

// String renders the entry on one line, for golden files:
// "put_if_absent offsets/3 120" or "get offsets/4 0 err=ErrNotExist".
func (e TraceEntry) String() string {
	s := fmt.Sprintf("%s %s %d", e.Op, e.Key, e.Bytes)
	if e.Err != "" {
		s += " err=" + e.Err
	}
	return s
}

// Counting is a Store decorator that counts requests and bytes by
// operation and, after StartTrace, records every call in order, for
// golden-trace tests of write order. Safe for concurrent use; concurrent
// calls are recorded in the order they complete.
type Counting struct {
	inner Store

	mu      sync.Mutex
	stats   map[string]OpStats
	tracing bool
	trace   []TraceEntry
}

// NewCounting wraps inner.
func NewCounting(inner Store) *Counting {
	return &Counting{inner: inner, stats: make(map[string]OpStats)}
}

// Stats returns a copy of the counts, keyed by OpGet, OpPut, ...; an
// operation never called is absent.
func (c *Counting) Stats() map[string]OpStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]OpStats, len(c.stats))
	for k, v := range c.stats {
		out[k] = v
	}
	return out
}

// Reset zeroes the counts (not the trace).
func (c *Counting) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats = make(map[string]OpStats)
}

// StartTrace clears the trace and starts recording calls.
func (c *Counting) StartTrace() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tracing = true
	c.trace = nil
}

// StopTrace stops recording; Trace still returns what was recorded.
func (c *Counting) StopTrace() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tracing = false
}

// Trace returns a copy of the calls recorded since StartTrace.
func (c *Counting) Trace() []TraceEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]TraceEntry(nil), c.trace...)
}

// errClass names an error for a trace.
func errClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrExists):
		return "ErrExists"
	case errors.Is(err, ErrNotExist):
		return "ErrNotExist"
	case errors.Is(err, ErrInjected):
		return "ErrInjected"
	case errors.Is(err, ErrNoSuchUpload):
		return "ErrNoSuchUpload"
	default:
		return err.Error()
	}
}

// recordList records one list that returned objects keys.
func (c *Counting) recordList(prefix string, objects int, err error) {
	c.record(OpList, prefix, 0, err)
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats[OpList]
	s.Objects += int64(objects)
	c.stats[OpList] = s
}

func (c *Counting) record(op, key string, n int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats[op]
	s.Requests++
	s.Bytes += int64(n)
	if err != nil {
		s.Errors++
		if errors.Is(err, ErrNotExist) || errors.Is(err, ErrExists) {
			s.Answers++
		}
	}
	c.stats[op] = s
	if c.tracing {
		c.trace = append(c.trace, TraceEntry{Op: op, Key: key, Bytes: n, Err: errClass(err)})
	}
}

func (c *Counting) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := c.inner.Get(ctx, key)
	c.record(OpGet, key, len(b), err)
	return b, err
}

func (c *Counting) Put(ctx context.Context, key string, data []byte) error {
	err := c.inner.Put(ctx, key, data)
	c.record(OpPut, key, len(data), err)
	return err
}

func (c *Counting) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := c.inner.PutIfAbsent(ctx, key, data)
	c.record(OpPutIfAbsent, key, len(data), err)
	return err
}

func (c *Counting) List(ctx context.Context, prefix string) ([]string, error) {
	keys, err := c.inner.List(ctx, prefix)
	c.recordList(prefix, len(keys), err)
	return keys, err
}

func (c *Counting) Delete(ctx context.Context, key string) error {
	err := c.inner.Delete(ctx, key)
	c.record(OpDelete, key, 0, err)
	return err
}

func multipartOf(inner Store, op, key string) (Multipart, error) {
	mp, ok := inner.(Multipart)
	if !ok {
		return nil, fmt.Errorf("%s %s: %w", op, key, ErrMultipartUnsupported)
	}
	return mp, nil
}

func (c *Counting) CreateMultipart(ctx context.Context, key string) (string, error) {
	mp, err := multipartOf(c.inner, OpCreateMultipart, key)
	id := ""
	if err == nil {
		id, err = mp.CreateMultipart(ctx, key)
	}
	c.record(OpCreateMultipart, key, 0, err)
	return id, err
}

func (c *Counting) UploadPart(ctx context.Context, key, uploadID string, number int, data []byte) (Part, error) {
	mp, err := multipartOf(c.inner, OpUploadPart, key)
	var p Part
	if err == nil {
		p, err = mp.UploadPart(ctx, key, uploadID, number, data)
	}
	c.record(OpUploadPart, key, len(data), err)
	return p, err
}

func (c *Counting) CompleteMultipart(ctx context.Context, key, uploadID string, parts []Part) error {
	mp, err := multipartOf(c.inner, OpCompleteMultipart, key)
	if err == nil {
		err = mp.CompleteMultipart(ctx, key, uploadID, parts)
	}
	c.record(OpCompleteMultipart, key, 0, err)
	return err
}

func (c *Counting) AbortMultipart(ctx context.Context, key, uploadID string) error {
	mp, err := multipartOf(c.inner, OpAbortMultipart, key)
	if err == nil {
		err = mp.AbortMultipart(ctx, key, uploadID)
	}
	c.record(OpAbortMultipart, key, 0, err)
	return err
}

func (c *Counting) ListInfo(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	il, ok := c.inner.(InfoLister)
	if !ok {
		err := fmt.Errorf("list %s: the store cannot list modification times", prefix)
		c.recordList(prefix, 0, err)
		return nil, err
	}
	infos, err := il.ListInfo(ctx, prefix)
	c.recordList(prefix, len(infos), err)
	return infos, err
}

// ListsStaged answers for the wrapped store.
func (c *Counting) ListsStaged() bool {
	_, ok := StagedListerOf(c.inner)
	return ok
}

func (c *Counting) ListStaged(ctx context.Context, prefix string) ([]StagedUpload, error) {
	l, err := stagedListerOf(c.inner, prefix)
	var out []StagedUpload
	if err == nil {
		out, err = l.ListStaged(ctx, prefix)
	}
	c.record(OpListStaged, prefix, 0, err)
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats[OpListStaged]
	st.Objects += int64(len(out))
	c.stats[OpListStaged] = st
	return out, err
}
