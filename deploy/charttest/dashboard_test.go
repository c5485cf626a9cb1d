package charttest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// dashboardFile is the one dashboard file: the chart's copy, which
// deploy/grafana/sluice-dashboard.json links to.
const dashboardFile = "../helm/sluice/dashboards/sluice.json"

// dashboard is what the tests read of a Grafana dashboard.
type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

func readDashboard(t *testing.T, path string) (dashboard, []byte) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return d, raw
}

// grafanaVars are the dashboard's variables as the queries see them,
// replaced by what Grafana sends for "All" and a one-minute interval.
var grafanaVars = strings.NewReplacer(`"$query"`, `".*"`, "$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h")

// documentedMetrics reads docs/observability.md's metrics tables: each metric's type
// and the labels it documents.
func documentedMetrics(t *testing.T) map[string]documented {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]documented{}
	row := regexp.MustCompile("(?m)^\\| `(sluice_[a-z_]+)` \\| ([a-z]+) \\|([^|]*)\\|")
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		d := documented{typ: m[2], labels: map[string]bool{}}
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.TrimSpace(l); l != "" {
				d.labels[l] = true
			}
		}
		out[m[1]] = d
	}
	if len(out) < 30 {
		t.Fatalf("docs/observability.md documents %d metrics: its tables were not found", len(out))
	}
	return out
}

type documented struct {
	typ    string
	labels map[string]bool
}

func (d documented) has(label string) bool { return d.labels[label] }

// lookupMetric finds the documented metric a series name belongs to:
// itself, or a histogram's _bucket, _sum or _count (whose bucket has le
// too).
func lookupMetric(docs map[string]documented, name string) (documented, bool) {
	if m, ok := docs[name]; ok {
		return m, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if m, ok := docs[base]; ok && m.typ == "histogram" {
				if suffix == "_bucket" {
					labels := map[string]bool{"le": true}
					for l := range m.labels {
						labels[l] = true
					}
					m.labels = labels
				}
				return m, true
			}
		}
	}
	return documented{}, false
}

// checkPromQL parses expr with Prometheus' own parser and returns what is
// wrong with it: a parse error, a metric docs/observability.md does not document, or a
// label (in a matcher, a grouping or a vector match) none of the metrics
// it names documents.
func checkPromQL(docs map[string]documented, expr string) []string {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVars.Replace(expr))
	if err != nil {
		return []string{"does not parse: " + err.Error()}
	}
	var problems []string
	var named []documented
	var labels []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			m, ok := lookupMetric(docs, n.Name)
			if !ok {
				problems = append(problems, "names "+n.Name+", which docs/observability.md's metrics tables do not list")
				return nil
			}
			named = append(named, m)
			for _, lm := range n.LabelMatchers {
				if lm.Name != "__name__" && !m.has(lm.Name) {
					problems = append(problems, n.Name+" has no documented label "+lm.Name)
				}
			}
		case *parser.AggregateExpr:
			labels = append(labels, n.Grouping...)
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				labels = append(labels, n.VectorMatching.MatchingLabels...)
				labels = append(labels, n.VectorMatching.Include...)
			}
		}
		return nil
	})
	for _, l := range labels {
		found := false
		for _, m := range named {
			found = found || m.has(l)
		}
		if !found {
			problems = append(problems, "groups or matches by "+l+", which none of its metrics documents")
		}
	}
	return problems
}

