// Command driver runs Sluice queries: in this process (run, demo) or, later,
// as the long-running driver service. It only wires flags to the engine.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
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
	root := &cobra.Command{
		Use:           "driver",
		Short:         "Sluice driver: plans micro-batches and commits them to the checkpoint",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().String("log-level", "info", "log level: debug, info, warn, error")
	root.AddCommand(newRunCmd(), newServeCmd(), newDemoCmd(), newCheckpointCmd(), newSinkCmd())
	root.AddCommand(newSubmitCmd(), newStopCmd(), newListCmd(), newStatusCmd(), newProgressCmd(), newContractCmd())
	return root
}

func logger(cmd *cobra.Command) *slog.Logger {
	lvl := slog.LevelInfo
	s, _ := cmd.Flags().GetString("log-level")
	_ = lvl.UnmarshalText([]byte(s))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}
