package console

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/rewrite"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if rewrite.Enabled() {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

var tileSchema = []query.Column{
	{Name: "window_start", Kind: row.Timestamp},
	{Name: "window_end", Kind: row.Timestamp},
	{Name: "course_id", Kind: row.String},
	{Name: "event_count", Kind: row.Long},
	{Name: "avg_score", Kind: row.Double},
	{Name: "passed", Kind: row.Bool},
}

func TestBatchPrintsLikeSparkConsole(t *testing.T) {
	start := time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)
	rows := []row.Row{
		{row.TimeValue(start), row.TimeValue(start.Add(5 * time.Minute)), row.StringValue("c1"), row.LongValue(2), row.DoubleValue(1.5), row.BoolValue(true)},
		{row.TimeValue(start), row.TimeValue(start.Add(5 * time.Minute)), row.StringValue("a-course-id-much-longer-than-twenty"), row.LongValue(12345), row.Value{}, row.BoolValue(false)},
		{row.TimestampValue(start.UnixMicro() + 123456), row.Value{}, row.StringValue("ünïcödé"), row.Value{}, row.DoubleValue(-0.25), row.Value{}},
	}
	var out bytes.Buffer
	w := New(&out, tileSchema)
	if err := w.WriteBatch(context.Background(), 0, rows); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBatch(context.Background(), 1, nil); err != nil {
		t.Fatal(err)
	}
	golden(t, "batches.golden", out.String())
}

func TestOnlyTwentyRowsAreShown(t *testing.T) {
	cols := []query.Column{{Name: "n", Kind: row.Long}}
	var rows []row.Row
	for i := range 25 {
		rows = append(rows, row.Row{row.LongValue(int64(i))})
	}
	var out bytes.Buffer
	if err := New(&out, cols).WriteBatch(context.Background(), 7, rows); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "| 19|") || strings.Contains(s, "| 20|") {
		t.Errorf("want rows 0..19 only:\n%s", s)
	}
	if !strings.Contains(s, "only showing top 20 rows\n") {
		t.Errorf("missing the note on hidden rows:\n%s", s)
	}
	golden(t, "twenty.golden", s)
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteErrorIsReported(t *testing.T) {
	err := New(failingWriter{}, tileSchema).WriteBatch(context.Background(), 3, nil)
	if err == nil || !strings.Contains(err.Error(), "batch 3") || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("err = %v", err)
	}
}

// int, date and decimal cells print as Spark's show() prints them: the
// number, yyyy-MM-dd, the decimal with its scale's digits.
func TestIntDateAndDecimalCells(t *testing.T) {
	cols := []query.Column{{Name: "i", Kind: row.Int}, {Name: "d", Kind: row.Date}, {Name: "m", Kind: row.Decimal, Precision: 6, Scale: 2}}
	rows := []row.Row{{{Kind: row.Int, I: -3}, {Kind: row.Date, I: 19_783}, {Kind: row.Decimal, Scale: 2, I: 150}}}
	var out bytes.Buffer
	if err := New(&out, cols).WriteBatch(context.Background(), 0, rows); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| -3|2024-03-01|1.50|"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
