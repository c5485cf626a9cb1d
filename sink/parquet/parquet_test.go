package parquet

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink"
)

const (
	queryA = "3f2b8c1e-0000-4000-8000-00000000000a"
	queryB = "9d41a7c2-0000-4000-8000-00000000000b"
)

func newStore(t *testing.T) *objstore.FS {
	t.Helper()
	st, err := objstore.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// allKinds is a schema with every kind.
var allKinds = []query.Column{
	{Name: "s", Kind: row.String},
	{Name: "l", Kind: row.Long},
	{Name: "d", Kind: row.Double},
	{Name: "b", Kind: row.Bool},
	{Name: "ts", Kind: row.Timestamp},
}

func allKindsRows() []row.Row {
	return []row.Row{
		{row.StringValue("course-1"), row.LongValue(42), row.DoubleValue(1.5), row.BoolValue(true), row.TimestampValue(1_700_000_000_123_456)},
		{row.Value{}, row.Value{}, row.Value{}, row.Value{}, row.Value{}},
		{row.StringValue(""), row.LongValue(math.MinInt64), row.DoubleValue(-0.25), row.BoolValue(false), row.TimestampValue(-1)},
		{row.StringValue("ünïcode ✓"), row.LongValue(math.MaxInt64), row.DoubleValue(math.Inf(1)), row.Value{}, row.TimestampValue(0)},
		{row.StringValue("x"), row.Value{}, row.DoubleValue(3), row.BoolValue(true), row.TimestampValue(1)},
	}
}

// tileSchema is the course-activity tile's output.
var tileSchema = []query.Column{
	{Name: "window_start", Kind: row.Timestamp},
	{Name: "window_end", Kind: row.Timestamp},
	{Name: "course_id", Kind: row.String},
	{Name: "event_count", Kind: row.Long},
}

func ts(s string) row.Value {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return row.TimeValue(t)
}

func tileRow(start, course string, n int64) row.Row {
	st := ts(start)
	return row.Row{st, row.TimestampValue(st.I + 5*60*1e6), row.StringValue(course), row.LongValue(n)}
}

// visible completes staged files as Commit would, without a log entry, and
// returns their keys: for tests of the file bytes.
func visible(t *testing.T, st objstore.Store, descs []string) []string {
	t.Helper()
	var keys []string
	for _, d := range descs {
		u, staged, err := parseDescriptor(d)
		if err != nil {
			t.Fatal(err)
		}
		if staged {
			if err := st.(objstore.Multipart).CompleteMultipart(context.Background(), u.Key, u.UploadID, u.Parts); err != nil {
				t.Fatal(err)
			}
		}
		keys = append(keys, u.Key)
	}
	return keys
}

func TestWrittenFileReadsBackEveryKindAndNull(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	s := New(st, allKinds, Options{})
	in := allKindsRows()
	descs, err := s.WritePartition(ctx, sink.Batch{QueryID: queryA, ID: 3}, 1, in)
	if err != nil {
		t.Fatal(err)
	}
	if files, err := ListDirectory(ctx, st); err != nil || len(files) != 0 {
		t.Fatalf("ListDirectory before commit = %v, %v; want nothing visible", files, err)
	}
	keys := visible(t, st, descs)
	want := []string{"part-00003-0001-" + queryA + ".snappy.parquet"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys = %v, want %v", keys, want)
	}
	data, err := st.Get(ctx, keys[0])
	if err != nil {
		t.Fatal(err)
	}
	cols, got, err := ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cols, allKinds) {
		t.Errorf("columns = %v, want %v (same order as the output schema)", cols, allKinds)
	}
	if !reflect.DeepEqual(got, in) {
		t.Errorf("rows read back differ:\n got %v\nwant %v", got, in)
	}
}

func TestNaNSurvivesRoundTrip(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	cols := []query.Column{{Name: "d", Kind: row.Double}}
	descs, err := New(st, cols, Options{}).WritePartition(ctx, sink.Batch{QueryID: queryA}, 0, []row.Row{{row.DoubleValue(math.NaN())}})
	if err != nil {
		t.Fatal(err)
	}
	keys := visible(t, st, descs)
	data, _ := st.Get(ctx, keys[0])
	_, got, err := ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0][0].Kind != row.Double || !math.IsNaN(got[0][0].F) {
		t.Fatalf("got %v, want one NaN", got)
	}
}

