package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/statestore"
)

// ErrNoMetadata is a checkpoint location without a metadata file: nothing
// to inspect.
var ErrNoMetadata = errors.New("no metadata file")

// Report is what Inspect finds in a checkpoint: the output of driver
// checkpoint inspect. Its JSON field names are stable for scripts.
type Report struct {
	QueryID              string            `json:"queryId"`
	Name                 string            `json:"name"`
	LastBatchID          ids.BatchID       `json:"lastBatchId"`
	LastCommittedBatchID ids.BatchID       `json:"lastCommittedBatchId"`
	NextBatchWatermark   string            `json:"nextBatchWatermark"`
	PendingRerun         bool              `json:"pendingRerun"`
	StateRows            int64             `json:"stateRows"`
	StateStore           string            `json:"stateStore"`
	ShufflePartitions    int               `json:"shufflePartitions"`
	Offsets              json.RawMessage   `json:"offsets"`
	Conf                 map[string]string `json:"conf,omitempty"`
	// Approvals are the production guards' consents the checkpoint was
	// created under (absent for old checkpoints and lab queries).
	Approvals []Approval `json:"approvals,omitempty"`
	// Manifest is the join snapshot the last planned batch joins against
	// (absent for a query without a join).
	Manifest *ManifestRef `json:"manifest,omitempty"`
}

// Inspect reads a checkpoint without changing it: the last planned and
// committed batches, the watermark the next batch runs with, the offsets
// logged, the approvals, and the rows of committed state (memory and pebble
// providers). A store without a metadata file is ErrNoMetadata.
func Inspect(ctx context.Context, store objstore.Store) (*Report, error) {
	log := New(store)
	meta, err := log.ReadMetadata(ctx)
	if errors.Is(err, objstore.ErrNotExist) {
		return nil, fmt.Errorf("%w: not a checkpoint, or no query has started on it", ErrNoMetadata)
	}
	if err != nil {
		return nil, err
	}
	last, commit, err := log.Latest(ctx)
	if err != nil {
		return nil, err
	}
	res, err := Decide(last, commit)
	if err != nil {
		return nil, err
	}
	rep := &Report{QueryID: meta.QueryID, Name: meta.Name, LastBatchID: -1, LastCommittedBatchID: -1,
		StateStore: meta.StateStore, ShufflePartitions: meta.ShufflePartitions, Offsets: json.RawMessage("null"),
		Approvals: meta.Approvals}
	wm := res.Watermark
	if last != nil {
		rep.LastBatchID = last.BatchID
		rep.Conf = last.Conf
		rep.Manifest = last.Manifest
		if len(last.Sources) > 0 {
			rep.Offsets = last.Sources[0].End
		}
	}
	if res.Rerun != nil {
		rep.PendingRerun = true
		wm = res.Rerun.BatchWatermark
	}
	if commit != nil {
		rep.LastCommittedBatchID = commit.BatchID
	}
	rep.NextBatchWatermark = row.FormatTimestamp(int64(wm))
	// The pebble provider writes the memory provider's files, so one loader reads both.
	if commit != nil && (meta.StateStore == "memory" || meta.StateStore == "pebble") {
		prov := statestore.NewMemory(store, statestore.MemoryOptions{})
		for p := range ids.PartitionID(meta.ShufflePartitions) {
			st, err := prov.Open(ctx, p, statestore.Version(commit.BatchID+1))
			if err != nil {
				return nil, fmt.Errorf("read state partition %d: %w", p, err)
			}
			rep.StateRows += st.NumRows()
			st.Abort()
		}
	}
	return rep, nil
}

// Write prints r as JSON (asJSON) or as aligned lines for people.
func (r *Report) Write(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "query              %s (%s)\n", r.Name, r.QueryID)
	fmt.Fprintf(w, "last batch         %d\n", r.LastBatchID)
	fmt.Fprintf(w, "last committed     %d\n", r.LastCommittedBatchID)
	if r.PendingRerun {
		fmt.Fprintf(w, "pending            batch %d is planned but not committed: the next start re-runs it as logged\n", r.LastBatchID)
	}
	fmt.Fprintf(w, "next watermark     %s\n", r.NextBatchWatermark)
	fmt.Fprintf(w, "state              %d rows in %d partitions (%s)\n", r.StateRows, r.ShufflePartitions, r.StateStore)
	fmt.Fprintf(w, "offsets            %s\n", r.Offsets)
	if m := r.Manifest; m != nil {
		fmt.Fprintf(w, "join manifest      %s (snapshot manifests/%s.json)\n", m.ID, m.Hash)
	}
	for _, a := range r.Approvals {
		fmt.Fprintf(w, "approval           %s: ticket %s, by %s, at %s\n", a.Kind, a.Ticket, a.By, a.At)
	}
	return nil
}
