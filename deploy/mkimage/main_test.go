package main

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// An image written from a static file holds it at the given path with the
// non-root user, a world-writable /tmp and the entrypoint, and the same
// inputs give the same image digest.
func TestImageHoldsTheFilesRunsAsNonRootAndIsReproducible(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("#!not really a binary\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(out string) string {
		t.Helper()
		err := run(context.Background(), []string{"-sluice=false", "-ca-certs=", "-file", bin + ":/usr/local/bin/tool", "-entrypoint", "/usr/local/bin/tool", "-tag", "example.local/tool:1", "-o", out})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b := write(filepath.Join(dir, "a.tar")), write(filepath.Join(dir, "b.tar"))
	tag, _ := name.NewTag("example.local/tool:1")
	imgA, err := tarball.ImageFromPath(a, &tag)
	if err != nil {
		t.Fatal(err)
	}
	imgB, err := tarball.ImageFromPath(b, &tag)
	if err != nil {
		t.Fatal(err)
	}
	da, _ := imgA.Digest()
	db, _ := imgB.Digest()
	if da != db {
		t.Errorf("two writes of the same inputs: digests %s and %s", da, db)
	}
	cf, err := imgA.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/usr/local/bin/tool" || cf.OS != "linux" {
		t.Errorf("config: user %q entrypoint %q os %q", cf.Config.User, cf.Config.Entrypoint, cf.OS)
	}
	layers, err := imgA.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d: %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	modes := map[string]int64{}
	tr := tar.NewReader(rc)
	var passwd string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		modes[h.Name] = h.Mode
		if h.Name == "etc/passwd" {
			b, _ := io.ReadAll(tr)
			passwd = string(b)
		}
	}
	for p, want := range map[string]int64{"tmp/": 0o1777, "usr/local/bin/tool": 0o755, "etc/passwd": 0o644} {
		if modes[p] != want {
			t.Errorf("%s: mode %o, want %o (entries %v)", p, modes[p], want, modes)
		}
	}
	if passwd == "" || !strings.Contains(passwd, "nonroot:x:65532:65532") {
		t.Errorf("/etc/passwd lacks the non-root user:\n%s", passwd)
	}
}

func TestBadFileArgumentIsRefused(t *testing.T) {
	err := run(context.Background(), []string{"-sluice=false", "-file", "no-colon", "-o", filepath.Join(t.TempDir(), "x.tar")})
	if err == nil || !strings.Contains(err.Error(), "SRC:DEST") {
		t.Errorf("got %v, want a refusal naming SRC:DEST", err)
	}
}
