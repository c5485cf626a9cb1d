package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/driver/policy"
	"github.com/sluicehq/sluice/driver/registry"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source/catalog"
)

// Registry changes, as recorded in Record.Change.
const (
	ChangeSubmit  = "submit"
	ChangeUpdate  = "update"
	ChangeResume  = "resume"
	ChangeRestart = "restart"
	ChangeStop    = "stop"
	ChangeStopNow = "stop-now"
)

// Errors callers branch on (the control service maps them to gRPC codes).
var (
	// ErrInvalidSpec: the spec does not parse or validate.
	ErrInvalidSpec = errors.New("invalid query spec")
	// ErrStandby: this driver does not hold the lease.
	ErrStandby = errors.New("this driver is a standby (another driver holds the lease)")
	// ErrPolicy: the spec names a location outside the driver's policy.
	ErrPolicy = errors.New("refused by the driver's location policy")
	// ErrCheckpointInUse: another query's checkpoint is the spec's, or
	// contains it, or is inside it.
	ErrCheckpointInUse = errors.New("checkpoint in use by another query")
)

// ConfigPrincipal and ConfigRole name, in the audit trail, the changes
// the driver makes from its own configuration (--query, --queries-dir).
const (
	ConfigPrincipal = "driver"
	ConfigRole      = "config"
)

// Actor is who makes a registry change, as the audit trail records it.
type Actor struct {
	// ChangedBy is what the client says it is (user@host).
	ChangedBy string
	// Principal and Role are the authenticated caller (empty: the
	// driver's own configuration, --query and --queries-dir).
	Principal, Role string
	// Reason is the change's reason or ticket.
	Reason string
}

// Submission is a submit request.
type Submission struct {
	Spec                    []byte
	AllowFirstStart, Replay bool
	// Ticket and ApprovedBy go with AllowFirstStart or Replay: the
	// registry's history and the new checkpoint's metadata record them.
	Ticket, ApprovedBy string
	ChangedBy          string
	// Principal and Role are the authenticated submitter; the location
	// policy is checked for Principal.
	Principal, Role string
	// Reason is the change's reason or ticket, for the audit trail.
	Reason string
}

// SubmitResult says what a submit did.
type SubmitResult struct {
	Record registry.Record
	// Outcome is submitted, updated, resumed, restarted or unchanged.
	Outcome string
	Message string
}

