package objstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/objstore"
)

func TestCountingCountsRequestsBytesAndErrorsByOperation(t *testing.T) {
	ctx := context.Background()
	c := objstore.NewCounting(objstore.NewMem())
	c.Put(ctx, "a", []byte("12345"))
	c.Put(ctx, "b", []byte("123"))
	c.PutIfAbsent(ctx, "c", []byte("1234567"))
	c.PutIfAbsent(ctx, "c", []byte("12")) // ErrExists
	c.Get(ctx, "a")                       // 5 bytes
	c.Get(ctx, "missing")                 // ErrNotExist, 0 bytes
	c.List(ctx, "")                       // 3 keys
	c.Delete(ctx, "b")                    //
	c.Delete(ctx, "b")                    // ErrNotExist
	c.Put(ctx, "../bad", []byte("xy"))    // invalid key error
	want := map[string]objstore.OpStats{
		objstore.OpPut:         {Requests: 3, Bytes: 10, Errors: 1},
		objstore.OpPutIfAbsent: {Requests: 2, Bytes: 9, Errors: 1, Answers: 1},
		objstore.OpGet:         {Requests: 2, Bytes: 5, Errors: 1, Answers: 1},
		objstore.OpList:        {Requests: 1, Objects: 3},
		objstore.OpDelete:      {Requests: 2, Errors: 1, Answers: 1},
	}
	got := c.Stats()
	if len(got) != len(want) {
		t.Errorf("Stats has %d ops, want %d: %+v", len(got), len(want), got)
	}
	for op, w := range want {
		if got[op] != w {
			t.Errorf("Stats()[%s] = %+v, want %+v", op, got[op], w)
		}
	}
	c.Reset()
	if got := c.Stats(); len(got) != 0 {
		t.Errorf("Stats after Reset = %+v, want empty", got)
	}
}

func TestCountingTraceRecordsCallsInOrder(t *testing.T) {
	ctx := context.Background()
	c := objstore.NewCounting(objstore.NewMem())
	c.Put(ctx, "before-trace", []byte("x"))
	c.StartTrace()
	c.PutIfAbsent(ctx, "offsets/0", []byte("abc"))
	c.PutIfAbsent(ctx, "offsets/0", []byte("abcd"))
	c.Get(ctx, "commits/0")
	c.Put(ctx, "state/0/1.delta", []byte("12"))
	c.PutIfAbsent(ctx, "commits/0", []byte("c"))
	c.List(ctx, "offsets/")
	c.StopTrace()
	c.Delete(ctx, "after-trace")
	got := c.Trace()
	var lines []string
	for _, e := range got {
		lines = append(lines, e.String())
	}
	want := []string{
		"put_if_absent offsets/0 3",
		"put_if_absent offsets/0 4 err=ErrExists",
		"get commits/0 0 err=ErrNotExist",
		"put state/0/1.delta 2",
		"put_if_absent commits/0 1",
		"list offsets/ 0",
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("trace:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	c.StartTrace()
	if len(c.Trace()) != 0 {
		t.Error("StartTrace did not clear the trace")
	}
}

func TestCountingTraceNamesInjectedFaults(t *testing.T) {
	ctx := context.Background()
	c := objstore.NewCounting(objstore.NewFaulty(objstore.NewMem(), objstore.FaultRule{Op: objstore.OpPut}))
	c.StartTrace()
	err := c.Put(ctx, "k", []byte("x"))
	if !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("Put = %v, want ErrInjected", err)
	}
	if got := c.Trace(); len(got) != 1 || got[0].Err != "ErrInjected" {
		t.Fatalf("trace = %+v", got)
	}
}
