//go:build k8s

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/internal/testutil/tlstest"
	"github.com/sluicehq/sluice/objstore"
)

// TestK8sMutualTLSBetweenExecutorPods installs the chart with TLS from an
// existing Secret whose certificate names the Services only, no IP
// address: the driver dials executors and executors dial each other at
// pod IPs, verifying the executors' Service name (--tls-peer-name). Two
// executors shuffle the tile; the output equals the oracle, no peer logs a
// refused handshake, and `helm test` (driver list over mutual TLS) passes.
func TestK8sMutualTLSBetweenExecutorPods(t *testing.T) {
	k := k8sEnv{
		kubeconfig: needEnv(t, "KUBECONFIG"),
		helm:       needEnv(t, "SLUICE_HELM"),
		script:     needEnv(t, "SLUICE_K8S_SCRIPT"),
		nodeIP:     needEnv(t, "SLUICE_K8S_NODE_IP"),
		ns:         "sluice-tls",
		release:    "mtls",
	}
	chart, err := filepath.Abs("../deploy/helm/sluice")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := k.run(t, 15*time.Minute, k.script, "image", "sluice:e2e-a"); err != nil {
		t.Fatalf("build and import the image: %v\n%s", err, out)
	}
	endpoint, access, secret := startNodeS3(t, k.nodeIP)
	const topic = "learning.progress"
	_, brokers := startNodeKafka(t, k.nodeIP, topic, 4)

	k.run(t, time.Minute, "kubectl", "delete", "namespace", k.ns, "--wait=true")
	if out, err := k.run(t, time.Minute, "kubectl", "create", "namespace", k.ns); err != nil {
		t.Fatalf("create namespace: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(k.diagnose(t))
		}
		k.run(t, 3*time.Minute, k.helm, "uninstall", k.release, "-n", k.ns)
		k.run(t, 3*time.Minute, "kubectl", "delete", "namespace", k.ns, "--wait=false")
	})
	k.kubectl(t, "create", "secret", "generic", "s3-keys", "--from-literal=AWS_ACCESS_KEY_ID="+access, "--from-literal=AWS_SECRET_ACCESS_KEY="+secret)
	// The certificate a user would bring: the driver's Service names and
	// the executors' Service name (the peer name), no IP address.
	svc := func(s string) string { return k.release + "-sluice-" + s + "." + k.ns + ".svc" }
	ca := tlstest.NewCA(t, "k8s-e2e-ca")
	tlsDir := filepath.Join(t.TempDir(), "tls")
	tlstest.WriteDir(t, tlsDir, ca.IssueFor(t, "sluice", k.release+"-sluice-driver", svc("driver"), svc("executor")), ca)
	k.kubectl(t, "create", "secret", "generic", "sluice-tls",
		"--from-file="+filepath.Join(tlsDir, "tls.crt"), "--from-file="+filepath.Join(tlsDir, "tls.key"), "--from-file="+filepath.Join(tlsDir, "ca.crt"))

	events := tiletest.Events(61, 4000, 500*time.Millisecond, 3*time.Minute, 7)
	producer, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	recs := make([]*kgo.Record, 0, len(events))
	for i, e := range events {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 4), Value: []byte(e.JSON())})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	values := filepath.Join(t.TempDir(), "values.yaml")
	body := fmt.Sprintf(k8sTileValues, "e2e-a", endpoint, brokers) + "tls: {enabled: true, existingSecret: sluice-tls}\n"
	if err := os.WriteFile(values, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	k.helmDo(t, "install", k.release, chart, "-f", values, "--wait", "--timeout", "10m")
	for _, c := range []string{"driver", "executor"} {
		args := k.kubectl(t, "get", "deploy", "-l", "app.kubernetes.io/component="+c, "-o", "jsonpath={.items[0].spec.template.spec.containers[0].args}")
		if !strings.Contains(args, "--tls-peer-name="+svc("executor")) {
			t.Fatalf("%s args lack the peer name: %s", c, args)
		}
	}

	pathStyle := true
	sink, err := objstore.NewS3(context.Background(), "sluice", "tile/", objstore.S3Options{Endpoint: endpoint, Region: "us-east-1", AccessKeyID: access, SecretAccessKey: secret, PathStyle: &pathStyle})
	if err != nil {
		t.Fatal(err)
	}
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	if len(want) < 10 {
		t.Fatalf("the oracle has %d windows; the test needs closed windows to compare", len(want))
	}
	var rep sinkReport
	waitK8s(t, k, "the output over mutual TLS to equal the oracle", 10*time.Minute, func() bool {
		rep = checkSinkStore(t, sink, want)
		return rep.ok()
	})
	if rep.duplicates != 0 {
		t.Fatalf("duplicated windows: %s", rep.diff)
	}
	// The driver reached both executors at their pod IPs (each prepared
	// the query), so map output crossed pods in the shuffle; no peer
	// refused a handshake, and no probe made one fail.
	for _, pod := range strings.Fields(k.kubectl(t, "get", "pods", "-l", "app.kubernetes.io/component=executor", "-o", "jsonpath={.items[*].metadata.name}")) {
		if l := k.kubectl(t, "logs", pod); !strings.Contains(l, "query prepared") {
			t.Errorf("executor %s never prepared the query:\n%s", pod, l)
		}
	}
	logs := k.kubectl(t, "logs", "-l", "app.kubernetes.io/component in (driver,executor)", "--all-containers", "--prefix", "--tail=-1")
	// The kubelet probes the plaintext health port, so every refusal
	// would be a peer's (or a probe sent to the TLS port).
	for _, line := range strings.Split(logs, "\n") {
		for _, bad := range []string{"TLS handshake failed", "certificate is valid for", "IP SANs", "bad certificate", "unknown authority"} {
			if strings.Contains(line, bad) {
				t.Fatalf("a pod logged %q:\n%s", bad, line)
			}
		}
	}
	out := k.helmDo(t, "test", k.release, "--logs", "--timeout", "5m")
	if !strings.Contains(out, "course-activity-tile") {
		t.Errorf("helm test: `driver list` output does not name the query:\n%s", out)
	}
}
