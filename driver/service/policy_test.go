package service

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/driver/policy"
	"github.com/sluicehq/sluice/driver/registry"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
)

func TestSubmitPolicyCheckpointInUseAndAudit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := newLab(t, dir)
	l.add(t, 50)
	pol, err := policy.Parse([]byte(`lab: true
allow:
  sources: [` + l.in + `]
  sinks: [` + filepath.Join(dir, "out") + `]
  checkpoints: [` + filepath.Join(dir, "cp") + `]
principals:
  alice:
    checkpoints: [` + filepath.Join(dir, "alice") + `]
`))
	if err != nil {
		t.Fatal(err)
	}
	st, err := objstore.NewFS(filepath.Join(dir, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{
		Registry: registry.New(st, registry.Options{}),
		Lease:    registry.LeaseConfig{TTL: 2 * time.Second, Renew: 200 * time.Millisecond},
		Poll:     50 * time.Millisecond,
		Engine:   microbatch.Options{Parallelism: 2},
		Policy:   pol,
	})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "the service to become active", func() bool { return s.Ready() == nil })

	// Outside the policy: refused, naming field, value and rule, and
	// nothing is created.
	outside := filepath.Join(dir, "elsewhere")
	for _, c := range []struct {
		field string
		edit  func(*query.Spec)
	}{
		{"source.file.path", func(q *query.Spec) { q.Source.File.Path = outside }},
		{"sink.parquet.path", func(q *query.Spec) { q.Sink.Parquet.Path = outside }},
		{"checkpointLocation", func(q *query.Spec) { q.CheckpointLocation = outside }},
		{"badRecordsPath", func(q *query.Spec) { q.BadRecordsPath = outside }},
		{"checkpointLocation", func(q *query.Spec) { q.CheckpointLocation = filepath.Join(dir, "cp", "..", "elsewhere") }},
	} {
		_, err := s.Submit(ctx, Submission{Spec: l.spec(c.edit), Principal: "bob", Role: "operator"})
		if !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), c.field+": ") || !strings.Contains(err.Error(), "outside the driver's policy") {
			t.Fatalf("%s outside the policy: %v, want ErrPolicy naming the field", c.field, err)
		}
		if _, err := os.Stat(outside); !os.IsNotExist(err) {
			t.Fatalf("%s refused, yet %s exists (%v)", c.field, outside, err)
		}
	}
	if recs, _ := s.reg.List(ctx); len(recs) != 0 {
		t.Fatalf("refused submits registered %d queries", len(recs))
	}
	// A principal's own prefix.
	alice := filepath.Join(dir, "alice", "q")
	if _, err := s.Submit(ctx, Submission{Spec: l.spec(func(q *query.Spec) { q.CheckpointLocation = alice }), Principal: "bob"}); !errors.Is(err, ErrPolicy) {
		t.Fatalf("bob on alice's prefix: %v", err)
	}

	// Allowed: submitted, with the audit fields.
	res, err := s.Submit(ctx, Submission{Spec: l.spec(nil), Principal: "bob", Role: "operator", ChangedBy: "bob@host", Reason: "CHG-1"})
	if err != nil {
		t.Fatal(err)
	}
	fp := specFingerprint(string(l.spec(nil)))
	if r := res.Record; r.Principal != "bob" || r.Role != "operator" || r.Reason != "CHG-1" || r.FingerprintBefore != "" || r.FingerprintAfter != fp || fp == "" {
		t.Fatalf("first generation's audit fields: %+v (fingerprint %s)", r, fp)
	}

	// Another query on the same checkpoint, or one inside it, or one
	// containing it: refused, naming the query.
	for _, cp := range []string{l.cp, filepath.Join(l.cp, "sub"), l.cp + "/./"} {
		_, err := s.Submit(ctx, Submission{Spec: l.spec(func(q *query.Spec) { q.Name = "copycat"; q.CheckpointLocation = cp }), Principal: "bob"})
		if !errors.Is(err, ErrCheckpointInUse) || !strings.Contains(err.Error(), "query course-activity-tile") {
			t.Fatalf("a second query on checkpoint %s: %v, want ErrCheckpointInUse naming course-activity-tile", cp, err)
		}
	}
	if _, err := s.reg.Get(ctx, "copycat"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("the refused query was registered: %v", err)
	}
	// A sibling with a common string prefix is another checkpoint.
	if _, err := s.Submit(ctx, Submission{Spec: l.spec(func(q *query.Spec) { q.Name = "sibling"; q.CheckpointLocation = l.cp + "-b" })}); !errors.Is(err, ErrPolicy) {
		// cp-b is outside the policy's cp/ prefix: the policy, not the
		// checkpoint check, refuses it.
		t.Fatalf("sibling checkpoint: %v, want ErrPolicy", err)
	}

	// Stop records who, why and the unchanged fingerprint.
	rec, _, err := s.StopAs(ctx, "course-activity-tile", true, time.Second, Actor{ChangedBy: "carol@host", Principal: "carol", Role: "operator", Reason: "INC-7"})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Principal != "carol" || rec.Reason != "INC-7" || rec.FingerprintBefore != fp || rec.FingerprintAfter != fp {
		t.Fatalf("stop's audit fields: %+v", rec)
	}
	hist, err := s.reg.History(ctx, "course-activity-tile")
	if err != nil || len(hist) != 2 || hist[0].Principal != "bob" || hist[1].Principal != "carol" {
		t.Fatalf("history: %+v, %v", hist, err)
	}
}
