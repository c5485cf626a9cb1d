package s3test_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil/s3test"
)

func TestBinaryPicksTheNewestCachedVersion(t *testing.T) {
	cache := t.TempDir()
	bin := filepath.Join(cache, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"versitygw-v1.8.0", "versitygw-v1.10.2", "versitygw-v1.9.9", "versitygw-junk"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Newer still, but not executable.
	if err := os.WriteFile(filepath.Join(bin, "versitygw-v2.0.0"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLUICE_VERSITYGW", "")
	t.Setenv("SLUICE_CACHE", cache)
	got, err := s3test.Binary()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(bin, "versitygw-v1.10.2"); got != want {
		t.Fatalf("Binary() = %q, want %q", got, want)
	}
	explicit := filepath.Join(bin, "versitygw-v1.8.0")
	t.Setenv("SLUICE_VERSITYGW", explicit)
	if got, err := s3test.Binary(); err != nil || got != explicit {
		t.Fatalf("Binary() with SLUICE_VERSITYGW = %q, %v; want %q", got, err, explicit)
	}
	t.Setenv("SLUICE_VERSITYGW", filepath.Join(bin, "missing"))
	if _, err := s3test.Binary(); err == nil {
		t.Fatal("Binary() accepted a SLUICE_VERSITYGW that does not exist")
	}
	// Under -short the S3 case never runs, whatever the binary.
	t.Setenv("SLUICE_VERSITYGW", explicit)
	if testing.Short() {
		if s3test.Available(t) {
			t.Fatal("Available() under -short")
		}
		return
	}
	t.Setenv("SLUICE_VERSITYGW", filepath.Join(bin, "missing"))
	// Outside CI a missing server leaves the S3 case out (said in the
	// log); under CI, Available fails the test as Start does.
	t.Setenv("CI", "")
	if s3test.Available(t) {
		t.Fatal("Available() with a missing server")
	}
	t.Setenv("SLUICE_VERSITYGW", explicit)
	if !s3test.Available(t) {
		t.Fatal("Available() refused an executable server binary")
	}
}

func TestServerServesBucketsAndIsKilledAtCleanup(t *testing.T) {
	var endpoint string
	t.Run("server", func(t *testing.T) {
		srv := s3test.Start(t)
		endpoint = srv.Endpoint
		st := srv.Store(t, "bkt1", "p/")
		ctx := context.Background()
		if err := st.Put(ctx, "k", []byte("v")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(srv.DataDir, "bkt1", "p", "k")); err != nil {
			t.Fatalf("object not in the posix data dir: %v", err)
		}
		if got := srv.URI("bkt2", "/x/"); got != "s3://bkt2/x/" {
			t.Fatalf("URI = %q", got)
		}
		if _, err := os.Stat(filepath.Join(srv.DataDir, "bkt2")); err != nil {
			t.Fatalf("URI did not create bucket bkt2: %v", err)
		}
	})
	if endpoint == "" {
		t.Skip("server did not start")
	}
	if resp, err := http.Get(endpoint + "/"); err == nil {
		resp.Body.Close()
		t.Fatalf("server at %s still answers after its test ended", endpoint)
	}
}
