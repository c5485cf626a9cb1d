package charttest

import (
	"encoding/base64"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The values files every check runs over, each with whether the optional
// CRDs are offered to the render.
var cases = []struct {
	name string
	opts renderOpts
}{
	{"defaults", renderOpts{}},
	{"minio", renderOpts{values: []string{"minio.yaml"}}},
	{"workload-identity", renderOpts{values: []string{"workload-identity.yaml"}}},
	{"tls-cert-manager", renderOpts{values: []string{"tls-certmanager.yaml"}, crds: true}},
	{"production", renderOpts{values: []string{"production.yaml"}}},
	{"queries", renderOpts{values: []string{"queries.yaml"}}},
	{"everything", renderOpts{values: []string{"everything.yaml"}, crds: true}},
	{"roles", renderOpts{values: []string{"roles.yaml"}, crds: true}},
}

func TestLintStrict(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir(t), "--namespace", namespace, "--kube-version", kubeVersion}
			for _, v := range c.opts.values {
				args = append(args, "-f", filepath.Join("testdata", v))
			}
			out, errOut, err := runHelm(t, args...)
			if err != nil {
				t.Fatalf("helm lint --strict: %v\n%s%s", err, out, errOut)
			}
		})
	}
}

func TestRenderedManifests(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := render(t, c.opts)
			checkDriver(t, objs)
			checkPods(t, objs)
			checkServiceNames(t, objs)
			checkNoSecretInConfigMaps(t, objs)
			checkExecutor(t, objs)
		})
	}
}

// podSpecs returns every pod template the render holds, by owner.
func podSpecs(objs []object) map[string]*corev1.PodSpec {
	m := map[string]*corev1.PodSpec{}
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			m["Deployment/"+o.name] = &v.Spec.Template.Spec
		case *corev1.Pod:
			m["Pod/"+o.name] = &v.Spec
		}
	}
	return m
}

func deployments(objs []object) (driver, executor *appsv1.Deployment) {
	for _, o := range objs {
		d, ok := o.obj.(*appsv1.Deployment)
		if !ok {
			continue
		}
		switch d.Spec.Template.Labels["app.kubernetes.io/component"] {
		case "driver":
			driver = d
		case "executor":
			executor = d
		}
	}
	return driver, executor
}

func checkDriver(t *testing.T, objs []object) {
	t.Helper()
	d, _ := deployments(objs)
	if d == nil {
		t.Fatal("no driver Deployment")
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("driver replicas = %s, want exactly 1 (the registry lease admits one driver)", ptrString(d.Spec.Replicas))
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("driver strategy = %q, want Recreate (the old driver must stop before the new one starts)", d.Spec.Strategy.Type)
	}
	if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g < 60 {
		t.Errorf("driver terminationGracePeriodSeconds = %s, want >= 60 to finish a batch", ptrString(g))
	}
	c := d.Spec.Template.Spec.Containers[0]
	if hasArgPrefix(c.Args, "--insecure") {
		t.Error("driver runs --insecure (an open cluster); the token must authenticate every peer")
	}
	for _, want := range []string{"serve", "--registry=s3://", "--queries-dir=/etc/sluice/queries", "--http-addr=0.0.0.0:", "--token-file="} {
		if !hasArgPrefix(c.Args, want) {
			t.Errorf("driver args %q lack %q", c.Args, want)
		}
	}
	checkHealthProbes(t, "driver", c)
	if d.Spec.Template.Annotations["checksum/token"] == "" {
		t.Error("driver pod template lacks the checksum/token annotation that rolls it on a new token")
	}
	if _, ok := d.Spec.Template.Annotations["checksum/queries"]; ok {
		t.Error("a query change rolls the driver by default; the driver watches --queries-dir")
	}
}

