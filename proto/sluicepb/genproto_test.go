package sluicepb_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Regenerating the code from proto/*.proto with the pinned generators
// gives exactly the committed files. Skipped where protoc (at the pinned
// version) is not installed, except in CI (CI=true), where scripts/test.sh
// installs it and its absence fails the test.
func TestGeneratedCodeMatchesProtoSources(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs protoc and its plugins")
	}
	skip := t.Skipf
	if os.Getenv("CI") == "true" {
		skip = t.Fatalf
	}
	if _, err := exec.LookPath("protoc"); err != nil {
		skip("protoc not installed: cannot check the generated code (scripts/test.sh installs Debian's protobuf-compiler)")
	}
	out := t.TempDir()
	cmd := exec.Command("bash", "scripts/genproto.sh", out)
	cmd.Dir = filepath.Join("..", "..")
	logs, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		skip("protoc is not the pinned version: %s", logs)
	}
	if err != nil {
		t.Fatalf("scripts/genproto.sh: %v\n%s", err, logs)
	}
	fresh, err := filepath.Glob(filepath.Join(out, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := filepath.Glob("*.pb.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(fresh) != len(committed) {
		t.Fatalf("regenerating gives %d files, %d are committed: run scripts/genproto.sh", len(fresh), len(committed))
	}
	for _, f := range fresh {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Base(f))
		if err != nil {
			t.Fatalf("%s is generated but not committed: run scripts/genproto.sh", filepath.Base(f))
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what proto/%s generates: run scripts/genproto.sh", filepath.Base(f), filepath.Base(f))
		}
	}
}
