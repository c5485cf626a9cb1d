package wire

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/join"
	"github.com/sluicehq/sluice/proto/sluicepb"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/statestore"
)

// A task's error crosses gRPC as a status. The conditions callers act on
// (the scheduler stops the query on data loss, fencing, an incompatible
// checkpoint, the state memory limit) ride as a DomainError detail naming
// their kind, and the driver turns the status back into a *RemoteError
// that matches the same sentinel, so a query fails the same way on
// executors as in one process. The status message is the task's error
// text, unchanged.

// domainKind ties a sentinel to the stable name and the code its status
// carries between executor and driver.
type domainKind struct {
	err  error
	kind string // never renamed: executors and drivers of other builds read it
	code codes.Code
	// local: the condition is the executor's own (its lease, its memory),
	// so another executor may run the task; otherwise it is the data's or
	// the checkpoint's, and every executor would fail the same way.
	local bool
}

// Kinds of domain error. An error matching several takes the first.
const (
	KindDataLoss               = "DATA_LOSS"
	KindStateCorrupt           = "STATE_CORRUPT"
	KindStateMemoryLimit       = "STATE_MEMORY_LIMIT"
	KindFenced                 = "FENCED"
	KindIncompatibleCheckpoint = "INCOMPATIBLE_CHECKPOINT"
	KindLeaseExpired           = "LEASE_EXPIRED"
	KindMalformedRecord        = "MALFORMED_RECORD"
	KindCorruptJoinSnapshot    = "CORRUPT_JOIN_SNAPSHOT"
	KindNoJoinManifest         = "NO_JOIN_MANIFEST"
)

// domainKinds is the table; the codes avoid UNAVAILABLE (the driver reads
// it as "executor lost") and FAILED_PRECONDITION on tasks (the driver
// reads it as "query not prepared there" and prepares it again) except for
// the incompatible checkpoint, which no executor can run.
var domainKinds = []domainKind{
	{source.ErrDataLoss, KindDataLoss, codes.DataLoss, false},
	{statestore.ErrCorrupt, KindStateCorrupt, codes.DataLoss, false},
	{statestore.ErrMemoryLimit, KindStateMemoryLimit, codes.ResourceExhausted, true},
	{checkpoint.ErrFenced, KindFenced, codes.Aborted, false},
	{checkpoint.ErrIncompatibleCheckpoint, KindIncompatibleCheckpoint, codes.FailedPrecondition, false},
	{ErrLeaseExpired, KindLeaseExpired, codes.Aborted, true},
	{row.ErrMalformed, KindMalformedRecord, codes.InvalidArgument, false},
	{join.ErrCorruptSnapshot, KindCorruptJoinSnapshot, codes.DataLoss, false},
	{join.ErrNoManifest, KindNoJoinManifest, codes.NotFound, false},
}

func kindOf(err error) (domainKind, bool) {
	for _, k := range domainKinds {
		if errors.Is(err, k.err) {
			return k, true
		}
	}
	return domainKind{}, false
}

func kindNamed(name string) (domainKind, bool) {
	for _, k := range domainKinds {
		if k.kind == name {
			return k, true
		}
	}
	return domainKind{}, false
}

// encodeDomain returns err as a status with a DomainError detail when it
// matches a domain sentinel (ok false otherwise). The message is err's
// text.
func EncodeDomain(err error) (_ error, ok bool) {
	k, ok := kindOf(err)
	if !ok {
		return nil, false
	}
	st := status.New(k.code, err.Error())
	if d, derr := st.WithDetails(&sluicepb.DomainError{Kind: k.kind}); derr == nil {
		st = d
	}
	return st.Err(), true
}

// statusOf returns err as a status: a domain error with its detail, a
// status as it is, anything else with code.
func StatusOf(err error, code codes.Code) error {
	if e, ok := EncodeDomain(err); ok {
		return e
	}
	if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
		return err
	}
	return status.Error(code, err.Error())
}

// RemoteError is a task's domain error as the driver receives it from an
// executor: it matches the sentinel its kind names (errors.Is(err,
// source.ErrDataLoss)), keeps the executor's message, and is still the
// gRPC status it arrived as (status.Code, status.Convert).
type RemoteError struct {
	// Executor is the executor the task failed on.
	Executor ids.ExecutorID
	// Kind is the DomainError kind (KindDataLoss, ...).
	Kind string
	// Message is the task's error text on the executor.
	Message string
	st      *status.Status
	match   error
	local   bool
}

// Error is the executor's message: the executor is named by the caller's
// wrapping ("reduce partition 3 on executor e1: ...").
func (e *RemoteError) Error() string { return e.Message }

// Is matches the sentinel of the error's kind.
func (e *RemoteError) Is(target error) bool { return target == e.match }

// GRPCStatus returns the status the error arrived as.
func (e *RemoteError) GRPCStatus() *status.Status { return e.st }

// decodeDomain returns err, received from executor id, as a *RemoteError
// when its status carries a DomainError of a known kind; any other error
// is returned as it is.
func DecodeDomain(err error, id ids.ExecutorID) error {
	if err == nil {
		return nil
	}
	var re *RemoteError
	if errors.As(err, &re) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		de, ok := d.(*sluicepb.DomainError)
		if !ok {
			continue
		}
		k, ok := kindNamed(de.Kind)
		if !ok {
			return err // a kind of a newer build: a plain task failure
		}
		return &RemoteError{Executor: id, Kind: k.kind, Message: st.Message(), st: st, match: k.err, local: k.local}
	}
	return err
}

// elsewhere reports whether a failed task may succeed on another executor:
// not when it failed for a domain condition of the data or the checkpoint,
// which every executor would meet.
func Elsewhere(err error) bool {
	var re *RemoteError
	return !errors.As(err, &re) || re.local
}

// ErrLeaseExpired is returned for a write an executor attempts after its
// lease lapsed: it has not reached the driver for most of the heartbeat
// timeout, so the driver may already have given its partitions to another
// executor. The write is refused instead of racing the new owner's.
var ErrLeaseExpired = errors.New("executor lease expired: cut off from the driver, not writing")

// TaskStatus maps a task's error to the status an executor returns:
// cancellation stays cancellation, a domain error (data loss, corrupt
// state, the memory limit, ...) carries its kind for the driver to match,
// and anything else is the task's failure (never UNAVAILABLE, which the
// driver reads as "executor lost").
func TaskStatus(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	return StatusOf(err, codes.Internal)
}

// ShuffleFailureStatus is the status of a map task that could not push to
// another executor: UNAVAILABLE with a ShuffleFailure detail naming that
// owner, so the driver reassigns the owner's partitions instead of
// counting this executor as lost.
func ShuffleFailureStatus(err error, owner, address string) error {
	st, derr := status.New(codes.Unavailable, err.Error()).WithDetails(&sluicepb.ShuffleFailure{ExecutorId: owner, Address: address})
	if derr != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	return st.Err()
}

// ShuffleFailureOf returns the owner a map task could not push to, if err
// (as received by the driver) says so.
func ShuffleFailureOf(err error) *sluicepb.ShuffleFailure {
	for _, d := range status.Convert(err).Details() {
		if f, ok := d.(*sluicepb.ShuffleFailure); ok {
			return f
		}
	}
	return nil
}
