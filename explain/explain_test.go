package explain_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil/rewrite"

	"github.com/sluicehq/sluice/explain"
	"github.com/sluicehq/sluice/internal/testutil/validatecases"
	"github.com/sluicehq/sluice/query"
)

// TestGolden explains every query in examples/ and testdata/specs/ and
// compares with testdata/NAME.golden (go test ./explain -run TestGolden
// -rewrite rewrites them).
func TestGolden(t *testing.T) {
	examples, _ := filepath.Glob("../examples/*.yaml")
	specs, _ := filepath.Glob("testdata/specs/*.yaml")
	if len(examples) == 0 {
		t.Fatal("no examples found")
	}
	for _, f := range append(examples, specs...) {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			spec, err := query.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			got, err := explain.Plan(spec)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			golden := filepath.Join("testdata", name+".golden")
			if rewrite.Enabled() {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -rewrite to create it)", err)
			}
			if got != string(want) {
				t.Fatalf("plan of %s differs from %s (run with -rewrite if intended):\n%s", f, golden, got)
			}
		})
	}
}

// Every case of the validation tests: explain refuses exactly what
// Validate refuses, with the same message, and plans every valid spec.
func TestSameMessagesAsValidate(t *testing.T) {
	n := 0
	validatecases.Each(t, func(t *testing.T, pos string, data []byte, want string) {
		want = strings.TrimSpace(want)
		spec, err := query.Parse(data)
		if err != nil {
			return // a parse error: explain and run share query.Load
		}
		n++
		plan, err := explain.Plan(spec)
		switch {
		case want == "ok" && err != nil:
			t.Fatalf("%s: valid spec, explain refused it: %v", pos, err)
		case want == "ok" && !strings.Contains(plan, "== Incremental plan: "):
			t.Fatalf("%s: no plan:\n%s", pos, plan)
		case want != "ok":
			var ve *query.ValidationError
			if !errors.As(err, &ve) || err.Error() != want {
				t.Fatalf("%s: explain said\n%v\nvalidate said\n%s", pos, err, want)
			}
		}
	})
	if n < 50 {
		t.Fatalf("only %d cases checked", n)
	}
}

// The tile in SQL (examples/tile-sql.yaml) and in YAML
// (examples/tile-file.yaml) explain the same plan: both compile to one
// query.Plan.
func TestTileInSQLExplainsTheYAMLTilesPlan(t *testing.T) {
	var plans []string
	for _, f := range []string{"../examples/tile-file.yaml", "../examples/tile-sql.yaml"} {
		spec, err := query.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := explain.Plan(spec)
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, p)
	}
	if plans[0] != plans[1] {
		t.Fatalf("YAML:\n%s\nSQL:\n%s", plans[0], plans[1])
	}
	spec, err := query.Load("../examples/tile-sql.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if spec.SQL == "" || spec.Aggregate != nil {
		t.Fatal("examples/tile-sql.yaml is not written in SQL")
	}
}

// A filter off the event time is shown below the watermark, one on it
// above; a deduplication's map side, exchange and state, and a session
// window's assignment and late drop are shown.
func TestPlanShowsPushedFilterDedupAndSessions(t *testing.T) {
	for f, want := range map[string][]string{
		"testdata/specs/sql-session-filter.yaml": {
			"Filter (event_type = 'lesson_completed'), below the watermark",
			"+- Filter (event_time >= TIMESTAMP '2026-01-01T00:00:00Z')\n",
			"SessionWindowAssign session_window(event_time, 30m0s)",
			"DropLate session_end <= the previous batch's watermark",
			"Filter (having) (events > 1L)",
		},
		"testdata/specs/dedup.yaml": {
			"DropDuplicatesWithinWatermark [event_id] (map side)",
			"Exchange hashpartitioning(event_id, 8)",
			"DropDuplicatesWithinWatermark [event_id], StateStore provider memory, 8 partitions",
			"no-data batches: after a batch that raised the watermark",
		},
	} {
		spec, err := query.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := explain.Plan(spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(p, w) {
				t.Errorf("%s: plan lacks %q:\n%s", f, w, p)
			}
		}
		// The watermark is printed above (after) the pushed filter.
		if strings.Contains(f, "filter") && strings.Index(p, "below the watermark") < strings.Index(p, "EventTimeWatermark") {
			t.Errorf("%s: the pushed filter is not below the watermark:\n%s", f, p)
		}
	}
}
