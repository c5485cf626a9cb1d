package jsonbatches

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink"
)

// SuccessMarker is the object written last in a complete batch directory.
const SuccessMarker = "_SUCCESS"

// BatchDir returns a batch's directory, with a trailing slash.
func BatchDir(batchID ids.BatchID) string { return "batch_id=" + batchID.String() + "/" }

// PartName returns the object name of state partition p's rows.
func PartName(p ids.PartitionID) string { return "part-" + p.String() + ".jsonl" }

// Writer is the idempotent per-batch directory writer. It implements
// sink.BatchWriter and sink.PartitionedBatchWriter.
type Writer struct {
	store objstore.Store
	cols  []query.Column
}

var (
	_ sink.BatchWriter            = (*Writer)(nil)
	_ sink.PartitionedBatchWriter = (*Writer)(nil)
)

// New returns a Writer over a store rooted at the sink path.
func New(store objstore.Store, schema []query.Column) *Writer {
	return &Writer{store: store, cols: slices.Clone(schema)}
}

// WriteBatch writes all of a batch's rows as part-0, replacing whatever the
// batch's directory held.
func (w *Writer) WriteBatch(ctx context.Context, batchID ids.BatchID, rows []row.Row) error {
	return w.WriteBatchParts(ctx, batchID, [][]row.Row{rows})
}

// WriteBatchParts writes parts[p] as part-P. Every part is written, empty
// ones as empty files, so the directory shows how many partitions the batch
// had. On a store with objstore.Multipart the directory is staged and
// completed with _SUCCESS last, and a complete directory from an earlier
// attempt is kept (see the package doc); without it, whatever the
// directory held is replaced.
func (w *Writer) WriteBatchParts(ctx context.Context, batchID ids.BatchID, parts [][]row.Row) error {
	if batchID < 0 {
		return fmt.Errorf("write batch %d: batch id must not be negative", batchID)
	}
	encoded := make([][]byte, len(parts))
	for p, rows := range parts {
		data, err := encodeRows(w.cols, rows)
		if err != nil {
			return fmt.Errorf("write batch %d part %d: %w", batchID, p, err)
		}
		encoded[p] = data
	}
	if mp, ok := w.store.(objstore.Multipart); ok {
		return w.writeStaged(ctx, mp, batchID, encoded)
	}
	dir := BatchDir(batchID)
	if err := clearDir(ctx, w.store, dir); err != nil {
		return fmt.Errorf("write batch %d: %w", batchID, err)
	}
	for p := range ids.PartitionID(len(encoded)) {
		if err := w.store.Put(ctx, dir+PartName(p), encoded[p]); err != nil {
			return fmt.Errorf("write batch %d part %d: %w", batchID, p, err)
		}
	}
	if err := w.store.Put(ctx, dir+SuccessMarker, nil); err != nil {
		return fmt.Errorf("write batch %d: %w", batchID, err)
	}
	return nil
}

// clearDir deletes the success marker first, then every other object under
// dir.
func clearDir(ctx context.Context, store objstore.Store, dir string) error {
	if err := store.Delete(ctx, dir+SuccessMarker); err != nil && !errors.Is(err, objstore.ErrNotExist) {
		return fmt.Errorf("clear %s: %w", dir, err)
	}
	keys, err := store.List(ctx, dir)
	if err != nil {
		return fmt.Errorf("clear %s: %w", dir, err)
	}
	for _, k := range keys {
		if err := store.Delete(ctx, k); err != nil && !errors.Is(err, objstore.ErrNotExist) {
			return fmt.Errorf("clear %s: %w", dir, err)
		}
	}
	return nil
}

// AppendingWriter is the naive foreachBatch writer: every call adds a new
// file to the batch's directory and never looks at what is there. It exists
// to demonstrate the at-least-once pitfall: a batch that is re-run after a
// failure writes its rows a second time, and readers count them twice. Do
// not use it for output anyone reads; use Writer.
type AppendingWriter struct {
	store objstore.Store
	cols  []query.Column
}

var _ sink.BatchWriter = (*AppendingWriter)(nil)

// NewAppending returns the naive appending writer (see AppendingWriter).
func NewAppending(store objstore.Store, schema []query.Column) *AppendingWriter {
	return &AppendingWriter{store: store, cols: slices.Clone(schema)}
}

// WriteBatch appends batch_id=N/append-K.jsonl, K the number of objects
// already in the directory.
func (w *AppendingWriter) WriteBatch(ctx context.Context, batchID ids.BatchID, rows []row.Row) error {
	data, err := encodeRows(w.cols, rows)
	if err != nil {
		return fmt.Errorf("append batch %d: %w", batchID, err)
	}
	dir := BatchDir(batchID)
	keys, err := w.store.List(ctx, dir)
	if err != nil {
		return fmt.Errorf("append batch %d: %w", batchID, err)
	}
	for k := len(keys); ; k++ {
		err := w.store.PutIfAbsent(ctx, dir+"append-"+strconv.Itoa(k)+".jsonl", data)
		if err == nil {
			return nil
		}
		if !errors.Is(err, objstore.ErrExists) {
			return fmt.Errorf("append batch %d: %w", batchID, err)
		}
	}
}

