package charttest

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// fileSource is the object key a container reads at a path.
type fileSource struct {
	kind, name, key string // kind Secret or ConfigMap
}

func (s fileSource) String() string { return s.kind + "/" + s.name + " key " + s.key }

// resolveFile follows path through c's mounts to the Secret or ConfigMap
// key the pod's volume projects there. A subPath mount is an error: the
// kubelet never updates it, so a rotated token or changed file would not
// reach the process.
func resolveFile(spec *corev1.PodSpec, c corev1.Container, path string) (fileSource, error) {
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		if m.SubPath != "" || m.SubPathExpr != "" {
			return fileSource{}, fmt.Errorf("%s is mounted with a subPath (volume %s): the kubelet never updates it", path, m.Name)
		}
		var vol *corev1.Volume
		for i := range spec.Volumes {
			if spec.Volumes[i].Name == m.Name {
				vol = &spec.Volumes[i]
			}
		}
		if vol == nil {
			return fileSource{}, fmt.Errorf("%s: mount %s names no volume", path, m.Name)
		}
		type src struct {
			kind, name string
			items      []corev1.KeyToPath
		}
		var srcs []src
		switch {
		case vol.Secret != nil:
			srcs = append(srcs, src{"Secret", vol.Secret.SecretName, vol.Secret.Items})
		case vol.ConfigMap != nil:
			srcs = append(srcs, src{"ConfigMap", vol.ConfigMap.Name, vol.ConfigMap.Items})
		case vol.Projected != nil:
			for _, p := range vol.Projected.Sources {
				if p.Secret != nil {
					srcs = append(srcs, src{"Secret", p.Secret.Name, p.Secret.Items})
				}
				if p.ConfigMap != nil {
					srcs = append(srcs, src{"ConfigMap", p.ConfigMap.Name, p.ConfigMap.Items})
				}
			}
		}
		for _, s := range srcs {
			if len(s.items) == 0 {
				// every key of the object is a file of that name
				return fileSource{s.kind, s.name, rel}, nil
			}
			for _, it := range s.items {
				if it.Path == rel {
					return fileSource{s.kind, s.name, it.Key}, nil
				}
			}
		}
		return fileSource{}, fmt.Errorf("%s: volume %s projects no key to %s", path, m.Name, rel)
	}
	return fileSource{}, fmt.Errorf("%s is under no volume mount of container %s", path, c.Name)
}

func mustResolve(t *testing.T, where string, spec *corev1.PodSpec, c corev1.Container, path string) fileSource {
	t.Helper()
	s, err := resolveFile(spec, c, path)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	return s
}

func testPod(t *testing.T, objs []object) *corev1.Pod {
	t.Helper()
	return mustFind[*corev1.Pod](t, objs, "Pod", release+"-sluice-test-list")
}

// TestRoleCredentialsAndPolicyReachTheDriver: with roles and a policy in
// values, the driver gets --viewer-tokens-file, --operator-tokens-file,
// --principal-role and --policy, each file flag naming a file its mounts
// fill from the Secret key or ConfigMap the values name (no subPath, so
// rotation reaches the driver's re-read); the policy ConfigMap holds
// exactly the values' policy and a change of it rolls the driver; the
// executors get none of it.
func TestRoleCredentialsAndPolicyReachTheDriver(t *testing.T) {
	opts := renderOpts{values: []string{"roles.yaml"}, crds: true}
	objs := render(t, opts)
	d, e := deployments(objs)
	spec := &d.Spec.Template.Spec
	c := spec.Containers[0]
	for flag, want := range map[string]fileSource{
		"--viewer-tokens-file":   {"Secret", "sluice-viewers", "viewers"},
		"--operator-tokens-file": {"Secret", "sluice-operators", "tokens"},
		"--policy":               {"ConfigMap", release + "-sluice-policy", "policy.yaml"},
	} {
		path := argValue(c.Args, flag)
		if path == "" {
			t.Errorf("driver args %q lack %s", c.Args, flag)
			continue
		}
		if got := mustResolve(t, "driver "+flag, spec, c, path); got != want {
			t.Errorf("driver %s=%s reads %s, want %s", flag, path, got, want)
		}
	}
	var roles []string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--principal-role="); ok {
			roles = append(roles, v)
		}
	}
	if want := []string{"CN=alice=operator", "vera=viewer"}; !slices.Equal(roles, want) {
		t.Errorf("driver --principal-role flags %q, want %q", roles, want)
	}

	// The ConfigMap is the values' policy, nothing added or lost.
	cm := mustFind[*corev1.ConfigMap](t, objs, "ConfigMap", release+"-sluice-policy")
	var got map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["policy.yaml"]), &got); err != nil {
		t.Fatalf("policy.yaml is not YAML: %v\n%s", err, cm.Data["policy.yaml"])
	}
	b, err := os.ReadFile(filepath.Join("testdata", "roles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Policy map[string]any `json:"policy"`
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, values.Policy) {
		t.Errorf("ConfigMap policy.yaml = %v, want the values' policy %v", got, values.Policy)
	}
	if len(cm.Data) != 1 {
		t.Errorf("policy ConfigMap keys %v, want policy.yaml alone", keys(cm.Data))
	}

	// The driver reads --policy at start only: a changed policy must change
	// the pod template.
	sum := d.Spec.Template.Annotations["checksum/policy"]
	changed, _ := deployments(render(t, renderOpts{values: opts.values, crds: true, set: []string{"--set", "policy.allow.sinks[0]=s3://warehouse/other/"}}))
	if sum == "" || changed.Spec.Template.Annotations["checksum/policy"] == sum {
		t.Errorf("checksum/policy %q before and %q after a policy change; the driver must roll", sum, changed.Spec.Template.Annotations["checksum/policy"])
	}

	ec := e.Spec.Template.Spec.Containers[0]
	for _, f := range []string{"--viewer-tokens-file", "--operator-tokens-file", "--principal-role", "--policy"} {
		if hasArgPrefix(ec.Args, f) {
			t.Errorf("executor args %q carry %s; roles and the policy are the driver's", ec.Args, f)
		}
	}
	for _, v := range e.Spec.Template.Spec.Volumes {
		if v.Name == "roles" || v.Name == "policy" {
			t.Errorf("executor pods mount volume %s", v.Name)
		}
	}
}