func checkExecutor(t *testing.T, objs []object) {
	t.Helper()
	_, e := deployments(objs)
	if e == nil {
		t.Fatal("no executor Deployment")
	}
	spec := e.Spec.Template.Spec
	var scratch *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == "scratch" {
			scratch = &spec.Volumes[i]
		}
	}
	if scratch == nil || scratch.EmptyDir == nil || scratch.EmptyDir.SizeLimit == nil || scratch.EmptyDir.SizeLimit.IsZero() {
		t.Errorf("executor scratch volume = %+v, want an emptyDir with a sizeLimit", scratch)
	}
	c := spec.Containers[0]
	checkHealthProbes(t, "executor", c)
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		t.Error("executor has no preStop hook")
	}
	drain := 0
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--drain-timeout="); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(v, "s"))
			if err != nil {
				t.Fatalf("--drain-timeout=%s: %v", v, err)
			}
			drain = n
		}
	}
	pre := 0
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		pre = int(c.Lifecycle.PreStop.Sleep.Seconds)
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || int(*g) < pre+drain {
		t.Errorf("executor terminationGracePeriodSeconds %s < preStop %d + drain %d", ptrString(g), pre, drain)
	}
	if e.Spec.Template.Annotations["checksum/token"] == "" {
		t.Error("executor pod template lacks checksum/token")
	}
	hpa, hasHPA := find[*autoscalingv2.HorizontalPodAutoscaler](objs, "HorizontalPodAutoscaler", e.Name)
	if hasHPA {
		if e.Spec.Replicas != nil {
			t.Errorf("executor replicas = %d with an HPA; the HPA must own the count", *e.Spec.Replicas)
		}
		if hpa.Spec.ScaleTargetRef.Name != e.Name {
			t.Errorf("HPA targets %q, want %q", hpa.Spec.ScaleTargetRef.Name, e.Name)
		}
	}
	pdb, ok := find[*policyv1.PodDisruptionBudget](objs, "PodDisruptionBudget", e.Name)
	if !ok {
		t.Fatal("no executor PodDisruptionBudget")
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(e.Spec.Template.Labels)) {
		t.Errorf("PDB selector %v does not select the executor pods %v", sel, e.Spec.Template.Labels)
	}
}

// checkPods: probes on every long-running container, resources on every
// container, the restricted security context everywhere.
func checkPods(t *testing.T, objs []object) {
	t.Helper()
	for owner, spec := range podSpecs(objs) {
		longRunning := strings.HasPrefix(owner, "Deployment/")
		psc := spec.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
			t.Errorf("%s: pod securityContext.runAsNonRoot is not true", owner)
		}
		if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: pod seccompProfile is not RuntimeDefault", owner)
		}
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("%s: the service account token is mounted; Sluice never calls the Kubernetes API", owner)
		}
		for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
			where := owner + " container " + c.Name
			if longRunning && (c.LivenessProbe == nil || c.ReadinessProbe == nil) {
				t.Errorf("%s: liveness %v, readiness %v; want both", where, c.LivenessProbe != nil, c.ReadinessProbe != nil)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
				t.Errorf("%s: requests %v, want cpu and memory", where, c.Resources.Requests)
			}
			if c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s: no memory limit", where)
			}
			sc := c.SecurityContext
			switch {
			case sc == nil:
				t.Errorf("%s: no securityContext", where)
				continue
			case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
				t.Errorf("%s: allowPrivilegeEscalation is not false", where)
			case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
				t.Errorf("%s: readOnlyRootFilesystem is not true", where)
			case sc.Privileged != nil && *sc.Privileged:
				t.Errorf("%s: privileged", where)
			case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0:
				t.Errorf("%s: capabilities %+v, want drop [ALL] and nothing added", where, sc.Capabilities)
			case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
				t.Errorf("%s: runAsNonRoot is not true", where)
			case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
				t.Errorf("%s: seccompProfile is not RuntimeDefault", where)
			}
			for _, e := range c.Env {
				if strings.Contains(strings.ToUpper(e.Name), "SECRET") && e.Value != "" {
					t.Errorf("%s: env %s carries a literal value; secrets come from secretKeyRef", where, e.Name)
				}
			}
			// Every mount names a volume of the pod.
			for _, m := range c.VolumeMounts {
				if !hasVolume(spec, m.Name) {
					t.Errorf("%s: mounts %q, which the pod does not define", where, m.Name)
				}
			}
		}
	}
}

