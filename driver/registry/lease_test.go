package registry

import (
	"testing"
	"time"
)

func TestLeaseStep(t *testing.T) {
	cfg := LeaseConfig{Holder: "me", TTL: 9 * time.Second, Renew: 3 * time.Second}
	t0 := time.Unix(100, 0)
	other := LeaseRecord{Seq: 7, Holder: "other"}
	tests := []struct {
		name   string
		st     LeaseState
		latest LeaseRecord
		now    time.Time
		want   LeaseAction
	}{
		{"free lease is acquired", LeaseState{}, LeaseRecord{}, t0, LeaseAction{Write: 1}},
		{"first sight of a held lease waits", LeaseState{}, other, t0, LeaseAction{}},
		{"held lease within its TTL waits", LeaseState{Latest: other, SeenAt: t0}, other, t0.Add(8 * time.Second), LeaseAction{}},
		{"lapsed lease is taken over", LeaseState{Latest: other, SeenAt: t0}, other, t0.Add(9 * time.Second), LeaseAction{Write: 8}},
		{"a renewal restarts the wait", LeaseState{Latest: other, SeenAt: t0}, LeaseRecord{Seq: 8, Holder: "other"}, t0.Add(20 * time.Second), LeaseAction{}},
		{"released lease is taken at once", LeaseState{Latest: other, SeenAt: t0}, LeaseRecord{Seq: 8, Holder: "other", Released: true}, t0, LeaseAction{Write: 9}},
		{"holder renews after Renew",
			LeaseState{Latest: LeaseRecord{Seq: 3, Holder: "me"}, SeenAt: t0, WroteAt: t0, HeldUntil: t0.Add(9 * time.Second)},
			LeaseRecord{Seq: 3, Holder: "me"}, t0.Add(3 * time.Second), LeaseAction{Write: 4}},
		{"holder waits before Renew",
			LeaseState{Latest: LeaseRecord{Seq: 3, Holder: "me"}, SeenAt: t0, WroteAt: t0, HeldUntil: t0.Add(9 * time.Second)},
			LeaseRecord{Seq: 3, Holder: "me"}, t0.Add(2 * time.Second), LeaseAction{}},
		{"holder that sees another's object has lost",
			LeaseState{Latest: LeaseRecord{Seq: 3, Holder: "me"}, SeenAt: t0, WroteAt: t0, HeldUntil: t0.Add(9 * time.Second)},
			LeaseRecord{Seq: 4, Holder: "other"}, t0.Add(2 * time.Second), LeaseAction{Lost: true}},
		{"holder past its TTL has lost",
			LeaseState{Latest: LeaseRecord{Seq: 3, Holder: "me"}, SeenAt: t0, WroteAt: t0, HeldUntil: t0.Add(9 * time.Second)},
			LeaseRecord{Seq: 3, Holder: "me"}, t0.Add(9 * time.Second), LeaseAction{Lost: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, got := LeaseStep(cfg, tc.st, tc.latest, tc.now)
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The holder believes it holds the lease for less time than a standby
// waits, whatever the delay between the holder's send and the standby's
// first sight of the object.
func TestLeaseHolderExpiresBeforeStandbyTakesOver(t *testing.T) {
	cfg := LeaseConfig{Holder: "h", TTL: 9 * time.Second, Renew: 3 * time.Second}
	sb := LeaseConfig{Holder: "s", TTL: 9 * time.Second, Renew: 3 * time.Second}
	sent := time.Unix(500, 0)
	for _, seenAfter := range []time.Duration{0, time.Millisecond, 2 * time.Second, 8 * time.Second} {
		h := LeaseWrote(cfg, LeaseState{}, 5, sent)
		rec := LeaseRecord{Seq: 5, Holder: "h"}
		s, _ := LeaseStep(sb, LeaseState{}, rec, sent.Add(seenAfter))
		for now := sent; now.Before(sent.Add(30 * time.Second)); now = now.Add(100 * time.Millisecond) {
			_, act := LeaseStep(sb, s, rec, now.Add(seenAfter))
			if act.Write > 0 && h.Holds(now) {
				t.Fatalf("seen %v after the send: standby acquires at %v while the holder holds", seenAfter, now)
			}
		}
	}
}
