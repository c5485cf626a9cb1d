//go:build linux

package parquet

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/objstore"
)

// exchangeSupported: Linux has renameat2(RENAME_EXCHANGE), which swaps two
// directories atomically.
const exchangeSupported = true

// stagedSuffix marks a new file in the staging directory until the moment
// before the exchange.
const stagedSuffix = ".staged"

// replaceByExchange is the local-filesystem path: the date's new directory
// is built under StagingDir (the new files, and a hard link to every
// other entry of the old directory: staged parts of a running batch,
// another query's files), the record is written, and the two directories
// are exchanged in one renameat2(RENAME_EXCHANGE): a directory lister
// reads the old set or the new set, never both. The old set, now under
// StagingDir, is deleted.
func replaceByExchange(ctx context.Context, fs *objstore.FS, l logLayout, rep *Replacement, data func(i int, w io.Writer) error, step func(string)) error {
	root := fs.Root()
	dirRel := PartitionByWindowDate + "=" + rep.Date
	rep.Staging = StagingDir + rep.ID + "-" + newAttemptID() + "/" + dirRel
	staging := filepath.Join(root, filepath.FromSlash(rep.Staging))
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return fmt.Errorf("make staging directory: %w", err)
	}
	// Written under a name no "*.parquet" glob matches (a recursive glob
	// such as DuckDB's enters '_' directories), renamed just before the
	// exchange.
	for i, key := range rep.Add {
		if err := writeSynced(filepath.Join(staging, path.Base(key)+stagedSuffix), func(w io.Writer) error { return data(i, w) }); err != nil {
			return err
		}
	}
	if err := linkRest(filepath.Join(root, dirRel), staging, rep); err != nil {
		return err
	}
	syncDir(staging)
	if err := writeReplacement(ctx, fs, l, rep, true); err != nil {
		_ = os.RemoveAll(stagingTop(root, rep.Staging))
		return err
	}
	step("recorded")
	return finishExchange(ctx, fs, l, rep, step)
}

// finishExchange exchanges the directories unless that is done, marks the
// record done and deletes the old set. Idempotent.
func finishExchange(ctx context.Context, fs *objstore.FS, l logLayout, rep *Replacement, step func(string)) error {
	root := fs.Root()
	dir := filepath.Join(root, PartitionByWindowDate+"="+rep.Date)
	staging := filepath.Join(root, filepath.FromSlash(rep.Staging))
	exchanged := true
	for _, k := range rep.Add {
		if _, err := os.Stat(filepath.Join(dir, path.Base(k))); err != nil {
			exchanged = false
			break
		}
	}
	if !exchanged {
		for _, k := range rep.Add {
			p := filepath.Join(staging, path.Base(k))
			if err := os.Rename(p+stagedSuffix, p); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("replacement %s: %w", rep.ID, err)
			}
			if _, err := os.Stat(p); err != nil {
				return fmt.Errorf("replacement %s: its new files are neither in %s nor in the staging directory: %w", rep.ID, dir, err)
			}
		}
		// Pick up what appeared in the old directory since staging.
		if err := linkRest(dir, staging, rep); err != nil {
			return err
		}
		if err := unix.Renameat2(unix.AT_FDCWD, staging, unix.AT_FDCWD, dir, unix.RENAME_EXCHANGE); err != nil {
			return fmt.Errorf("exchange %s with %s: %w", staging, dir, err)
		}
		syncDir(filepath.Dir(dir))
		syncDir(filepath.Dir(staging))
	}
	step("visible")
	rep.State = StateDone
	if err := writeReplacement(ctx, fs, l, rep, false); err != nil {
		return err
	}
	// Readers that opened an old file keep reading it (POSIX unlink); a
	// reader that listed before the exchange and opens after finds the
	// file gone and lists again.
	if err := os.RemoveAll(stagingTop(root, rep.Staging)); err != nil {
		return fmt.Errorf("delete the replaced files: %w", err)
	}
	_ = os.Remove(filepath.Join(root, strings.TrimSuffix(StagingDir, "/"))) // only if empty
	step("deleted")
	return nil
}

// linkRest hard-links into staging every file of dir that the replacement
// does not remove and staging does not hold yet.
func linkRest(dir, staging string, rep *Replacement) error {
	removed := map[string]bool{}
	for _, k := range rep.Remove {
		removed[path.Base(k)] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	present := map[string]bool{}
	for _, e := range entries {
		present[e.Name()] = true
	}
	for _, k := range rep.Remove {
		if !present[path.Base(k)] {
			return fmt.Errorf("replaced file %s is not in %s: the log and the directory disagree", k, dir)
		}
	}
	for _, e := range entries {
		if e.IsDir() || removed[e.Name()] {
			continue
		}
		err := os.Link(filepath.Join(dir, e.Name()), filepath.Join(staging, e.Name()))
		if err != nil && !os.IsExist(err) && !os.IsNotExist(err) {
			return fmt.Errorf("link %s into the staging directory: %w", e.Name(), err)
		}
	}
	return nil
}

// stagingTop is StagingDir/<id>-<attempt>, the directory one replacement
// staged under.
func stagingTop(root, staging string) string {
	parts := strings.SplitN(staging, "/", 3)
	return filepath.Join(root, parts[0], parts[1])
}

func writeSynced(p string, write func(w io.Writer) error) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		f.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
