package microbatch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/statestore"
	"github.com/sluicehq/sluice/task"
)

// flaky fails its first write, then collects.
type flaky struct {
	failed bool
	rows   int
}

func (f *flaky) WriteBatch(_ context.Context, _ ids.BatchID, rows []row.Row) error {
	if !f.failed {
		f.failed = true
		return errors.New("sink unreachable")
	}
	f.rows += len(rows)
	return nil
}

// A batch that fails for a retryable reason is reported through OnRetry
// (the service shows RECOVERING), then commits; a new checkpoint records
// the id it was given.
func TestOnRetryIsToldOfARetriedBatchAndNewQueryIDIsRecorded(t *testing.T) {
	spec := query.Spec{
		Name:               "t",
		Source:             query.Source{Schema: []query.Field{{Name: "course_id", Type: "string"}, {Name: "event_time", Type: "timestamp"}}},
		OutputMode:         query.Append,
		CheckpointLocation: "mem",
		Trigger:            query.Trigger{Once: true},
	}
	spec = spec.WithDefaults()
	store := objstore.NewMem()
	src := &listSource{lines: lines, perBatch: 100}
	out := &flaky{}
	type retry struct {
		batch   ids.BatchID
		attempt int
		err     error
	}
	var retries []retry
	q, err := microbatch.Open(context.Background(), microbatch.Config{
		Spec: spec, Checkpoint: store, Source: src, Writer: out, RetryBackoff: time.Millisecond,
		NewQueryID: "3f0c2d9e-1b7a-4c55-9e0f-6a1b2c3d4e5f",
		Observer:   progress.Funcs{OnRetrying: func(b ids.BatchID, a int, err error) { retries = append(retries, retry{b, a, err}) }},
	})
	if err != nil {
		t.Fatal(err)
	}
	if q.QueryID() != "3f0c2d9e-1b7a-4c55-9e0f-6a1b2c3d4e5f" {
		t.Fatalf("query id %s, want the given one", q.QueryID())
	}
	env := &task.Env{QueryID: q.QueryID(), Spec: &spec, Source: src, BadRecords: store, State: statestore.NewMemory(store, statestore.MemoryOptions{})}
	if err := q.Run(context.Background(), &task.Local{Env: env}, nil); err != nil {
		t.Fatal(err)
	}
	if len(retries) != 1 || retries[0].batch != 0 || retries[0].attempt != 1 || retries[0].err == nil {
		t.Fatalf("retries %+v, want one for batch 0 attempt 1", retries)
	}
	if out.rows != len(lines) {
		t.Fatalf("rows written %d, want %d", out.rows, len(lines))
	}
}

// Admit refuses what Open would refuse, and creates nothing.
func TestAdmitRunsOpensGuardsWithoutCreatingTheCheckpoint(t *testing.T) {
	ctx := context.Background()
	spec := query.Spec{
		Name:               "t",
		Environment:        query.Production,
		Source:             query.Source{Schema: []query.Field{{Name: "course_id", Type: "string"}, {Name: "event_time", Type: "timestamp"}}},
		OutputMode:         query.Append,
		CheckpointLocation: "s3://b/cp",
		Trigger:            query.Trigger{Once: true},
	}
	spec = spec.WithDefaults()
	store := objstore.NewMem()
	cfg := microbatch.Config{Spec: spec, Checkpoint: store}
	if err := microbatch.Admit(ctx, cfg); !errors.Is(err, microbatch.ErrProductionGuard) {
		t.Fatalf("production on a local checkpoint: %v", err)
	}
	cfg.CheckpointOnObjectStore = true
	if err := microbatch.Admit(ctx, cfg); !errors.Is(err, microbatch.ErrProductionGuard) {
		t.Fatalf("production on an empty checkpoint: %v", err)
	}
	if keys, _ := store.List(ctx, ""); len(keys) != 0 {
		t.Fatalf("Admit created %v", keys)
	}
	cfg.AllowFirstStart = true
	if err := microbatch.Admit(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Source, cfg.Writer = &listSource{lines: lines, perBatch: 1}, &flaky{failed: true}
	if _, err := microbatch.Open(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	changed := cfg
	changed.Spec.ShufflePartitions = 3
	if err := microbatch.Admit(ctx, changed); !errors.Is(err, checkpoint.ErrIncompatibleCheckpoint) {
		t.Fatalf("changed shufflePartitions: %v, want new checkpoint required", err)
	}
	if err := microbatch.Admit(ctx, cfg); err != nil {
		t.Fatalf("same spec on its checkpoint: %v", err)
	}
}
