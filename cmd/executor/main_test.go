package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil/rewrite"

	"github.com/sluicehq/sluice/internal/clidoc"
)

func TestExecutorRefusesUnknownLogLevel(t *testing.T) {
	root := newRoot()
	root.SetArgs([]string{"--driver", "127.0.0.1:1", "--data-dir", t.TempDir(), "--log-level", "verbose"})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), `invalid argument "verbose" for "--log-level" flag: not a level: use debug, info, warn, error`) {
		t.Fatalf("got %v, want the unknown level refused", err)
	}
}

// TestCLIReference keeps docs/cli-executor.md equal to the command tree;
// regenerate with go test ./cmd/driver ./cmd/executor -run TestCLIReference -rewrite
func TestCLIReference(t *testing.T) {
	clidoc.CleanEnv(t)
	clidoc.Check(t, newRoot(), filepath.Join("..", "..", "docs", "cli-executor.md"), rewrite.Enabled())
}

// Durations, sizes and addresses show an example and a default in the
// unit a user types.
func TestFlagHelpReadsAsTyped(t *testing.T) {
	clidoc.CheckFlagHelp(t, newRoot())
}