// encodeRows renders rows as JSON lines.
func encodeRows(cols []query.Column, rows []row.Row) ([]byte, error) {
	var buf bytes.Buffer
	for i, r := range rows {
		if len(r) != len(cols) {
			return nil, fmt.Errorf("row %d has %d values, the output schema has %d columns", i, len(r), len(cols))
		}
		buf.WriteByte('{')
		for c, v := range r {
			if c > 0 {
				buf.WriteByte(',')
			}
			appendString(&buf, cols[c].Name)
			buf.WriteByte(':')
			if err := appendValue(&buf, v, cols[c]); err != nil {
				return nil, fmt.Errorf("row %d: %w", i, err)
			}
		}
		buf.WriteString("}\n")
	}
	return buf.Bytes(), nil
}

func appendValue(buf *bytes.Buffer, v row.Value, c query.Column) error {
	if v.IsNull() {
		buf.WriteString("null")
		return nil
	}
	if v.Kind != c.Kind {
		return fmt.Errorf("column %s holds a %s value, want %s", c.Name, v.Kind, c.Kind)
	}
	switch v.Kind {
	case row.String:
		appendString(buf, v.S)
	case row.Long:
		buf.WriteString(strconv.FormatInt(v.I, 10))
	case row.Double:
		switch {
		case math.IsNaN(v.F):
			buf.WriteString(`"NaN"`)
		case math.IsInf(v.F, 1):
			buf.WriteString(`"Infinity"`)
		case math.IsInf(v.F, -1):
			buf.WriteString(`"-Infinity"`)
		default:
			b, err := json.Marshal(v.F)
			if err != nil {
				return fmt.Errorf("column %s: %w", c.Name, err)
			}
			buf.Write(b)
		}
	case row.Bool:
		buf.WriteString(strconv.FormatBool(v.I != 0))
	case row.Timestamp:
		appendString(buf, row.FormatTimestamp(v.I))
	case row.Int:
		buf.WriteString(strconv.FormatInt(v.I, 10))
	case row.Date:
		// Spark's JSON writer: yyyy-MM-dd.
		appendString(buf, v.String())
	case row.Decimal:
		// A JSON number with the column's scale, as Spark's JSON writer
		// writes a BigDecimal (plain notation).
		buf.WriteString(row.FormatDecimal(v))
	default:
		return fmt.Errorf("column %s: kind %s has no JSON form", c.Name, v.Kind)
	}
	return nil
}

// appendString writes s as a JSON string without HTML escaping.
func appendString(buf *bytes.Buffer, s string) {
	var tmp bytes.Buffer
	enc := json.NewEncoder(&tmp)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	buf.Write(bytes.TrimSuffix(tmp.Bytes(), []byte("\n")))
}

// ReadAll reads every batch directory under a store rooted at the sink
// path: batch id -> rows, files in part order (part-P by P, then others by
// name), lines in file order. Numbers decode as json.Number so longs stay
// exact. A directory without _SUCCESS is read all the same.
func ReadAll(ctx context.Context, store objstore.Store) (map[ids.BatchID][]map[string]any, error) {
	keys, err := store.List(ctx, "batch_id=")
	if err != nil {
		return nil, fmt.Errorf("read batches: %w", err)
	}
	type file struct {
		batch ids.BatchID
		part  int // -1 for files not named part-P.jsonl
		name  string
	}
	var files []file
	for _, k := range keys {
		dir, name, ok := strings.Cut(k, "/")
		if !ok || !strings.HasSuffix(name, ".jsonl") || strings.Contains(name, "/") {
			continue
		}
		id, err := ids.ParseBatchID(strings.TrimPrefix(dir, "batch_id="))
		if err != nil {
			continue
		}
		part := -1
		if p, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, "part-"), ".jsonl")); err == nil && strings.HasPrefix(name, "part-") {
			part = p
		}
		files = append(files, file{batch: id, part: part, name: name})
	}
	slices.SortFunc(files, func(a, b file) int {
		if a.batch != b.batch {
			return cmp.Compare(a.batch, b.batch)
		}
		if (a.part < 0) != (b.part < 0) {
			if a.part < 0 {
				return 1
			}
			return -1
		}
		if a.part != b.part {
			return cmp.Compare(a.part, b.part)
		}
		return strings.Compare(a.name, b.name)
	})
	out := make(map[ids.BatchID][]map[string]any)
	for _, f := range files {
		key := BatchDir(f.batch) + f.name
		rc, err := objstore.GetReader(ctx, store, key)
		if err != nil {
			return nil, fmt.Errorf("read batches: %w", err)
		}
		if _, ok := out[f.batch]; !ok {
			out[f.batch] = []map[string]any{}
		}
		// Decoded as the file streams in.
		dec := json.NewDecoder(rc)
		dec.UseNumber()
		for dec.More() {
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				rc.Close()
				return nil, fmt.Errorf("read batches: %s: %w", key, err)
			}
			out[f.batch] = append(out[f.batch], m)
		}
		rc.Close()
	}
	return out, nil
}
