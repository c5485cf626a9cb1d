package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/testutil/faultproxy"
	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/internal/testutil/tlstest"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/proto/sluicepb"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/wire/rpcauth"
)

const e2eToken = "e2e-secret-cluster-token-7f3a9c"

// pki is a CA and a certificate directory (tls.crt, tls.key, ca.crt) all
// processes of a test share.
type pki struct {
	ca        *tlstest.CA
	dir       string
	tokenFile string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	ca := tlstest.NewCA(t, "sluice-e2e-ca")
	base := t.TempDir()
	p := pki{ca: ca, dir: filepath.Join(base, "tls"), tokenFile: filepath.Join(base, "token")}
	tlstest.WriteDir(t, p.dir, ca.Issue(t, "sluice", time.Time{}, time.Time{}), ca)
	if err := os.WriteFile(p.tokenFile, []byte(e2eToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// args are the flags of a process with mutual TLS and the token on top.
func (p pki) args() []string { return []string{"--tls-dir", p.dir, "--token-file", p.tokenFile} }

func (p pki) client(t *testing.T) *tls.Config {
	s, err := tlsconf.Load(tlsconf.Config{Dir: p.dir})
	if err != nil {
		t.Fatal(err)
	}
	return s.ClientConfig()
}

// The chaos suite's cluster kill scenario (the driver and its executors
// SIGKILLed at random) with mutual TLS and a token between all processes.
func TestChaosRandomClusterKillsWithMutualTLS(t *testing.T) {
	randomKills(t, executorsTopology(2, newPKI(t).args()...), localPlace(t))
}

// The chaos suite's executor kill scenario with mutual TLS and a token.
func TestChaosRandomExecutorKillsWithMutualTLS(t *testing.T) {
	randomExecutorKills(t, newPKI(t).args()...)
}

// recordingListen returns a kfake ListenFn whose brokers are reached
// through recording TCP proxies: the broker advertises the proxy's
// address, so every client byte passes through it.
func recordingListen(t *testing.T, proxies *[]*faultproxy.TCP) kfake.Opt {
	return kfake.ListenFn(func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr)
		if err != nil {
			return nil, err
		}
		px, err := faultproxy.NewTCP(ln.Addr().String(), nil)
		if err != nil {
			ln.Close()
			return nil, err
		}
		px.Record()
		t.Cleanup(func() { px.Close() })
		*proxies = append(*proxies, px)
		return proxiedListener{Listener: ln, addr: px}, nil
	})
}

type proxiedListener struct {
	net.Listener
	addr *faultproxy.TCP
}

func (l proxiedListener) Addr() net.Addr {
	a, _ := net.ResolveTCPAddr("tcp", l.addr.Addr())
	return a
}

// The distributed tile with mutual TLS (and the token) between a driver
// and two executors, and Kafka over SASL/SCRAM, every connection through
// a recording TCP proxy: the recordings hold neither the cluster token
// nor the SASL password (nor the spec option that carries it), and no
// checkpoint object holds the password or an unsalted SHA-256 of it.
func TestMutualTLSTileLeaksNoSecret(t *testing.T) {
	const user, password = "tile-reader", "sasl-password-Qm9v2xk8"
	var kafkaProxies []*faultproxy.TCP
	broker := kafkatest.Start(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", user, password), recordingListen(t, &kafkaProxies))
	broker.ClientOpts = []kgo.Opt{kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha256Mechanism())}
	const topic = "learning.progress"
	broker.CreateTopic(topic, 4)
	events := tiletest.Events(41, 6000, 150*time.Millisecond, 4*time.Minute, 9)
	recs := make([]*kgo.Record, len(events))
	for i, e := range events {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i % 4), Value: []byte(e.JSON())}
	}
	broker.Produce(recs...)
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)

	l := localLocations(t, "mtls")
	spec := tiletest.Spec("", l.Sink, l.Checkpoint)
	spec.Source.File = nil
	spec.Source.Kafka = &query.KafkaSource{BootstrapServers: broker.Addr, Subscribe: topic, StartingOffsets: "earliest", MaxOffsetsPerTrigger: 1500,
		Options: map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": password}}

	p := newPKI(t)
	dport := chaosFreePort(t)
	toDriver, err := faultproxy.NewTCP(fmt.Sprintf("127.0.0.1:%d", dport), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer toDriver.Close()
	toDriver.Record()
	proxies := []*faultproxy.TCP{toDriver}
	progress := filepath.Join(t.TempDir(), "progress.jsonl")
	driver := NewProc(t, "driver", bins.driver, append([]string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", dport), "--heartbeat-timeout", "3s",
		"--min-executors", "2", "--exit-when-done", "--query", writeSpec(t, spec), "--progress-json", progress, "--log-level", "debug"}, p.args()...)...)
	driver.Start()
	driver.WaitForLog(`msg="driver listening"`, 30*time.Second)
	var execs []*Proc
	for i := range 2 {
		port := chaosFreePort(t)
		px, err := faultproxy.NewTCP(fmt.Sprintf("127.0.0.1:%d", port), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer px.Close()
		px.Record()
		proxies = append(proxies, px)
		e := NewProc(t, fmt.Sprintf("executor-%d", i+1), bins.executor, append([]string{"--driver", toDriver.Addr(), "--data-dir", "data", "--log-level", "debug",
			"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--advertise", px.Addr()}, p.args()...)...)
		e.Start()
		execs = append(execs, e)
	}
	logs := func() string {
		var b strings.Builder
		for _, pr := range append([]*Proc{driver}, execs...) {
			fmt.Fprintf(&b, "--- %s:\n%s", pr.name, pr.Logs())
		}
		return b.String()
	}
	if err := driver.Wait(180 * time.Second); err != nil {
		t.Fatalf("driver serve: %v\n%s", err, logs())
	}
	if d := sinkDiff(t, l, want); d != "" {
		t.Fatalf("output differs from the oracle:\n%s\n%s", d, logs())
	}
	if !strings.Contains(driver.Logs(), "executors=2") {
		t.Fatalf("the batches did not run on the executors:\n%s", driver.Logs())
	}

	// Nothing secret in the logs (debug level) or the progress.
	prog, err := os.ReadFile(progress)
	if err != nil || len(prog) == 0 {
		t.Fatalf("progress: %v (%d bytes)", err, len(prog))
	}
	inspect := NewProc(t, "inspect", bins.driver, "checkpoint", "inspect", "--json", l.Checkpoint)
	inspect.Start()
	if err := inspect.Wait(60 * time.Second); err != nil || !strings.Contains(inspect.Logs(), `"queryId"`) {
		t.Fatalf("checkpoint inspect: %v\n%s", err, inspect.Logs())
	}
	for what, out := range map[string]string{"the logs": logs(), "the progress": string(prog), "checkpoint inspect": inspect.Logs()} {
		for _, s := range []string{e2eToken, password} {
			if strings.Contains(out, s) {
				t.Errorf("%s contain a secret", what)
			}
		}
	}

	secrets := map[string][]byte{"the cluster token": []byte(e2eToken), "the SASL password": []byte(password), "the spec's password option": []byte("sasl.password")}
	var grpcBytes, kafkaBytes int
	for i, px := range append(proxies, kafkaProxies...) {
		kafka := i >= len(proxies)
		for _, stream := range px.Recorded() {
			for what, s := range secrets {
				if bytes.Contains(stream, s) {
					t.Errorf("%s is in the bytes recorded between processes (proxy %d)", what, i)
				}
			}
			if kafka {
				kafkaBytes += len(stream)
			} else {
				grpcBytes += len(stream)
				if len(stream) > 0 && stream[0] != 0x16 { // a TLS handshake record
					t.Errorf("a connection through proxy %d does not start with a TLS handshake: %q", i, stream[:min(len(stream), 16)])
				}
			}
		}
	}
	// The recordings are real: the cluster talked, and SCRAM's first
	// message names the user in clear (SASL_PLAINTEXT).
	var sawUser bool
	for _, px := range kafkaProxies {
		for _, stream := range px.Recorded() {
			sawUser = sawUser || bytes.Contains(stream, []byte("n="+user))
		}
	}
	if grpcBytes < 10000 || kafkaBytes < 10000 || !sawUser {
		t.Fatalf("recorded %d gRPC and %d Kafka bytes (user seen %v): the proxies did not carry the traffic", grpcBytes, kafkaBytes, sawUser)
	}

	sum := sha256.Sum256([]byte(password))
	forms := map[string][]byte{
		"the password":                 []byte(password),
		"its SHA-256 (hex)":            []byte(hex.EncodeToString(sum[:])),
		"its SHA-256 (base64)":         []byte(base64.StdEncoding.EncodeToString(sum[:])),
		"its SHA-256 (raw)":            sum[:],
		"its SHA-256 (hex, uppercase)": []byte(strings.ToUpper(hex.EncodeToString(sum[:]))),
	}
	var objects int
	err = filepath.Walk(l.Checkpoint, func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		objects++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for what, f := range forms {
			if bytes.Contains(b, f) {
				t.Errorf("checkpoint object %s contains %s", path, what)
			}
		}
		return nil
	})
	if err != nil || objects == 0 {
		t.Fatalf("walk checkpoint: %v (%d objects)", err, objects)
	}
	t.Logf("recorded %d gRPC bytes through %d proxies and %d Kafka bytes; %d checkpoint objects checked", grpcBytes, len(proxies), kafkaBytes, objects)
}

