package statestore

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/objstore"
)

// maintain runs one maintenance pass of prov and returns the snapshots it
// wrote.
func maintain(t *testing.T, prov Provider) int {
	t.Helper()
	n, err := prov.(Maintainer).Maintain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// recordAndMaintain writes the commit record a driver writes after batch v
// changed partition p (commits/v: version v+1 made by a delta of attempt
// "", when it wrote one), then runs a maintenance pass, as an executor does in the background.
func recordAndMaintain(t *testing.T, cp objstore.Store, prov Provider, p int, v Version) {
	t.Helper()
	rec := CommitRecord{Deltas: []int{}}
	if _, err := cp.Get(context.Background(), deltaKey(0, p, v+1, "")); err == nil {
		rec.Deltas = []int{p} // else the batch left the partition unchanged
	}
	writeRecord(t, cp, int64(v), rec)
	maintain(t, prov)
}
