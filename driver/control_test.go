package driver

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/registry"
	"github.com/sluicehq/sluice/scheduler"
)

func TestErrorsCrossGRPCAndBack(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{fmt.Errorf("query %q: %w", "x", registry.ErrNotFound), codes.NotFound},
		{fmt.Errorf("gen 3: %w", registry.ErrConflict), codes.Aborted},
		{fmt.Errorf("%w: name: must match", ErrInvalidSpec), codes.InvalidArgument},
		{fmt.Errorf("checkpoint is empty: %w", scheduler.ErrProductionGuard), codes.FailedPrecondition},
		{fmt.Errorf("state schema differs: %w", checkpoint.ErrIncompatibleCheckpoint), codes.FailedPrecondition},
		{ErrStandby, codes.Unavailable},
	} {
		st := ToStatus(tc.err)
		if status.Code(st) != tc.code {
			t.Errorf("%v: code %v, want %v", tc.err, status.Code(st), tc.code)
		}
		back := FromStatus(st)
		if back.Error() != tc.err.Error() {
			t.Errorf("message %q, want %q", back.Error(), tc.err.Error())
		}
		for _, sentinel := range []error{registry.ErrNotFound, registry.ErrConflict, ErrInvalidSpec, scheduler.ErrProductionGuard, checkpoint.ErrIncompatibleCheckpoint, ErrStandby} {
			if errors.Is(back, sentinel) != errors.Is(tc.err, sentinel) {
				t.Errorf("%v: errors.Is(back, %v) = %v", tc.err, sentinel, errors.Is(back, sentinel))
			}
		}
	}
	if status.Code(ToStatus(errors.New("disk on fire"))) != codes.Internal {
		t.Error("an unclassified error is not Internal")
	}
}