var (
	serverAddrInLog = regexp.MustCompile(`msg="driver listening" address=(\S+)`)
)

// Clients without an acceptable certificate are refused on every port of
// real processes (driver gRPC, executor gRPC, the driver's HTTP port), and
// the refusing server's log names the cause.
func TestTLSRefusalsOnEveryPort(t *testing.T) {
	p := newPKI(t)
	other := tlstest.NewCA(t, "other-ca")
	base := t.TempDir()
	foreign := filepath.Join(base, "foreign")
	tlstest.WriteDir(t, foreign, other.Issue(t, "intruder", time.Time{}, time.Time{}), p.ca)
	expired := filepath.Join(base, "expired")
	tlstest.WriteDir(t, expired, p.ca.Issue(t, "old", time.Now().Add(-72*time.Hour), time.Now().Add(-24*time.Hour)), p.ca)
	in, _ := tileFiles(t, 31, 8000, 2000)
	l := localLocations(t, "refusals")
	spec := tileSpec(in, l, 1)
	spec.Trigger = query.Trigger{ProcessingTime: query.Duration(time.Second)}
	httpPort := chaosFreePort(t)
	httpAddr := fmt.Sprintf("127.0.0.1:%d", httpPort)
	driver := NewProc(t, "driver", bins.driver, append([]string{"serve", "--listen", "127.0.0.1:0", "--metrics-addr", httpAddr,
		"--query", writeSpec(t, spec)}, p.args()...)...)
	driver.Start()
	driver.WaitForLog(`msg="driver listening"`, 30*time.Second)
	daddr := logMatch(t, driver, serverAddrInLog)
	exec := NewProc(t, "executor", bins.executor, append([]string{"--driver", daddr, "--data-dir", "data"}, p.args()...)...)
	exec.Start()
	exec.WaitForLog(`msg="executor registered"`, 30*time.Second)
	eaddr := logMatch(t, exec, execAddrInLog)

	// The accepted client works on every port.
	good := p.client(t)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: good}, Timeout: 10 * time.Second}
	resp, err := hc.Get("https://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatalf("metrics with a good certificate: %v\n%s", err, driver.Logs())
	}
	resp.Body.Close()

	load := func(c tlsconf.Config) *tls.Config {
		s, err := tlsconf.Load(c)
		if err != nil {
			t.Fatal(err)
		}
		return s.ClientConfig()
	}
	cases := []struct {
		name string
		cfg  *tls.Config
		want string
	}{
		{"plaintext client", nil, "first record does not look like a TLS handshake|client sent an HTTP request to an HTTPS server"},
		{"certificate of another CA", load(tlsconf.Config{Dir: foreign}), "unknown authority"},
		{"expired certificate", load(tlsconf.Config{Dir: expired}), "expired"},
		{"no client certificate", load(tlsconf.Config{CAFile: filepath.Join(p.dir, tlsconf.DirCA)}), "didn't provide a certificate"},
	}
	for _, tc := range cases {
		for _, port := range []struct {
			name string
			proc *Proc
			call func() error
		}{
			{"driver gRPC", driver, func() error { return grpcCall(t, daddr, tc.cfg, true) }},
			{"executor gRPC", exec, func() error { return grpcCall(t, eaddr, tc.cfg, false) }},
			{"driver HTTP", driver, func() error { return httpCall(httpAddr, tc.cfg) }},
		} {
			cause := regexp.MustCompile(`msg="refused a connection: TLS handshake failed".*(` + tc.want + `)`)
			count := func() int { return len(cause.FindAllString(port.proc.Logs(), -1)) }
			before := count()
			if err := port.call(); err == nil {
				t.Errorf("%s on the %s port: accepted", tc.name, port.name)
				continue
			}
			deadline := time.Now().Add(15 * time.Second)
			for count() <= before && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if count() <= before {
				t.Errorf("%s on the %s port: the server's log does not name the cause %q:\n%s", tc.name, port.name, tc.want, port.proc.Logs())
			}
		}
	}
}

