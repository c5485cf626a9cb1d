package charttest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const (
	helmVersion = "v3.22.0"
	release     = "rel"
	namespace   = "streams"
	kubeVersion = "v1.37.2"
)

// The API versions of the optional CRDs, given to `helm template` as if the
// cluster served them.
var crdAPIs = []string{
	"cert-manager.io/v1/Certificate",
	"monitoring.coreos.com/v1/ServiceMonitor",
	"monitoring.coreos.com/v1/PrometheusRule",
}

func chartDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs("../helm/sluice")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// helmBin finds Helm: $SLUICE_HELM, else the cache scripts/test.sh fills.
func helmBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SLUICE_HELM"); p != "" {
		return p
	}
	cache := os.Getenv("SLUICE_CACHE")
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			t.Fatalf("helm: no $SLUICE_HELM and no user cache dir: %v", err)
		}
		cache = filepath.Join(base, "sluice")
	}
	p := filepath.Join(cache, "bin", "helm-"+helmVersion)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("helm %s not found at %s (%v): run scripts/test.sh, which installs it, or set SLUICE_HELM", helmVersion, p, err)
	}
	return p
}

func runHelm(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: runs helm, a process")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmBin(t), args...)
	// No kubeconfig: `helm template` must not reach any cluster.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(t.TempDir(), "none"), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

type renderOpts struct {
	values []string // files under testdata
	set    []string // --set-json / --set arguments, as "--set", "k=v" pairs
	crds   bool
}

func templateArgs(t *testing.T, o renderOpts) []string {
	args := []string{"template", release, chartDir(t), "--namespace", namespace, "--kube-version", kubeVersion}
	for _, v := range o.values {
		args = append(args, "-f", filepath.Join("testdata", v))
	}
	args = append(args, o.set...)
	if o.crds {
		for _, a := range crdAPIs {
			args = append(args, "--api-versions", a)
		}
	}
	return args
}

// render runs `helm template` and fails the test on an error.
func render(t *testing.T, o renderOpts) []object {
	t.Helper()
	out, errOut, err := runHelm(t, templateArgs(t, o)...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", o, err, errOut)
	}
	return decodeAll(t, out)
}

// renderErr runs `helm template` expecting a refusal and returns its message.
func renderErr(t *testing.T, o renderOpts) string {
	t.Helper()
	_, errOut, err := runHelm(t, templateArgs(t, o)...)
	if err == nil {
		t.Fatalf("helm template %v: rendered, want a refusal", o)
	}
	return errOut
}

// object is one rendered manifest decoded into its API type.
type object struct {
	kind, name, source string
	obj                any
	raw                map[string]any
}

// decodeAll splits helm's output and decodes every document strictly: an
// unknown field, a duplicate field or a wrong type fails the test.
func decodeAll(t *testing.T, out string) []object {
	t.Helper()
	var objs []object
	for _, doc := range strings.Split(out, "\n---") {
		source := ""
		if i := strings.Index(doc, "# Source: "); i >= 0 {
			source = strings.TrimSpace(strings.SplitN(doc[i+len("# Source: "):], "\n", 2)[0])
		}
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("%s: not YAML: %v", source, err)
		}
		if string(js) == "null" {
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		var raw map[string]any
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &head); err != nil {
			t.Fatalf("%s: %v", source, err)
		}
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &raw); err != nil {
			t.Fatalf("%s: %v", source, err)
		}
		target := newTyped(head.APIVersion, head.Kind)
		if target != nil {
			strict, err := sigsjson.UnmarshalStrict(js, target)
			if err != nil {
				t.Fatalf("%s: %s %s does not decode into the API type: %v", source, head.Kind, head.Metadata.Name, err)
			}
			if len(strict) > 0 {
				t.Fatalf("%s: %s %s has fields the API does not know: %v", source, head.Kind, head.Metadata.Name, strict)
			}
		} else if !isKnownCRD(head.APIVersion, head.Kind) {
			t.Fatalf("%s: %s/%s is neither a core API type nor an expected CRD", source, head.APIVersion, head.Kind)
		}
		if head.Metadata.Namespace != namespace && head.Kind != "ClusterRole" {
			t.Errorf("%s: %s %s in namespace %q, want %q", source, head.Kind, head.Metadata.Name, head.Metadata.Namespace, namespace)
		}
		objs = append(objs, object{kind: head.Kind, name: head.Metadata.Name, source: source, obj: target, raw: raw})
	}
	if len(objs) == 0 {
		t.Fatal("helm template rendered nothing")
	}
	return objs
}

func newTyped(apiVersion, kind string) any {
	switch apiVersion + "/" + kind {
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}
	case "v1/Service":
		return &corev1.Service{}
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}
	case "v1/Secret":
		return &corev1.Secret{}
	case "v1/Pod":
		return &corev1.Pod{}
	case "autoscaling/v2/HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "networking.k8s.io/v1/NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	}
	return nil
}

func isKnownCRD(apiVersion, kind string) bool {
	for _, a := range crdAPIs {
		if a == apiVersion+"/"+kind {
			return true
		}
	}
	return false
}

func find[T any](objs []object, kind, name string) (T, bool) {
	var zero T
	for _, o := range objs {
		if o.kind == kind && o.name == name {
			if v, ok := o.obj.(T); ok {
				return v, true
			}
		}
	}
	return zero, false
}

func kinds(objs []object) map[string]int {
	m := map[string]int{}
	for _, o := range objs {
		m[o.kind]++
	}
	return m
}

func mustFind[T any](t *testing.T, objs []object, kind, name string) T {
	t.Helper()
	v, ok := find[T](objs, kind, name)
	if !ok {
		var names []string
		for _, o := range objs {
			names = append(names, o.kind+"/"+o.name)
		}
		t.Fatalf("no %s %q among %v", kind, name, names)
	}
	return v
}

func (o renderOpts) String() string {
	return fmt.Sprintf("values=%v set=%v crds=%v", o.values, o.set, o.crds)
}
