//go:build unix

package dispatch

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/proto/sluicepb"
	"github.com/sluicehq/sluice/wire/rpcauth"
)

// BenchmarkHeartbeat is one executor heartbeat over real gRPC on loopback,
// with the cluster token: the driver's side and the caller's together
// (both are in this process), an upper bound of what a heartbeat costs
// the driver.
func BenchmarkHeartbeat(b *testing.B) {
	d, err := NewDriver(DriverOptions{Listen: "127.0.0.1:0", Token: "t0ken"})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	pool := rpcauth.NewPool("t0ken", nil)
	defer pool.Close()
	conn, err := pool.Conn(d.Addr())
	if err != nil {
		b.Fatal(err)
	}
	c := sluicepb.NewDriverServiceClient(conn)
	reg, err := c.Register(ctx, &sluicepb.RegisterRequest{Address: "127.0.0.1:1", Name: "bench", Slots: 1})
	if err != nil {
		b.Fatal(err)
	}
	cpu := processCPU()
	for b.Loop() {
		resp, err := c.Heartbeat(ctx, &sluicepb.HeartbeatRequest{ExecutorId: reg.ExecutorId})
		if err != nil || !resp.Known {
			b.Fatalf("heartbeat: %v %v", resp, err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// processCPU is this process's user+system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
