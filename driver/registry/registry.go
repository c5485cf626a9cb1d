package registry

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/objstore"
)

// ErrNotFound is returned (wrapped) when no query has the name.
var ErrNotFound = errors.New("query not found")

// ErrConflict is returned (wrapped) when another writer changed the query
// since the generation the caller read: the write did not happen.
var ErrConflict = errors.New("query changed concurrently")

// Desired is the state an operator asked for.
type Desired string

// Desired states.
const (
	Running Desired = "running"
	Stopped Desired = "stopped"
)

// Record is one generation of a query's registry entry.
type Record struct {
	Name string `json:"name"`
	// ID is a version-4 UUID given at the first submit and kept by every
	// later generation.
	ID         string  `json:"id"`
	Generation int64   `json:"generation"`
	Desired    Desired `json:"desired"`
	// Spec is the query spec as submitted (YAML or JSON).
	Spec string `json:"spec"`
	// AllowFirstStart and AllowReplay are the production guards' consent,
	// given with the submit that started the query.
	AllowFirstStart bool `json:"allowFirstStart,omitempty"`
	AllowReplay     bool `json:"allowReplay,omitempty"`
	// Ticket and ApprovedBy record the approval given with the guard's
	// consent: the ticket and who (user@host or --approved-by).
	Ticket     string `json:"ticket,omitempty"`
	ApprovedBy string `json:"approvedBy,omitempty"`
	// Change says what this generation did: submit, update, stop, resume.
	Change string `json:"change"`
	// ChangedBy is what the client said it is (user@host).
	ChangedBy string    `json:"changedBy"`
	ChangedAt time.Time `json:"changedAt"`
	// Principal and Role are the authenticated caller that made the change
	// (a token's name, a certificate's common name, "cluster-token") and
	// its role; empty when the change carried no authenticated caller.
	Principal string `json:"principal,omitempty"`
	Role      string `json:"role,omitempty"`
	// Reason is the change's reason or ticket as the caller gave it.
	Reason string `json:"reason,omitempty"`
	// FingerprintBefore and FingerprintAfter are the secret-free spec
	// fingerprints (query.Spec.Fingerprint) of the previous generation and
	// of this one: equal when the change kept the spec.
	FingerprintBefore string `json:"fingerprintBefore,omitempty"`
	FingerprintAfter  string `json:"fingerprintAfter,omitempty"`
	// Pruned is set on a generation History returns from the audit trail
	// alone: the generation itself was pruned, and its Spec is empty.
	Pruned bool `json:"pruned,omitempty"`
}

// Options configure a Registry.
type Options struct {
	// Keep is how many generations per query are retained (default 16).
	Keep int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Registry is the query registry over a store. It is safe for concurrent
// use; concurrent writers are arbitrated by the store's PutIfAbsent.
type Registry struct {
	store objstore.Store
	keep  int
	now   func() time.Time
}

// New returns the registry kept in store.
func New(store objstore.Store, opts Options) *Registry {
	if opts.Keep < 2 {
		opts.Keep = 16
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Registry{store: store, keep: opts.Keep, now: opts.Now}
}

// Store returns the registry's store (the lease lives there too).
func (r *Registry) Store() objstore.Store { return r.store }

var nameRE = regexp.MustCompile(`^[a-z0-9-]+$`)

func checkName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("query name %q: must match [a-z0-9-]+", name)
	}
	return nil
}

const genDigits = 20

func genKey(name string, gen int64) string {
	return fmt.Sprintf("queries/%s/%0*d.json", name, genDigits, gen)
}

// auditKey is a generation's entry in the audit trail: the record without
// its spec, written beside the generation and never pruned, so the trail
// outlives the Keep generations the registry retains.
func auditKey(name string, gen int64) string {
	return fmt.Sprintf("audit/%s/%0*d.json", name, genDigits, gen)
}

// writeAudit writes rec's audit entry if it is not there yet.
func (r *Registry) writeAudit(ctx context.Context, rec Record) error {
	rec.Spec, rec.Pruned = "", false
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	err = r.store.PutIfAbsent(ctx, auditKey(rec.Name, rec.Generation), b)
	if err != nil && !errors.Is(err, objstore.ErrExists) {
		return fmt.Errorf("registry: write the audit entry of %s generation %d: %w", rec.Name, rec.Generation, err)
	}
	return nil
}

