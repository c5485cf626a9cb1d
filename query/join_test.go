package query

import (
	"strings"
	"testing"
	"time"
)

func joinTestSpec(mode OutputMode, j *Join) Spec {
	return Spec{
		Name: "q",
		Source: Source{File: &FileSource{Path: "in"}, Schema: []Field{
			{Name: "course_id", Type: "string"}, {Name: "lesson_id", Type: "string"}, {Name: "event_time", Type: "timestamp"},
		}},
		Watermark:  &Watermark{Column: "event_time", Delay: Duration(10 * time.Minute)},
		Aggregate:  &Aggregate{GroupBy: []string{"course_id", "module"}, Measures: []Measure{{Name: "n", Fn: FnCount}}},
		OutputMode: mode, Sink: Sink{Console: &ConsoleSink{}}, CheckpointLocation: "cp", Join: j,
	}
}

func TestJoinValidation(t *testing.T) {
	ok := func() *Join {
		return &Join{Path: "m", Keys: []string{"lesson_id"}, Columns: []JoinColumn{{Name: "module", Type: "string"}}}
	}
	s := joinTestSpec(Update, ok())
	if err := s.Validate(coreSources{}); err != nil {
		t.Fatalf("a join in update mode grouping by a joined column: %v", err)
	}
	if got := s.InputSchema(); len(got) != 4 || got[3].Name != "module" {
		t.Fatalf("joined columns follow the source's: %v", got)
	}
	cases := []struct {
		name string
		mode OutputMode
		edit func(j *Join)
		want string
	}{
		{"stream-stream in update", Update, func(j *Join) { j.Stream = map[string]any{"kafka": map[string]any{}} },
			"join.stream: is refused: Join between two streaming DataFrames/Datasets is not supported in Update output mode, only in Append output mode"},
		{"stream-stream in complete", Complete, func(j *Join) { j.Stream = map[string]any{} }, "in Complete output mode, only in Append output mode"},
		{"full", Update, func(j *Join) { j.Type = "full" }, `join.type: "full" is refused`},
		{"unknown key", Update, func(j *Join) { j.Keys = []string{"lesson"} }, `join.keys[0]: "lesson" is not a column of source.schema`},
		{"no keys", Update, func(j *Join) { j.Keys = nil }, "join.keys: required"},
		{"clash", Update, func(j *Join) { j.Columns = append(j.Columns, JoinColumn{Name: "course_id", Type: "string"}) }, `join.columns[1].name: "course_id" clashes`},
		{"bad format", Update, func(j *Join) { j.Format = "csv" }, `join.format: "csv" is not a dimension format`},
		{"no path", Update, func(j *Join) { j.Path = "" }, "join.path: required"},
	}
	for _, c := range cases {
		j := ok()
		c.edit(j)
		s := joinTestSpec(c.mode, j)
		err := s.Validate(coreSources{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}
}

// A join's defaults written out or left out give the same fingerprint; a
// changed manifest path does not.
func TestJoinFingerprintSpellsOutDefaults(t *testing.T) {
	a := joinTestSpec(Update, &Join{Path: "m", Keys: []string{"lesson_id"}, Columns: []JoinColumn{{Name: "module", Type: "string"}}})
	b := joinTestSpec(Update, &Join{Path: "m", Keys: []string{"lesson_id"}, Type: JoinLeft, Format: JoinParquet, Columns: []JoinColumn{{Name: "module", Type: "string"}}})
	if a.Fingerprint() != b.Fingerprint() {
		t.Fatal("type left and format parquet written out changed the fingerprint")
	}
	c := joinTestSpec(Update, &Join{Path: "m2", Keys: []string{"lesson_id"}, Columns: []JoinColumn{{Name: "module", Type: "string"}}})
	if a.Fingerprint() == c.Fingerprint() {
		t.Fatal("another join.path kept the fingerprint")
	}
	if a.Join.Type != "" {
		t.Fatal("Fingerprint changed the spec")
	}
}
