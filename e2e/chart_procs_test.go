//go:build k8s

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
)

// renderedPod is what a process needs from one rendered pod template.
type renderedPod struct {
	component string
	args      []string
}

// renderChart runs `helm template` and returns the containers' args by
// component (driver, executor, test) and the queries ConfigMap's files.
func renderChart(t *testing.T, helm, values string, extra ...string) (map[string]renderedPod, map[string]string) {
	t.Helper()
	chart, err := filepath.Abs("../deploy/helm/sluice")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append([]string{"template", "procs", chart, "--namespace", "procs", "--kube-version", "v1.37.2", "-f", values}, extra...)
	out, err := exec.CommandContext(ctx, helm, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	pods := map[string]renderedPod{}
	files := map[string]string{}
	for _, doc := range strings.Split(string(out), "\n---") {
		var o struct {
			Kind string `json:"kind"`
			Data map[string]string
			Spec struct {
				Template struct {
					Metadata struct {
						Labels map[string]string `json:"labels"`
					} `json:"metadata"`
					Spec podSpec `json:"spec"`
				} `json:"template"`
				podSpec
			} `json:"spec"`
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("rendered YAML: %v", err)
		}
		switch o.Kind {
		case "ConfigMap":
			files = o.Data
		case "Deployment":
			c := o.Spec.Template.Metadata.Labels["app.kubernetes.io/component"]
			pods[c] = renderedPod{component: c, args: o.Spec.Template.Spec.Containers[0].Args}
		case "Pod":
			pods["test"] = renderedPod{component: "test", args: o.Spec.Containers[0].Args}
		}
	}
	return pods, files
}

type podSpec struct {
	Containers []struct {
		Args []string `json:"args"`
	} `json:"containers"`
}

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func httpStatus(url string) int {
	c := http.Client{Timeout: 3 * time.Second}
	r, err := c.Get(url)
	if err != nil {
		return 0
	}
	r.Body.Close()
	return r.StatusCode
}

// TestChartArgsRunTheRealBinaries runs the driver and two executors on
// loopback with exactly the arguments the chart renders (paths of the
// pod's mounts mapped to temporary directories, $(POD_IP) and the Service
// name to 127.0.0.1), against the S3-compatible server and kfake: the
// probes' endpoints answer, `helm test`'s `driver list` succeeds and names
// the query from the ConfigMap, and the Parquet output equals the oracle.
// It checks the contract between the chart and the binaries' flags without
// a cluster.
func TestChartArgsRunTheRealBinaries(t *testing.T) {
	t.Run("plaintext with the token", func(t *testing.T) { chartArgsRun(t, false) })
	t.Run("mutual TLS from a Secret", func(t *testing.T) { chartArgsRun(t, true) })
}

func chartArgsRun(t *testing.T, withTLS bool) {
	helm := needEnv(t, "SLUICE_HELM")
	srv := s3test.Start(t)
	srv.URI("sluice", "")
	broker := kafkatest.Start(t)
	const topic = "learning.progress"
	broker.CreateTopic(topic, 4)
	events := tiletest.Events(71, 4000, 500*time.Millisecond, 3*time.Minute, 7)
	recs := make([]*kgo.Record, len(events))
	for i, e := range events {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i % 4), Value: []byte(e.JSON())}
	}
	broker.Produce(recs...)
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	if len(want) < 10 {
		t.Fatalf("the oracle has %d windows; the test needs closed windows to compare", len(want))
	}

	dgrpc, dhttp := freeLoopbackPort(t), freeLoopbackPort(t)
	dir := t.TempDir()
	values := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(values, []byte(fmt.Sprintf(k8sTileValues, "x", srv.Endpoint, broker.Addr)), 0o644); err != nil {
		t.Fatal(err)
	}
	dhealth := freeLoopbackPort(t)
	extra := []string{"--set", "driver.ports.grpc=" + strconv.Itoa(dgrpc), "--set", "driver.ports.http=" + strconv.Itoa(dhttp), "--set", "driver.ports.health=" + strconv.Itoa(dhealth)}
	tlsDir := filepath.Join(dir, "tls")
	if withTLS {
		writeTLSDir(t, tlsDir)
		extra = append(extra, "--set", "tls.enabled=true", "--set", "tls.existingSecret=sluice-tls")
	}
	pods, files := renderChart(t, helm, values, extra...)
	if len(files) != 1 || pods["driver"].args == nil || pods["executor"].args == nil || pods["test"].args == nil {
		t.Fatalf("render: pods %v, query files %v", pods, files)
	}
	queries := filepath.Join(dir, "queries")
	if err := os.MkdirAll(queries, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(queries, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("chart-procs-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	mapArgs := func(args []string, scratch string, ports map[string]int) []string {
		out := make([]string, 0, len(args))
		for _, a := range args {
			a = strings.ReplaceAll(a, "/var/run/sluice/token/token", token)
			a = strings.ReplaceAll(a, "/etc/sluice/queries", queries)
			a = strings.ReplaceAll(a, "/var/run/sluice/tls", tlsDir)
			a = strings.ReplaceAll(a, "/var/lib/sluice/scratch", scratch)
			a = strings.ReplaceAll(a, "$(POD_IP)", "127.0.0.1")
			// by name: the certificate names no IP address (executors are
			// verified by --tls-peer-name, the driver by its name)
			a = strings.ReplaceAll(a, "procs-sluice-driver.procs.svc", "localhost")
			a = strings.ReplaceAll(a, "0.0.0.0", "127.0.0.1")
			for flag, port := range ports {
				if v, ok := strings.CutPrefix(a, flag+"="); ok {
					host, _, _ := net.SplitHostPort(v)
					a = flag + "=" + net.JoinHostPort(host, strconv.Itoa(port))
				}
			}
			out = append(out, a)
		}
		return out
	}
	env := []string{"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey}
	drv := NewProc(t, "driver", bins.driver, mapArgs(pods["driver"].args, "", nil)...).Env(env...)
	drv.Start()
	var execs []*Proc
	var ehealth []int
	for i := range 2 {
		g, h, hh := freeLoopbackPort(t), freeLoopbackPort(t), freeLoopbackPort(t)
		args := mapArgs(pods["executor"].args, filepath.Join(dir, "scratch"+strconv.Itoa(i)), map[string]int{"--listen": g, "--advertise": g, "--http-addr": h, "--health-addr": hh})
		p := NewProc(t, "executor-"+strconv.Itoa(i), bins.executor, args...).Env(env...)
		p.Start()
		execs, ehealth = append(execs, p), append(ehealth, hh)
	}
	logs := func() string {
		var b strings.Builder
		for _, p := range append([]*Proc{drv}, execs...) {
			fmt.Fprintf(&b, "--- %s\n%s\n", p.name, p.Logs())
		}
		return b.String()
	}
	if withTLS {
		for _, p := range append([]*Proc{drv}, execs...) {
			if strings.Contains(p.Logs(), "--insecure") {
				t.Errorf("%s warns of --insecure under TLS", p.name)
			}
		}
	}
	// The chart's probes: httpGet on each pod's health port, in plaintext
	// with TLS on or off (the kubelet holds no client certificate).
	deadline := time.Now().Add(2 * time.Minute)
	for _, url := range []string{
		fmt.Sprintf("http://127.0.0.1:%d/healthz", dhealth), fmt.Sprintf("http://127.0.0.1:%d/readyz", dhealth),
		fmt.Sprintf("http://127.0.0.1:%d/healthz", ehealth[0]), fmt.Sprintf("http://127.0.0.1:%d/readyz", ehealth[1]),
	} {
		for httpStatus(url) != http.StatusOK {
			if time.Now().After(deadline) {
				t.Fatalf("%s never answered 200 (the chart's probe)\n%s", url, logs())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	sink, err := objstore.NewS3(context.Background(), "sluice", "tile/", srv.Options("sluice"))
	if err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(5 * time.Minute)
	for {
		rep := checkSinkStore(t, sink, want)
		if rep.ok() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("output differs from the oracle:\n%s\n%s", rep.diff, logs())
		}
		time.Sleep(time.Second)
	}

	list := NewProc(t, "helm test: driver list", bins.driver, mapArgs(pods["test"].args, "", map[string]int{"--server": dgrpc})...)
	list.Start()
	if err := list.Wait(time.Minute); err != nil {
		t.Fatalf("driver list with the helm test pod's arguments: %v\n%s", err, list.Logs())
	}
	if !strings.Contains(list.Logs(), "course-activity-tile") {
		t.Errorf("driver list does not name the query:\n%s", list.Logs())
	}
	// The pods' root filesystem is read-only: nothing may be written
	// outside the mounts (token, queries, scratch, /tmp), so each process's
	// working directory must still be empty.
	for _, p := range append([]*Proc{drv, list}, execs...) {
		entries, err := os.ReadDir(p.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			t.Errorf("%s wrote %s into its working directory; under readOnlyRootFilesystem that write fails", p.name, e.Name())
		}
	}
}

// writeTLSDir writes a CA and one certificate for 127.0.0.1 and the
// chart's Service names, in cert-manager's Secret layout.
func writeTLSDir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "chart-procs-ca"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "sluice"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		DNSNames: []string{"procs-sluice-driver.procs.svc", "procs-sluice-executor.procs.svc", "localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{
		"ca.crt":  {Type: "CERTIFICATE", Bytes: caDER},
		"tls.crt": {Type: "CERTIFICATE", Bytes: der},
		"tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
