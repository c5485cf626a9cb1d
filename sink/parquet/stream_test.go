package parquet

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink"
)

// encode is the whole-buffer encoding, the oracle for the streamed one.
func encode(schema *pq.Schema, cols []query.Column, rows []row.Row) ([]byte, error) {
	var buf bytes.Buffer
	if err := encodeTo(&buf, schema, cols, rows); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// S3's smallest part but the last.
const minPart = 5 << 20

var wideCols = []query.Column{
	{Name: "id", Kind: row.Long},
	{Name: "payload", Kind: row.String},
	{Name: "x", Kind: row.Double},
}

// wideRows returns n rows whose payloads (random hex, which snappy cannot
// shrink much) make a file of about n*220 bytes.
func wideRows(n int) []row.Row {
	rng := rand.New(rand.NewPCG(1, 2))
	rows := make([]row.Row, n)
	b := make([]byte, 100)
	for i := range rows {
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		rows[i] = row.Row{row.LongValue(int64(i)), row.StringValue(hex.EncodeToString(b)), row.DoubleValue(float64(i) / 3)}
	}
	return rows
}

// putOnly hides Multipart and RangeReader: the sink writes with Put (here
// streamed through Streamer) and reads whole objects.
type putOnly struct {
	objstore.Store
	objstore.Streamer
}

// TestLargeFileIsStreamedInPartsAndReadsBackInRanges writes one file of
// several parts' size on each backend: it goes up as several parts of
// exactly the part size (and a shorter last one), its bytes are the
// whole-buffer encoding's, it reads back equal to the rows, and no single
// read of it is larger than the readers' bounds.
func TestLargeFileIsStreamedInPartsAndReadsBackInRanges(t *testing.T) {
	ctx := context.Background()
	rows := wideRows(100_000) // about 19 MiB encoded
	s0 := New(objstore.NewMem(), wideCols, Options{})
	var want []byte
	var err error
	peak := peakHeap(func() { want, err = encode(s0.schema, wideCols, rows) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("whole-buffer encoding of the %d-byte file: peak heap %d MiB above its start", len(want), peak>>20)
	wantParts := (len(want) + minPart - 1) / minPart
	if wantParts < 4 {
		t.Fatalf("the file is %d bytes: the test wants one of several parts", len(want))
	}
	backends := map[string]func(t *testing.T) objstore.Store{
		"fs":  func(t *testing.T) objstore.Store { return newStore(t) },
		"mem": func(t *testing.T) objstore.Store { return objstore.NewMem() },
		"fs-put": func(t *testing.T) objstore.Store {
			fs := newStore(t)
			return putOnly{fs, fs}
		},
	}
	if testing.Short() {
		// The fast loop writes the file on the filesystem store only.
		delete(backends, "mem")
		delete(backends, "fs-put")
	}
	if s3test.Available(t) {
		srv := s3test.Start(t)
		var n atomic.Int64
		backends["s3"] = func(t *testing.T) objstore.Store {
			return srv.Store(t, "sink", fmt.Sprintf("large-%d/", n.Add(1)))
		}
	}
	for name, newStore := range backends {
		t.Run(name, func(t *testing.T) {
			var inner objstore.Store
			var counting *objstore.Counting
			var st objstore.Store
			var s *Sink
			var spool string
			var descs []string
			var err error
			b := sink.Batch{QueryID: queryA, ID: 0}
			// The peak is the process's heap, other goroutines' garbage
			// included: on a loaded machine the collector lags, so the
			// file is written again (on a fresh store) before a peak
			// above the bound fails the test; holding the file exceeds
			// it every time.
			for attempt := 1; ; attempt++ {
				inner = newStore(t)
				counting = objstore.NewCounting(inner)
				st = counting
				if _, ok := inner.(putOnly); ok {
					st = putOnly{counting, counting}
				}
				spool = t.TempDir()
				s = New(st, wideCols, Options{SpoolDir: spool})
				defer s.Close()
				s.partSize = minPart
				if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
					t.Fatal(err)
				}
				peak := peakHeap(func() { descs, err = s.WritePartition(ctx, b, 0, rows) })
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: file %d bytes, WritePartition's peak heap %d MiB above its start (attempt %d)", name, len(want), peak>>20, attempt)
				// The memory store keeps the parts it is sent; the others
				// must not hold the file (a part, spooled pages, the SDK's
				// buffers: 12-14 MiB measured).
				if (name != "fs" && name != "s3") || peak < uint64(len(want)) {
					break
				}
				if attempt == 3 {
					t.Fatalf("writing the %d-byte file took %d MiB of heap in each of 3 attempts: it holds the whole file", len(want), peak>>20)
				}
			}
			if left, _ := os.ReadDir(spool); len(left) > 0 {
				t.Fatalf("%d temporary page files left in the spool directory", len(left))
			}
			if err := s.Commit(ctx, b, descs); err != nil {
				t.Fatal(err)
			}
			stats := counting.Stats()
			key := FileName(queryA, 0, 0)
			if _, multipart := inner.(objstore.Multipart); multipart {
				if got := stats[objstore.OpUploadPart].Requests; got != int64(wantParts) {
					t.Fatalf("%d parts uploaded, want %d (a %d-byte file in %d-byte parts)", got, wantParts, len(want), minPart)
				}
				u, _, err := parseDescriptor(descs[0])
				if err != nil {
					t.Fatal(err)
				}
				for i, p := range u.Parts {
					if i < len(u.Parts)-1 && p.Size != minPart {
						t.Fatalf("part %d has %d bytes, want %d", p.Number, p.Size, minPart)
					}
				}
			}
			got, err := inner.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("the streamed file (%d bytes) differs from the whole-buffer encoding (%d bytes)", len(got), len(want))
			}

			counting.Reset()
			counting.StartTrace()
			cols, read, err := ReadCommitted(ctx, st)
			counting.StopTrace()
			if err != nil {
				t.Fatal(err)
			}
			if !equalCols(cols, wideCols) || !sameRowsInOrder(read, rows) {
				t.Fatalf("read back %d rows (columns %v), want the %d written", len(read), cols, len(rows))
			}
			largest, gets, total := 0, 0, 0
			for _, e := range counting.Trace() {
				if e.Op == objstore.OpGet && e.Key == key {
					largest, gets, total = max(largest, e.Bytes), gets+1, total+e.Bytes
				}
			}
			t.Logf("%s: read the file in %d gets, %d bytes in all, the largest %d bytes", name, gets, total, largest)
			if _, ranged := inner.(objstore.RangeReader); ranged {
				if largest > readTail || gets < 2 {
					t.Fatalf("read the %d-byte file in %d gets, the largest %d bytes: want ranged reads of at most %d", len(want), gets, largest, readTail)
				}
			}
		})
	}
}

// recordingReaderAt records the largest single read and the bytes read.
type recordingReaderAt struct {
	r       io.ReaderAt
	mu      sync.Mutex
	largest int
	total   int64
	reads   int
}

func (r *recordingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	r.mu.Lock()
	r.largest = max(r.largest, len(p))
	r.total += int64(len(p))
	r.reads++
	r.mu.Unlock()
	return r.r.ReadAt(p, off)
}

// TestReadingALargeFileHoldsABoundedBuffer reads a file of about 19 MiB
// through a ReaderAt that records every read: no read is larger than the
// per-column buffer, and the file is read about once.
func TestReadingALargeFileHoldsABoundedBuffer(t *testing.T) {
	rows := wideRows(100_000)
	s := New(objstore.NewMem(), wideCols, Options{})
	data, err := encode(s.schema, wideCols, rows)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingReaderAt{r: bytes.NewReader(data)}
	cols, got, err := ReadFileAt(rec, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if !equalCols(cols, wideCols) || !sameRowsInOrder(got, rows) {
		t.Fatalf("read %d rows, want %d", len(got), len(rows))
	}
	t.Logf("a %d-byte file read in %d reads, %d bytes in all, the largest %d bytes", len(data), rec.reads, rec.total, rec.largest)
	if rec.largest > readBuffer {
		t.Fatalf("largest single read %d bytes, want at most %d", rec.largest, readBuffer)
	}
	if rec.total > int64(len(data))+readBuffer {
		t.Fatalf("read %d bytes of a %d-byte file: want about one pass", rec.total, len(data))
	}
}

func equalCols(a, b []query.Column) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sameRowsInOrder(a, b []row.Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if rowKey(a[i]) != rowKey(b[i]) {
			return false
		}
	}
	return true
}

// peakHeap runs f and returns the largest Go heap (live and not yet
// collected objects, sampled) above the heap before it, with the
// collector made eager and pools emptied first so that the figure is
// about what f holds.
func peakHeap(f func()) uint64 {
	runtime.GC()
	runtime.GC() // empties sync.Pools (their victim caches too)
	old := debug.SetGCPercent(5)
	defer debug.SetGCPercent(old)
	read := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	base := read()
	var peak atomic.Uint64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	f()
	close(done)
	<-stopped
	if v := read(); v > peak.Load() {
		peak.Store(v)
	}
	if peak.Load() < base {
		return 0
	}
	return peak.Load() - base
}

// TestPartWriterSendsFullPartsAndTheRest writes files of several sizes in
// writes of awkward sizes: every part but the last is exactly the part
// size, a size that is a multiple of it has no empty last part, and the
// completed object is the bytes written.
func TestPartWriterSendsFullPartsAndTheRest(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	for _, size := range []int{1, 9, 10, 11, 30, 35} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i * 13)
		}
		key := fmt.Sprintf("f-%d", size)
		id, err := st.CreateMultipart(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		parts, err := uploadStreamed(ctx, st, key, id, 10, func(w io.Writer) error {
			for rest := data; len(rest) > 0; {
				n := min(len(rest), 7)
				if _, err := w.Write(rest[:n]); err != nil {
					return err
				}
				rest = rest[n:]
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := (size + 9) / 10; len(parts) != want {
			t.Fatalf("%d bytes in 10-byte parts: %d parts, want %d", size, len(parts), want)
		}
		for i, p := range parts {
			if p.Number != i+1 || (i < len(parts)-1 && p.Size != 10) || p.Size == 0 {
				t.Fatalf("%d bytes: part %d is %+v", size, i, p)
			}
		}
		if err := st.CompleteMultipart(ctx, key, id, parts); err != nil {
			t.Fatal(err)
		}
		if got, _ := st.Get(ctx, key); !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: completed object differs", size)
		}
	}
}

// TestFailedPartFailsTheWriteAndTheNextCommitAbortsTheUpload makes the
// second part of a streamed file fail: WritePartition reports it naming
// the part, nothing is visible, and the next batch's commit aborts the
// upload it left.
func TestFailedPartFailsTheWriteAndTheNextCommitAbortsTheUpload(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	st := objstore.NewFaulty(mem, objstore.FaultRule{Name: "part 2", Op: objstore.OpUploadPart, Nth: 2})
	s := New(st, wideCols, Options{})
	defer s.Close()
	s.partSize = 1 << 20
	if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
		t.Fatal(err)
	}
	rows := wideRows(20_000) // about 4 MiB: 4 parts
	_, err := s.WritePartition(ctx, sink.Batch{QueryID: queryA, ID: 0}, 0, rows)
	if err == nil || !errors.Is(err, objstore.ErrInjected) || !strings.Contains(err.Error(), "upload part 2") {
		t.Fatalf("WritePartition with a failing part: %v", err)
	}
	if mem.PendingUploads() != 1 {
		t.Fatalf("%d pending uploads after the failed write, want 1", mem.PendingUploads())
	}
	st.ClearRules()
	b := sink.Batch{QueryID: queryA, ID: 0}
	descs, err := s.WritePartition(ctx, b, 0, rows[:10])
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, b, descs); err != nil {
		t.Fatal(err)
	}
	if mem.PendingUploads() != 0 {
		t.Fatalf("%d pending uploads after the commit, want 0 (the failed attempt's aborted)", mem.PendingUploads())
	}
	_, got, err := ReadCommitted(ctx, st)
	if err != nil || !sameRowsInOrder(got, rows[:10]) {
		t.Fatalf("read %d rows (%v), want the 10 committed", len(got), err)
	}
}