// checkServiceNames: executors and `helm test` dial HOST:PORT where HOST is
// a rendered Service that selects the driver pod and PORT is its port
// reaching the driver's --listen port.
func checkServiceNames(t *testing.T, objs []object) {
	t.Helper()
	d, e := deployments(objs)
	listen := argValue(d.Spec.Template.Spec.Containers[0].Args, "--listen")
	_, listenPort, _ := strings.Cut(listen, ":")
	dialers := map[string]string{
		"executor --driver": argValue(e.Spec.Template.Spec.Containers[0].Args, "--driver"),
	}
	for owner, spec := range podSpecs(objs) {
		if strings.HasPrefix(owner, "Pod/") {
			dialers[owner+" --server"] = argValue(spec.Containers[0].Args, "--server")
		}
	}
	for who, addr := range dialers {
		host, port, ok := strings.Cut(addr, ":")
		if !ok {
			t.Errorf("%s = %q, want HOST:PORT", who, addr)
			continue
		}
		name, ns, _ := strings.Cut(host, ".")
		if ns != namespace+".svc" {
			t.Errorf("%s = %q: want the Service in namespace %s (NAME.%s.svc)", who, addr, namespace, namespace)
		}
		svc, ok := find[*corev1.Service](objs, "Service", name)
		if !ok {
			t.Errorf("%s = %q: no Service %q is rendered", who, addr, name)
			continue
		}
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("%s: Service %s selector %v does not select the driver pod %v", who, name, svc.Spec.Selector, d.Spec.Template.Labels)
		}
		var reached bool
		for _, p := range svc.Spec.Ports {
			if strconv.Itoa(int(p.Port)) != port {
				continue
			}
			for _, cp := range d.Spec.Template.Spec.Containers[0].Ports {
				if (cp.Name == p.TargetPort.String() || strconv.Itoa(int(cp.ContainerPort)) == p.TargetPort.String()) && strconv.Itoa(int(cp.ContainerPort)) == listenPort {
					reached = true
				}
			}
		}
		if !reached {
			t.Errorf("%s = %q: Service %s has no port %s reaching the driver's --listen %s", who, addr, name, port, listen)
		}
	}
	// Executors are reached on the address they advertise: their pod IP.
	if adv := argValue(e.Spec.Template.Spec.Containers[0].Args, "--advertise"); !strings.HasPrefix(adv, "$(POD_IP):") {
		t.Errorf("executor --advertise = %q, want $(POD_IP):PORT", adv)
	}
}

// checkNoSecretInConfigMaps: no token, no key, no password in a ConfigMap.
func checkNoSecretInConfigMaps(t *testing.T, objs []object) {
	t.Helper()
	var secrets []string
	for _, o := range objs {
		if s, ok := o.obj.(*corev1.Secret); ok {
			for _, v := range s.Data {
				secrets = append(secrets, string(v), base64.StdEncoding.EncodeToString(v))
			}
			for _, v := range s.StringData {
				secrets = append(secrets, v)
			}
		}
	}
	for _, o := range objs {
		cm, ok := o.obj.(*corev1.ConfigMap)
		if !ok {
			continue
		}
		for k, v := range cm.Data {
			for _, s := range secrets {
				if s != "" && strings.Contains(v, s) {
					t.Errorf("ConfigMap %s key %s holds a Secret's value", cm.Name, k)
				}
			}
			lv := strings.ToLower(v)
			for _, w := range []string{"password", "secretaccesskey", "aws_secret", "jaas"} {
				if strings.Contains(lv, w) {
					t.Errorf("ConfigMap %s key %s mentions %q", cm.Name, k, w)
				}
			}
		}
	}
}

func TestQueriesBecomeFilesInTheWatchedConfigMap(t *testing.T) {
	objs := render(t, renderOpts{values: []string{"queries.yaml"}})
	cm := mustFind[*corev1.ConfigMap](t, objs, "ConfigMap", release+"-sluice-queries")
	want := map[string]string{"tile-a.yaml": "tile-a", "tile-b.yaml": "renamed-b", "tile-c.yaml": "tile-c"}
	if len(cm.Data) != len(want) {
		t.Fatalf("ConfigMap keys %v, want %v", keys(cm.Data), want)
	}
	for file, name := range want {
		if !strings.Contains(cm.Data[file], "name: "+name+"\n") {
			t.Errorf("%s:\n%s\nwant name %s", file, cm.Data[file], name)
		}
	}
	d, _ := deployments(objs)
	var projected []string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "queries" && v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					projected = append(projected, "ConfigMap/"+s.ConfigMap.Name)
				}
				if s.Secret != nil {
					projected = append(projected, "Secret/"+s.Secret.Name)
				}
			}
		}
	}
	if strings.Join(projected, ",") != "ConfigMap/"+cm.Name+",Secret/sluice-secret-queries" {
		t.Errorf("queries volume projects %v", projected)
	}
	if !hasArgPrefix(d.Spec.Template.Spec.Containers[0].Args, "--prune") {
		t.Error("registry.prune: true did not give --prune")
	}
	// restartOnQueryChange: a changed query changes the pod template.
	sum := func(extra ...string) string {
		d, _ := deployments(render(t, renderOpts{values: []string{"queries.yaml"}, set: append([]string{"--set", "driver.restartOnQueryChange=true"}, extra...)}))
		return d.Spec.Template.Annotations["checksum/queries"]
	}
	if a, b := sum(), sum("--set", "queries.tile-a.checkpointLocation=s3://ckpt/a2/"); a == "" || a == b {
		t.Errorf("restartOnQueryChange: checksum/queries %q before and %q after a query change", a, b)
	}
}

