package dispatch

import (
	"context"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestSilentExecutorExpiresAfterTheTimeoutOnly(t *testing.T) {
	ms := NewMembership(5*time.Second, nil, nil)
	a := ms.Register(t0, "127.0.0.1:1", "a", 1)
	b := ms.Register(t0, "127.0.0.1:2", "b", 1)
	ms.Heartbeat(t0.Add(4*time.Second), a.ID, a.Address)
	if gone := ms.Expire(t0.Add(5 * time.Second)); len(gone) != 0 {
		t.Fatalf("expired %v at exactly the timeout", gone)
	}
	gone := ms.Expire(t0.Add(6 * time.Second))
	if len(gone) != 1 || gone[0].ID != b.ID {
		t.Fatalf("expired %v, want only %s", gone, b.ID)
	}
	select {
	case <-ms.Gone(b.ID):
	default:
		t.Fatal("Gone channel of the expired executor is open")
	}
	if ms.Heartbeat(t0.Add(7*time.Second), b.ID, b.Address) {
		t.Fatal("an expired executor's heartbeat was accepted; it must register again")
	}
}

// A restarted driver numbers executors afresh: the first executor to
// register with it gets exec-1, which another executor got from the old
// driver. That other executor's heartbeat, with exec-1 and its own
// address, is not accepted as the new exec-1's: it must register again
// (before, it was, and the executor waited as a member the driver did not
// have, while the driver waited for it to register).
func TestHeartbeatOfAnIDGivenToAnotherAddressIsUnknown(t *testing.T) {
	old := NewMembership(5*time.Second, nil, nil)
	a := old.Register(t0, "127.0.0.1:1", "a", 1)
	b := old.Register(t0, "127.0.0.1:2", "b", 1)
	restarted := NewMembership(5*time.Second, nil, nil)
	b2 := restarted.Register(t0.Add(time.Second), b.Address, "b", 1)
	if b2.ID != a.ID {
		t.Fatalf("the restarted driver gave %s to b, want %s (the collision this test is about)", b2.ID, a.ID)
	}
	if restarted.Heartbeat(t0.Add(2*time.Second), a.ID, a.Address) {
		t.Fatalf("a's heartbeat as %s from %s was accepted, but %s is b at %s", a.ID, a.Address, b2.ID, b2.Address)
	}
	if !restarted.Heartbeat(t0.Add(2*time.Second), b2.ID, b2.Address) {
		t.Fatal("b's own heartbeat was refused")
	}
	if !restarted.Heartbeat(t0.Add(2*time.Second), b2.ID, "") {
		t.Fatal("a heartbeat without an address (an older executor) was refused")
	}
}

func TestRegisteringAgainAtAnAddressReplacesTheOldMember(t *testing.T) {
	var removed []Member
	ms := NewMembership(time.Second, nil, func(m Member) { removed = append(removed, m) })
	a := ms.Register(t0, "127.0.0.1:1", "a", 1)
	a2 := ms.Register(t0, "127.0.0.1:1", "a", 1)
	if a.ID == a2.ID || ms.IsMember(a.ID) || !ms.IsMember(a2.ID) || len(removed) != 1 {
		t.Fatalf("old %s new %s removed %v", a.ID, a2.ID, removed)
	}
}

func TestDrainWaitsForBatchesUsingTheExecutor(t *testing.T) {
	ms := NewMembership(time.Minute, nil, nil)
	a := ms.Register(t0, "127.0.0.1:1", "a", 1)
	ms.Register(t0, "127.0.0.1:2", "b", 1)
	hold := ms.AcquireLive()
	done := make(chan error, 1)
	go func() { done <- ms.Drain(context.Background(), a.ID) }()
	// Draining at once stops new batches from using a.
	deadline := time.Now().Add(5 * time.Second)
	for len(ms.Live()) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("draining executor still offered to new batches")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Drain returned %v while a batch still used the executor", err)
	case <-time.After(30 * time.Millisecond):
	}
	if !ms.IsMember(a.ID) {
		t.Fatal("draining executor left before the batch released it")
	}
	hold.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ms.IsMember(a.ID) {
		t.Fatal("drained executor is still a member")
	}
}

func TestWaitForLiveReturnsWhenAnExecutorRegisters(t *testing.T) {
	ms := NewMembership(time.Minute, nil, nil)
	done := make(chan []Member, 1)
	go func() {
		m, _ := ms.WaitForLive(context.Background(), 1)
		done <- m
	}()
	ms.Register(t0, "127.0.0.1:1", "a", 1)
	select {
	case m := <-done:
		if len(m) != 1 {
			t.Fatalf("got %v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitForLive did not return")
	}
}