// Parse parses and validates a spec as driver run does, wrapping the
// messages in ErrInvalidSpec.
func Parse(data []byte) (query.Spec, error) {
	spec, err := query.Parse(data)
	if err != nil {
		return query.Spec{}, fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	if err := catalog.Validate(spec); err != nil {
		return query.Spec{}, fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	return spec, nil
}

// admit runs the production guards and the checkpoint compatibility check
// of spec against its checkpoint, creating nothing.
func (s *Service) admit(ctx context.Context, spec query.Spec, allowFirst, allowReplay bool) error {
	spec = spec.WithDefaults()
	cp, err := objstore.Open(ctx, spec.CheckpointLocation, s.opts.Engine.Store)
	if err != nil {
		return fmt.Errorf("open checkpointLocation: %w", err)
	}
	return microbatch.Admit(ctx, microbatch.Config{
		Spec: spec, Checkpoint: cp, CheckpointOnObjectStore: objstore.IsObjectStore(spec.CheckpointLocation),
		AllowFirstStart: allowFirst, AllowReplay: allowReplay,
	})
}

// Submit registers a spec as running. The same spec again is a no-op; a
// stopped (or finished, or failed) query is resumed from its checkpoint; a
// changed spec is applied if the query's checkpoint can serve it, else
// refused with checkpoint.ErrIncompatibleCheckpoint and the old version
// keeps running. Production guards refuse with
// microbatch.ErrProductionGuard. Concurrent submitters of one name: one
// wins, the others get registry.ErrConflict.
func (s *Service) Submit(ctx context.Context, sub Submission) (SubmitResult, error) {
	if err := s.awaitActive(ctx); err != nil {
		return SubmitResult{}, err
	}
	spec, err := Parse(sub.Spec)
	if err != nil {
		return SubmitResult{}, err
	}
	if probs := s.opts.Policy.Check(spec, sub.Principal); len(probs) > 0 {
		return SubmitResult{}, fmt.Errorf("%w (principal %s): %w", ErrPolicy, orNone(sub.Principal), &query.ValidationError{Problems: probs})
	}
	s.submitMu.Lock()
	defer s.submitMu.Unlock()
	if err := s.checkpointFree(ctx, spec); err != nil {
		return SubmitResult{}, err
	}
	cur, err := s.reg.Get(ctx, spec.Name)
	var prev *registry.Record
	switch {
	case errors.Is(err, registry.ErrNotFound):
	case err != nil:
		return SubmitResult{}, err
	default:
		prev = &cur
	}
	change := ChangeSubmit
	if prev != nil {
		same := sameSpec(prev.Spec, spec)
		v, _ := s.tr.Get(spec.Name)
		switch {
		case prev.Desired == registry.Running && same && !v.State.Terminal():
			return SubmitResult{Record: cur, Outcome: "unchanged", Message: fmt.Sprintf("query %s is already running this spec (generation %d): nothing changed", spec.Name, cur.Generation)}, nil
		case prev.Desired == registry.Running && same:
			change = ChangeRestart
		case prev.Desired == registry.Stopped:
			change = ChangeResume
		default:
			change = ChangeUpdate
		}
	}
	if err := s.admit(ctx, spec, sub.AllowFirstStart, sub.Replay); err != nil {
		return SubmitResult{}, err
	}
	next := registry.Record{
		Name: spec.Name, Desired: registry.Running, Spec: string(sub.Spec),
		AllowFirstStart: sub.AllowFirstStart, AllowReplay: sub.Replay,
		Change: change, ChangedBy: sub.ChangedBy, ChangedAt: s.opts.Now().UTC(),
		Principal: sub.Principal, Role: sub.Role, Reason: sub.Reason,
		FingerprintAfter: spec.Fingerprint(),
	}
	if prev != nil {
		next.FingerprintBefore = specFingerprint(prev.Spec)
	}
	if sub.AllowFirstStart || sub.Replay {
		next.Ticket, next.ApprovedBy = sub.Ticket, sub.ApprovedBy
		if next.ApprovedBy == "" {
			next.ApprovedBy = sub.ChangedBy
		}
	}
	if prev != nil && sameSpec(prev.Spec, spec) {
		next.Spec = prev.Spec // keep the text the running version has
	}
	rec, err := s.reg.Write(ctx, prev, next)
	if err != nil {
		return SubmitResult{}, err
	}
	s.Kick()
	outcome := map[string]string{ChangeSubmit: "submitted", ChangeUpdate: "updated", ChangeResume: "resumed", ChangeRestart: "restarted"}[change]
	return SubmitResult{Record: rec, Outcome: outcome, Message: fmt.Sprintf("query %s %s (generation %d, id %s)", rec.Name, outcome, rec.Generation, rec.ID)}, nil
}

// checkpointFree refuses spec when another registered query's checkpoint
// is spec's, contains it or is inside it (whatever that query's desired
// state: a stopped query resumes from its checkpoint).
func (s *Service) checkpointFree(ctx context.Context, spec query.Spec) error {
	recs, err := s.reg.List(ctx)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if rec.Name == spec.Name {
			continue
		}
		other, err := query.Parse([]byte(rec.Spec))
		if err != nil {
			continue
		}
		if policy.Overlap(spec.CheckpointLocation, other.CheckpointLocation) {
			how := "is the checkpoint of"
			switch {
			case policy.Clean(spec.CheckpointLocation) == policy.Clean(other.CheckpointLocation):
			case policy.Under(spec.CheckpointLocation, other.CheckpointLocation):
				how = "is inside the checkpoint of"
			default:
				how = "contains the checkpoint of"
			}
			return fmt.Errorf("%w: checkpointLocation %q %s query %s (%q, desired %s): two queries may never share a checkpoint; give %s its own", ErrCheckpointInUse, spec.CheckpointLocation, how, rec.Name, other.CheckpointLocation, rec.Desired, spec.Name)
		}
	}
	return nil
}

// specFingerprint is the secret-free fingerprint of a registered spec
// text ("" if it no longer parses).
func specFingerprint(text string) string {
	spec, err := query.Parse([]byte(text))
	if err != nil {
		return ""
	}
	return spec.Fingerprint()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// sameSpec reports whether the registered spec text means spec.
func sameSpec(text string, spec query.Spec) bool {
	old, err := query.Parse([]byte(text))
	if err != nil {
		return false
	}
	a, b := old.WithDefaults(), spec.WithDefaults()
	return a.Fingerprint() == b.Fingerprint()
}

// WaitStarted waits until name's run of at least generation gen is past
// STARTING; it returns the view, and the query's error if it failed.
func (s *Service) WaitStarted(ctx context.Context, name string, gen int64) (monitor.View, error) {
	for {
		r := s.runOf(name)
		v, _ := s.tr.Get(name)
		if r != nil && r.gen >= gen && v.State != monitor.Pending && v.State != monitor.Starting {
			if v.State == monitor.Failed {
				return v, errors.New(v.LastError)
			}
			return v, nil
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop sets name's desired state to stopped and waits until its run has
// ended: by default the batch in flight commits first (within timeout,
// then it is abandoned); now abandons it at once.
func (s *Service) Stop(ctx context.Context, name string, now bool, timeout time.Duration, by string) (registry.Record, monitor.View, error) {
	return s.StopAs(ctx, name, now, timeout, Actor{ChangedBy: by})
}

// StopAs is Stop recording actor in the audit trail.
func (s *Service) StopAs(ctx context.Context, name string, now bool, timeout time.Duration, actor Actor) (registry.Record, monitor.View, error) {
	if err := s.awaitActive(ctx); err != nil {
		return registry.Record{}, monitor.View{}, err
	}
	if timeout <= 0 {
		timeout = s.opts.StopTimeout
	}
	cur, err := s.reg.Get(ctx, name)
	if err != nil {
		return registry.Record{}, monitor.View{}, err
	}
	rec := cur
	if cur.Desired != registry.Stopped {
		change := ChangeStop
		if now {
			change = ChangeStopNow
		}
		next := cur
		next.Desired, next.Change, next.ChangedBy, next.ChangedAt = registry.Stopped, change, actor.ChangedBy, s.opts.Now().UTC()
		next.Principal, next.Role, next.Reason = actor.Principal, actor.Role, actor.Reason
		fp := specFingerprint(cur.Spec)
		next.FingerprintBefore, next.FingerprintAfter = fp, fp
		if rec, err = s.reg.Write(ctx, &cur, next); err != nil {
			return registry.Record{}, monitor.View{}, err
		}
	}
	s.tr.SetDesired(monitor.Ref{Name: rec.Name, ID: rec.ID}, monitor.DesiredStopped, rec.Generation)
	r := s.runOf(name)
	if r != nil && !r.ended() {
		s.tr.SetState(monitor.Ref{Name: rec.Name, ID: rec.ID}, monitor.Stopping, nil)
		sig := microbatch.Signal{Kind: microbatch.Stop, Timeout: timeout}
		if now {
			sig = microbatch.Signal{Kind: microbatch.StopNow}
		}
		r.stop(sig, true)
		select {
		case <-r.done:
		case <-ctx.Done():
			v, _ := s.tr.Get(name)
			return rec, v, ctx.Err()
		}
	} else if v, ok := s.tr.Get(name); !ok || !v.State.Terminal() {
		s.tr.SetState(monitor.Ref{Name: rec.Name, ID: rec.ID}, monitor.Stopped, nil)
	}
	v, _ := s.tr.Get(name)
	return rec, v, nil
}

// IsIncompatible reports whether err is "new checkpoint required".
func IsIncompatible(err error) bool { return errors.Is(err, checkpoint.ErrIncompatibleCheckpoint) }