func TestOptionalObjects(t *testing.T) {
	all := render(t, renderOpts{values: []string{"everything.yaml"}, crds: true})
	k := kinds(all)
	for kind, n := range map[string]int{"HorizontalPodAutoscaler": 1, "NetworkPolicy": 2, "ServiceMonitor": 2, "PrometheusRule": 1, "Certificate": 1, "PodDisruptionBudget": 1} {
		if k[kind] != n {
			t.Errorf("everything: %d %s, want %d (all kinds: %v)", k[kind], kind, n, k)
		}
	}
	// The same values on a cluster without the CRDs: the CRD objects are
	// left out rather than failing the install (cert-manager is refused,
	// since TLS would have no certificate: see TestRefusals).
	none := render(t, renderOpts{values: []string{"everything.yaml"}, set: []string{"--set", "tls.enabled=false"}})
	k = kinds(none)
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule", "Certificate"} {
		if k[kind] != 0 {
			t.Errorf("no CRDs: rendered %d %s", k[kind], kind)
		}
	}
	def := kinds(render(t, renderOpts{}))
	for _, kind := range []string{"HorizontalPodAutoscaler", "NetworkPolicy", "ServiceMonitor", "PrometheusRule", "Certificate"} {
		if def[kind] != 0 {
			t.Errorf("defaults render a %s; it must be opt-in", kind)
		}
	}
	d, e := deployments(all)
	if got := d.Spec.Template.Spec.Containers[0].Image; got != "registry.example.com/data/sluice:1.2.3" {
		t.Errorf("image = %q", got)
	}
	if d.Spec.Template.Spec.NodeSelector["kubernetes.io/os"] != "linux" || e.Spec.Template.Spec.NodeSelector["pool"] != "executors" {
		t.Error("per-component nodeSelector not applied")
	}
	if e.Spec.Template.Labels["tier"] != "work" || d.Spec.Template.Labels["cost-center"] != "42" {
		t.Error("podLabels/commonLabels not on the pod templates")
	}
	if d.Spec.Template.Spec.Containers[0].LivenessProbe.PeriodSeconds != 30 {
		t.Error("driver.livenessProbe override not applied")
	}
	// The override names port http; with (mutual) TLS on the kubelet cannot
	// present a client certificate, so it moves to the health port.
	if p := d.Spec.Template.Spec.Containers[0].LivenessProbe; p.HTTPGet == nil || p.HTTPGet.Port.String() != "health" {
		t.Errorf("with (mutual) TLS on, want the overridden probe moved to the health port, got %+v", p.ProbeHandler)
	}
	checkHealthProbes(t, "driver", d.Spec.Template.Spec.Containers[0])
	checkHealthProbes(t, "executor", e.Spec.Template.Spec.Containers[0])
	wi := render(t, renderOpts{values: []string{"workload-identity.yaml"}})
	wd, _ := deployments(wi)
	if got := wd.Spec.Template.Spec.Containers[0].Image; got != "123456789012.dkr.ecr.eu-west-1.amazonaws.com/sluice@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" {
		t.Errorf("digest image = %q", got)
	}
	sa := mustFind[*corev1.ServiceAccount](t, wi, "ServiceAccount", release+"-sluice")
	if sa.Annotations["eks.amazonaws.com/role-arn"] == "" || wd.Spec.Template.Spec.ServiceAccountName != sa.Name {
		t.Errorf("workload identity: ServiceAccount %+v, pods use %q", sa.ObjectMeta, wd.Spec.Template.Spec.ServiceAccountName)
	}
	for _, e := range wd.Spec.Template.Spec.Containers[0].Env {
		if strings.HasPrefix(e.Name, "AWS_") {
			t.Errorf("workload identity: env %s set; the role must come from the ServiceAccount", e.Name)
		}
	}
	mo := render(t, renderOpts{values: []string{"minio.yaml"}})
	md, _ := deployments(mo)
	var fromSecret int
	for _, e := range md.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "minio-keys" {
			fromSecret++
		}
	}
	if fromSecret != 2 {
		t.Errorf("minio: %d env vars from Secret minio-keys, want 2", fromSecret)
	}
	for _, want := range []string{"--s3-endpoint=http://minio.minio.svc:9000", "--s3-path-style=true", "--token-file=/var/run/sluice/token/token"} {
		if !hasArgPrefix(md.Spec.Template.Spec.Containers[0].Args, want) {
			t.Errorf("minio: driver args lack %s", want)
		}
	}
}