// Every query of the Grafana dashboard parses as PromQL with Prometheus'
// own parser (the Grafana variables replaced as Grafana does) and names
// only metrics, and labels of those metrics, that docs/observability.md documents; the
// panels cover what an operator looks at; the file in deploy/grafana is
// the chart's.
func TestDashboardQueriesAreValidPromQLOnDocumentedMetrics(t *testing.T) {
	docs := documentedMetrics(t)
	d, _ := readDashboard(t, "../grafana/sluice-dashboard.json")
	if target, err := os.Readlink("../grafana/sluice-dashboard.json"); err != nil || filepath.Clean(filepath.Join("../grafana", target)) != filepath.Clean(dashboardFile) {
		t.Errorf("deploy/grafana/sluice-dashboard.json must link to the chart's dashboard: %q %v", target, err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("the dashboard needs a title and a uid: %q %q", d.Title, d.UID)
	}
	exprs := 0
	var titles []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		titles = append(titles, strings.ToLower(p.Title))
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs++
			for _, problem := range checkPromQL(docs, tg.Expr) {
				t.Errorf("panel %q, query %s: %s", p.Title, tg.Expr, problem)
			}
		}
	}
	if exprs < 15 {
		t.Errorf("%d queries: the dashboard was not read", exprs)
	}
	all := strings.Join(titles, " | ")
	for _, want := range []string{"throughput", "lag", "watermark delay", "duration by phase", "state rows", "budget", "restarts", "health", "executors"} {
		if !strings.Contains(all, want) {
			t.Errorf("no panel about %q among %s", want, all)
		}
	}
	// The query variable's values come from a documented metric's label.
	labelValues := regexp.MustCompile(`^label_values\((sluice_[a-z_]+), ([a-z_]+)\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(METRIC, LABEL)", v.Name, v.Definition)
			continue
		}
		if doc, ok := docs[m[1]]; !ok || !doc.has(m[2]) {
			t.Errorf("variable %s reads label %s of %s, which docs/observability.md does not document", v.Name, m[2], m[1])
		}
	}
}

// The checker catches what it is there to catch.
func TestPromQLCheckRefusesUndocumentedNamesAndLabels(t *testing.T) {
	docs := documentedMetrics(t)
	for expr, want := range map[string]string{
		`rate(sluice_input_rows_total{query=~"$query"}[$__rate_interval])`:                             "",
		`histogram_quantile(0.9, sum by (le, query) (rate(sluice_batch_duration_seconds_bucket[5m])))`: "",
		`sluice_made_up_total`:                                        "which docs/observability.md's metrics tables do not list",
		`sluice_input_rows_total{pod="x"}`:                            "has no documented label pod",
		`sum by (phase) (sluice_input_rows_total)`:                    "groups or matches by phase",
		`sum(rate(sluice_input_rows_total[5m]) by (query)`:            "does not parse",
		`sluice_state_rows / on (instance) sluice_state_memory_bytes`: "groups or matches by instance",
		`sum by (query, phase) (rate(sluice_batch_phase_seconds_total[1m])) / on (query) group_left () sum by (query) (rate(sluice_batches_total[1m]))`: "",
	} {
		got := strings.Join(checkPromQL(docs, expr), "; ")
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%s: problems %q, want %q", expr, got, want)
		}
	}
}

// With metrics.grafanaDashboard.enabled the chart ships the dashboard file,
// byte for byte, in a ConfigMap labelled grafana_dashboard (what Grafana's
// dashboard sidecar loads), with the values' extra labels and annotations;
// without it, no such ConfigMap.
func TestGrafanaDashboardConfigMap(t *testing.T) {
	_, raw := readDashboard(t, dashboardFile)
	dashboards := func(objs []object) []*corev1.ConfigMap {
		var out []*corev1.ConfigMap
		for _, o := range objs {
			if cm, ok := o.obj.(*corev1.ConfigMap); ok && cm.Labels["grafana_dashboard"] != "" {
				out = append(out, cm)
			}
		}
		return out
	}
	if got := dashboards(render(t, renderOpts{})); len(got) != 0 {
		t.Fatalf("the default render has %d dashboard ConfigMaps, want none", len(got))
	}
	got := dashboards(render(t, renderOpts{values: []string{"everything.yaml"}, crds: true}))
	if len(got) != 1 {
		t.Fatalf("%d dashboard ConfigMaps, want 1", len(got))
	}
	cm := got[0]
	if cm.Labels["grafana_dashboard"] != "1" || cm.Labels["team"] != "streaming" || cm.Labels["app.kubernetes.io/name"] == "" || cm.Annotations["grafana_folder"] != "Streaming" {
		t.Errorf("labels %v, annotations %v", cm.Labels, cm.Annotations)
	}
	var keys []string
	for k := range cm.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) != 1 || strings.TrimSpace(cm.Data["sluice.json"]) != strings.TrimSpace(string(raw)) {
		t.Fatalf("the ConfigMap's data (%v) is not %s as it is", keys, dashboardFile)
	}

	// Another namespace (where the sidecar looks) and label value.
	out, errOut, err := runHelm(t, templateArgs(t, renderOpts{set: []string{"--set", "metrics.grafanaDashboard.enabled=true",
		"--set", "metrics.grafanaDashboard.namespace=monitoring", "--set-string", "metrics.grafanaDashboard.labelValue=sluice"}})...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, errOut)
	}
	found := false
	for _, doc := range strings.Split(out, "\n---") {
		var o corev1.ConfigMap
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatal(err)
		}
		if o.Kind == "ConfigMap" && o.Labels["grafana_dashboard"] != "" {
			found = true
			if o.Namespace != "monitoring" || o.Labels["grafana_dashboard"] != "sluice" {
				t.Errorf("dashboard ConfigMap in %q labelled %q, want monitoring and sluice", o.Namespace, o.Labels["grafana_dashboard"])
			}
		}
	}
	if !found {
		t.Error("no dashboard ConfigMap rendered with --set metrics.grafanaDashboard.enabled=true")
	}
}
