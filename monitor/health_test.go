package monitor

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/progress"
)

// took sets p's triggerExecution duration.
func took(p *progress.Report, d time.Duration) *progress.Report {
	p.DurationMs = map[string]int64{"triggerExecution": d.Milliseconds()}
	return p
}

func TestClassifyHealth(t *testing.T) {
	opts := HealthOptions{Stall: time.Minute, SlowBatches: 3}
	running := View{State: Running}
	withTrigger := View{State: Running, Trigger: 10 * time.Second}
	inFlight := View{State: Running, InFlight: 7, InFlightSince: t0.Add(10 * time.Second)}
	for _, c := range []struct {
		name   string
		v      View
		ps     []*progress.Report
		now    int // seconds after t0
		want   Health
		reason string // a piece of the reason
	}{
		{"failed", View{State: Failed, LastError: "boom"}, nil, 0, IncidentHealth, "boom"},
		{"recovering: retries failing", View{State: Recovering, LastError: "batch 3 attempt 2: dial"}, nil, 0, IncidentHealth, "retries failing"},
		{"stopped", View{State: Stopped}, nil, 0, Inactive, "STOPPED"},
		{"pending", View{State: Pending}, nil, 0, Inactive, "PENDING"},
		{"running, no batch yet", running, nil, 0, Healthy, "running"},
		{"running, watermark advancing", running,
			[]*progress.Report{batch(0, 1000, 5, 0), batch(50, 2000, 5, 0)}, 60, Healthy, ""},
		{"stop producing: idle by watermark", running,
			[]*progress.Report{batch(0, 1000, 5, 0), batch(10, 2000, 5, 0)}, 600, IdleSource, "idle"},
		{"stop producing, no watermark, lag zero: idle", running,
			[]*progress.Report{batch(0, 0, 5, 0), batch(10, 0, 5, 0)}, 600, IdleSource, "no new input"},
		{"no watermark, file source quiet: idle", running,
			[]*progress.Report{batch(0, 0, 5, -1)}, 600, IdleSource, "no new input"},
		{"no watermark, quiet for less than the stall: healthy", running,
			[]*progress.Report{batch(0, 0, 5, 0)}, 30, Healthy, ""},
		{"no batch for the stall while offsets wait: incident", running,
			[]*progress.Report{batch(0, 0, 5, 40)}, 600, IncidentHealth, "40 offsets wait"},
		{"watermark stalled while lag grows: incident", running,
			[]*progress.Report{batch(0, 1000, 5, 0), batch(10, 2000, 5, 10), batch(80, 2000, 5, 400)}, 100, IncidentHealth, "lag 10 → 400"},
		{"lag rising at each of the last 3 batches: incident", running,
			[]*progress.Report{batch(0, 1000, 5, 10), batch(10, 2000, 5, 20), batch(20, 3000, 5, 30), batch(30, 4000, 5, 40)}, 35, IncidentHealth, "10 → 40"},
		{"lag rising at only 2 of the last 3: healthy", running,
			[]*progress.Report{batch(0, 1000, 5, 10), batch(10, 2000, 5, 5), batch(20, 3000, 5, 30), batch(30, 4000, 5, 40)}, 35, Healthy, ""},
		{"3 batches slower than the trigger: incident", withTrigger,
			[]*progress.Report{took(batch(0, 1000, 5, 0), 11*time.Second), took(batch(11, 2000, 5, 0), 12*time.Second), took(batch(23, 3000, 5, 0), 15*time.Second)}, 40, IncidentHealth, "longer than the 10s trigger"},
		{"2 of 3 slower than the trigger: healthy", withTrigger,
			[]*progress.Report{took(batch(0, 1000, 5, 0), 11*time.Second), took(batch(11, 2000, 5, 0), 2*time.Second), took(batch(23, 3000, 5, 0), 15*time.Second)}, 40, Healthy, ""},
		{"slow batches without a trigger: not judged", running,
			[]*progress.Report{took(batch(0, 1000, 5, 0), 11*time.Second), took(batch(11, 2000, 5, 0), 12*time.Second), took(batch(23, 3000, 5, 0), 15*time.Second)}, 40, Healthy, ""},
		{"batch in flight past the stall: incident", inFlight,
			[]*progress.Report{batch(0, 0, 5, 0)}, 100, IncidentHealth, "batch 7 in flight"},
		{"batch in flight within the stall: not idle", inFlight,
			[]*progress.Report{batch(0, 0, 5, 0)}, 65, Healthy, ""},
		{"in-flight limit is N triggers when longer than the stall", View{State: Running, Trigger: 30 * time.Second, InFlight: 1, InFlightSince: t0},
			[]*progress.Report{batch(0, 0, 5, 0)}, 80, Healthy, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ClassifyHealth(c.v, c.ps, t0.Add(time.Duration(c.now)*time.Second), opts)
			if got.Health != c.want || !strings.Contains(got.Reason, c.reason) {
				t.Fatalf("got %s (%q), want %s with %q", got.Health, got.Reason, c.want, c.reason)
			}
		})
	}
}

func TestTrackerHealth(t *testing.T) {
	now := t0
	tr := New(Options{Now: func() time.Time { return now }, Health: HealthOptions{Stall: time.Minute}})
	ref := Ref{Name: "q", ID: "id"}
	tr.SetState(ref, Running, nil)
	tr.SetTrigger(ref, 5*time.Second)
	tr.BatchStarted(ref, 0)
	now = t0.Add(2 * time.Minute)
	if v, _ := tr.Get("q"); v.Health.Health != IncidentHealth || v.InFlight != 0 || v.InFlightSince != t0 {
		t.Fatalf("stuck batch 0: %+v", v.Health)
	}
	p := batch(120, 0, 5, 0)
	p.Name, p.ID, p.BatchID = "q", "id", 0
	tr.Observe(p)
	if v, _ := tr.Get("q"); v.Health.Health != Healthy || !v.InFlightSince.IsZero() {
		t.Fatalf("after the commit: %+v", v.Health)
	}
	now = t0.Add(10 * time.Minute)
	if vs := tr.List(); len(vs) != 1 || vs[0].Health.Health != IdleSource {
		t.Fatalf("quiet: %+v", vs)
	}
}