func TestTLSFromCertManager(t *testing.T) {
	objs := render(t, renderOpts{values: []string{"tls-certmanager.yaml"}, crds: true})
	var cert map[string]any
	for _, o := range objs {
		if o.kind == "Certificate" {
			cert = o.raw
		}
	}
	if cert == nil {
		t.Fatal("no Certificate")
	}
	spec := cert["spec"].(map[string]any)
	secret := spec["secretName"].(string)
	dns := fmt.Sprint(spec["dnsNames"])
	if !strings.Contains(dns, release+"-sluice-driver."+namespace+".svc") {
		t.Errorf("certificate dnsNames %s lack the driver Service name", dns)
	}
	// Executors are dialed at their pod IP and verified against one name
	// the certificate carries: the executors' Service name, no wildcard.
	peer := release + "-sluice-executor." + namespace + ".svc"
	if !slices.Contains(spec["dnsNames"].([]any), any(peer)) || strings.Contains(dns, "*") {
		t.Errorf("certificate dnsNames %s: want the peer name %s and no wildcard", dns, peer)
	}
	d, e := deployments(objs)
	for _, dep := range []*appsv1.Deployment{d, e} {
		if !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--tls-peer-name="+peer) {
			t.Errorf("%s: args %q lack --tls-peer-name=%s", dep.Name, dep.Spec.Template.Spec.Containers[0].Args, peer)
		}
		var mounted bool
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Name == "tls" && v.Secret != nil && v.Secret.SecretName == secret {
				mounted = true
			}
		}
		if !mounted || !hasArgPrefix(dep.Spec.Template.Spec.Containers[0].Args, "--tls-dir=/var/run/sluice/tls") {
			t.Errorf("%s: TLS Secret %s mounted %v, args %q", dep.Name, secret, mounted, dep.Spec.Template.Spec.Containers[0].Args)
		}
		if hasArgPrefix(dep.Spec.Template.Spec.Containers[0].Args, "--insecure") {
			t.Errorf("%s: --insecure with TLS on", dep.Name)
		}
	}
	// An existing Secret whose certificate carries another name.
	objs = render(t, renderOpts{set: []string{"--set", "tls.enabled=true", "--set", "tls.existingSecret=mine", "--set", "tls.peerName=sluice-peers.example.internal"}})
	d, e = deployments(objs)
	for _, dep := range []*appsv1.Deployment{d, e} {
		if !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--tls-peer-name=sluice-peers.example.internal") {
			t.Errorf("%s: args %q lack the tls.peerName", dep.Name, dep.Spec.Template.Spec.Containers[0].Args)
		}
	}
}

