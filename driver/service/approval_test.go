package service

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
)

// An approval given with a submit is in the registry's history and in the
// metadata of the checkpoint the query creates.
func TestApprovalInRegistryHistoryAndCheckpoint(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := newLab(t, dir)
	l.add(t, 200)
	s, cancel, done := newService(t, filepath.Join(dir, "registry"))
	defer func() { cancel(); <-done }()
	const name = "course-activity-tile"

	res, err := s.Submit(ctx, Submission{Spec: l.spec(nil), AllowFirstStart: true, Ticket: "CHG-4711", ApprovedBy: "alice@ops", ChangedBy: "bob@host"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the output to equal the oracle", func() bool { return l.check(t) == "" })

	hist, err := s.reg.History(ctx, name)
	if err != nil || len(hist) != 1 {
		t.Fatalf("history: %v, %v", hist, err)
	}
	if h := hist[0]; h.Ticket != "CHG-4711" || h.ApprovedBy != "alice@ops" || !h.AllowFirstStart || h.ChangedBy != "bob@host" || h.Generation != res.Record.Generation {
		t.Fatalf("history records %+v", h)
	}
	st, err := objstore.NewFS(l.cp)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := checkpoint.New(st).ReadMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta.Approvals) != 1 {
		t.Fatalf("checkpoint approvals: %+v", meta.Approvals)
	}
	a := meta.Approvals[0]
	if a.Kind != checkpoint.ApprovalFirstStart || a.Ticket != "CHG-4711" || a.By != "alice@ops" || a.At != meta.CreatedAt || a.At == "" {
		t.Fatalf("checkpoint approval %+v (created %s)", a, meta.CreatedAt)
	}

	// Without a guard's consent the ticket is not recorded: a later
	// generation (stop, resume) carries none.
	if _, _, err := s.Stop(ctx, name, false, 0, "bob@host"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, Submission{Spec: l.spec(nil), Ticket: "ignored", ChangedBy: "bob@host"}); err != nil {
		t.Fatal(err)
	}
	hist, _ = s.reg.History(ctx, name)
	if last := hist[len(hist)-1]; last.Ticket != "" || last.Change != ChangeResume {
		t.Fatalf("resume without consent records %+v", last)
	}

	// A replay (what driver replay submits): the same query on a new
	// checkpoint, approved under a ticket; the history and the new
	// checkpoint record it.
	cp2 := filepath.Join(dir, "cp2")
	res, err = s.Submit(ctx, Submission{Spec: l.spec(func(q *query.Spec) { q.CheckpointLocation = cp2 }), Replay: true, Ticket: "INC-9", ChangedBy: "carol@host"})
	if err != nil || res.Outcome != "updated" {
		t.Fatalf("replay submit: %+v, %v", res, err)
	}
	if _, err := s.WaitStarted(ctx, name, res.Record.Generation); err != nil {
		t.Fatal(err)
	}
	hist, _ = s.reg.History(ctx, name)
	if last := hist[len(hist)-1]; last.Ticket != "INC-9" || last.ApprovedBy != "carol@host" || !last.AllowReplay {
		t.Fatalf("replay recorded %+v", last)
	}
	st2, err := objstore.NewFS(cp2)
	if err != nil {
		t.Fatal(err)
	}
	var meta2 *checkpoint.Metadata
	waitFor(t, "the new checkpoint's metadata", func() bool {
		meta2, err = checkpoint.New(st2).ReadMetadata(ctx)
		return err == nil
	})
	if len(meta2.Approvals) != 1 || meta2.Approvals[0].Kind != checkpoint.ApprovalReplay || meta2.Approvals[0].Ticket != "INC-9" || meta2.Approvals[0].By != "carol@host" {
		t.Fatalf("new checkpoint approvals %+v", meta2.Approvals)
	}
}
