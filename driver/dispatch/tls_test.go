package dispatch

import (
	"context"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/executor"
	"github.com/sluicehq/sluice/internal/testutil/syncbuf"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/internal/testutil/tlstest"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/proto/sluicepb"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/wire/rpcauth"
)

// pki is a test CA with a server/client certificate directory.
type pki struct {
	ca  *tlstest.CA
	dir string
}

func newPKI(t *testing.T) pki {
	ca := tlstest.NewCA(t, "sluice-test-ca")
	dir := filepath.Join(t.TempDir(), "tls")
	tlstest.WriteDir(t, dir, ca.Issue(t, "sluice", time.Time{}, time.Time{}), ca)
	return pki{ca: ca, dir: dir}
}

func tlsSource(t *testing.T, c tlsconf.Config) *tlsconf.Source {
	t.Helper()
	s, err := tlsconf.Load(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The pass-through tile on two executors with mutual TLS and a token on
// top: every connection (executor to driver, driver to executor, executor
// to executor) is TLS; the rows returned to the driver's sink exceed one
// message's limit, so they arrive in chunks.
func TestMutualTLSClusterStreamsDriverSinkRowsInChunks(t *testing.T) {
	p := newPKI(t)
	in, _ := tileInput(t, 150000)
	c := newSecureTestCluster(t, 2, "s3cret", tlsSource(t, tlsconf.Config{Dir: p.dir}), testLogger(t))
	dir := t.TempDir()
	spec := tiletest.Spec(in, "", filepath.Join(dir, "cp"))
	spec.Aggregate, spec.Watermark = nil, nil
	spec.Source.File.MaxFilesPerTrigger = 1000
	spec.ShufflePartitions = 1 // one reduce task returns every row
	spec.Sink = query.Sink{JSONBatches: &query.JSONBatchesSink{Path: filepath.Join(dir, "out")}}
	c.runOn(spec, nil)
	var lines, size int
	filepath.Walk(filepath.Join(dir, "out"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			b, _ := os.ReadFile(p)
			lines += strings.Count(string(b), "\n")
			size += len(b)
		}
		return nil
	})
	if lines != 150000 {
		t.Fatalf("%d rows written, want 150000", lines)
	}
	// The shuffle encoding is more compact than JSON; what matters is that
	// one partition's rows are far beyond one message.
	if size < 3*rpcauth.MaxMessageBytes {
		t.Fatalf("the sink got %d bytes: too few to need chunks (limit %d per message)", size, rpcauth.MaxMessageBytes)
	}
}

// Clients without an acceptable certificate are refused by the driver's
// and the executor's gRPC servers, and the server's log names the cause.
func TestTLSRefusalsNameTheCauseOnTheServer(t *testing.T) {
	p := newPKI(t)
	other := tlstest.NewCA(t, "other-ca")
	base := t.TempDir()
	foreign := filepath.Join(base, "foreign")
	tlstest.WriteDir(t, foreign, other.Issue(t, "intruder", time.Time{}, time.Time{}), p.ca)
	expired := filepath.Join(base, "expired")
	tlstest.WriteDir(t, expired, p.ca.Issue(t, "old", time.Now().Add(-72*time.Hour), time.Now().Add(-24*time.Hour)), p.ca)
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	c := newSecureTestCluster(t, 1, "", tlsSource(t, tlsconf.Config{Dir: p.dir}), log)
	execAddr := c.nodes[0].Addr()
	cases := []struct {
		name string
		cfg  *tls.Config
		want string
	}{
		{"plaintext client", nil, "first record does not look like a TLS handshake"},
		{"certificate of another CA", tlsSource(t, tlsconf.Config{Dir: foreign}).ClientConfig(), "unknown authority"},
		{"expired certificate", tlsSource(t, tlsconf.Config{Dir: expired}).ClientConfig(), "expired"},
		{"no client certificate", tlsSource(t, tlsconf.Config{CAFile: filepath.Join(p.dir, tlsconf.DirCA)}).ClientConfig(), "didn't provide a certificate"},
	}
	for _, tc := range cases {
		for _, port := range []struct{ name, addr string }{{"driver", c.driver.Addr()}, {"executor", execAddr}} {
			conn, err := grpc.NewClient(port.addr, rpcauth.DialOptions("", tc.cfg)...)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var callErr error
			if port.name == "driver" {
				_, callErr = sluicepb.NewDriverServiceClient(conn).Heartbeat(ctx, &sluicepb.HeartbeatRequest{ExecutorId: "x"})
			} else {
				_, callErr = sluicepb.NewExecutorServiceClient(conn).ReleaseBatch(ctx, &sluicepb.ReleaseBatchRequest{})
			}
			cancel()
			conn.Close()
			if callErr == nil {
				t.Errorf("%s on the %s port: the call succeeded", tc.name, port.name)
				continue
			}
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(logs.String(), tc.want) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if !strings.Contains(logs.String(), tc.want) {
				t.Errorf("%s on the %s port: the server's log does not name the cause %q:\n%s", tc.name, port.name, tc.want, logs.String())
			}
		}
	}
	_ = execAddr
}

// A message larger than MaxMessageBytes is refused before any handler runs.
func TestOversizedMessageIsRefused(t *testing.T) {
	c := newTestCluster(t, 0, "s3cret")
	conn, err := grpc.NewClient(c.driver.Addr(), rpcauth.DialOptions("", nil)...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	big := strings.Repeat("x", 8<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = sluicepb.NewDriverServiceClient(conn).Register(ctx, &sluicepb.RegisterRequest{Address: "127.0.0.1:1", Name: big}, grpc.MaxCallSendMsgSize(64<<20))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("8 MiB register: %v, want RESOURCE_EXHAUSTED", err)
	}
}

func TestNonLoopbackListenNeedsAuthentication(t *testing.T) {
	p := newPKI(t)
	serverOnly := filepath.Join(t.TempDir(), "server-only")
	if err := os.MkdirAll(serverOnly, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{tlsconf.DirCert, tlsconf.DirKey} {
		b, _ := os.ReadFile(filepath.Join(p.dir, f))
		os.WriteFile(filepath.Join(serverOnly, f), b, 0o600)
	}
	for _, tc := range []struct {
		name string
		opts DriverOptions
		want string // "" accepted
	}{
		{"nothing", DriverOptions{}, "--tls-ca"},
		{"TLS without a CA", DriverOptions{TLS: tlsSource(t, tlsconf.Config{Dir: serverOnly})}, "TLS without a CA"},
		{"token", DriverOptions{Token: "t"}, ""},
		{"mutual TLS", DriverOptions{TLS: tlsSource(t, tlsconf.Config{Dir: p.dir})}, ""},
		{"insecure", DriverOptions{Insecure: true}, ""},
	} {
		var logs syncbuf.Buffer
		tc.opts.Listen, tc.opts.Logger = "0.0.0.0:0", slog.New(slog.NewTextHandler(&logs, nil))
		d, err := NewDriver(tc.opts)
		if tc.want != "" {
			if err == nil || !strings.Contains(err.Error(), "not loopback") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: got %v, want a refusal naming %q", tc.name, err, tc.want)
			}
			if err == nil {
				d.lis.Close()
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		d.lis.Close()
		if tc.opts.Insecure && !strings.Contains(logs.String(), "--insecure") {
			t.Errorf("--insecure started without the warning: %s", logs.String())
		}
		// The same rule for executors.
		_, err = executor.NewNode(executor.NodeOptions{Driver: "127.0.0.1:1", DataDir: t.TempDir(), Listen: "0.0.0.0:0"})
		if err == nil || !strings.Contains(err.Error(), "not loopback") {
			t.Errorf("executor on 0.0.0.0 with nothing: %v", err)
		}
	}
}

func TestBlankTokenIsAnError(t *testing.T) {
	t.Setenv(rpcauth.TokenEnv, " \t\n")
	if _, err := rpcauth.LoadToken(""); err == nil || !strings.Contains(err.Error(), rpcauth.TokenEnv) {
		t.Errorf("whitespace %s: %v", rpcauth.TokenEnv, err)
	}
	f := filepath.Join(t.TempDir(), "token")
	os.WriteFile(f, []byte("  \n"), 0o600)
	if _, err := rpcauth.LoadToken(f); err == nil || !strings.Contains(err.Error(), "--token-file") {
		t.Errorf("whitespace token file: %v", err)
	}
	t.Setenv(rpcauth.TokenEnv, " abc\n")
	if tok, err := rpcauth.LoadToken(""); err != nil || tok != "abc" {
		t.Errorf("token %q, %v", tok, err)
	}
}

// A query with secrets is not sent to executors over plaintext beyond
// loopback.
func TestSecretsAreNotSentInClear(t *testing.T) {
	d, err := NewDriver(DriverOptions{Listen: "0.0.0.0:0", Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.lis.Close()
	spec := query.Spec{Name: "q", Source: query.Source{Kafka: &query.KafkaSource{BootstrapServers: "b:9092", Subscribe: "t",
		Options: map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "hunter2"}}}}
	_, err = d.NewRunner(RunnerOptions{QueryID: "id", Spec: spec})
	if err == nil || !strings.Contains(err.Error(), "kafka.sasl.password") || !strings.Contains(err.Error(), "--tls-dir") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("got %v, want a refusal naming the option and --tls-dir, without the value", err)
	}
}

// Executors advertised at an address their certificate does not name (pod
// IPs under Kubernetes): with the peer name the certificate carries
// (--tls-peer-name), the driver's task calls and the executors' shuffle
// fetches verify that name and the tile equals the oracle; a client that
// verifies the dialed IP instead is refused.
func TestPeerNameVerifiesExecutorsDialedByIP(t *testing.T) {
	const peer = "sluice-executor.sluice.svc"
	ca := tlstest.NewCA(t, "sluice-test-ca")
	dir := filepath.Join(t.TempDir(), "tls")
	// localhost: the executors dial the driver by name; no IP address at all.
	tlstest.WriteDir(t, dir, ca.IssueFor(t, "sluice", "localhost", peer), ca)
	src := tlsSource(t, tlsconf.Config{Dir: dir, PeerName: peer})
	c := newSecureTestCluster(t, 0, "", src, testLogger(t))
	_, port, _ := strings.Cut(c.driver.Addr(), ":")
	for range 2 {
		c.addNode(func(o *executor.NodeOptions) { o.Driver = "localhost:" + port })
	}
	c.waitLive(2)

	in, want := tileInput(t, 6000)
	out := t.TempDir()
	spec := tiletest.Spec(in, filepath.Join(out, "out"), filepath.Join(out, "cp"))
	spec.Source.File.MaxFilesPerTrigger = 4
	spec.ShufflePartitions = 4
	r := c.runOn(spec, nil)
	if d := tiletest.Diff(want, sinkWindows(t, spec.Sink.Parquet.Path)); d != "" {
		t.Fatalf("output differs from the oracle:\n%s", d)
	}
	if st := r.Stats(); st.ShuffleBytes == 0 {
		t.Fatalf("no shuffle between the executors: %+v", st)
	}

	call := func(cfg *tls.Config, opts ...grpc.DialOption) error {
		conn, err := grpc.NewClient(c.nodes[0].Addr(), append(rpcauth.DialOptions("", cfg), opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = sluicepb.NewExecutorServiceClient(conn).ReleaseBatch(ctx, &sluicepb.ReleaseBatchRequest{})
		return err
	}
	// The certificate does not cover the executor's IP: Go's standard
	// verification of the dialed address refuses it.
	cert, err := src.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	roots, err := src.Pool()
	if err != nil {
		t.Fatal(err)
	}
	std := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12}
	if err := call(std); err == nil || !strings.Contains(err.Error(), "IP SANs") {
		t.Fatalf("dialing %s verifying the IP: %v, want a refusal naming the missing IP SAN", c.nodes[0].Addr(), err)
	}
	// tlsconf's verification (the CA may rotate) checks the dialed IP too.
	if err := call(src.ClientConfig()); err == nil || !strings.Contains(err.Error(), "IP SANs") {
		t.Fatalf("dialing %s with the CA's verification: %v, want a refusal naming the missing IP SAN", c.nodes[0].Addr(), err)
	}
	// The peer name is what is verified: the right one passes, another
	// name the CA did not sign for this certificate is refused.
	if err := call(src.ClientConfig(), grpc.WithAuthority(peer)); err != nil {
		t.Fatalf("dialing %s verifying %s: %v", c.nodes[0].Addr(), peer, err)
	}
	if err := call(src.ClientConfig(), grpc.WithAuthority("other.sluice.svc")); err == nil || !strings.Contains(err.Error(), "not other.sluice.svc") {
		t.Fatalf("dialing %s verifying other.sluice.svc: %v, want a refusal", c.nodes[0].Addr(), err)
	}
}

func TestPeerNameNeedsTLSAndIsAName(t *testing.T) {
	if _, err := tlsconf.Open(tlsconf.Config{PeerName: "x.svc"}); err == nil || !strings.Contains(err.Error(), "--tls-peer-name") {
		t.Fatalf("a peer name without TLS: %v", err)
	}
	p := newPKI(t)
	if _, err := tlsconf.Open(tlsconf.Config{Dir: p.dir, PeerName: "x.svc:7078"}); err == nil || !strings.Contains(err.Error(), "no port") {
		t.Fatalf("a peer name with a port: %v", err)
	}
}
