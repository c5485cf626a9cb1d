package executor

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/executor/shuffle"
	"github.com/sluicehq/sluice/wire"
)

// The driver reads UNAVAILABLE as "this executor is lost" unless a
// ShuffleFailure detail names another one: map task errors must keep to
// that contract.
func TestMapTaskErrorsTellTheDriverWhoIsLost(t *testing.T) {
	ctx := context.Background()
	owner := shuffle.Owner{ID: "exec-9", Address: "127.0.0.1:9"}
	for _, tc := range []struct {
		name     string
		err      error
		code     codes.Code
		detailed bool
	}{
		{"unreachable owner", &shuffle.PushError{Owner: owner, Err: status.Error(codes.Unavailable, "connection refused")}, codes.Unavailable, true},
		{"owner refused the data", &shuffle.PushError{Owner: owner, Err: status.Error(codes.FailedPrecondition, "not prepared")}, codes.Aborted, false},
		{"own buffer full", &shuffle.PushError{Owner: shuffle.Owner{ID: "exec-1"}, Err: shuffle.ErrFull}, codes.Internal, false},
		{"task failure", errors.New("read split: boom"), codes.Internal, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := pushError(ctx, tc.err, "exec-1")
			if status.Code(err) != tc.code {
				t.Fatalf("code %v, want %v (%v)", status.Code(err), tc.code, err)
			}
			f := wire.ShuffleFailureOf(err)
			if tc.detailed != (f != nil) || (f != nil && f.ExecutorId != owner.ID) {
				t.Fatalf("ShuffleFailure detail %v, want one naming %s: %v", f, owner.ID, tc.detailed)
			}
		})
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := wire.TaskStatus(cancelled, errors.New("x")); status.Code(err) != codes.Canceled {
		t.Fatalf("a cancelled task reports %v", err)
	}
}
