package main

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/clidoc"
)

var update = flag.Bool("update", false, "rewrite docs/cli-driver.md from the command tree")

// TestCLIReference keeps docs/cli-driver.md equal to the command tree.
// After changing a command or a flag, regenerate it with
//
//	go test ./cmd/driver ./cmd/executor -run TestCLIReference -update
func TestCLIReference(t *testing.T) {
	clidoc.CleanEnv(t)
	clidoc.Check(t, newRoot(), filepath.Join("..", "..", "docs", "cli-driver.md"), *update)
}