// Audit returns a query's audit trail, oldest first: every generation
// ever written (retained or pruned), without specs.
func (r *Registry) Audit(ctx context.Context, name string) ([]Record, error) {
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	keys, err := r.store.List(ctx, "audit/"+name+"/")
	if err != nil {
		return nil, fmt.Errorf("registry: list the audit trail of %s: %w", name, err)
	}
	sort.Strings(keys)
	var out []Record
	for _, k := range keys {
		if strings.Contains(strings.TrimPrefix(k, "audit/"+name+"/"), "/") || !strings.HasSuffix(k, ".json") {
			continue
		}
		b, err := r.store.Get(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("registry: read %s: %w", k, err)
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("registry: decode %s: %w", k, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// generations lists a query's retained generations, ascending.
func (r *Registry) generations(ctx context.Context, name string) ([]int64, error) {
	keys, err := r.store.List(ctx, "queries/"+name+"/")
	if err != nil {
		return nil, fmt.Errorf("registry: list %s: %w", name, err)
	}
	var gens []int64
	for _, k := range keys {
		base := strings.TrimSuffix(strings.TrimPrefix(k, "queries/"+name+"/"), ".json")
		if strings.Contains(base, "/") {
			continue
		}
		g, err := strconv.ParseInt(base, 10, 64)
		if err != nil {
			continue
		}
		gens = append(gens, g)
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i] < gens[j] })
	return gens, nil
}

func (r *Registry) read(ctx context.Context, name string, gen int64) (Record, error) {
	b, err := r.store.Get(ctx, genKey(name, gen))
	if err != nil {
		return Record{}, fmt.Errorf("registry: read %s generation %d: %w", name, gen, err)
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return Record{}, fmt.Errorf("registry: decode %s generation %d: %w", name, gen, err)
	}
	return rec, nil
}

// Get returns a query's latest record, or an error matching ErrNotFound.
func (r *Registry) Get(ctx context.Context, name string) (Record, error) {
	if err := checkName(name); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	for {
		gens, err := r.generations(ctx, name)
		if err != nil {
			return Record{}, err
		}
		if len(gens) == 0 {
			return Record{}, fmt.Errorf("query %q: %w", name, ErrNotFound)
		}
		rec, err := r.read(ctx, name, gens[len(gens)-1])
		if errors.Is(err, objstore.ErrNotExist) {
			continue // pruned between list and read (a stale writer's cleanup): list again
		}
		return rec, err
	}
}

// History returns a query's generations, oldest first: the retained ones
// with their spec, and before them those the audit trail keeps of pruned
// generations (Pruned set, no spec).
func (r *Registry) History(ctx context.Context, name string) ([]Record, error) {
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	gens, err := r.generations(ctx, name)
	if err != nil {
		return nil, err
	}
	audit, err := r.Audit(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(gens) == 0 && len(audit) == 0 {
		return nil, fmt.Errorf("query %q: %w", name, ErrNotFound)
	}
	byGen := map[int64]Record{}
	for _, a := range audit {
		a.Pruned = true
		byGen[a.Generation] = a
	}
	for _, g := range gens {
		rec, err := r.read(ctx, name, g)
		if errors.Is(err, objstore.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		byGen[g] = rec
	}
	out := make([]Record, 0, len(byGen))
	for _, rec := range byGen {
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Generation < out[j].Generation })
	return out, nil
}

// List returns every query's latest record, sorted by name.
func (r *Registry) List(ctx context.Context) ([]Record, error) {
	keys, err := r.store.List(ctx, "queries/")
	if err != nil {
		return nil, fmt.Errorf("registry: list: %w", err)
	}
	seen := map[string]bool{}
	var names []string
	for _, k := range keys {
		name, _, ok := strings.Cut(strings.TrimPrefix(k, "queries/"), "/")
		if ok && !seen[name] && checkName(name) == nil {
			seen[name] = true
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := make([]Record, 0, len(names))
	for _, n := range names {
		rec, err := r.Get(ctx, n)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// Write stores next as the generation after prev (prev nil: the query's
// first generation, which gets a new id). It fails with ErrConflict if
// that generation already exists: someone else wrote since prev was read.
// Name, ID and Generation of next are set from prev; ChangedAt from the
// clock when zero.
func (r *Registry) Write(ctx context.Context, prev *Record, next Record) (Record, error) {
	if err := checkName(next.Name); err != nil {
		return Record{}, err
	}
	if next.Desired != Running && next.Desired != Stopped {
		return Record{}, fmt.Errorf("registry: desired state %q: must be running or stopped", next.Desired)
	}
	if prev == nil {
		next.ID, next.Generation = NewID(), 1
	} else {
		if prev.Name != next.Name {
			return Record{}, fmt.Errorf("registry: write %s after a record of %s", next.Name, prev.Name)
		}
		next.ID, next.Generation = prev.ID, prev.Generation+1
	}
	if next.ChangedAt.IsZero() {
		next.ChangedAt = r.now().UTC()
	}
	b, err := json.Marshal(next)
	if err != nil {
		return Record{}, err
	}
	err = r.store.PutIfAbsent(ctx, genKey(next.Name, next.Generation), b)
	if errors.Is(err, objstore.ErrExists) {
		return Record{}, fmt.Errorf("query %q generation %d was written by another client: %w", next.Name, next.Generation, ErrConflict)
	}
	if err != nil {
		return Record{}, fmt.Errorf("registry: write %s: %w", next.Name, err)
	}
	gens, err := r.generations(ctx, next.Name)
	if err != nil {
		return Record{}, err
	}
	// A writer that read a generation long gone may have created an
	// object that had been pruned: a higher one exists, so it lost.
	if latest := gens[len(gens)-1]; latest > next.Generation {
		_ = r.store.Delete(ctx, genKey(next.Name, next.Generation))
		return Record{}, fmt.Errorf("query %q is at generation %d, not %d: %w", next.Name, latest, next.Generation-1, ErrConflict)
	}
	// The audit entry: a crash before it leaves the generation, whose
	// entry the next pruning writes before deleting it.
	if err := r.writeAudit(ctx, next); err != nil {
		return next, err
	}
	if len(gens) > r.keep {
		for _, g := range gens[:len(gens)-r.keep] {
			old, err := r.read(ctx, next.Name, g)
			if err == nil {
				err = r.writeAudit(ctx, old)
			}
			if err != nil && !errors.Is(err, objstore.ErrNotExist) {
				break // keep the generation until its audit entry is written
			}
			if err := r.store.Delete(ctx, genKey(next.Name, g)); err != nil && !errors.Is(err, objstore.ErrNotExist) {
				break // pruning is best effort; the next write tries again
			}
		}
	}
	return next, nil
}

// NewID returns a random version-4 UUID.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
