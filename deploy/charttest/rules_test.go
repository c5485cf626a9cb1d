package charttest

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// rulesFile is the one rules file: the chart's copy, which
// deploy/prometheus/sluice-rules.yaml links to.
const rulesFile = "../helm/sluice/rules/sluice-rules.yaml"

// TestRulesAreValidPrometheusRules parses the shipped alerting rules with
// Prometheus' own rule-file code (what `promtool check rules` runs):
// expressions, durations, label and annotation templates. Every metric an
// expression names must be one docs/observability.md's metrics tables document.
func TestRulesAreValidPrometheusRules(t *testing.T) {
	for _, path := range []string{rulesFile, "../prometheus/sluice-rules.yaml"} {
		p := parser.NewParser(parser.Options{})
		groups, errs := rulefmt.ParseFile(path, false, model.UTF8Validation, p, nil)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", path, errs)
		}
		if len(groups.Groups) == 0 || len(groups.Groups[0].Rules) < 5 {
			t.Fatalf("%s: %d groups, want the sluice group with its rules", path, len(groups.Groups))
		}
		readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "observability.md"))
		if err != nil {
			t.Fatal(err)
		}
		documented := map[string]bool{}
		for _, m := range regexp.MustCompile("(?m)^\\| `(sluice_[a-z_]+)`").FindAllStringSubmatch(string(readme), -1) {
			documented[m[1]] = true
		}
		alerts := map[string]bool{}
		for _, r := range groups.Groups[0].Rules {
			alerts[r.Alert] = true
			expr, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("%s: %v", r.Alert, err)
			}
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok && !documented[vs.Name] {
					t.Errorf("%s uses %s, which docs/observability.md's metrics table does not list", r.Alert, vs.Name)
				}
				return nil
			})
			if r.Annotations["summary"] == "" || r.Labels["severity"] == "" {
				t.Errorf("%s: needs a summary and a severity", r.Alert)
			}
		}
		for _, want := range []string{"SluiceQueryIncident", "SluiceQuerySourceIdle", "SluiceQueryFailed", "SluiceQueryRecovering", "SluiceNoExecutors"} {
			if !alerts[want] {
				t.Errorf("%s: no %s alert", path, want)
			}
		}
	}
	if target, err := os.Readlink("../prometheus/sluice-rules.yaml"); err != nil || filepath.Clean(filepath.Join("../prometheus", target)) != filepath.Clean(rulesFile) {
		t.Errorf("deploy/prometheus/sluice-rules.yaml must link to the chart's rules file: %q %v", target, err)
	}
}

// TestPrometheusRuleRendersTheRulesFile: the chart's PrometheusRule holds
// exactly the groups of the shipped rules file, Prometheus templates intact.
func TestPrometheusRuleRendersTheRulesFile(t *testing.T) {
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	var got any
	for _, o := range render(t, renderOpts{values: []string{"everything.yaml"}, crds: true}) {
		if o.kind == "PrometheusRule" {
			got = o.raw["spec"].(map[string]any)["groups"]
		}
	}
	if got == nil {
		t.Fatal("no PrometheusRule rendered")
	}
	if !reflect.DeepEqual(got, want["groups"]) {
		t.Fatalf("rendered groups differ from %s:\n%v\nwant\n%v", rulesFile, got, want["groups"])
	}
	if !strings.Contains(string(raw), "{{ $labels.query }}") {
		t.Fatal("the rules file lost its Prometheus templates")
	}
}