func TestTimestampColumnIsMicrosecondUTC(t *testing.T) {
	s := New(newStore(t), allKinds, Options{})
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	leaf := s.schema.Fields()[4]
	if got := leaf.Type().String(); got != "TIMESTAMP(isAdjustedToUTC=true,unit=MICROS)" {
		t.Errorf("timestamp column type = %s", got)
	}
	for _, f := range s.schema.Fields() {
		if !f.Optional() {
			t.Errorf("column %s is not optional", f.Name())
		}
	}
}

func TestRewriteOfSameBatchPartitionIsByteIdentical(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	b := sink.Batch{QueryID: queryA, ID: 7}
	rows := allKindsRows()
	descs1, err := New(st, allKinds, Options{}).WritePartition(ctx, b, 2, rows)
	if err != nil {
		t.Fatal(err)
	}
	keys1 := visible(t, st, descs1)
	first, _ := st.Get(ctx, keys1[0])
	// A fresh sink (another task attempt) writes the same rows again.
	descs2, err := New(st, allKinds, Options{}).WritePartition(ctx, b, 2, rows)
	if err != nil {
		t.Fatal(err)
	}
	keys2 := visible(t, st, descs2)
	second, _ := st.Get(ctx, keys2[0])
	if !reflect.DeepEqual(keys1, keys2) {
		t.Fatalf("keys differ: %v vs %v", keys1, keys2)
	}
	if !bytes.Equal(first, second) {
		t.Fatal("rewrite produced different bytes")
	}
	if bytes.Contains(first, []byte("parquet-go")) {
		t.Error("footer names the library build; created_by should be constant")
	}
}

// TestRewriteInAnotherProcessIsByteIdentical runs this test binary as a
// child that writes the same partition, so per-process randomness (map
// order, hash seeds) would show up as different bytes.
func TestRewriteInAnotherProcessIsByteIdentical(t *testing.T) {
	if dir := os.Getenv("SLUICE_PARQUET_CHILD_DIR"); dir != "" {
		st, err := objstore.NewFS(dir)
		if err != nil {
			t.Fatal(err)
		}
		descs, err := New(st, allKinds, Options{}).WritePartition(context.Background(), sink.Batch{QueryID: queryA, ID: 7}, 2, allKindsRows())
		if err != nil {
			t.Fatal(err)
		}
		visible(t, st, descs)
		return
	}
	ctx := context.Background()
	st := newStore(t)
	descs, err := New(st, allKinds, Options{}).WritePartition(ctx, sink.Batch{QueryID: queryA, ID: 7}, 2, allKindsRows())
	if err != nil {
		t.Fatal(err)
	}
	keys := visible(t, st, descs)
	here, _ := st.Get(ctx, keys[0])
	if testing.Short() {
		t.Skip("-short: rewrites the file in a child process")
	}
	childDir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRewriteInAnotherProcessIsByteIdentical$")
	cmd.Env = append(os.Environ(), "SLUICE_PARQUET_CHILD_DIR="+childDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	there, err := os.ReadFile(filepath.Join(childDir, keys[0]))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(here, there) {
		t.Fatal("the same partition written by another process has different bytes")
	}
}

func TestZeroRowsWriteNoFile(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	keys, err := New(st, tileSchema, Options{PartitionBy: "window_date"}).WritePartition(ctx, sink.Batch{QueryID: queryA}, 0, nil)
	if err != nil || len(keys) != 0 {
		t.Fatalf("keys %v err %v, want none", keys, err)
	}
	if files, _ := ListDirectory(ctx, st); len(files) != 0 {
		t.Fatalf("files %v, want none", files)
	}
}

func TestWindowDatePartitionsByUTCDateOfWindowStart(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	s := New(st, tileSchema, Options{PartitionBy: "window_date"})
	rows := []row.Row{
		tileRow("2024-03-01T23:55:00Z", "c1", 2), // ends at midnight: still the 1st
		tileRow("2024-03-02T00:00:00Z", "c1", 1),
		tileRow("2024-03-01T10:00:00Z", "c2", 5),
		tileRow("2024-03-02T00:05:00Z", "c3", 1),
	}
	descs, err := s.WritePartition(ctx, sink.Batch{QueryID: queryA, ID: 12}, 3, rows)
	if err != nil {
		t.Fatal(err)
	}
	keys := visible(t, st, descs)
	name := "part-00012-0003-" + queryA + ".snappy.parquet"
	want := []string{"window_date=2024-03-01/" + name, "window_date=2024-03-02/" + name}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys = %v, want %v", keys, want)
	}
	wantRows := map[string][]row.Row{
		want[0]: {rows[0], rows[2]},
		want[1]: {rows[1], rows[3]},
	}
	for key, wr := range wantRows {
		data, err := st.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		_, got, err := ReadFile(data)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, wr) {
			t.Errorf("%s holds %v, want %v", key, got, wr)
		}
	}
}

