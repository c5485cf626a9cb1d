package dispatch

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/executor"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
)

// A driver and executors that ran a query and were stopped leave no
// goroutine behind.
func TestClusterStopsWithoutLeakingGoroutines(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs a driver serving gRPC on loopback")
	}
	in, _ := tileInput(t, 6000)
	dir := t.TempDir()
	before := runtime.NumGoroutine()
	func() {
		d, err := NewDriver(DriverOptions{Listen: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- d.Serve(ctx) }()
		var stops []func() error
		for i := range 2 {
			n, err := executor.NewNode(executor.NodeOptions{Driver: d.Addr(), DataDir: filepath.Join(dir, "exec", string(rune('a'+i)))})
			if err != nil {
				t.Fatal(err)
			}
			nctx, ncancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- n.Run(nctx) }()
			stops = append(stops, func() error { ncancel(); return <-done })
		}
		spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
		spec.Source.File.MaxFilesPerTrigger = 8
		job, err := microbatch.Build(context.Background(), spec, microbatch.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := d.NewRunner(RunnerOptions{QueryID: job.Query.QueryID(), Spec: job.Spec, MinExecutors: 2})
		if err != nil {
			t.Fatal(err)
		}
		if err := job.RunWith(context.Background(), r, nil); err != nil {
			t.Fatal(err)
		}
		job.Close()
		for _, stop := range stops {
			if err := stop(); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		if err := <-served; err != nil {
			t.Fatal(err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after stopping:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
