package service

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Watcher submits the specs of a directory (a Kubernetes ConfigMap, say)
// at start and whenever they change: a new file submits; a changed file
// is applied if its checkpoint can serve it, else refused ("new checkpoint
// required") while the old version keeps running; a removed file stops its
// query only with Prune.
type Watcher struct {
	Dir                          string
	Prune                        bool
	AllowFirstStart, AllowReplay bool
	// Ticket and ApprovedBy go with AllowFirstStart or AllowReplay.
	Ticket, ApprovedBy string
	S                  *Service
	Logger             *slog.Logger
	// Poll is how often the directory is read (default 2s).
	Poll time.Duration

	seen map[string]seenFile // by file name
}

type seenFile struct {
	sum   [32]byte
	query string // the query name it submitted ("" if it never parsed)
}

// Run scans the directory while the service is active, until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	if w.Poll <= 0 {
		w.Poll = 2 * time.Second
	}
	if w.Logger == nil {
		w.Logger = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(w.Poll)
	defer t.Stop()
	for {
		if w.S.Ready() == nil {
			if err := w.Scan(ctx); err != nil && ctx.Err() == nil {
				w.Logger.Warn("queries-dir", "dir", w.Dir, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// specFile reports whether name looks like a spec (ConfigMap mounts also
// hold ..data links and dot-directories).
func specFile(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	switch filepath.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// Scan applies the directory's changes since the last scan.
func (w *Watcher) Scan(ctx context.Context) error {
	if w.seen == nil {
		w.seen = map[string]seenFile{}
	}
	if w.Logger == nil {
		w.Logger = slog.New(slog.DiscardHandler)
	}
	entries, err := os.ReadDir(w.Dir)
	if err != nil {
		return err
	}
	present := map[string]bool{}
	var names []string
	for _, e := range entries {
		if specFile(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, name := range names {
		present[name] = true
		path := filepath.Join(w.Dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			if info, serr := os.Stat(path); serr == nil && info.IsDir() {
				continue
			}
			w.Logger.Warn("queries-dir: cannot read", "file", path, "err", err)
			continue
		}
		sum := sha256.Sum256(data)
		if prev, ok := w.seen[name]; ok && prev.sum == sum {
			continue
		}
		res, err := w.S.Submit(ctx, Submission{Spec: data, AllowFirstStart: w.AllowFirstStart, Replay: w.AllowReplay, Ticket: w.Ticket, ApprovedBy: w.ApprovedBy, ChangedBy: "queries-dir:" + path, Principal: ConfigPrincipal, Role: ConfigRole})
		switch {
		case errors.Is(err, ErrStandby) || ctx.Err() != nil:
			return err // try again when active
		case IsIncompatible(err):
			w.Logger.Error("queries-dir: change refused: new checkpoint required; the running version is kept", "file", path, "err", err)
		case err != nil:
			w.Logger.Error("queries-dir: refused", "file", path, "err", err)
		default:
			w.Logger.Info("queries-dir: "+res.Outcome, "file", path, "query", res.Record.Name, "generation", res.Record.Generation)
		}
		q := ""
		if spec, perr := Parse(data); perr == nil {
			q = spec.Name
		}
		w.seen[name] = seenFile{sum: sum, query: q}
	}
	for name, f := range w.seen {
		if present[name] {
			continue
		}
		delete(w.seen, name)
		if f.query == "" {
			continue
		}
		if !w.Prune {
			w.Logger.Info("queries-dir: file removed; its query keeps its desired state (use --prune to stop it)", "file", name, "query", f.query)
			continue
		}
		if _, _, err := w.S.StopAs(ctx, f.query, false, 0, Actor{ChangedBy: "queries-dir:prune", Principal: ConfigPrincipal, Role: ConfigRole}); err != nil {
			w.Logger.Error("queries-dir: prune", "query", f.query, "err", err)
		} else {
			w.Logger.Info("queries-dir: file removed: query stopped (--prune)", "file", name, "query", f.query)
		}
	}
	return nil
}
