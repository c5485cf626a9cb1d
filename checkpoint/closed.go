package checkpoint

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/objstore"
)

// ErrNothingCommitted is returned (wrapped) by ClosedWatermark for a
// checkpoint without a committed batch.
var ErrNothingCommitted = errors.New("no batch committed yet")

// ClosedWatermark returns the checkpoint's query id and the watermark the
// next (or in-flight) batch drops late rows against: every window ending
// by it was emitted by a committed batch, and no later row can reach it.
// driver compact and the compactClosedDates policy close dates with it.
func ClosedWatermark(ctx context.Context, cp objstore.Store) (queryID string, watermark eventtime.Watermark, err error) {
	log := New(cp)
	meta, err := log.ReadMetadata(ctx)
	if err != nil {
		return "", 0, fmt.Errorf("read checkpoint metadata: %w", err)
	}
	last, commit, err := log.Latest(ctx)
	if err != nil {
		return "", 0, err
	}
	res, err := Decide(last, commit)
	if err != nil {
		return "", 0, err
	}
	if commit == nil {
		return meta.QueryID, 0, ErrNothingCommitted
	}
	wm := last.BatchWatermark
	if res.Rerun != nil {
		// Batch N is planned, not committed: its late watermark is
		// batch N-1's, the last committed.
		wm = last.LateWatermark
	}
	return meta.QueryID, wm, nil
}
