package objstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
)

// ErrInjected is matched (errors.Is) by every error Faulty injects.
var ErrInjected = errors.New("injected fault")

// InjectedError is the error Faulty returns. It matches ErrInjected.
type InjectedError struct {
	Rule string // FaultRule.Name
	Op   string // OpGet, OpPut, ...
	Key  string // the key, or the prefix for list
	// Performed is true when the operation was carried out before the
	// error was returned (FaultRule.AfterWrite: a lost response).
	Performed bool
	// InnerErr is what the inner store returned when Performed.
	InnerErr error
}

func (e *InjectedError) Error() string {
	s := fmt.Sprintf("%s %s: %v (rule %q", e.Op, e.Key, ErrInjected, e.Rule)
	if e.Performed {
		s += ", operation performed, response lost"
		if e.InnerErr != nil {
			s += fmt.Sprintf(", inner result: %v", e.InnerErr)
		}
	}
	return s + ")"
}

// Is makes errors.Is(err, ErrInjected) true.
func (e *InjectedError) Is(target error) bool { return target == ErrInjected }

// FaultRule says which calls fail.
//
// A call matches when Op is empty or equals the call's operation, and the
// key (the prefix, for List) matches every key condition set: Key (exact),
// KeyPrefix, KeyRegexp. No condition set matches every key.
//
// Of the matching calls, the rule fails:
//   - only the Nth one (1-based) when Nth > 0;
//   - otherwise each one with probability Probability, drawn from a random
//     source seeded with Seed, when Probability > 0;
//   - otherwise every one.
//
// Limit > 0 caps how many faults the rule injects in total (so "the first
// K matching calls" is Limit: K with no Nth and no Probability).
//
// AfterWrite makes the fault a lost response: the call is passed to the
// inner store first and the fault is returned whatever the inner store
// said, as when a request reaches the server but its response does not
// come back.
type FaultRule struct {
	Name        string
	Op          string
	Key         string
	KeyPrefix   string
	KeyRegexp   *regexp.Regexp
	Nth         int
	Probability float64
	Seed        uint64
	Limit       int
	AfterWrite  bool
}

func (r *FaultRule) matches(op, key string) bool {
	if r.Op != "" && r.Op != op {
		return false
	}
	if r.Key != "" && r.Key != key {
		return false
	}
	if r.KeyPrefix != "" && !strings.HasPrefix(key, r.KeyPrefix) {
		return false
	}
	if r.KeyRegexp != nil && !r.KeyRegexp.MatchString(key) {
		return false
	}
	return true
}

type ruleState struct {
	FaultRule
	rng      *rand.Rand
	matched  int
	injected int
}

// decide counts a matching call and reports whether the rule fires on it.
// A rule never fires on a call an earlier rule already fails. Called with
// Faulty.mu held.
func (r *ruleState) decide(alreadyFailed bool) bool {
	r.matched++
	if alreadyFailed || (r.Limit > 0 && r.injected >= r.Limit) {
		return false
	}
	fire := false
	switch {
	case r.Nth > 0:
		fire = r.matched == r.Nth
	case r.Probability > 0:
		fire = r.rng.Float64() < r.Probability
	default:
		fire = true
	}
	if fire {
		r.injected++
	}
	return fire
}

// Faulty is a Store decorator that injects errors by rule. Rules can be
// added and cleared while the store is in use. For each call, the first
// rule (in the order added) that decides to fire wins; every matching rule
// counts the call (for Nth), but only the first to fire injects a fault.
type Faulty struct {
	inner Store

	mu       sync.Mutex
	rules    []*ruleState
	injected int
}

// NewFaulty wraps inner with the given rules.
func NewFaulty(inner Store, rules ...FaultRule) *Faulty {
	f := &Faulty{inner: inner}
	for _, r := range rules {
		f.AddRule(r)
	}
	return f
}

// AddRule appends a rule.
func (f *Faulty) AddRule(r FaultRule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &ruleState{FaultRule: r, rng: rand.New(rand.NewPCG(r.Seed, r.Seed^0x9e3779b97f4a7c15))})
}

// ClearRules removes every rule; later calls pass through.
func (f *Faulty) ClearRules() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// RemoveRule removes the rules with the given name and reports whether any
// was removed.
func (f *Faulty) RemoveRule(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	kept := f.rules[:0]
	for _, r := range f.rules {
		if r.Name != name {
			kept = append(kept, r)
		}
	}
	removed := len(kept) != len(f.rules)
	clear(f.rules[len(kept):])
	f.rules = kept
	return removed
}