var healthAddrInLog = regexp.MustCompile(`msg="serving the health port[^"]*" address=(\S+)`)

// Under mutual TLS the kubelet's probes hold no client certificate. The
// health ports (--health-addr) of a driver and an executor answer
// /healthz and /readyz in plaintext, with the readiness of the process (the
// executor's 503 until it registers), serve nothing else, and the probes
// make no "TLS handshake failed" line; the HTTP port beside them still
// refuses a plaintext client.
func TestHealthPortsAnswerProbesWithoutACertificateUnderMutualTLS(t *testing.T) {
	p := newPKI(t)
	in, _ := tileFiles(t, 31, 8000, 2000)
	l := localLocations(t, "health-port")
	spec := tileSpec(in, l, 1)
	spec.Trigger = query.Trigger{ProcessingTime: query.Duration(time.Second)}
	driver := NewProc(t, "driver", bins.driver, append([]string{"serve", "--listen", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--health-addr", "127.0.0.1:0", "--query", writeSpec(t, spec)}, p.args()...)...)
	driver.Start()
	// The three ports log as they start, in no fixed order.
	driver.WaitForLog(`msg="driver listening"`, 30*time.Second)
	driver.WaitForLog(`msg="serving HTTP`, 30*time.Second)
	driver.WaitForLog(`msg="serving the health port`, 30*time.Second)
	daddr, dhttp, dhealth := logMatch(t, driver, serverAddrInLog), logMatch(t, driver, httpAddrInLog), logMatch(t, driver, healthAddrInLog)

	plain := &http.Client{Timeout: 10 * time.Second}
	get := func(addr, path string) (int, string) {
		t.Helper()
		resp, err := plain.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s%s in plaintext: %v", addr, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitReady := func(name, addr string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			code, body := get(addr, "/readyz")
			if code == 200 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s health port never ready: %d %q\n%s", name, code, body, driver.Logs())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitReady("driver", dhealth)

	// The executor starts with a driver address nobody serves: its health
	// port says why it is not ready, then it is restarted against the
	// driver and becomes ready.
	dead := fmt.Sprintf("127.0.0.1:%d", chaosFreePort(t))
	lost := NewProc(t, "executor-unregistered", bins.executor, append([]string{"--driver", dead, "--data-dir", t.TempDir(), "--health-addr", "127.0.0.1:0"}, p.args()...)...)
	lost.Start()
	lost.WaitForLog(`msg="serving the health port`, 30*time.Second)
	if code, body := get(logMatch(t, lost, healthAddrInLog), "/readyz"); code != 503 || !strings.Contains(body, "not registered") {
		t.Errorf("an unregistered executor's /readyz: %d %q, want 503 naming the reason", code, body)
	}
	lost.Kill()
	exec := NewProc(t, "executor", bins.executor, append([]string{"--driver", daddr, "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0"}, p.args()...)...)
	exec.Start()
	exec.WaitForLog(`msg="executor registered"`, 30*time.Second)
	exec.WaitForLog(`msg="serving the health port`, 30*time.Second)
	ehealth := logMatch(t, exec, healthAddrInLog)
	waitReady("executor", ehealth)

	for _, port := range []struct{ name, addr string }{{"driver", dhealth}, {"executor", ehealth}} {
		for i := 0; i < 5; i++ { // a probe's period, a few times over
			if code, body := get(port.addr, "/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
				t.Errorf("%s /healthz: %d %q", port.name, code, body)
			}
		}
		for _, path := range []string{"/metrics", "/", "/api/queries"} {
			if code, _ := get(port.addr, path); code != 404 {
				t.Errorf("%s health port serves %s: %d, want 404", port.name, path, code)
			}
		}
	}
	// The HTTP port itself still wants a certificate.
	if err := httpCall(dhttp, nil); err == nil {
		t.Errorf("the driver's HTTP port answered a plaintext client")
	}
	good := &http.Client{Transport: &http.Transport{TLSClientConfig: p.client(t)}, Timeout: 10 * time.Second}
	resp, err := good.Get("https://" + dhttp + "/metrics")
	if err != nil {
		t.Fatalf("metrics with a good certificate: %v", err)
	}
	resp.Body.Close()
	// Only the one plaintext client above was refused: no probe was.
	time.Sleep(200 * time.Millisecond)
	if n := strings.Count(driver.Logs(), "TLS handshake failed"); n != 1 {
		t.Errorf("the driver logged %d failed TLS handshakes, want 1 (the plaintext client of its HTTP port):\n%s", n, driver.Logs())
	}
	if n := strings.Count(exec.Logs(), "TLS handshake failed"); n != 0 {
		t.Errorf("the executor logged %d failed TLS handshakes, want none:\n%s", n, exec.Logs())
	}
}

// grpcCall makes one call with the token and cfg (nil: plaintext).
func grpcCall(t *testing.T, addr string, cfg *tls.Config, driver bool) error {
	conn, err := grpc.NewClient(addr, rpcauth.DialOptions(e2eToken, cfg)...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if driver {
		_, err = sluicepb.NewDriverServiceClient(conn).Heartbeat(ctx, &sluicepb.HeartbeatRequest{ExecutorId: "nobody"})
	} else {
		_, err = sluicepb.NewExecutorServiceClient(conn).ReleaseBatch(ctx, &sluicepb.ReleaseBatchRequest{})
	}
	return err
}

func httpCall(addr string, cfg *tls.Config) error {
	scheme, tr := "http", &http.Transport{}
	if cfg != nil {
		scheme, tr.TLSClientConfig = "https", cfg
	}
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := hc.Get(scheme + "://" + addr + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

// Rotation: the certificate files are replaced while a processingTime
// query runs on a driver and three executors with mutual TLS. New
// connections get the new certificate (a client sees the new serial, and
// a new executor joins with it), the query never stops, and the output is
// exact.
func TestCertificateRotationWhileAQueryRuns(t *testing.T) {
	p := newPKI(t)
	seed := chaosSeed(t)
	q := startClusterQuery(t, seed, localPlace(t), 2, p.args()...)
	before := len(q.progress())
	fresh := p.ca.Issue(t, "sluice-rotated", time.Time{}, time.Time{})
	tlstest.WriteDir(t, p.dir, fresh, p.ca)
	// A new connection to the driver sees the new certificate.
	cfg := p.client(t)
	cfg.ServerName = "127.0.0.1"
	var serial string
	q.waitFor("the driver to serve the new certificate", 30*time.Second, func() bool {
		c, err := tls.Dial("tcp", q.run.addr, cfg)
		if err != nil {
			return false
		}
		defer c.Close()
		serial = c.ConnectionState().PeerCertificates[0].SerialNumber.String()
		return serial == fresh.Cert.SerialNumber.String()
	})
	// A new executor joins with the new certificate and an old one is
	// killed: batches go on with new connections.
	joined := q.run.extra(nil)
	joined.WaitForLog(`msg="executor registered"`, 60*time.Second)
	q.run.executors[0].Kill()
	q.waitFor("three more batches after the rotation", 120*time.Second, func() bool { return len(q.progress()) >= before+3 })
	prog, files := q.drain()
	finish(t, q.p, q.f.oracle(), summary{scenario: "certificate-rotation/serve+2-executors+mtls/local", seed: seed, kills: 1, retries: retries(prog),
		extra: []string{fmt.Sprintf("files=%d", files)}})
}

// Safe defaults on real processes: a non-loopback listen address with
// neither a token nor mutual TLS is refused, naming the flags; --insecure
// starts with a warning; a whitespace token is refused.
func TestSafeDefaultsOnRealProcesses(t *testing.T) {
	in, _ := tileFiles(t, 31, 8000, 2000)
	spec := writeSpec(t, tileSpec(in, localLocations(t, "defaults"), 1))
	refused := func(name string, p *Proc, want ...string) {
		t.Helper()
		p.Start()
		err := p.Wait(60 * time.Second)
		if err == nil {
			t.Errorf("%s: started", name)
			return
		}
		for _, w := range want {
			if !strings.Contains(p.Logs(), w) {
				t.Errorf("%s: the error does not say %q:\n%s", name, w, p.Logs())
			}
		}
	}
	refused("driver on 0.0.0.0 with nothing", NewProc(t, "driver", bins.driver, "serve", "--listen", "0.0.0.0:0", "--query", spec), "not loopback", "--tls-ca", "--token-file", "--insecure")
	refused("executor on 0.0.0.0 with nothing", NewProc(t, "executor", bins.executor, "--driver", "127.0.0.1:1", "--data-dir", "d", "--listen", "0.0.0.0:0"), "not loopback", "--insecure")
	refused("whitespace SLUICE_TOKEN", NewProc(t, "driver", bins.driver, "serve", "--query", spec).Env(rpcauth.TokenEnv+"= \t "), rpcauth.TokenEnv, "empty")
	blank := filepath.Join(t.TempDir(), "token")
	os.WriteFile(blank, []byte("\n \n"), 0o600)
	refused("whitespace token file", NewProc(t, "executor", bins.executor, "--driver", "127.0.0.1:1", "--data-dir", "d", "--token-file", blank), "--token-file", "empty")

	insecure := NewProc(t, "driver", bins.driver, "serve", "--listen", "0.0.0.0:0", "--insecure", "--query", spec)
	insecure.Start()
	insecure.WaitForLog(`msg="driver listening"`, 30*time.Second)
	if !strings.Contains(insecure.Logs(), "level=WARN msg=\"--insecure:") {
		t.Errorf("--insecure started without the warning:\n%s", insecure.Logs())
	}
	insecure.Stop(30 * time.Second)
}

// vmRSS returns a process's resident set size in bytes.
func vmRSS(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// An unauthenticated client (no token) sending a 100 MiB message to the
// driver is refused, and the driver's resident memory does not grow by
// more than the per-message bound (plus slack for the runtime).
func TestHundredMiBFromAnUnauthenticatedPeerIsRefusedWithinTheBound(t *testing.T) {
	p := newPKI(t)
	in, _ := tileFiles(t, 31, 8000, 2000)
	spec := tileSpec(in, localLocations(t, "big"), 1)
	spec.Trigger = query.Trigger{ProcessingTime: query.Duration(time.Second)}
	driver := NewProc(t, "driver", bins.driver, "serve", "--listen", "127.0.0.1:0", "--token-file", p.tokenFile, "--query", writeSpec(t, spec))
	driver.Start()
	driver.WaitForLog(`msg="driver listening"`, 30*time.Second)
	addr := logMatch(t, driver, serverAddrInLog)
	time.Sleep(time.Second) // let the process settle before measuring
	pid := driver.cmd.Process.Pid
	base := vmRSS(t, pid)
	conn, err := grpc.NewClient(addr, rpcauth.DialOptions("", nil)...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	big := &sluicepb.RegisterRequest{Address: "127.0.0.1:1", Name: strings.Repeat("x", 100<<20)}
	var peak int64
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		_, err = sluicepb.NewDriverServiceClient(conn).Register(ctx, big, grpc.MaxCallSendMsgSize(200<<20))
		cancel()
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("100 MiB register without a token: %v, want RESOURCE_EXHAUSTED", err)
		}
		peak = max(peak, vmRSS(t, pid))
	}
	growth := peak - base
	t.Logf("driver VmRSS %d MiB before, %d MiB peak after three 100 MiB messages (growth %d KiB, bound %d MiB)", base>>20, peak>>20, growth>>10, rpcauth.MaxMessageBytes>>20)
	if growth > rpcauth.MaxMessageBytes+(4<<20) {
		t.Fatalf("the driver's RSS grew by %d MiB, more than the %d MiB bound plus 4 MiB slack", growth>>20, rpcauth.MaxMessageBytes>>20)
	}
}
