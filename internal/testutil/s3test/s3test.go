package s3test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sluicehq/sluice/objstore"
)

// Region is the region the test server answers for.
const Region = "us-east-1"

// Server is a running versitygw process.
type Server struct {
	Endpoint  string // http://127.0.0.1:PORT
	AccessKey string
	SecretKey string
	DataDir   string // the posix root: one directory per bucket

	tb      testing.TB
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
	client  *s3.Client

	mu      sync.Mutex
	buckets map[string]bool
}

// Binary returns the versitygw binary to run: $SLUICE_VERSITYGW, else the
// newest versitygw-vX.Y.Z in the cache's bin directory.
func Binary() (string, error) {
	if p := os.Getenv("SLUICE_VERSITYGW"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("find versitygw: SLUICE_VERSITYGW=%s: %w", p, err)
		}
		return p, nil
	}
	cache := os.Getenv("SLUICE_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("find versitygw: %w", err)
			}
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "sluice")
	}
	matches, _ := filepath.Glob(filepath.Join(cache, "bin", "versitygw-*"))
	var found []string
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			found = append(found, m)
		}
	}
	if len(found) == 0 {
		return "", fmt.Errorf("find versitygw: no %s", filepath.Join(cache, "bin", "versitygw-*"))
	}
	sort.Slice(found, func(i, j int) bool { return versionLess(found[i], found[j]) })
	return found[len(found)-1], nil
}

// versionLess orders versitygw-vX.Y.Z paths by version; names without a
// parsable version sort first.
func versionLess(a, b string) bool {
	va, vb := parseVersion(a), parseVersion(b)
	for i := range 3 {
		if va[i] != vb[i] {
			return va[i] < vb[i]
		}
	}
	return a < b
}

func parseVersion(p string) [3]int {
	v := strings.TrimPrefix(strings.TrimPrefix(filepath.Base(p), "versitygw-"), "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) != 3 {
		return [3]int{-1, -1, -1}
	}
	var out [3]int
	for i, part := range parts {
		digits := part
		if j := strings.IndexFunc(part, func(r rune) bool { return r < '0' || r > '9' }); j >= 0 {
			digits = part[:j] // "0-rc1" → "0"
		}
		n, err := strconv.Atoi(digits)
		if err != nil {
			return [3]int{-1, -1, -1}
		}
		out[i] = n
	}
	return out
}

func randomString(n int, alphabet string) string {
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Available reports whether the S3 test server can be started, for a
// test that runs its other cases without it (an S3 backend among
// several). Without a binary it fails the test if $CI is set, as Start
// does, and otherwise logs why the S3 case does not run.
func Available(t testing.TB) bool {
	t.Helper()
	if testing.Short() {
		t.Log("-short: the S3 case (the versitygw process) does not run")
		return false
	}
	if _, err := Binary(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(missing(err))
		}
		t.Log(missing(err) + ": the S3 case does not run")
		return false
	}
	return true
}

func missing(err error) string {
	return fmt.Sprintf("no S3 test server: %v; run ./scripts/test.sh (it installs versitygw) or set SLUICE_VERSITYGW", err)
}

// Start runs versitygw on 127.0.0.1 with a fresh data directory and
// credentials and returns once it answers HTTP. The process is killed when
// the test ends. Without a binary the test is skipped, or fails if $CI is
// set.
func Start(t testing.TB) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test runs the S3 test server (versitygw), a process; the full suite (scripts/test.sh) runs it")
	}
	bin, err := Binary()
	if err != nil {
		msg := missing(err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	s := &Server{
		AccessKey: randomString(20, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"),
		SecretKey: randomString(40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"),
		DataDir:   filepath.Join(dir, "data"),
		tb:        t,
		buckets:   make(map[string]bool),
	}
	if err := os.Mkdir(s.DataDir, 0o755); err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	// The port is free when picked but another process may take it before
	// versitygw binds: try a few ports.
	var lastErr error
	for attempt := 1; attempt <= 5; attempt++ {
		s.logPath = filepath.Join(dir, fmt.Sprintf("versitygw-%d.log", attempt))
		lastErr = s.start(t, bin)
		if lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("start versitygw %s: %v", bin, lastErr)
	}
	s.client = s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
	return s
}

func (s *Server) start(t testing.TB, bin string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	logf, err := os.Create(s.logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "--port", addr, "-a", s.AccessKey, "-s", s.SecretKey, "posix", s.DataDir)
	cmd.Stdout, cmd.Stderr = logf, logf
	for _, kv := range os.Environ() { // keep our flags authoritative
		if !strings.HasPrefix(kv, "VGW_") && !strings.HasPrefix(kv, "ROOT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(exited)
	}()
	endpoint := "http://" + addr
	if err := waitReady(endpoint, exited, 30*time.Second); err != nil {
		cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%w; log:\n%s", err, readFile(s.logPath))
	}
	s.cmd, s.exited, s.Endpoint = cmd, exited, endpoint
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	return nil
}

// waitReady polls endpoint until it answers HTTP (any status), the process
// exits, or the deadline passes.
func waitReady(endpoint string, exited <-chan struct{}, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.After(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := client.Get(endpoint + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-exited:
			return errors.New("versitygw exited before answering")
		case <-deadline:
			return fmt.Errorf("versitygw did not answer on %s within %v: %v", endpoint, timeout, err)
		case <-tick.C:
		}
	}
}

func readFile(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// Logs returns what the server has printed so far.
func (s *Server) Logs() string { return readFile(s.logPath) }

// CreateBucket creates a bucket (idempotent).
func (s *Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	if err := s.ensureBucket(name); err != nil {
		t.Fatal(err)
	}
}

func (s *Server) ensureBucket(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buckets[name] {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("create bucket %s on %s: %w", name, s.Endpoint, err)
	}
	s.buckets[name] = true
	return nil
}

// Options returns store options that reach this server, creating bucket
// first if needed (failing the test that started the server on error, so
// call it from the test goroutine).
func (s *Server) Options(bucket string) objstore.S3Options {
	if err := s.ensureBucket(bucket); err != nil {
		s.tb.Fatal(err)
	}
	pathStyle := true
	return objstore.S3Options{
		Region:          Region,
		Endpoint:        s.Endpoint,
		AccessKeyID:     s.AccessKey,
		SecretAccessKey: s.SecretKey,
		PathStyle:       &pathStyle,
	}
}

// URI returns s3://bucket/prefix, creating bucket first if needed. Open it
// with objstore.Options{S3: s.Options(bucket)}, or in a child process with
// Env.
func (s *Server) URI(bucket, prefix string) string {
	if err := s.ensureBucket(bucket); err != nil {
		s.tb.Fatal(err)
	}
	return "s3://" + bucket + "/" + strings.TrimLeft(prefix, "/")
}

// Env returns the AWS environment variables that point a child process's
// default AWS settings at this server.
func (s *Server) Env() []string {
	return []string{
		"AWS_ENDPOINT_URL_S3=" + s.Endpoint,
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_REGION=" + Region,
	}
}

// Store returns an S3 store on bucket/prefix of this server, creating the
// bucket if needed.
func (s *Server) Store(t testing.TB, bucket, prefix string) *objstore.S3 {
	t.Helper()
	st, err := objstore.NewS3(context.Background(), bucket, prefix, s.Options(bucket))
	if err != nil {
		t.Fatal(err)
	}
	return st
}
