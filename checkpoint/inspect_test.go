package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
)

func TestInspectReadsTheLogWithoutChangingIt(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMem()
	if _, err := Inspect(ctx, store); !errors.Is(err, ErrNoMetadata) {
		t.Fatalf("an empty location: %v, want ErrNoMetadata", err)
	}
	l := New(store)
	if err := l.CreateMetadata(ctx, &Metadata{QueryID: "q-1", Name: "tile", StateStore: "memory", ShufflePartitions: 0}); err != nil {
		t.Fatal(err)
	}
	for b := ids.BatchID(0); b < 3; b++ {
		end := json.RawMessage(`{"t":{"0":` + string(rune('1'+b)) + `}}`)
		if err := l.WriteOffsets(ctx, &OffsetEntry{BatchID: b, BatchWatermark: eventtime.Watermark(b) * 60_000_000, Sources: []SourceRange{{End: end}}}); err != nil {
			t.Fatal(err)
		}
		if b < 2 {
			if err := l.WriteCommit(ctx, &CommitEntry{BatchID: b, NextBatchWatermark: eventtime.Watermark(b+1) * 60_000_000}); err != nil {
				t.Fatal(err)
			}
		}
	}
	before, err := store.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Inspect(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	// Batch 2 is planned, not committed: the next start re-runs it with the
	// watermark it logged (2 minutes), not the last commit's.
	if rep.QueryID != "q-1" || rep.LastBatchID != 2 || rep.LastCommittedBatchID != 1 || !rep.PendingRerun {
		t.Fatalf("report %+v", rep)
	}
	if rep.NextBatchWatermark != "1970-01-01T00:02:00Z" {
		t.Fatalf("next watermark %q, want the logged batch 2's 00:02:00", rep.NextBatchWatermark)
	}
	if string(rep.Offsets) != `{"t":{"0":3}}` {
		t.Fatalf("offsets %s, want batch 2's end", rep.Offsets)
	}
	after, err := store.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("inspect changed the store: %d objects before, %d after", len(before), len(after))
	}
	var text bytes.Buffer
	if err := rep.Write(&text, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "pending            batch 2 is planned but not committed") {
		t.Fatalf("text:\n%s", text.String())
	}
}