// Injected returns how many faults have been injected so far.
func (f *Faulty) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// fault returns the rule that fires for this call, or nil.
func (f *Faulty) fault(op, key string) *FaultRule {
	f.mu.Lock()
	defer f.mu.Unlock()
	var fired *FaultRule
	for _, r := range f.rules {
		if !r.matches(op, key) {
			continue
		}
		if r.decide(fired != nil) {
			rule := r.FaultRule
			fired = &rule
		}
	}
	if fired != nil {
		f.injected++
	}
	return fired
}

// do runs one call through the rules.
func (f *Faulty) do(op, key string, call func() error) error {
	r := f.fault(op, key)
	if r == nil {
		return call()
	}
	if !r.AfterWrite {
		return &InjectedError{Rule: r.Name, Op: op, Key: key}
	}
	innerErr := call()
	return &InjectedError{Rule: r.Name, Op: op, Key: key, Performed: true, InnerErr: innerErr}
}

func (f *Faulty) Get(ctx context.Context, key string) ([]byte, error) {
	var b []byte
	err := f.do(OpGet, key, func() (err error) { b, err = f.inner.Get(ctx, key); return err })
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (f *Faulty) Put(ctx context.Context, key string, data []byte) error {
	return f.do(OpPut, key, func() error { return f.inner.Put(ctx, key, data) })
}

func (f *Faulty) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return f.do(OpPutIfAbsent, key, func() error { return f.inner.PutIfAbsent(ctx, key, data) })
}

func (f *Faulty) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	err := f.do(OpList, prefix, func() (err error) { keys, err = f.inner.List(ctx, prefix); return err })
	if err != nil {
		return nil, err
	}
	return keys, nil
}

func (f *Faulty) Delete(ctx context.Context, key string) error {
	return f.do(OpDelete, key, func() error { return f.inner.Delete(ctx, key) })
}

func (f *Faulty) CreateMultipart(ctx context.Context, key string) (string, error) {
	var id string
	err := f.do(OpCreateMultipart, key, func() error {
		mp, err := multipartOf(f.inner, OpCreateMultipart, key)
		if err != nil {
			return err
		}
		id, err = mp.CreateMultipart(ctx, key)
		return err
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

func (f *Faulty) UploadPart(ctx context.Context, key, uploadID string, number int, data []byte) (Part, error) {
	var p Part
	err := f.do(OpUploadPart, key, func() error {
		mp, err := multipartOf(f.inner, OpUploadPart, key)
		if err != nil {
			return err
		}
		p, err = mp.UploadPart(ctx, key, uploadID, number, data)
		return err
	})
	if err != nil {
		return Part{}, err
	}
	return p, nil
}

func (f *Faulty) CompleteMultipart(ctx context.Context, key, uploadID string, parts []Part) error {
	return f.do(OpCompleteMultipart, key, func() error {
		mp, err := multipartOf(f.inner, OpCompleteMultipart, key)
		if err != nil {
			return err
		}
		return mp.CompleteMultipart(ctx, key, uploadID, parts)
	})
}

func (f *Faulty) AbortMultipart(ctx context.Context, key, uploadID string) error {
	return f.do(OpAbortMultipart, key, func() error {
		mp, err := multipartOf(f.inner, OpAbortMultipart, key)
		if err != nil {
			return err
		}
		return mp.AbortMultipart(ctx, key, uploadID)
	})
}

func (f *Faulty) ListInfo(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var infos []ObjectInfo
	err := f.do(OpList, prefix, func() error {
		il, ok := f.inner.(InfoLister)
		if !ok {
			return fmt.Errorf("list %s: the store cannot list modification times", prefix)
		}
		var err error
		infos, err = il.ListInfo(ctx, prefix)
		return err
	})
	if err != nil {
		return nil, err
	}
	return infos, nil
}

// ListsStaged answers for the wrapped store.
func (f *Faulty) ListsStaged() bool {
	_, ok := StagedListerOf(f.inner)
	return ok
}

func (f *Faulty) ListStaged(ctx context.Context, prefix string) ([]StagedUpload, error) {
	var out []StagedUpload
	err := f.do(OpListStaged, prefix, func() error {
		l, err := stagedListerOf(f.inner, prefix)
		if err != nil {
			return err
		}
		out, err = l.ListStaged(ctx, prefix)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
