package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/driver/registry"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/wire/rpcauth"
)

func TestErrorsCrossGRPCAndBack(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{fmt.Errorf("query %q: %w", "x", registry.ErrNotFound), codes.NotFound},
		{fmt.Errorf("gen 3: %w", registry.ErrConflict), codes.Aborted},
		{fmt.Errorf("%w: name: must match", ErrInvalidSpec), codes.InvalidArgument},
		{fmt.Errorf("checkpoint is empty: %w", microbatch.ErrProductionGuard), codes.FailedPrecondition},
		{fmt.Errorf("state schema differs: %w", checkpoint.ErrIncompatibleCheckpoint), codes.FailedPrecondition},
		{ErrStandby, codes.Unavailable},
		{fmt.Errorf("%w (principal olga): sink.parquet.path: outside", ErrPolicy), codes.PermissionDenied},
		{fmt.Errorf("%w: checkpointLocation is the checkpoint of query a", ErrCheckpointInUse), codes.FailedPrecondition},
	} {
		st := ToStatus(tc.err)
		if status.Code(st) != tc.code {
			t.Errorf("%v: code %v, want %v", tc.err, status.Code(st), tc.code)
		}
		back := FromStatus(st)
		if back.Error() != tc.err.Error() {
			t.Errorf("message %q, want %q", back.Error(), tc.err.Error())
		}
		for _, sentinel := range []error{registry.ErrNotFound, registry.ErrConflict, ErrInvalidSpec, microbatch.ErrProductionGuard, checkpoint.ErrIncompatibleCheckpoint, ErrStandby, ErrPolicy, ErrCheckpointInUse} {
			if errors.Is(back, sentinel) != errors.Is(tc.err, sentinel) {
				t.Errorf("%v: errors.Is(back, %v) = %v", tc.err, sentinel, errors.Is(back, sentinel))
			}
		}
	}
	if status.Code(ToStatus(errors.New("disk on fire"))) != codes.Internal {
		t.Error("an unclassified error is not Internal")
	}
}

func TestViewerSeesSpecsWithoutSecrets(t *testing.T) {
	text := `name: q
source:
  kafka:
    bootstrapServers: k:9092
    subscribe: t
    kafka.sasl.mechanism: PLAIN
    kafka.sasl.password: hunter2-secret
  schema: [{name: a, type: string}]
outputMode: append
sink: {console: {}}
checkpointLocation: /tmp/cp
`
	viewer := rpcauth.WithPrincipal(context.Background(), rpcauth.Principal{Name: "vera", Role: rpcauth.RoleViewer})
	operator := rpcauth.WithPrincipal(context.Background(), rpcauth.Principal{Name: "olga", Role: rpcauth.RoleOperator})
	got := string(specFor(viewer, text))
	if strings.Contains(got, "hunter2") || !strings.Contains(got, "[redacted]") || !strings.Contains(got, "PLAIN") {
		t.Fatalf("a viewer's spec:\n%s", got)
	}
	back, err := query.Parse([]byte(got))
	if err != nil || back.Source.Kafka.Options["sasl.password"] != "[redacted]" {
		t.Fatalf("the redacted spec does not parse back: %v", err)
	}
	if string(specFor(operator, text)) != text || string(specFor(context.Background(), text)) != text {
		t.Fatal("an operator, or a driver without roles, gets the spec as submitted")
	}
}