func TestPartitionByNeedsWindowStartAndRefusesOthers(t *testing.T) {
	noWindow := []query.Column{{Name: "course_id", Kind: row.String}, {Name: "n", Kind: row.Long}}
	if err := New(newStore(t), noWindow, Options{PartitionBy: "window_date"}).Err(); err == nil || !strings.Contains(err.Error(), "window_start") {
		t.Errorf("err = %v, want one naming window_start", err)
	}
	if err := New(newStore(t), tileSchema, Options{PartitionBy: "course_id"}).Err(); err == nil || !strings.Contains(err.Error(), "course_id") {
		t.Errorf("err = %v, want a refusal naming course_id", err)
	}
	if _, err := New(newStore(t), noWindow, Options{PartitionBy: "course_id"}).WritePartition(context.Background(), sink.Batch{QueryID: queryA}, 0, []row.Row{{row.StringValue("c"), row.LongValue(1)}}); err == nil {
		t.Error("WritePartition on a badly configured sink succeeded")
	}
}

func TestRowOfWrongKindIsRefused(t *testing.T) {
	_, err := New(newStore(t), tileSchema, Options{}).WritePartition(context.Background(), sink.Batch{QueryID: queryA}, 0,
		[]row.Row{{row.LongValue(1), row.Value{}, row.StringValue("c"), row.LongValue(1)}})
	if err == nil || !strings.Contains(err.Error(), "window_start") {
		t.Fatalf("err = %v, want one naming window_start", err)
	}
}

func commitBatch(t *testing.T, s *Sink, q string, id ids.BatchID, rows []row.Row) []string {
	t.Helper()
	ctx := context.Background()
	b := sink.Batch{QueryID: q, ID: id}
	keys, err := s.WritePartition(ctx, b, 0, rows)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, b, keys); err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestCommitTwiceBySameQueryIsSuccessAndCommittedReportsIt(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	s := New(st, tileSchema, Options{})
	if err := s.Prepare(ctx, queryA, ""); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Committed(ctx, 0); ok || err != nil {
		t.Fatalf("Committed before commit = %v, %v", ok, err)
	}
	keys := commitBatch(t, s, queryA, 0, []row.Row{tileRow("2024-03-01T10:00:00Z", "c1", 1)})
	// The batch is re-run after a crash before commits/0: the same files
	// and the same entry.
	if err := s.Commit(ctx, sink.Batch{QueryID: queryA, ID: 0}, keys); err != nil {
		t.Fatalf("second commit: %v", err)
	}
	if ok, err := s.Committed(ctx, 0); !ok || err != nil {
		t.Fatalf("Committed after commit = %v, %v", ok, err)
	}
	if ok, _ := s.Committed(ctx, 1); ok {
		t.Fatal("batch 1 reported committed")
	}
	data, err := st.Get(ctx, "_sink_log/0")
	if err != nil {
		t.Fatal(err)
	}
	u, _, _ := parseDescriptor(keys[0])
	want := "{\n  \"version\": 2,\n  \"queryId\": \"" + queryA + "\",\n  \"batchId\": 0,\n  \"files\": [\n    \"" + u.Key + "\"\n  ],\n  \"uploads\": [\n    {\n      \"key\": \"" + u.Key + "\",\n      \"uploadId\": \"" + u.UploadID + "\",\n      \"parts\": [\n        {\n          \"n\": 1,\n          \"etag\": " + strconv.Quote(u.Parts[0].ETag) + ",\n          \"size\": " + strconv.FormatInt(u.Parts[0].Size, 10) + "\n        }\n      ]\n    }\n  ]\n}\n"
	if string(data) != want {
		t.Errorf("_sink_log/0 =\n%s\nwant\n%s", data, want)
	}
	// A new sink on the same path (driver restarted) sees it too.
	s2 := New(st, tileSchema, Options{})
	if err := s2.Prepare(ctx, queryA, ""); err != nil {
		t.Fatal(err)
	}
	if ok, err := s2.Committed(ctx, 0); !ok || err != nil {
		t.Fatalf("Committed on a restarted sink = %v, %v", ok, err)
	}
}