// TestRefusals: wrong values stop the render with a message naming the
// value and the rule, from the schema or from a template check.
func TestRefusals(t *testing.T) {
	prodLocal := []string{"-f", filepath.Join("testdata", "production.yaml"), "--set", "queries.course-activity-tile.checkpointLocation=/data/checkpoint"}
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"schema: replicas not a number", []string{"--set", "executor.replicas=three"}, []string{"/executor/replicas", "got string, want integer"}},
		{"schema: unknown pull policy", []string{"--set", "image.pullPolicy=Sometimes"}, []string{"/image/pullPolicy", "Always", "IfNotPresent", "Never"}},
		{"schema: misspelt top-level value", []string{"--set", "executors.replicas=3"}, []string{"executors", "not allowed"}},
		{"schema: bad endpoint", []string{"--set", "objectStore.endpoint=minio:9000"}, []string{"/objectStore/endpoint", "minio:9000", "https?://"}},
		{"production query on a local checkpoint", prodLocal, []string{"queries.course-activity-tile.checkpointLocation", `"/data/checkpoint"`, "s3://"}},
		{"production output on a local path", []string{"-f", filepath.Join("testdata", "production.yaml"), "--set", "queries.course-activity-tile.sink.parquet.path=/out"}, []string{"sink.parquet.path", "s3://"}},
		{"lab query on a local checkpoint", []string{"-f", filepath.Join("testdata", "minio.yaml"), "--set", "queries.tile.checkpointLocation=lab/checkpoint"}, []string{"queries.tile.checkpointLocation", `"lab/checkpoint"`, "different pods"}},
		{"lab output on a local path", []string{"-f", filepath.Join("testdata", "minio.yaml"), "--set", "queries.tile.sink.parquet.path=out/"}, []string{"queries.tile.sink.parquet.path", "s3://"}},
		{"a secret in the queries ConfigMap", []string{"-f", filepath.Join("testdata", "minio.yaml"), "--set", "queries.tile.source.kafka.kafka\\.sasl\\.password=hunter2"}, []string{"kafka.sasl.password", "queriesExistingSecret"}},
		{"PDB that blocks every drain", []string{"--set", "executor.pdb.maxUnavailable=null", "--set", "executor.pdb.minAvailable=2"}, []string{"executor.pdb.minAvailable", "every node drain would block"}},
		{"PDB percentage that blocks every drain", []string{"--set", "executor.pdb.maxUnavailable=null", "--set", "executor.pdb.minAvailable=100%"}, []string{"executor.pdb.minAvailable"}},
		{"both PDB fields", []string{"--set", "executor.pdb.minAvailable=1"}, []string{"executor.pdb", "not both"}},
		{"grace shorter than the drain", []string{"--set", "executor.terminationGracePeriodSeconds=30"}, []string{"executor.terminationGracePeriodSeconds", "drain"}},
		{"driver grace not above its stop timeout", []string{"--set", "driver.terminationGracePeriodSeconds=60"}, []string{"driver.terminationGracePeriodSeconds", "stopTimeoutSeconds"}},
		{"registry on the pod's disk", []string{"--set", "registry.uri=/var/registry"}, []string{"registry.uri", "s3://"}},
		{"guard given as a boolean, not a ticket", []string{"--set", "driver.allowFirstStart=true"}, []string{"/driver/allowFirstStart", "want string"}},
		{"ticket with a space", []string{"--set", "driver.allowReplay=CHG 1"}, []string{"/driver/allowReplay"}},
		{"TLS with no source", []string{"--set", "tls.enabled=true"}, []string{"tls.enabled", "existingSecret"}},
		{"TLS peer name with a port", []string{"--set", "tls.enabled=true", "--set", "tls.existingSecret=s", "--set", "tls.peerName=exec.svc:7078"}, []string{"/tls/peerName", "exec.svc:7078"}},
		{"cert-manager without its CRD", []string{"-f", filepath.Join("testdata", "tls-certmanager.yaml")}, []string{"cert-manager", "Certificate"}},
		{"certificate roles without TLS", []string{"--set", "roles.principalRoles[0]=CN=alice=operator", "--set", "tests.enabled=false"}, []string{"roles.principalRoles", "mutual TLS", "tls.enabled", "ca.crt"}},
		{"schema: certificate role that is no role", []string{"--set", "roles.principalRoles[0]=CN=alice=admin"}, []string{"/roles/principalRoles/0", "CN=alice=admin", "viewer|operator"}},
		{"roles without a token for helm test", []string{"--set", "roles.viewerTokens.existingSecret=viewers"}, []string{"roles.clientToken.existingSecret", "tests.enabled", "cluster token"}},
		{"roles without a token for the ServiceMonitor", []string{"--set", "roles.operatorTokens.existingSecret=ops", "--set", "tests.enabled=false", "--set", "metrics.serviceMonitor.enabled=true", "--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"}, []string{"roles.clientToken.existingSecret", "metrics.serviceMonitor.enabled", "401"}},
		{"client token with no tokens file", []string{"--set", "roles.clientToken.existingSecret=helm-test"}, []string{"roles.clientToken.existingSecret", "roles.viewerTokens", "roles.operatorTokens"}},
		{"client token with certificate roles alone", []string{"--set", "tls.enabled=true", "--set", "tls.existingSecret=s", "--set", "roles.principalRoles[0]=vera=viewer", "--set", "roles.clientToken.existingSecret=helm-test"}, []string{"roles.clientToken.existingSecret", "roles.viewerTokens"}},
		{"policy with a local path", []string{"--set", "policy.allow.checkpoints[0]=/data/checkpoints"}, []string{"policy.allow.checkpoints", `"/data/checkpoints"`, "policy.lab: true"}},
		{"a principal's policy with a file URI", []string{"--set", "policy.principals.olga.sinks[0]=file:///out"}, []string{"policy.principals.olga.sinks", `"file:///out"`, "policy.lab: true"}},
		{"schema: misspelt policy list", []string{"--set", "policy.allow.sink[0]=s3://warehouse/out/"}, []string{"/policy/allow", "sink", "not allowed"}},
		{"schema: policy lab not a boolean", []string{"--set-string", "policy.lab=yes"}, []string{"/policy/lab", "want boolean"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := renderErr(t, renderOpts{set: c.args})
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("refusal does not mention %q:\n%s", w, msg)
				}
			}
			if strings.Contains(msg, "hunter2") {
				t.Errorf("refusal echoes the secret:\n%s", msg)
			}
			if strings.Count(msg, "\n") > 12 {
				t.Errorf("refusal is not short and readable (%d lines):\n%s", strings.Count(msg, "\n"), msg)
			}
		})
	}
	// minAvailable below the replica count is fine.
	objs := render(t, renderOpts{set: []string{"--set", "executor.pdb.maxUnavailable=null", "--set", "executor.pdb.minAvailable=1"}})
	_, e := deployments(objs)
	pdb := mustFind[*policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", e.Name)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("PDB %+v, want minAvailable 1 only", pdb.Spec)
	}
}