// TestRolesGiveTheChartsClientsAViewerToken: with roles on, the cluster
// token is refused on the CLI's service, so `helm test` presents
// roles.clientToken and does not even mount the cluster token, and the
// driver's ServiceMonitor sends it as a bearer token. Without roles the
// test pod presents the cluster token, as before.
func TestRolesGiveTheChartsClientsAViewerToken(t *testing.T) {
	objs := render(t, renderOpts{values: []string{"roles.yaml"}, crds: true})
	pod := testPod(t, objs)
	c := pod.Spec.Containers[0]
	if got, want := mustResolve(t, "helm test --token-file", &pod.Spec, c, argValue(c.Args, "--token-file")), (fileSource{"Secret", "sluice-helm-test", "viewer-token"}); got != want {
		t.Errorf("helm test pod --token-file reads %s, want %s", got, want)
	}
	if argValue(c.Args, "--tls-dir") == "" {
		t.Errorf("helm test pod args %q: with TLS on it must present the release's certificate", c.Args)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == release+"-sluice-token" {
			t.Errorf("helm test pod mounts the cluster token Secret (volume %s) with roles on", v.Name)
		}
	}
	checkServiceMonitorAuth(t, objs, map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "sluice-helm-test", "key": "viewer-token"}})

	def := render(t, renderOpts{crds: true, set: []string{"--set", "metrics.serviceMonitor.enabled=true"}})
	pod = testPod(t, def)
	c = pod.Spec.Containers[0]
	if got, want := mustResolve(t, "helm test --token-file", &pod.Spec, c, argValue(c.Args, "--token-file")), (fileSource{"Secret", release + "-sluice-token", "token"}); got != want {
		t.Errorf("without roles the helm test pod reads %s, want the cluster token %s", got, want)
	}
	checkServiceMonitorAuth(t, def, nil)
	d, _ := deployments(def)
	for _, f := range []string{"--viewer-tokens-file", "--operator-tokens-file", "--principal-role", "--policy"} {
		if hasArgPrefix(d.Spec.Template.Spec.Containers[0].Args, f) {
			t.Errorf("defaults pass %s to the driver", f)
		}
	}
	if _, ok := d.Spec.Template.Annotations["checksum/policy"]; ok {
		t.Error("defaults carry checksum/policy without a policy")
	}
	if _, ok := find[*corev1.ConfigMap](def, "ConfigMap", release+"-sluice-policy"); ok {
		t.Error("defaults render a policy ConfigMap")
	}
}

// checkServiceMonitorAuth: the driver's ServiceMonitor endpoint carries
// want as its authorization (nil: none); the executors' never does (their
// HTTP port knows no roles).
func checkServiceMonitorAuth(t *testing.T, objs []object, want map[string]any) {
	t.Helper()
	for _, comp := range []string{"driver", "executor"} {
		var sm map[string]any
		for _, o := range objs {
			if o.kind == "ServiceMonitor" && o.name == release+"-sluice-"+comp {
				sm = o.raw
			}
		}
		if sm == nil {
			t.Fatalf("no ServiceMonitor for the %s", comp)
		}
		eps := sm["spec"].(map[string]any)["endpoints"].([]any)
		got, has := eps[0].(map[string]any)["authorization"]
		switch {
		case comp == "driver" && want != nil && !reflect.DeepEqual(got, any(want)):
			t.Errorf("driver ServiceMonitor authorization = %v, want %v", got, want)
		case (comp == "executor" || want == nil) && has:
			t.Errorf("%s ServiceMonitor authorization = %v, want none", comp, got)
		}
	}
}