func TestCommitListsFilesSorted(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	s := New(st, tileSchema, Options{})
	if err := s.Commit(ctx, sink.Batch{QueryID: queryA, ID: 4}, []string{"b.parquet", "a.parquet", "b.parquet"}); err != nil {
		t.Fatal(err)
	}
	entries, err := LogEntries(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || !reflect.DeepEqual(entries[0].Files, []string{"a.parquet", "b.parquet"}) {
		t.Fatalf("entries = %+v", entries)
	}
}

func TestEmptyBatchCommitsAnEntryWithNoFiles(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	s := New(st, tileSchema, Options{})
	if err := s.Prepare(ctx, queryA, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, sink.Batch{QueryID: queryA, ID: 0}, nil); err != nil {
		t.Fatal(err)
	}
	data, _ := st.Get(ctx, "_sink_log/0")
	if !strings.Contains(string(data), `"files": []`) {
		t.Errorf("entry = %s, want an empty files list", data)
	}
	if ok, _ := s.Committed(ctx, 0); !ok {
		t.Error("empty batch not committed")
	}
}

func TestCommittedNeedsPrepare(t *testing.T) {
	_, err := New(newStore(t), tileSchema, Options{}).Committed(context.Background(), 0)
	if err == nil || !strings.Contains(err.Error(), "Prepare") {
		t.Fatalf("err = %v, want one saying to call Prepare", err)
	}
}

func TestCommitOfAnotherQuerysPrimaryEntryIsRefused(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	// Both sinks resolve while the log is empty; A commits first.
	a := New(st, tileSchema, Options{})
	b := New(st, tileSchema, Options{})
	if err := a.Prepare(ctx, queryA, ""); err != nil {
		t.Fatal(err)
	}
	if err := b.Prepare(ctx, queryB, ""); err != nil {
		t.Fatal(err)
	}
	commitBatch(t, a, queryA, 0, []row.Row{tileRow("2024-03-01T10:00:00Z", "c1", 1)})
	err := b.Commit(ctx, sink.Batch{QueryID: queryB, ID: 0}, []string{"x.parquet"})
	if !errors.Is(err, ErrForeignSinkLog) {
		t.Fatalf("err = %v, want ErrForeignSinkLog", err)
	}
	if !strings.Contains(err.Error(), queryA) || !strings.Contains(err.Error(), queryB) {
		t.Errorf("error %q should name both query ids", err)
	}
}

// recordingHandler keeps the records a logger emits.
type recordingHandler struct{ records *[]slog.Record }

func (h recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordingHandler) Handle(_ context.Context, r slog.Record) error {
	*h.records = append(*h.records, r)
	return nil
}
func (h recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordingHandler) WithGroup(string) slog.Handler      { return h }

// runQueryA writes and commits two batches of query A, with the second
// batch re-run once, and returns the rows it committed.
func runQueryA(t *testing.T, st objstore.Store) []row.Row {
	t.Helper()
	ctx := context.Background()
	s := New(st, tileSchema, Options{PartitionBy: "window_date"})
	if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
		t.Fatal(err)
	}
	b0 := []row.Row{tileRow("2024-03-01T10:00:00Z", "c1", 2), tileRow("2024-03-01T10:00:00Z", "c2", 1)}
	b1 := []row.Row{tileRow("2024-03-01T10:05:00Z", "c1", 4)}
	commitBatch(t, s, queryA, 0, b0)
	commitBatch(t, s, queryA, 1, b1)
	commitBatch(t, s, queryA, 1, b1) // re-run of batch 1
	return append(append([]row.Row{}, b0...), b1...)
}