// TestApprovalValues: allowFirstStart and allowReplay carry the ticket to
// the driver's flags, with approvedBy; unset, no guard flag is passed.
func TestApprovalValues(t *testing.T) {
	d, _ := deployments(render(t, renderOpts{}))
	args := d.Spec.Template.Spec.Containers[0].Args
	for _, f := range []string{"--allow-first-start", "--allow-replay", "--approved-by"} {
		if hasArgPrefix(args, f) {
			t.Errorf("defaults pass %s: %q", f, args)
		}
	}
	d, _ = deployments(render(t, renderOpts{set: []string{"--set", "driver.allowReplay=INC-77", "--set", "driver.approvedBy=alice@ops"}}))
	args = d.Spec.Template.Spec.Containers[0].Args
	if argValue(args, "--allow-replay") != "INC-77" || argValue(args, "--approved-by") != "alice@ops" || hasArgPrefix(args, "--allow-first-start") {
		t.Errorf("allowReplay=INC-77, approvedBy=alice@ops give args %q", args)
	}
	d, _ = deployments(render(t, renderOpts{set: []string{"--set-string", "driver.allowFirstStart=1234"}}))
	if args = d.Spec.Template.Spec.Containers[0].Args; argValue(args, "--allow-first-start") != "1234" {
		t.Errorf("allowFirstStart=1234 gives args %q", args)
	}
}

func hasArgPrefix(args []string, p string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, p) {
			return true
		}
	}
	return false
}

func argValue(args []string, flag string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

func hasVolume(spec *corev1.PodSpec, name string) bool {
	for _, v := range spec.Volumes {
		if v.Name == name {
			return true
		}
	}
	return false
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// checkHealthProbes: the container serves its health port (--health-addr
// on the port named health) and its liveness and readiness probes are
// httpGet /healthz and /readyz in plaintext there, TLS on or off: the
// kubelet holds no client certificate for the HTTP port.
func checkHealthProbes(t *testing.T, where string, c corev1.Container) {
	t.Helper()
	var port int32
	for _, p := range c.Ports {
		if p.Name == "health" {
			port = p.ContainerPort
		}
	}
	if port == 0 || !hasArgPrefix(c.Args, fmt.Sprintf("--health-addr=0.0.0.0:%d", port)) {
		t.Errorf("%s: health port %d, args %q: want a port named health served by --health-addr", where, port, c.Args)
	}
	for _, pr := range []struct {
		name, path string
		p          *corev1.Probe
	}{{"liveness", "/healthz", c.LivenessProbe}, {"readiness", "/readyz", c.ReadinessProbe}} {
		if pr.p == nil || pr.p.HTTPGet == nil || pr.p.HTTPGet.Path != pr.path || pr.p.HTTPGet.Port.String() != "health" || pr.p.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			t.Errorf("%s %s probe = %+v, want httpGet %s on port health", where, pr.name, pr.p, pr.path)
		}
	}
}
