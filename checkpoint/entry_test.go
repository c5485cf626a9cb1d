package checkpoint

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/statestore"
)

// The entries' files are the format: written byte for byte as before the
// Go fields carried watermarks as eventtime.Watermark (the want strings
// are what the int64 *Ms fields encoded to), and read back to the same
// entries.
func TestLogEntriesEncodeWatermarksInMillisecondsAsBefore(t *testing.T) {
	ms := eventtime.WatermarkFromMillis
	for _, c := range []struct {
		entry any
		want  string
	}{
		{&OffsetEntry{Version: 1, BatchID: 42, BatchWatermark: ms(1_772_442_060_000), LateWatermark: ms(1_772_442_000_000), BatchTimestampMs: 1_772_442_123_456,
			NoData: true, Sources: []SourceRange{{Start: json.RawMessage(`{"t":{"0":1}}`), End: json.RawMessage(`{"t":{"0":9}}`)}},
			Conf: map[string]string{"shufflePartitions": "4", "a": "b"}, RunID: "run-1", Manifest: &ManifestRef{ID: "m1", Hash: "abc"}},
			`{"version":1,"batchId":42,"batchWatermarkMs":1772442060000,"lateWatermarkMs":1772442000000,"batchTimestampMs":1772442123456,"noData":true,"sources":[{"start":{"t":{"0":1}},"end":{"t":{"0":9}}}],"conf":{"a":"b","shufflePartitions":"4"},"runId":"run-1","manifest":{"id":"m1","hash":"abc"}}`},
		{&OffsetEntry{},
			`{"version":0,"batchId":0,"batchWatermarkMs":0,"lateWatermarkMs":0,"batchTimestampMs":0,"sources":null,"conf":null}`},
		{&CommitEntry{Version: 1, BatchID: 42, NextBatchWatermark: ms(1_772_442_120_000), RunID: "run-1",
			State: &statestore.CommitRecord{Format: 2, Deltas: []ids.PartitionID{0, 3}, Snapshots: []ids.PartitionID{3}, Attempts: map[ids.PartitionID]string{0: "a", 3: "b"}}},
			`{"version":1,"batchId":42,"nextBatchWatermarkMs":1772442120000,"state":{"format":2,"deltas":[0,3],"snapshots":[3],"attempts":{"0":"a","3":"b"}},"runId":"run-1"}`},
		{&CommitEntry{},
			`{"version":0,"batchId":0,"nextBatchWatermarkMs":0}`},
	} {
		b, err := json.Marshal(c.entry)
		if err != nil || string(b) != c.want {
			t.Fatalf("marshal %+v:\n got %s (%v)\nwant %s", c.entry, b, err, c.want)
		}
		back := reflect.New(reflect.TypeOf(c.entry).Elem()).Interface()
		if err := json.Unmarshal(b, back); err != nil || !reflect.DeepEqual(back, c.entry) {
			t.Fatalf("read back %s: %+v, %v; want %+v", b, back, err, c.entry)
		}
	}
	// A value marshals as the pointer does.
	if b, err := json.Marshal(OffsetEntry{BatchWatermark: ms(5)}); err != nil || !strings.Contains(string(b), `"batchWatermarkMs":5,`) {
		t.Fatalf("OffsetEntry value: %s, %v", b, err)
	}
}

// A watermark that is not a whole number of milliseconds (never one
// eventtime.Advance computes) would not survive the log: refused, not
// rounded.
func TestLogEntryWithSubMillisecondWatermarkIsRefused(t *testing.T) {
	if _, err := json.Marshal(&OffsetEntry{BatchID: 3, LateWatermark: 1500}); err == nil || !strings.Contains(err.Error(), "lateWatermark 1500 µs is not a whole number of milliseconds") {
		t.Fatalf("offsets entry: %v", err)
	}
	if _, err := json.Marshal(&CommitEntry{BatchID: 3, NextBatchWatermark: 1}); err == nil {
		t.Fatal("commit entry with a 1 µs watermark was written")
	}
}
