package objstore_test

import (
	"testing"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/objstore/storetest"
)

// Every decorator forwards ranged reads: a split at a high offset of a
// large object makes the store serve the split's bytes, not everything
// before it. A plain embedding of Store (what Forward replaces) serves it
// all, so the check can fail.
func TestEveryDecoratorReadsASplitAtAHighOffsetOnly(t *testing.T) {
	for _, c := range []struct {
		name  string
		wrap  func(objstore.Store) objstore.Store
		hides bool
	}{
		{"no decorator", func(s objstore.Store) objstore.Store { return s }, false},
		{"Counting", func(s objstore.Store) objstore.Store { return objstore.NewCounting(s) }, false},
		{"Faulty", func(s objstore.Store) objstore.Store { return objstore.NewFaulty(s) }, false},
		{"Prefixed", func(s objstore.Store) objstore.Store { return objstore.Prefixed(s, "") }, false},
		{"Forward", func(s objstore.Store) objstore.Store { return objstore.Forward{Store: s} }, false},
		{"Forward over Prefixed over Faulty", func(s objstore.Store) objstore.Store {
			return objstore.Forward{Store: objstore.Prefixed(objstore.NewFaulty(s), "")}
		}, false},
		{"an embedded Store", func(s objstore.Store) objstore.Store { return struct{ objstore.Store }{s} }, true},
	} {
		served, err := storetest.SplitServed(c.wrap)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if hid := served > 2*storetest.SplitBytes; hid != c.hides {
			t.Errorf("%s: the store served %d bytes for a %d-byte split (hides ranged reads: %v, want %v)", c.name, served, storetest.SplitBytes, hid, c.hides)
		}
	}
}
