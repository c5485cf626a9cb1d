package jsonbatches

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

var tileSchema = []query.Column{
	{Name: "window_start", Kind: row.Timestamp},
	{Name: "window_end", Kind: row.Timestamp},
	{Name: "course_id", Kind: row.String},
	{Name: "event_count", Kind: row.Long},
}

func newStore(t *testing.T) *objstore.FS {
	t.Helper()
	st, err := objstore.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func tileRow(start string, course string, n int64) row.Row {
	t, err := time.Parse(time.RFC3339, start)
	if err != nil {
		panic(err)
	}
	return row.Row{row.TimeValue(t), row.TimeValue(t.Add(5 * time.Minute)), row.StringValue(course), row.LongValue(n)}
}

func TestWriteBatchTwiceLeavesOneCopy(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	w := New(st, tileSchema)
	rows := []row.Row{tileRow("2024-03-01T10:00:00Z", "c1", 2), tileRow("2024-03-01T10:00:00Z", "c2", 1)}
	for i := 0; i < 2; i++ { // the batch is re-run after a failure
		if err := w.WriteBatch(ctx, 5, rows); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadAll(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[5]) != 2 {
		t.Fatalf("ReadAll = %v, want batch 5 with 2 rows", got)
	}
	keys, _ := st.List(ctx, "")
	want := []string{"batch_id=5/_SUCCESS", "batch_id=5/part-0.jsonl"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("objects = %v, want %v", keys, want)
	}
}

func TestRetryKeepsACompleteDirectoryAndReplacesAnIncompleteOne(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	w := New(st, tileSchema)
	a, b := tileRow("2024-03-01T10:00:00Z", "c1", 2), tileRow("2024-03-01T10:00:00Z", "c2", 1)
	if err := w.WriteBatchParts(ctx, 0, [][]row.Row{{a}, {b}, {}}); err != nil {
		t.Fatal(err)
	}
	// A re-run that read other rows: the complete directory, which a
	// reader may have consumed, stays as it was.
	if err := w.WriteBatch(ctx, 0, []row.Row{a}); err != nil {
		t.Fatal(err)
	}
	keys, _ := st.List(ctx, "batch_id=0/")
	want := []string{"batch_id=0/_SUCCESS", "batch_id=0/part-0.jsonl", "batch_id=0/part-1.jsonl", "batch_id=0/part-2.jsonl"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("objects = %v, want %v", keys, want)
	}
	// A directory without _SUCCESS (an older version's interrupted
	// rewrite, a stray file) is replaced whole.
	if err := st.Put(ctx, "batch_id=1/stray.jsonl", []byte(`{"x":1}`+"\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBatch(ctx, 1, []row.Row{a, b}); err != nil {
		t.Fatal(err)
	}
	keys, _ = st.List(ctx, "batch_id=1/")
	want = []string{"batch_id=1/_SUCCESS", "batch_id=1/part-0.jsonl"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("objects = %v, want %v", keys, want)
	}
}

func TestOtherBatchesAreUntouched(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	w := New(st, tileSchema)
	for _, id := range []ids.BatchID{1, 10, 11} {
		if err := w.WriteBatch(ctx, id, []row.Row{tileRow("2024-03-01T10:00:00Z", "c1", int64(id))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteBatch(ctx, 1, []row.Row{tileRow("2024-03-01T10:00:00Z", "c1", 1)}); err != nil {
		t.Fatal(err)
	}
	got, err := ReadAll(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []ids.BatchID{1, 10, 11} {
		if len(got[id]) != 1 || got[id][0]["event_count"] != json.Number(id.String()) {
			t.Errorf("batch %d = %v", id, got[id])
		}
	}
}

func TestNaiveAppendingWriterDuplicatesOnRetry(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	w := NewAppending(st, tileSchema)
	rows := []row.Row{tileRow("2024-03-01T10:00:00Z", "c1", 2)}
	for i := 0; i < 2; i++ { // the batch is re-run after a failure
		if err := w.WriteBatch(ctx, 5, rows); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadAll(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if len(got[5]) != 2 || !reflect.DeepEqual(got[5][0], got[5][1]) {
		t.Fatalf("batch 5 = %v, want the same row twice (the duplicate a retry causes)", got[5])
	}
	// The same retry through the idempotent writer leaves one copy.
	if err := New(st, tileSchema).WriteBatch(ctx, 5, rows); err != nil {
		t.Fatal(err)
	}
	got, _ = ReadAll(ctx, st)
	if len(got[5]) != 1 {
		t.Fatalf("after an idempotent rewrite batch 5 = %v, want one row", got[5])
	}
}

func TestLinesAreJSONObjectsInColumnOrder(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	cols := []query.Column{
		{Name: "ts", Kind: row.Timestamp},
		{Name: "s", Kind: row.String},
		{Name: "l", Kind: row.Long},
		{Name: "d", Kind: row.Double},
		{Name: "b", Kind: row.Bool},
	}
	rows := []row.Row{
		{row.TimestampValue(1_709_287_200_000_000), row.StringValue(`a "q" <b> ✓`), row.LongValue(math.MaxInt64), row.DoubleValue(0.1), row.BoolValue(true)},
		{row.TimestampValue(1_709_287_200_123_456), row.Value{}, row.LongValue(-3), row.DoubleValue(2), row.BoolValue(false)},
		{row.Value{}, row.StringValue(""), row.Value{}, row.DoubleValue(math.NaN()), row.Value{}},
	}
	if err := New(st, cols).WriteBatch(ctx, 0, rows); err != nil {
		t.Fatal(err)
	}
	data, err := st.Get(ctx, "batch_id=0/part-0.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"ts":"2024-03-01T10:00:00Z","s":"a \"q\" <b> ✓","l":9223372036854775807,"d":0.1,"b":true}
{"ts":"2024-03-01T10:00:00.123456Z","s":null,"l":-3,"d":2,"b":false}
{"ts":null,"s":"","l":null,"d":"NaN","b":null}
`
	if string(data) != want {
		t.Fatalf("file =\n%s\nwant\n%s", data, want)
	}
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("line %d is not valid JSON: %s", i, line)
		}
	}
	got, err := ReadAll(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if got[0][0]["l"] != json.Number("9223372036854775807") {
		t.Errorf("long read back as %v, want exact", got[0][0]["l"])
	}
	ts, err := time.Parse(time.RFC3339Nano, got[0][1]["ts"].(string))
	if err != nil || ts.UnixMicro() != 1_709_287_200_123_456 {
		t.Errorf("timestamp %v does not parse back to the microsecond (%v)", got[0][1]["ts"], err)
	}
}

func TestPartsAreWrittenPerPartitionIncludingEmptyOnes(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	a, b := tileRow("2024-03-01T10:00:00Z", "c1", 2), tileRow("2024-03-01T10:00:00Z", "c2", 1)
	if err := New(st, tileSchema).WriteBatchParts(ctx, 3, [][]row.Row{{a}, {}, {b}}); err != nil {
		t.Fatal(err)
	}
	keys, _ := st.List(ctx, "batch_id=3/")
	want := []string{"batch_id=3/_SUCCESS", "batch_id=3/part-0.jsonl", "batch_id=3/part-1.jsonl", "batch_id=3/part-2.jsonl"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("objects = %v, want %v", keys, want)
	}
	got, _ := ReadAll(ctx, st)
	if len(got[3]) != 2 || got[3][0]["course_id"] != "c1" || got[3][1]["course_id"] != "c2" {
		t.Fatalf("batch 3 = %v, want c1 then c2", got[3])
	}
}

func TestEmptyBatchLeavesACompleteEmptyDirectory(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	if err := New(st, tileSchema).WriteBatch(ctx, 9, nil); err != nil {
		t.Fatal(err)
	}
	got, err := ReadAll(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if rows, ok := got[9]; !ok || len(rows) != 0 {
		t.Fatalf("batch 9 = %v (present %v), want present and empty", rows, ok)
	}
	if _, err := st.Get(ctx, "batch_id=9/_SUCCESS"); err != nil {
		t.Fatal(err)
	}
}

func TestRowOfWrongShapeIsRefusedBeforeAnythingIsDeleted(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	w := New(st, tileSchema)
	good := []row.Row{tileRow("2024-03-01T10:00:00Z", "c1", 2)}
	if err := w.WriteBatch(ctx, 0, good); err != nil {
		t.Fatal(err)
	}
	err := w.WriteBatch(ctx, 0, []row.Row{{row.LongValue(1)}})
	if err == nil {
		t.Fatal("short row accepted")
	}
	got, _ := ReadAll(ctx, st)
	if len(got[0]) != 1 {
		t.Fatalf("batch 0 = %v: a refused rewrite must leave the old copy", got[0])
	}
}

// int, date and decimal values are written as Spark's JSON writer writes
// them: numbers, yyyy-MM-dd, and plain-notation numbers with the scale's
// digits.
func TestIntDateAndDecimalValues(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	cols := []query.Column{
		{Name: "i", Kind: row.Int},
		{Name: "d", Kind: row.Date},
		{Name: "m", Kind: row.Decimal, Precision: 7, Scale: 2},
		{Name: "w", Kind: row.Decimal, Precision: 38, Scale: 3},
	}
	rows := []row.Row{
		{{Kind: row.Int, I: -7}, {Kind: row.Date, I: 19_783}, {Kind: row.Decimal, Scale: 2, I: -5}, {Kind: row.Decimal, Scale: 3, S: "12345678901234567890123"}},
		{{}, {Kind: row.Date, I: -1}, {Kind: row.Decimal, Scale: 2, I: 150}, {}},
	}
	if err := New(st, cols).WriteBatch(ctx, 0, rows); err != nil {
		t.Fatal(err)
	}
	data, err := st.Get(ctx, "batch_id=0/part-0.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"i":-7,"d":"2024-03-01","m":-0.05,"w":12345678901234567890.123}
{"i":null,"d":"1969-12-31","m":1.50,"w":null}
`
	if string(data) != want {
		t.Fatalf("file =\n%s\nwant\n%s", data, want)
	}
}