func TestForeignSinkLogWarnsInLabAndWritesWindowsAgain(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	first := runQueryA(t, st)

	// The checkpoint is deleted: the query restarts with a new id and
	// replays from the source.
	var records []slog.Record
	s := New(st, tileSchema, Options{PartitionBy: "window_date", Logger: slog.New(recordingHandler{&records})})
	other, err := s.CheckOwner(ctx, queryB)
	if err != nil || other != queryA {
		t.Fatalf("CheckOwner = %q, %v; want %q", other, err, queryA)
	}
	if err := s.Prepare(ctx, queryB, query.Lab); err != nil {
		t.Fatalf("lab Prepare: %v", err)
	}
	if len(records) != 1 || records[0].Level != slog.LevelWarn ||
		!strings.Contains(records[0].Message, queryA) || !strings.Contains(records[0].Message, "write its windows again") {
		t.Fatalf("log records = %v, want one warning naming %s", records, queryA)
	}
	if ok, err := s.Committed(ctx, 0); ok || err != nil {
		t.Fatalf("batch 0 of the new query reported committed (%v, %v): the replay would be skipped", ok, err)
	}
	replay := []row.Row{tileRow("2024-03-01T10:00:00Z", "c1", 2), tileRow("2024-03-01T10:00:00Z", "c2", 1)}
	keys := commitBatch(t, s, queryB, 0, replay)
	commitBatch(t, s, queryB, 0, replay) // and a re-run of it
	if ok, err := s.Committed(ctx, 0); !ok || err != nil {
		t.Fatalf("Committed(0) for the new query = %v, %v", ok, err)
	}
	if _, err := st.Get(ctx, "_sink_log/"+queryB+"/0"); err != nil {
		t.Fatalf("new query's entry: %v", err)
	}
	for _, k := range keys {
		if !strings.Contains(k, queryB) {
			t.Errorf("replayed file %s does not carry the new query id", k)
		}
	}

	// The log records both runs; the windows appear twice, once per run,
	// never twice within a run.
	_, got, err := ReadCommitted(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]row.Row{}, first...), replay...)
	if !sameRows(got, want) {
		t.Fatalf("ReadCommitted = %v, want %v", got, want)
	}
	entries, _ := LogEntries(ctx, st)
	seen := map[string]bool{}
	for _, e := range entries {
		for _, f := range e.Files {
			if seen[f] {
				t.Errorf("file %s listed twice in the log", f)
			}
			seen[f] = true
		}
	}

	// Restarting the new query: it owns its log now, no warning.
	records = nil
	s2 := New(st, tileSchema, Options{PartitionBy: "window_date", Logger: slog.New(recordingHandler{&records})})
	if err := s2.Prepare(ctx, queryB, query.Production); err != nil {
		t.Fatalf("restart of the new query: %v", err)
	}
	if len(records) != 0 {
		t.Errorf("restart warned: %v", records)
	}
	if ok, _ := s2.Committed(ctx, 0); !ok {
		t.Error("restarted sink does not see batch 0")
	}
	// And the old query, if its checkpoint came back, still finds its own.
	s3 := New(st, tileSchema, Options{})
	if err := s3.Prepare(ctx, queryA, query.Production); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s3.Committed(ctx, 1); !ok {
		t.Error("old query's batch 1 not committed")
	}
}

func TestForeignSinkLogIsRefusedInProduction(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	runQueryA(t, st)
	s := New(st, tileSchema, Options{Path: "s3://warehouse/tile", Environment: query.Production})
	err := s.Prepare(ctx, queryB, "")
	if !errors.Is(err, ErrForeignSinkLog) {
		t.Fatalf("err = %v, want ErrForeignSinkLog", err)
	}
	for _, part := range []string{queryA, queryB, "s3://warehouse/tile"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not name %s", err, part)
		}
	}
	// A driver that skipped Prepare is stopped at Commit.
	s = New(st, tileSchema, Options{Environment: query.Production})
	err = s.Commit(ctx, sink.Batch{QueryID: queryB, ID: 0}, nil)
	if !errors.Is(err, ErrForeignSinkLog) {
		t.Fatalf("Commit err = %v, want ErrForeignSinkLog", err)
	}
	if keys, _ := st.List(ctx, "_sink_log/"+queryB); len(keys) != 0 {
		t.Fatalf("production query wrote %v", keys)
	}
}

