package main

import (
	"strings"
	"testing"
)

func TestExecutorRefusesUnknownLogLevel(t *testing.T) {
	root := newRoot()
	root.SetArgs([]string{"--driver", "127.0.0.1:1", "--data-dir", t.TempDir(), "--log-level", "verbose"})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), `--log-level "verbose" is not a level: use debug, info, warn, error`) {
		t.Fatalf("got %v, want the unknown level refused", err)
	}
}
