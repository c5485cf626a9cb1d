// Command executor joins a Sluice driver's pool: it registers, heartbeats,
// runs map and reduce tasks and serves shuffle data to other executors.
// It keeps nothing that matters locally: --data-dir holds caches (state
// partitions rebuilt from the checkpoint, shuffle spill files). SIGTERM
// drains it: it hands its partitions back, finishes its tasks and exits.
// It only wires flags to package executor.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/executor"
	"github.com/sluicehq/sluice/fault"
	"github.com/sluicehq/sluice/internal/cliflags"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/statestore"
	"github.com/sluicehq/sluice/task"
	"github.com/sluicehq/sluice/wire/rpcauth"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := newRoot().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	var opts executor.NodeOptions
	var tokenFile, logLevel, httpAddr, healthAddr, cpuProfile string
	var stateMemoryLimit int64
	var s3 objstore.S3Options
	var tlsFlags tlsconf.Config
	cmd := &cobra.Command{
		Use:           "executor --driver HOST:PORT --data-dir DIR",
		Short:         "Sluice executor: runs a driver's tasks, serves shuffle data",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			lvl, err := cliflags.ParseLogLevel(logLevel)
			if err != nil {
				return err
			}
			stopProfile, err := cliflags.StartCPUProfile(cpuProfile)
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, stopProfile()) }()
			opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
			tok, err := rpcauth.LoadToken(tokenFile)
			if err != nil {
				return err
			}
			opts.Token, opts.Insecure = tok, tlsFlags.Insecure
			if opts.TLS, err = tlsconf.Open(tlsFlags); err != nil {
				return err
			}
			hook, err := fault.FromEnv()
			if err != nil {
				return err
			}
			opts.Task = task.OpenOptions{Hook: hook, Store: objstore.Options{S3: s3}, StateMemoryLimit: statestore.NewMemoryLimit(stateMemoryLimit)}
			node, err := executor.NewNode(opts)
			if err != nil {
				return err
			}
			if httpAddr != "" || healthAddr != "" {
				stop, err := serveHTTP(cmd.Context(), httpAddr, healthAddr, opts.TLS, node, opts.Driver, opts.Logger)
				if err != nil {
					return err
				}
				defer stop()
			}
			return node.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Driver, "driver", "", "the driver's address, HOST:PORT, e.g. sluice-driver.streams.svc:7077 (required)")
	f.StringVar(&opts.Listen, "listen", "127.0.0.1:0", "address to serve tasks and shuffle on, HOST:PORT, e.g. 0.0.0.0:7078 (port 0: a free port)")
	f.StringVar(&opts.Advertise, "advertise", "", "address the driver and other executors dial, HOST:PORT, e.g. 10.0.3.7:7078 (default: the bound --listen address)")
	f.StringVar(&opts.DataDir, "data-dir", "", "directory for local caches: state partitions and shuffle spill files (required)")
	f.StringVar(&tokenFile, "token-file", "", "file holding the cluster token (default: $"+rpcauth.TokenEnv+")")
	f.IntVar(&opts.Slots, "slots", 0, "tasks run at once (default: number of CPUs)")
	cliflags.Bytes(f, &opts.ShuffleMemory, "shuffle-memory", 0, "shuffle data held in memory before spilling to --data-dir, e.g. 512MiB (default: 256MiB)")
	cliflags.Bytes(f, &stateMemoryLimit, "state-memory-limit", 0, "state the in-memory state store (stateStore: memory) may hold for all queries on this executor, e.g. 512MiB or 2GiB; past it a batch fails with advice to switch to stateStore: pebble (0: no limit)")
	f.DurationVar(&opts.DrainTimeout, "drain-timeout", 60*time.Second, "how long SIGTERM waits for running batches and tasks, e.g. 60s or 5m")
	cliflags.LogLevel(f, &logLevel)
	f.StringVar(&httpAddr, "http-addr", "", "serve HTTP on this address: /metrics (Prometheus), /healthz, /readyz (registered with the driver), e.g. 0.0.0.0:8081")
	f.StringVar(&healthAddr, "health-addr", "", "serve only /healthz and /readyz on this address, in plaintext even with TLS on (no metrics): for probes that cannot present a client certificate, such as the kubelet's under mutual TLS (e.g. 0.0.0.0:8082)")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile from start to exit (SIGTERM: after the drain) to this file (go tool pprof FILE)")
	cliflags.S3(f, &s3)
	tlsFlags.Register(f)
	cliflags.TidyDefaults(cmd)
	return cmd
}
