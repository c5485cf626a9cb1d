package checkpoint

import (
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/statestore"
)

// The log entries' JSON. The Go fields carry watermarks as
// eventtime.Watermark (microseconds); the files carry them in
// milliseconds, under the names Spark's offset log uses (batchWatermarkMs).
// This file is the one place that converts: a watermark is always a whole
// number of milliseconds (eventtime.Advance truncates), so both ways are
// exact, every entry written before reads the same, and one that is not
// whole milliseconds is refused rather than rounded.

// offsetEntryJSON is offsets/N as written: the field order and names are
// the format.
type offsetEntryJSON struct {
	Version          int               `json:"version"`
	BatchID          ids.BatchID       `json:"batchId"`
	BatchWatermarkMs int64             `json:"batchWatermarkMs"`
	LateWatermarkMs  int64             `json:"lateWatermarkMs"`
	BatchTimestampMs int64             `json:"batchTimestampMs"`
	NoData           bool              `json:"noData,omitempty"`
	Sources          []SourceRange     `json:"sources"`
	Conf             map[string]string `json:"conf"`
	RunID            string            `json:"runId,omitempty"`
	Manifest         *ManifestRef      `json:"manifest,omitempty"`
}

// commitEntryJSON is commits/N as written.
type commitEntryJSON struct {
	Version              int                      `json:"version"`
	BatchID              ids.BatchID              `json:"batchId"`
	NextBatchWatermarkMs int64                    `json:"nextBatchWatermarkMs"`
	State                *statestore.CommitRecord `json:"state,omitempty"`
	RunID                string                   `json:"runId,omitempty"`
	// StateOperators: statestore.OperatorsField (the key is the operator
	// id; json writes it in decimal).
	StateOperators map[int]*statestore.CommitRecord `json:"stateOperators,omitempty"`
}

// watermarkMs is w as the log writes it.
func watermarkMs(name string, w eventtime.Watermark) (int64, error) {
	ms := w.Millis()
	if eventtime.WatermarkFromMillis(ms) != w {
		return 0, fmt.Errorf("%s %d µs is not a whole number of milliseconds", name, w)
	}
	return ms, nil
}

// MarshalJSON writes offsets/N.
func (e OffsetEntry) MarshalJSON() ([]byte, error) {
	batch, err := watermarkMs("batchWatermark", e.BatchWatermark)
	if err != nil {
		return nil, err
	}
	late, err := watermarkMs("lateWatermark", e.LateWatermark)
	if err != nil {
		return nil, err
	}
	return json.Marshal(offsetEntryJSON{
		Version: e.Version, BatchID: e.BatchID, BatchWatermarkMs: batch, LateWatermarkMs: late,
		BatchTimestampMs: e.BatchTimestampMs, NoData: e.NoData, Sources: e.Sources, Conf: e.Conf,
		RunID: e.RunID, Manifest: e.Manifest,
	})
}

// UnmarshalJSON reads offsets/N.
func (e *OffsetEntry) UnmarshalJSON(b []byte) error {
	var j offsetEntryJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = OffsetEntry{
		Version: j.Version, BatchID: j.BatchID,
		BatchWatermark: eventtime.WatermarkFromMillis(j.BatchWatermarkMs), LateWatermark: eventtime.WatermarkFromMillis(j.LateWatermarkMs),
		BatchTimestampMs: j.BatchTimestampMs, NoData: j.NoData, Sources: j.Sources, Conf: j.Conf,
		RunID: j.RunID, Manifest: j.Manifest,
	}
	return nil
}

// MarshalJSON writes commits/N.
func (e CommitEntry) MarshalJSON() ([]byte, error) {
	next, err := watermarkMs("nextBatchWatermark", e.NextBatchWatermark)
	if err != nil {
		return nil, err
	}
	return json.Marshal(commitEntryJSON{Version: e.Version, BatchID: e.BatchID, NextBatchWatermarkMs: next, State: e.State, RunID: e.RunID, StateOperators: e.StateOperators})
}

// UnmarshalJSON reads commits/N.
func (e *CommitEntry) UnmarshalJSON(b []byte) error {
	var j commitEntryJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = CommitEntry{Version: j.Version, BatchID: j.BatchID, NextBatchWatermark: eventtime.WatermarkFromMillis(j.NextBatchWatermarkMs), State: j.State, RunID: j.RunID,
		StateOperators: j.StateOperators}
	return nil
}
