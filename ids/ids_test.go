package ids

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
)

// The ids replace plain integers in files on disk and in logs: each must
// encode exactly as the integer did.
func TestIDsEncodeAsTheIntegersTheyReplace(t *testing.T) {
	type entry struct {
		Batch BatchID               `json:"batchId"`
		Part  PartitionID           `json:"partition"`
		Files map[PartitionID]int64 `json:"files"`
	}
	b, err := json.Marshal(entry{Batch: 42, Part: 3, Files: map[PartitionID]int64{3: 7}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"batchId":42,"partition":3,"files":{"3":7}}`; got != want {
		t.Errorf("json: got %s, want %s", got, want)
	}
	var back entry
	if err := json.Unmarshal(b, &back); err != nil || back.Batch != 42 || back.Part != 3 || back.Files[3] != 7 {
		t.Errorf("json round trip: %+v, %v", back, err)
	}
	if got := fmt.Sprintf("offsets/%d %v %s p%d", BatchID(-1), BatchID(7), BatchID(8), PartitionID(2)); got != "offsets/-1 7 8 p2" {
		t.Errorf("fmt: %q", got)
	}
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("x", "batch", BatchID(5), "partition", PartitionID(1))
	slog.New(slog.NewJSONHandler(&js, nil)).Info("x", "batch", BatchID(5), "partition", PartitionID(1))
	if !bytes.Contains(text.Bytes(), []byte("batch=5 partition=1")) {
		t.Errorf("text log: %s", text.String())
	}
	if !bytes.Contains(js.Bytes(), []byte(`"batch":5,"partition":1`)) {
		t.Errorf("json log: %s", js.String())
	}
}

func TestRangeOverPartitionCountYieldsPartitionIDs(t *testing.T) {
	var got []PartitionID
	for p := range PartitionID(3) {
		got = append(got, p)
	}
	if fmt.Sprint(got) != "[0 1 2]" {
		t.Errorf("range PartitionID(3) = %v", got)
	}
}

func TestParseBatchIDReadsWhatStringWrites(t *testing.T) {
	for _, b := range []BatchID{0, 7, 12345, -1} {
		got, err := ParseBatchID(b.String())
		if err != nil || got != b {
			t.Errorf("ParseBatchID(%q) = %d, %v", b.String(), got, err)
		}
	}
	if _, err := ParseBatchID("7.compact"); err == nil {
		t.Error("ParseBatchID accepted 7.compact")
	}
}
