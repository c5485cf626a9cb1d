//go:build k8s

// The chart on a real Kubernetes cluster. Built only with -tags k8s, which
// scripts/k8s-e2e.sh passes after bringing the single-node cluster up
// (scripts/k8s.sh); it fails, never skips, when the cluster or a tool is
// missing.

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
)

// k8sEnv is what scripts/k8s-e2e.sh hands the test.
type k8sEnv struct {
	kubeconfig, helm, script, nodeIP, ns, release string
}

func needEnv(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: run this test through scripts/k8s-e2e.sh", name)
	}
	return v
}

func (k k8sEnv) run(t *testing.T, timeout time.Duration, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+k.kubeconfig)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (k k8sEnv) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := k.run(t, 3*time.Minute, "kubectl", append([]string{"-n", k.ns}, args...)...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (k k8sEnv) helmDo(t *testing.T, args ...string) string {
	t.Helper()
	out, err := k.run(t, 12*time.Minute, k.helm, append(args, "-n", k.ns)...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s\n%s", strings.Join(args, " "), err, out, k.diagnose(t))
	}
	return out
}

// diagnose collects what explains a failure: pods, events, logs.
func (k k8sEnv) diagnose(t *testing.T) string {
	var b strings.Builder
	for _, args := range [][]string{
		{"get", "pods", "-o", "wide"},
		{"get", "events", "--sort-by=.lastTimestamp"},
		{"logs", "-l", "app.kubernetes.io/component=driver", "--tail=80", "--all-containers", "--prefix"},
		{"logs", "-l", "app.kubernetes.io/component=executor", "--tail=40", "--all-containers", "--prefix"},
	} {
		out, _ := k.run(t, time.Minute, "kubectl", append([]string{"-n", k.ns}, args...)...)
		fmt.Fprintf(&b, "--- kubectl %s\n%s\n", strings.Join(args, " "), out)
	}
	return b.String()
}

// startNodeS3 runs the S3-compatible server on the node address, where
// pods reach it through the bridge, with a bucket for everything.
func startNodeS3(t *testing.T, ip string) (endpoint, access, secret string) {
	t.Helper()
	bin, err := s3test.Binary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sluice"), 0o755); err != nil {
		t.Fatal(err)
	}
	port := freePortOn(t, ip)
	access, secret = "k8se2eaccess", "k8se2esecret-"+strconv.FormatInt(time.Now().UnixNano(), 36)
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	logf, err := os.Create(filepath.Join(t.TempDir(), "versitygw.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--port", addr, "-a", access, "-s", secret, "posix", dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logf.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw on %s did not start: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "http://" + addr, access, secret
}

func freePortOn(t *testing.T, ip string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen on the node address %s (is the cluster up?): %v", ip, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startNodeKafka runs kfake on the node address, so the brokers it
// advertises are reachable from pods.
func startNodeKafka(t *testing.T, ip, topic string, partitions int32) (*kfake.Cluster, string) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic),
		kfake.ListenFn(func(network, address string) (net.Listener, error) {
			return net.Listen(network, strings.Replace(address, "127.0.0.1", ip, 1))
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, strings.Join(c.ListenAddrs(), ",")
}

const k8sTileValues = `
image: {repository: sluice, tag: %[1]s, pullPolicy: Never}
objectStore:
  endpoint: %[2]s
  region: us-east-1
  pathStyle: true
  credentials: {existingSecret: s3-keys}
registry: {uri: "s3://sluice/registry/"}
driver:
  terminationGracePeriodSeconds: 30
  stopTimeoutSeconds: 20
  resources: {requests: {cpu: 50m, memory: 64Mi}, limits: {memory: 512Mi}}
executor:
  replicas: 2
  slots: 2
  drainTimeoutSeconds: 20
  preStopSleepSeconds: 2
  terminationGracePeriodSeconds: 30
  scratch: {sizeLimit: 512Mi}
  resources: {requests: {cpu: 50m, memory: 64Mi}, limits: {memory: 512Mi}}
queries:
  course-activity-tile:
    source:
      kafka: {bootstrapServers: "%[3]s", subscribe: learning.progress, startingOffsets: earliest, failOnDataLoss: true, maxOffsetsPerTrigger: 400}
      format: json
      schema:
        - {name: event_id, type: string, nullable: false}
        - {name: course_id, type: string, nullable: false}
        - {name: lesson_id, type: string}
        - {name: event_time, type: timestamp, nullable: false}
    watermark: {column: event_time, delay: 10m}
    aggregate:
      window: {column: event_time, size: 5m}
      groupBy: [course_id]
      measures: [{name: event_count, fn: count}]
    outputMode: append
    sink: {parquet: {path: "s3://sluice/tile/"}}
    checkpointLocation: s3://sluice/checkpoint/
    trigger: {processingTime: 2s}
    shufflePartitions: 4
`

// TestK8sHelmInstallRunsTheTileExactlyOnceThroughPodDeletionsAndUpgrades is
// the cluster scenario: helm install with two executors, events
// produced in rounds, the driver pod deleted mid-batch, an executor pod
// deleted, upgrades to three executors and to a new image tag while the
// query runs; the Parquet output equals the oracle exactly once, `helm
// test` passes, and `helm uninstall` leaves checkpoint and output.
func TestK8sHelmInstallRunsTheTileExactlyOnceThroughPodDeletionsAndUpgrades(t *testing.T) {
	k := k8sEnv{
		kubeconfig: needEnv(t, "KUBECONFIG"),
		helm:       needEnv(t, "SLUICE_HELM"),
		script:     needEnv(t, "SLUICE_K8S_SCRIPT"),
		nodeIP:     needEnv(t, "SLUICE_K8S_NODE_IP"),
		ns:         "sluice-e2e",
		release:    "tile",
	}
	chart, err := filepath.Abs("../deploy/helm/sluice")
	if err != nil {
		t.Fatal(err)
	}
	// Two image tags of the same build: the upgrade changes the pods' image.
	imgStart := time.Now()
	for _, tag := range []string{"sluice:e2e-a", "sluice:e2e-b"} {
		if out, err := k.run(t, 15*time.Minute, k.script, "image", tag); err != nil {
			t.Fatalf("build and import %s: %v\n%s", tag, err, out)
		}
	}
	t.Logf("images built and imported in %s", time.Since(imgStart).Round(time.Second))

	endpoint, access, secret := startNodeS3(t, k.nodeIP)
	const topic = "learning.progress"
	_, brokers := startNodeKafka(t, k.nodeIP, topic, 4)
	producer, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	events := tiletest.Events(53, 6000, 500*time.Millisecond, 3*time.Minute, 7)
	produce := func(from, to int) {
		t.Helper()
		recs := make([]*kgo.Record, 0, to-from)
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 4), Value: []byte(events[i].JSON())})
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	pathStyle := true
	s3opts := objstore.S3Options{Endpoint: endpoint, Region: "us-east-1", AccessKeyID: access, SecretAccessKey: secret, PathStyle: &pathStyle}
	cp, err := objstore.NewS3(context.Background(), "sluice", "checkpoint/", s3opts)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := objstore.NewS3(context.Background(), "sluice", "tile/", s3opts)
	if err != nil {
		t.Fatal(err)
	}

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
	valuesFile := func(tag string) string {
		p := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(p, []byte(fmt.Sprintf(k8sTileValues, tag, endpoint, brokers)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	produce(0, 1500)
	k.helmDo(t, "install", k.release, chart, "-f", valuesFile("e2e-a"), "--wait", "--timeout", "10m")
	token1 := k.kubectl(t, "get", "secret", k.release+"-sluice-token", "-o", "jsonpath={.data.token}")

	committed := func() int64 {
		_, commit, err := checkpoint.New(cp).Latest(context.Background())
		if err != nil || commit == nil {
			return -1
		}
		return int64(commit.BatchID)
	}
	waitK8s(t, k, "a first committed batch", 5*time.Minute, func() bool { return committed() >= 0 })

	// The driver pod deleted mid-batch: wait for a batch planned but not
	// committed, then delete the pod; Kubernetes recreates it and the new
	// driver resumes from the registry and the checkpoint.
	produce(1500, 3000)
	caught := false
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if pendingBatch(t, cp) != nil {
			caught = true
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := committed()
	k.kubectl(t, "delete", "pod", "-l", "app.kubernetes.io/component=driver", "--wait=false")
	t.Logf("driver pod deleted with a batch in flight: %v (last commit %d)", caught, before)
	waitK8s(t, k, "a batch committed by the new driver", 5*time.Minute, func() bool { return committed() > before })

	// An executor pod deleted while the query runs.
	produce(3000, 4000)
	pods := strings.Fields(k.kubectl(t, "get", "pods", "-l", "app.kubernetes.io/component=executor", "-o", "jsonpath={.items[*].metadata.name}"))
	if len(pods) != 2 {
		t.Fatalf("executor pods %v, want 2", pods)
	}
	before = committed()
	k.kubectl(t, "delete", "pod", pods[0], "--wait=false")
	waitK8s(t, k, "a batch after an executor was deleted", 5*time.Minute, func() bool { return committed() > before })

	// Upgrades while the query runs: three executors, then a new image tag.
	produce(4000, 5000)
	k.helmDo(t, "upgrade", k.release, chart, "-f", valuesFile("e2e-a"), "--set", "executor.replicas=3", "--wait", "--timeout", "10m")
	// A pod deleted earlier or replaced by the rollout may still be
	// terminating (its phase stays Running until it has exited).
	waitK8s(t, k, "3 executors running after the upgrade", 3*time.Minute, func() bool {
		return len(strings.Fields(k.kubectl(t, "get", "pods", "-l", "app.kubernetes.io/component=executor", "--field-selector=status.phase=Running", "-o", "jsonpath={.items[*].metadata.name}"))) == 3
	})
	produce(5000, len(events))
	k.helmDo(t, "upgrade", k.release, chart, "-f", valuesFile("e2e-b"), "--set", "executor.replicas=3", "--wait", "--timeout", "10m")
	for _, c := range []string{"driver", "executor"} {
		img := k.kubectl(t, "get", "deploy", "-l", "app.kubernetes.io/component="+c, "-o", "jsonpath={.items[0].spec.template.spec.containers[0].image}")
		if img != "sluice:e2e-b" {
			t.Errorf("%s image after the upgrade = %q", c, img)
		}
	}
	if token2 := k.kubectl(t, "get", "secret", k.release+"-sluice-token", "-o", "jsonpath={.data.token}"); token2 != token1 {
		t.Error("helm upgrade changed the generated token; lookup must keep it")
	}

	// The output: exactly the oracle, read by listing and by the sink log.
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	if len(want) < 10 {
		t.Fatalf("the oracle has %d windows; the test needs closed windows to compare", len(want))
	}
	var rep sinkReport
	waitK8s(t, k, "the output to equal the oracle", 10*time.Minute, func() bool {
		rep = checkSinkStore(t, sink, want)
		return rep.ok()
	})
	if rep.duplicates != 0 {
		t.Fatalf("duplicated windows: %s", rep.diff)
	}

	out := k.helmDo(t, "test", k.release, "--logs", "--timeout", "5m")
	if !strings.Contains(out, "course-activity-tile") {
		t.Errorf("helm test: `driver list` output does not name the query:\n%s", out)
	}

	k.helmDo(t, "uninstall", k.release, "--wait", "--timeout", "5m")
	if pendingBatch(t, cp) == nil && committed() < 0 {
		t.Error("the checkpoint is gone after helm uninstall")
	}
	if rep := checkSinkStore(t, sink, want); !rep.ok() {
		t.Errorf("the output changed after helm uninstall:\n%s", rep.diff)
	}
}

func waitK8s(t *testing.T, k k8sEnv, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s\n%s", timeout, what, k.diagnose(t))
		}
		time.Sleep(time.Second)
	}
	t.Logf("%s", what)
}

// TestK8sRolesAndPolicy installs the chart with a viewer and an operator
// tokens file from Secrets, roles.clientToken for `helm test`, and a
// location policy that admits the values' query (checked as principal
// driver) and gives the operator olga locations of her own. On the real
// cluster: `helm test` lists the query with the viewer token, a viewer's
// `driver list` works and its `submit` is refused naming the role, the
// cluster token is refused on the CLI's service, olga submits a spec
// inside her locations and one outside them is refused naming the field,
// a token rotated by patching the Secret works without a restart, and
// certificate roles over a TLS Secret without ca.crt are refused at install.
func TestK8sRolesAndPolicy(t *testing.T) {
	k := k8sEnv{
		kubeconfig: needEnv(t, "KUBECONFIG"),
		helm:       needEnv(t, "SLUICE_HELM"),
		script:     needEnv(t, "SLUICE_K8S_SCRIPT"),
		nodeIP:     needEnv(t, "SLUICE_K8S_NODE_IP"),
		ns:         "sluice-roles",
		release:    "roles",
	}
	chart, err := filepath.Abs("../deploy/helm/sluice")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := k.run(t, 15*time.Minute, k.script, "image", "sluice:e2e-a"); err != nil {
		t.Fatalf("build and import the image: %v\n%s", err, out)
	}
	endpoint, access, secret := startNodeS3(t, k.nodeIP)
	_, brokers := startNodeKafka(t, k.nodeIP, "learning.progress", 4)

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
	tok := func(who string) string {
		return who + "-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-e2e-token"
	}
	vera, olga, helmTest := tok("vera"), tok("olga"), tok("helm-test")
	k.kubectl(t, "create", "secret", "generic", "s3-keys", "--from-literal=AWS_ACCESS_KEY_ID="+access, "--from-literal=AWS_SECRET_ACCESS_KEY="+secret)
	k.kubectl(t, "create", "secret", "generic", "viewers", "--from-literal=tokens=# viewers\nvera "+vera+"\nhelm-test "+helmTest+"\n")
	k.kubectl(t, "create", "secret", "generic", "operators", "--from-literal=tokens=olga "+olga+"\n")
	k.kubectl(t, "create", "secret", "generic", "helm-test", "--from-literal=token="+helmTest)

	values := filepath.Join(t.TempDir(), "values.yaml")
	body := fmt.Sprintf(k8sTileValues, "e2e-a", endpoint, brokers) + `
roles:
  viewerTokens: {existingSecret: viewers, key: tokens}
  operatorTokens: {existingSecret: operators, key: tokens}
  clientToken: {existingSecret: helm-test, key: token}
policy:
  allow:
    topics: [learning.progress]
    sinks: ["s3://sluice/tile/"]
    checkpoints: ["s3://sluice/checkpoint/"]
  principals:
    olga:
      sinks: ["s3://sluice/olga/"]
      checkpoints: ["s3://sluice/olga-checkpoints/"]
`
	if err := os.WriteFile(values, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// Certificate roles need a CA: a tls.existingSecret without ca.crt is
	// refused at render, which only a render against the cluster (lookup)
	// can see.
	k.kubectl(t, "create", "secret", "generic", "tls-no-ca", "--from-literal=tls.crt=unused", "--from-literal=tls.key=unused")
	out, err := k.run(t, 3*time.Minute, k.helm, "install", k.release+"-no-ca", chart, "-n", k.ns, "-f", values, "--dry-run=server",
		"--set", "tls.enabled=true", "--set", "tls.existingSecret=tls-no-ca", "--set", "roles.principalRoles[0]=CN=alice=operator")
	if err == nil || !strings.Contains(out, "roles.principalRoles") || !strings.Contains(out, "tls-no-ca") || !strings.Contains(out, "no ca.crt") {
		t.Errorf("certificate roles with a TLS Secret lacking ca.crt: err %v, want a refusal naming roles.principalRoles and the Secret:\n%s", err, out)
	}

	k.helmDo(t, "install", k.release, chart, "-f", values, "--wait", "--timeout", "10m")

	// `helm test` presents roles.clientToken; the values' query is listed,
	// so the policy admitted it as principal driver.
	out = k.helmDo(t, "test", k.release, "--logs", "--timeout", "5m")
	if !strings.Contains(out, "course-activity-tile") {
		t.Errorf("helm test: `driver list` with the client token does not name the query:\n%s", out)
	}

	// The CLI from the node, at the driver pod's IP (the bridge routes it).
	ip := k.kubectl(t, "get", "pod", "-l", "app.kubernetes.io/component=driver", "-o", "jsonpath={.items[0].status.podIP}")
	if ip == "" {
		t.Fatal("the driver pod has no IP")
	}
	server := net.JoinHostPort(ip, "7077")
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	clusterToken, err := base64.StdEncoding.DecodeString(k.kubectl(t, "get", "secret", k.release+"-sluice-token", "-o", "jsonpath={.data.token}"))
	if err != nil {
		t.Fatal(err)
	}
	spec := func(name, sink, checkpoint string) string {
		return file(name+".yaml", fmt.Sprintf(`name: %s
source:
  kafka: {bootstrapServers: "%s", subscribe: learning.progress, startingOffsets: earliest}
  format: json
  schema:
    - {name: event_id, type: string, nullable: false}
    - {name: course_id, type: string, nullable: false}
    - {name: event_time, type: timestamp, nullable: false}
watermark: {column: event_time, delay: 10m}
aggregate:
  window: {column: event_time, size: 5m}
  groupBy: [course_id]
  measures: [{name: event_count, fn: count}]
outputMode: append
sink: {parquet: {path: "%s"}}
checkpointLocation: %s
trigger: {processingTime: 2s}
`, name, brokers, sink, checkpoint))
	}
	as := func(token string, args ...string) (string, int) {
		t.Helper()
		stdout, stderr, code := cli(t, nil, append(args, "--server", server, "--token-file", file("token", token))...)
		return stdout + stderr, code
	}
	want := func(what string, out string, code, wantCode int, substrs ...string) {
		t.Helper()
		if code != wantCode {
			t.Errorf("%s: exit %d, want %d:\n%s", what, code, wantCode, out)
		}
		for _, s := range substrs {
			if !strings.Contains(out, s) {
				t.Errorf("%s: output lacks %q:\n%s", what, s, out)
			}
		}
	}
	out, code := as(vera, "list")
	want("viewer list", out, code, 0, "course-activity-tile")
	out, code = as(vera, "submit", "-f", spec("vera-tile", "s3://sluice/tile/vera/", "s3://sluice/checkpoint/vera/"))
	want("viewer submit", out, code, 4, "needs role operator", "vera (viewer)")
	out, code = as(string(clusterToken), "list")
	want("list with the cluster token", out, code, 4, "cluster")
	out, code = as(olga, "submit", "-f", spec("olga-outside", "s3://elsewhere/tile/", "s3://sluice/olga-checkpoints/outside/"))
	want("operator submit outside the policy", out, code, 4, "location policy", "principal olga", "sink.parquet.path", "s3://elsewhere/tile/")
	out, code = as(olga, "submit", "-f", spec("olga-tile", "s3://sluice/olga/tile/", "s3://sluice/olga-checkpoints/tile/"))
	want("operator submit inside her locations", out, code, 0)
	out, code = as(vera, "list")
	want("viewer list after olga's submit", out, code, 0, "course-activity-tile", "olga-tile")

	// Rotation: a new token for vera in the Secret reaches the driver
	// through the kubelet's update of the mount and the driver's re-read;
	// the pod is not restarted.
	pod := k.kubectl(t, "get", "pod", "-l", "app.kubernetes.io/component=driver", "-o", "jsonpath={.items[0].metadata.uid}")
	vera2 := tok("vera2")
	tokens := base64.StdEncoding.EncodeToString([]byte("vera " + vera2 + "\nhelm-test " + helmTest + "\n"))
	k.kubectl(t, "patch", "secret", "viewers", "-p", `{"data":{"tokens":"`+tokens+`"}}`)
	waitK8s(t, k, "the rotated viewer token to be accepted", 4*time.Minute, func() bool {
		_, code := as(vera2, "list")
		return code == 0
	})
	out, code = as(vera, "list")
	want("the revoked viewer token", out, code, 4)
	if now := k.kubectl(t, "get", "pod", "-l", "app.kubernetes.io/component=driver", "-o", "jsonpath={.items[0].metadata.uid}"); now != pod {
		t.Errorf("the driver pod was replaced (%s, then %s); a token rotation needs no restart", pod, now)
	}
}
