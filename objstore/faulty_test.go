package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/objstore"
)

// outcomes returns, for n calls of Put on key, whether each one failed
// with ErrInjected.
func outcomes(t *testing.T, f *objstore.Faulty, key string, n int) []bool {
	t.Helper()
	out := make([]bool, n)
	for i := range out {
		err := f.Put(context.Background(), key, []byte("x"))
		if err != nil && !errors.Is(err, objstore.ErrInjected) {
			t.Fatalf("Put: %v", err)
		}
		out[i] = err != nil
	}
	return out
}

func TestFaultyFailsOnlyTheNthMatchingCall(t *testing.T) {
	f := objstore.NewFaulty(objstore.NewMem(), objstore.FaultRule{Op: objstore.OpPut, Key: "k", Nth: 3})
	got := outcomes(t, f, "k", 5)
	if want := []bool{false, false, true, false, false}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("failures = %v, want %v", got, want)
	}
	// Other keys and ops do not match and do not count.
	if err := f.Put(context.Background(), "other", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Get(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
}

func TestFaultyFailsEveryMatchingCallUpToLimit(t *testing.T) {
	f := objstore.NewFaulty(objstore.NewMem(), objstore.FaultRule{KeyPrefix: "offsets/", Limit: 2})
	if got := outcomes(t, f, "offsets/1", 4); fmt.Sprint(got) != "[true true false false]" {
		t.Fatalf("failures = %v", got)
	}
	g := objstore.NewFaulty(objstore.NewMem(), objstore.FaultRule{KeyPrefix: "offsets/"})
	if got := outcomes(t, g, "offsets/1", 3); fmt.Sprint(got) != "[true true true]" {
		t.Fatalf("failures without limit = %v", got)
	}
	if got := outcomes(t, g, "commits/1", 2); fmt.Sprint(got) != "[false false]" {
		t.Fatalf("non-matching key failures = %v", got)
	}
}

func TestFaultyMatchesKeysByRegexpAndAnyOp(t *testing.T) {
	ctx := context.Background()
	inner := objstore.NewMem()
	inner.Put(ctx, "state/3/7.snapshot", []byte("s"))
	f := objstore.NewFaulty(inner, objstore.FaultRule{KeyRegexp: regexp.MustCompile(`^state/\d+/\d+\.snapshot$`)})
	if _, err := f.Get(ctx, "state/3/7.snapshot"); !errors.Is(err, objstore.ErrInjected) {
		t.Errorf("Get = %v, want ErrInjected", err)
	}
	if err := f.Delete(ctx, "state/3/7.snapshot"); !errors.Is(err, objstore.ErrInjected) {
		t.Errorf("Delete = %v, want ErrInjected", err)
	}
	if _, err := f.List(ctx, "state/3/7.snapshot"); !errors.Is(err, objstore.ErrInjected) {
		t.Errorf("List = %v, want ErrInjected", err)
	}
	if err := f.Put(ctx, "state/3/7.delta", nil); err != nil {
		t.Errorf("Put of a non-matching key: %v", err)
	}
	if _, err := inner.Get(ctx, "state/3/7.snapshot"); err != nil {
		t.Errorf("an injected Delete removed the object: %v", err)
	}
}

func TestFaultyProbabilityIsReproducibleFromSeed(t *testing.T) {
	rule := objstore.FaultRule{Op: objstore.OpPut, Probability: 0.3, Seed: 42}
	a := outcomes(t, objstore.NewFaulty(objstore.NewMem(), rule), "k", 200)
	b := outcomes(t, objstore.NewFaulty(objstore.NewMem(), rule), "k", 200)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("same seed gave different failure sequences")
	}
	// Oracle: the same draws from the documented generator.
	rng := rand.New(rand.NewPCG(42, 42^0x9e3779b97f4a7c15))
	n := 0
	for i, failed := range a {
		want := rng.Float64() < 0.3
		if failed != want {
			t.Fatalf("call %d failed=%v, oracle says %v", i, failed, want)
		}
		if failed {
			n++
		}
	}
	if n < 30 || n > 90 {
		t.Errorf("%d of 200 calls failed at p=0.3", n)
	}
}

func TestFaultyLostResponseWritesThenFails(t *testing.T) {
	ctx := context.Background()
	inner := objstore.NewMem()
	f := objstore.NewFaulty(inner, objstore.FaultRule{Name: "lost", Op: objstore.OpPutIfAbsent, Key: "commits/5", AfterWrite: true, Limit: 1})
	err := f.PutIfAbsent(ctx, "commits/5", []byte("mine"))
	var ie *objstore.InjectedError
	if !errors.As(err, &ie) || !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("PutIfAbsent = %v, want an InjectedError", err)
	}
	if !ie.Performed || ie.InnerErr != nil || ie.Rule != "lost" || ie.Op != objstore.OpPutIfAbsent || ie.Key != "commits/5" {
		t.Fatalf("InjectedError = %+v", ie)
	}
	if got, err := inner.Get(ctx, "commits/5"); err != nil || string(got) != "mine" {
		t.Fatalf("inner Get = %q, %v; the write should have happened", got, err)
	}
	// The caller's retry now sees the key taken.
	if err := f.PutIfAbsent(ctx, "commits/5", []byte("mine")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("retry = %v, want ErrExists", err)
	}
}

func TestFaultyRulesCanChangeWhileInUse(t *testing.T) {
	ctx := context.Background()
	f := objstore.NewFaulty(objstore.NewMem())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				key := fmt.Sprintf("g%d/%d", g, i)
				err := f.Put(ctx, key, []byte("x"))
				if err != nil && !errors.Is(err, objstore.ErrInjected) {
					t.Errorf("Put: %v", err)
				}
			}
		})
	}
	for i := range 50 {
		f.AddRule(objstore.FaultRule{Name: "r", Op: objstore.OpPut, Probability: 0.5, Seed: uint64(i)})
		f.RemoveRule("r")
	}
	f.AddRule(objstore.FaultRule{Name: "all"})
	wg.Wait()
	if err := f.Put(ctx, "late", nil); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("Put with rule 'all' = %v", err)
	}
	injected := f.Injected()
	f.ClearRules()
	if err := f.Put(ctx, "after-clear", nil); err != nil {
		t.Fatalf("Put after ClearRules: %v", err)
	}
	if f.Injected() != injected {
		t.Fatalf("Injected changed after ClearRules")
	}
	if f.RemoveRule("none") {
		t.Fatal("RemoveRule of an absent name reported a removal")
	}
}
