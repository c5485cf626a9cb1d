package main

import (
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil/rewrite"

	"github.com/sluicehq/sluice/internal/clidoc"
)

// TestCLIReference keeps docs/cli-driver.md equal to the command tree.
// After changing a command or a flag, regenerate it with
//
//	go test ./cmd/driver ./cmd/executor -run TestCLIReference -rewrite
func TestCLIReference(t *testing.T) {
	clidoc.CleanEnv(t)
	clidoc.Check(t, newRoot(), filepath.Join("..", "..", "docs", "cli-driver.md"), rewrite.Enabled())
}

// Every command's summary fits on a line and every flag's help reads the
// way a user types: durations, sizes and addresses with an example and a
// default in the unit typed, approvals without pflag's internals.
func TestFlagHelpReadsAsTyped(t *testing.T) {
	clidoc.CheckFlagHelp(t, newRoot())
}
