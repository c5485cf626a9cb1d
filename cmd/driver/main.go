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

	"github.com/sluicehq/sluice/internal/cliflags"
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
		Use:   "driver",
		Short: "Sluice driver: plans micro-batches and commits them",
		Long: `Sluice driver: plans micro-batches and commits them to the checkpoint. It
runs one query in this process (run, demo), serves every registered query
on executors (serve), and is the CLI of a running driver (submit, stop,
list, status, progress, history).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cliflags.LogLevel(root.PersistentFlags(), new(string)) // refuses unknown levels
	root.AddCommand(newRunCmd(), newServeCmd(), newDemoCmd(), newCheckpointCmd(), newSinkCmd())
	root.AddCommand(newExplainCmd())
	root.AddCommand(newCompactCmd())
	root.AddCommand(newSubmitCmd(), newReplayCmd(), newStopCmd(), newListCmd(), newStatusCmd(), newProgressCmd(), newHistoryCmd(), newContractCmd())
	// An approval flag without its ticket is refused in plain words.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cliflags.PlainFlagError(err) })
	cliflags.TidyDefaults(root)
	return root
}

func logger(cmd *cobra.Command) *slog.Logger {
	s, _ := cmd.Flags().GetString("log-level")
	lvl, _ := cliflags.ParseLogLevel(s) // the flag refused anything else
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}
