package monitor

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/progress"
)

func TestTrackerKeepsStateErrorAndBoundedProgress(t *testing.T) {
	now := time.Unix(1000, 0)
	tr := New(Options{Keep: 3, Now: func() time.Time { return now }})
	r := Ref{Name: "tile", ID: "id-1"}
	tr.SetDesired(r, DesiredRunning, 1)
	tr.SetState(r, Starting, nil)
	tr.SetState(r, Running, nil)
	for i := ids.BatchID(0); i < 5; i++ {
		tr.Observe(&progress.Report{Name: "tile", ID: "id-1", BatchID: i})
	}
	now = now.Add(time.Second)
	tr.SetState(r, Recovering, errors.New("broker away"))
	tr.SetState(r, Starting, nil)
	v, ok := tr.Get("tile")
	if !ok || v.State != Starting || v.LastError != "broker away" || v.Restarts != 1 || v.Desired != DesiredRunning || v.Latest.BatchID != 4 {
		t.Fatalf("view = %+v", v)
	}
	p := tr.Progress("tile", 0)
	if len(p) != 3 || p[0].BatchID != 2 || p[2].BatchID != 4 {
		t.Fatalf("progress kept: %d, first %d", len(p), p[0].BatchID)
	}
	if got := tr.Progress("tile", 2); len(got) != 2 || got[0].BatchID != 3 {
		t.Fatalf("last 2: %+v", got)
	}
}

func TestFollowReceivesNewBatchesAndStops(t *testing.T) {
	tr := New(Options{})
	ch, stop := tr.Follow(Ref{Name: "q"})
	tr.Observe(&progress.Report{Name: "q", BatchID: 7})
	if p := <-ch; p.BatchID != 7 {
		t.Fatalf("got batch %d", p.BatchID)
	}
	stop()
	stop()
	if _, open := <-ch; open {
		t.Fatal("channel still open after stop")
	}
	tr.Observe(&progress.Report{Name: "q", BatchID: 8}) // no panic on a stopped follower
}

func TestChangedIsClosedByEachStateChange(t *testing.T) {
	tr := New(Options{})
	r := Ref{Name: "tile"}
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	ch := tr.Changed()
	if closed(ch) {
		t.Fatal("Changed is closed before any change")
	}
	tr.Observe(&progress.Report{Name: "tile", BatchID: 0})
	if closed(ch) {
		t.Fatal("a batch's progress closed Changed; only state changes should")
	}
	for _, change := range []struct {
		name string
		do   func()
	}{
		{"SetDesired", func() { tr.SetDesired(r, DesiredRunning, 1) }},
		{"SetState", func() { tr.SetState(r, Running, nil) }},
		{"SetState terminal", func() { tr.SetState(r, Stopped, nil) }},
		{"Remove", func() { tr.Remove("tile") }},
	} {
		ch := tr.Changed()
		change.do()
		if !closed(ch) {
			t.Fatalf("%s did not close Changed", change.name)
		}
		if closed(tr.Changed()) {
			t.Fatalf("after %s, the next Changed is already closed", change.name)
		}
	}
}
