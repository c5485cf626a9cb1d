// Command mkimage writes the Sluice container image as an image tarball
// (docker-archive layout with an OCI-compatible manifest), without Docker
// or a registry: FROM scratch, one layer holding the static binaries, a
// non-root user and the host's CA bundle. `ctr images import`, `docker load`
// and `podman load` read it.
//
//	cd deploy && go run ./mkimage -o ../sluice.tar -tag sluice:dev
//
// By default it builds /usr/local/bin/driver and /usr/local/bin/executor
// from the repository with CGO_ENABLED=0; -sluice=false with -file and
// -entrypoint packs any other static binary (the test cluster's pause and
// CoreDNS images). It is its own module so go-containerregistry never
// enters the binaries' dependency graph.
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const module = "github.com/sluicehq/sluice"

// uid is the non-root user the image runs as (distroless's "nonroot").
const uid = 65532

type fileFlag []string

func (f *fileFlag) String() string     { return strings.Join(*f, ",") }
func (f *fileFlag) Set(v string) error { *f = append(*f, v); return nil }

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	out := fs.String("o", "sluice.tar", "image tarball to write")
	tag := fs.String("tag", "sluice:dev", "image reference recorded in the tarball")
	sluice := fs.Bool("sluice", true, "build and add the driver and executor binaries from the repository")
	root := fs.String("repo", "", "repository root (default: the nearest parent directory whose go.mod is "+module+")")
	entrypoint := fs.String("entrypoint", "/usr/local/bin/driver", "the image's entrypoint")
	user := fs.String("user", fmt.Sprintf("%d:%d", uid, uid), "UID:GID the image runs as (the Sluice image: the non-root 65532)")
	caCerts := fs.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to add at /etc/ssl/certs/ca-certificates.crt (empty: none)")
	var files fileFlag
	fs.Var(&files, "file", "SRC:DEST, a file to add (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	ref, err := name.NewTag(*tag)
	if err != nil {
		return fmt.Errorf("-tag %q: %w", *tag, err)
	}

	var entries []entry
	if *sluice {
		dir := *root
		if dir == "" {
			if dir, err = findRepo(); err != nil {
				return err
			}
		}
		tmp, err := os.MkdirTemp("", "mkimage-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		for _, bin := range []string{"driver", "executor"} {
			dst := filepath.Join(tmp, bin)
			if err := build(ctx, dir, "./cmd/"+bin, dst); err != nil {
				return err
			}
			entries = append(entries, entry{src: dst, dest: "usr/local/bin/" + bin, mode: 0o755})
		}
	}
	for _, f := range files {
		src, dest, ok := strings.Cut(f, ":")
		if !ok || src == "" || dest == "" {
			return fmt.Errorf("-file %q: want SRC:DEST", f)
		}
		entries = append(entries, entry{src: src, dest: strings.TrimPrefix(dest, "/"), mode: 0o755})
	}
	if len(entries) == 0 {
		return errors.New("nothing to add: -sluice=false and no -file")
	}
	if *caCerts != "" {
		if _, err := os.Stat(*caCerts); err == nil {
			entries = append(entries, entry{src: *caCerts, dest: "etc/ssl/certs/ca-certificates.crt", mode: 0o644})
		} else {
			fmt.Fprintf(os.Stderr, "mkimage: no CA bundle at %s; TLS to public endpoints (AWS S3) will fail in this image\n", *caCerts)
		}
	}

	layer, err := buildLayer(entries)
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint = []string{*entrypoint}
	cf.Config.User = *user
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.source": "https://" + module,
		"org.opencontainers.image.title":  "sluice",
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	if err := tarball.WriteToFile(*out, ref, img); err != nil {
		return fmt.Errorf("write %s: %w", *out, err)
	}
	d, _ := img.Digest()
	fmt.Fprintf(os.Stderr, "mkimage: wrote %s (%s, %s)\n", *out, ref, d)
	return nil
}

type entry struct {
	src, dest string
	mode      int64
}

// buildLayer writes one tar layer: the directories, /etc/passwd and
// /etc/group naming the non-root user, a world-writable /tmp, and the files.
// Times are fixed so the same inputs give the same layer digest.
func buildLayer(entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0).UTC()
	dirs := map[string]bool{}
	addDir := func(d string, mode int64) error {
		if d == "." || d == "" || dirs[d] {
			return nil
		}
		dirs[d] = true
		return tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: mode, ModTime: epoch})
	}
	addParents := func(p string) error {
		var parts []string
		for d := filepath.Dir(p); d != "." && d != "/"; d = filepath.Dir(d) {
			parts = append([]string{d}, parts...)
		}
		for _, d := range parts {
			if err := addDir(d, 0o755); err != nil {
				return err
			}
		}
		return nil
	}
	addBytes := func(p string, mode int64, data []byte) error {
		if err := addParents(p); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(data)), ModTime: epoch}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := addDir("tmp", 0o1777); err != nil {
		return nil, err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, uid)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", uid)
	if err := addBytes("etc/passwd", 0o644, []byte(passwd)); err != nil {
		return nil, err
	}
	if err := addBytes("etc/group", 0o644, []byte(group)); err != nil {
		return nil, err
	}
	for _, e := range entries {
		data, err := os.ReadFile(e.src)
		if err != nil {
			return nil, err
		}
		if err := addBytes(e.dest, e.mode, data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
}

// build compiles pkg in the repository at dir as a static binary.
func build(ctx context.Context, dir, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w", pkg, err)
	}
	return nil
}

// findRepo walks up from the working directory to the repository's go.mod.
func findRepo() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(data)), "module "+module+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no parent directory holds the go.mod of %s; give -repo", module)
		}
		dir = parent
	}
}