func TestCheckOwnerOnEmptyAndOwnLog(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	if other, err := CheckOwner(ctx, st, queryA); other != "" || err != nil {
		t.Fatalf("empty log: %q %v", other, err)
	}
	runQueryA(t, st)
	if other, err := CheckOwner(ctx, st, queryA); other != "" || err != nil {
		t.Fatalf("own log: %q %v", other, err)
	}
}

func TestReadCommittedFollowsTheLog(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	committed := runQueryA(t, st)
	// A batch whose files were written but whose log entry never was (the
	// driver died before Commit).
	s := New(st, tileSchema, Options{PartitionBy: "window_date"})
	orphan, err := s.WritePartition(ctx, sink.Batch{QueryID: queryA, ID: 2}, 0, []row.Row{tileRow("2024-03-01T10:10:00Z", "c9", 9)})
	if err != nil {
		t.Fatal(err)
	}
	_, got, err := ReadCommitted(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if !sameRows(got, committed) {
		t.Fatalf("ReadCommitted = %v, want %v", got, committed)
	}
	files, err := ListDirectory(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	// The uncommitted batch's file is staged: a directory reader does not
	// see it.
	u, staged, _ := parseDescriptor(orphan[0])
	for _, f := range files {
		if f == u.Key || strings.HasPrefix(f, "_sink") {
			t.Errorf("ListDirectory returned %s", f)
		}
	}
	if !staged || len(files) != 2 {
		t.Fatalf("ListDirectory = %v (staged %v), want the 2 committed files only", files, staged)
	}
	_, all, err := ReadAllFiles(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if !sameRows(all, committed) {
		t.Fatalf("ReadAllFiles read %v, want %v", all, committed)
	}
}

// sameRows compares two row lists as multisets, by their printed form.
func sameRows(a, b []row.Row) bool {
	count := map[string]int{}
	for _, r := range a {
		count[rowKey(r)]++
	}
	for _, r := range b {
		count[rowKey(r)]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return len(a) == len(b)
}

func rowKey(r row.Row) string {
	var sb strings.Builder
	for _, v := range r {
		sb.WriteString(v.Kind.String())
		sb.WriteByte(':')
		sb.WriteString(v.String())
		sb.WriteByte('|')
	}
	return sb.String()
}

func TestUnpreparedLabCommitBesideForeignLogGoesToItsOwnLogWithAWarning(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	runQueryA(t, st)
	var records []slog.Record
	s := New(st, tileSchema, Options{Logger: slog.New(recordingHandler{&records})})
	if err := s.Commit(ctx, sink.Batch{QueryID: queryB, ID: 0}, []string{"f.parquet"}); err != nil {
		t.Fatal(err)
	}
	if len(records) != 1 || records[0].Level != slog.LevelWarn {
		t.Fatalf("records = %v, want one warning", records)
	}
	if _, err := st.Get(ctx, "_sink_log/"+queryB+"/0"); err != nil {
		t.Fatal(err)
	}
	// The primary entry is still query A's.
	entries, _ := LogEntries(ctx, st)
	if entries[0].QueryID != queryA || entries[1].QueryID != queryB || entries[1].BatchID != 0 {
		t.Fatalf("entries = %+v", entries)
	}
	if err := s.Commit(ctx, sink.Batch{QueryID: queryB, ID: 1}, nil); err != nil {
		t.Fatal(err)
	}
	if len(records) != 1 {
		t.Errorf("warned again on the next commit: %v", records)
	}
}

func TestPreparedLabQueryWarnsOnce(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	runQueryA(t, st)
	var records []slog.Record
	s := New(st, tileSchema, Options{Logger: slog.New(recordingHandler{&records})})
	if err := s.Prepare(ctx, queryB, query.Lab); err != nil {
		t.Fatal(err)
	}
	for id := ids.BatchID(0); id < 3; id++ {
		if err := s.Commit(ctx, sink.Batch{QueryID: queryB, ID: id}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(records) != 1 {
		t.Fatalf("records = %v, want exactly one warning", records)
	}
}

func TestBadQueryIDIsRefused(t *testing.T) {
	s := New(newStore(t), tileSchema, Options{})
	for _, id := range []string{"", "../x", "a/b", "a b"} {
		if _, err := s.WritePartition(context.Background(), sink.Batch{QueryID: id}, 0, []row.Row{tileRow("2024-03-01T10:00:00Z", "c", 1)}); err == nil {
			t.Errorf("query id %q accepted", id)
		}
	}
}
