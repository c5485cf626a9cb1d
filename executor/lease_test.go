package executor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/objstore/storetest"
	"github.com/sluicehq/sluice/wire"
)

// An executor whose lease lapsed (no acknowledged heartbeat for most of the
// driver's timeout) has its writes refused; reads still work, and a renewed
// lease lets writes through again.
func TestWritesAreRefusedAfterTheLeaseLapses(t *testing.T) {
	ctx := context.Background()
	l := newWriteLease()
	st := newLeasedStore(objstore.NewMem(), l)
	if err := st.Put(ctx, "state/0/0/1.delta", []byte("x")); !errors.Is(err, wire.ErrLeaseExpired) {
		t.Fatalf("a write before any heartbeat was acknowledged: %v, want ErrLeaseExpired", err)
	}
	l.renew(time.Now(), time.Hour)
	if err := st.Put(ctx, "state/0/0/1.delta", []byte("x")); err != nil {
		t.Fatalf("write under a valid lease: %v", err)
	}
	l2 := newWriteLease()
	l2.renew(time.Now().Add(-time.Second), 500*time.Millisecond) // sent a second ago, lasted half a second
	st2 := newLeasedStore(st.Store, l2)
	for name, write := range map[string]func() error{
		"put":           func() error { return st2.Put(ctx, "a", nil) },
		"put-if-absent": func() error { return st2.PutIfAbsent(ctx, "b", nil) },
		"delete":        func() error { return st2.Delete(ctx, "state/0/0/1.delta") },
	} {
		if err := write(); !errors.Is(err, wire.ErrLeaseExpired) {
			t.Errorf("%s after the lease lapsed: %v, want ErrLeaseExpired", name, err)
		}
	}
	if b, err := st2.Get(ctx, "state/0/0/1.delta"); err != nil || string(b) != "x" {
		t.Fatalf("reads must pass: %q %v", b, err)
	}
}

// The lease never moves backwards (a late heartbeat answer with an older
// send time does not shorten it), and it is shorter than the driver's
// timeout so the executor stops writing before the driver removes it.
func TestLeaseOnlyGrowsAndEndsBeforeTheDriverTimeout(t *testing.T) {
	l := newWriteLease()
	now := time.Now()
	l.renew(now, 4*time.Second)
	l.renew(now.Add(-time.Second), 4*time.Second)
	if !l.valid(now.Add(3900 * time.Millisecond)) {
		t.Fatal("an older renewal shortened the lease")
	}
	n := &Node{interval: time.Second}
	if d := n.leaseDuration(); d >= 5*time.Second || d <= 0 {
		t.Fatalf("lease %v for a 5s heartbeat timeout must be positive and shorter than it", d)
	}
}

// The lease's store forwards ranged reads: a split of a large source file
// read on an executor costs its own bytes, as in one process.
func TestLeasedStoreReadsASplitAtAHighOffsetOnly(t *testing.T) {
	l := newWriteLease()
	served, err := storetest.SplitServed(func(s objstore.Store) objstore.Store { return newLeasedStore(s, l) })
	if err != nil {
		t.Fatal(err)
	}
	if served > 2*storetest.SplitBytes {
		t.Fatalf("the store served %d bytes for a %d-byte split: the lease's store hides ranged reads", served, storetest.SplitBytes)
	}
}

// Every write path is guarded, not only Put.
func TestEveryWritePathNeedsTheLease(t *testing.T) {
	ctx := context.Background()
	l := newWriteLease() // never renewed: lapsed
	st := newLeasedStore(objstore.NewMem(), l)
	for name, write := range map[string]func() error{
		"put-stream":         func() error { return st.PutStream(ctx, "a", strings.NewReader("x")) },
		"delete-many":        func() error { return st.DeleteMany(ctx, []string{"a"}) },
		"create-multipart":   func() error { _, err := st.CreateMultipart(ctx, "a"); return err },
		"upload-part":        func() error { _, err := st.UploadPart(ctx, "a", "u", 1, nil); return err },
		"complete-multipart": func() error { return st.CompleteMultipart(ctx, "a", "u", nil) },
		"abort-multipart":    func() error { return st.AbortMultipart(ctx, "a", "u") },
	} {
		if err := write(); !errors.Is(err, wire.ErrLeaseExpired) {
			t.Errorf("%s with a lapsed lease: %v, want ErrLeaseExpired", name, err)
		}
	}
}
