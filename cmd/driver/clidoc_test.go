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
