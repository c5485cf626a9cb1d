package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/internal/cliflags"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
)

// replayFlags are driver replay's settings.
type replayFlags struct {
	file, checkpoint, offsets, out string
	guards                         cliflags.Guards
	run, dryRun, wait              bool
	timeout                        time.Duration
	s3                             objstore.S3Options
}

func newReplayCmd() *cobra.Command {
	var cf clientFlags
	var f replayFlags
	cmd := &cobra.Command{
		Use:   "replay -f QUERY.yaml --checkpoint NEW --starting-offsets OFFSETS --ticket TICKET [--run | --dry-run]",
		Short: "Restart a query after data loss from chosen offsets",
		Long: `Writes the query's spec with checkpointLocation NEW and the Kafka source's
startingOffsets OFFSETS ("earliest", "latest" or Spark's JSON map
{"topic":{"0":1234}}, -2 earliest, -1 latest) to --out, validates it, checks
that NEW holds no checkpoint, and starts it as an intended replay
(--allow-replay=TICKET): submitted to the running driver (default), run in
this process (--run), or only written (--dry-run). The ticket, who
(--approved-by, default user@host) and when are recorded in NEW's metadata
(driver checkpoint inspect) and, when submitted, in the registry's history.
The old checkpoint is left as it is, as evidence.`,
		Args: cobra.NoArgs,
	}
	cf.add(cmd.Flags(), "table")
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "file", "f", "", "the query spec that stopped (YAML or JSON)")
	fl.StringVar(&f.checkpoint, "checkpoint", "", "the new checkpointLocation (must hold no checkpoint)")
	fl.StringVar(&f.offsets, "starting-offsets", "", `where the replay starts: earliest, latest or a JSON map {"topic":{"partition":offset}}`)
	fl.StringVar(&f.guards.Replay, "ticket", "", "the change or incident ticket the replay is approved under")
	fl.StringVar(&f.guards.ApprovedBy, "approved-by", "", cliflags.ApprovedByHelp)
	fl.StringVar(&f.out, "out", "", "where the replay's spec is written (default: QUERY.replay.yaml next to -f)")
	fl.BoolVar(&f.run, "run", false, "run the replay in this process (as driver run) instead of submitting it")
	fl.BoolVar(&f.dryRun, "dry-run", false, "validate and write the spec; start nothing")
	fl.BoolVar(&f.wait, "wait", true, "when submitting: answer once the query runs (or failed to start)")
	fl.DurationVar(&f.timeout, "timeout", 2*time.Minute, "when submitting: give up waiting after this long, e.g. 2m")
	cliflags.S3(fl, &f.s3)
	return clientCmd(cmd, func(cmd *cobra.Command, _ []string) error {
		spec, b, err := f.prepare(cmd.Context())
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "replay spec written to %s (checkpoint %s, startingOffsets %s, ticket %s)\n", f.out, spec.CheckpointLocation, spec.Source.Kafka.StartingOffsets, f.guards.Replay)
		switch {
		case f.dryRun:
			return nil
		case f.run:
			return runSpecTracked(cmd, spec, microbatch.Options{
				Store: objstore.Options{S3: f.s3}, AllowReplay: true,
				Ticket: f.guards.Ticket(), ApprovedBy: f.guards.By(who),
			}, nil)
		}
		cl, closeConn, err := cf.dial()
		if err != nil {
			return err
		}
		defer closeConn()
		ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
		defer cancel()
		resp, err := cl.SubmitQuery(ctx, submitRequest(b, &f.guards, f.wait, f.guards.Replay))
		if err != nil {
			return cf.callErr(err, "")
		}
		if cf.output == "json" {
			return writeJSON(w, resp)
		}
		msg := resp.Message
		if resp.State != "" {
			msg += "; state " + resp.State
		}
		fmt.Fprintln(w, msg)
		return nil
	})
}

// prepare checks the flags, writes the replay's spec to f.out and returns
// it, parsed and as written.
func (f *replayFlags) prepare(ctx context.Context) (query.Spec, []byte, error) {
	switch {
	case f.file == "":
		return query.Spec{}, nil, usageErr("-f QUERY.yaml is required")
	case f.checkpoint == "":
		return query.Spec{}, nil, usageErr("--checkpoint NEW is required: a replay starts on a new checkpoint, the old one stays as evidence")
	case f.offsets == "":
		return query.Spec{}, nil, usageErr("--starting-offsets is required: earliest, latest or a JSON map {\"topic\":{\"partition\":offset}}")
	case strings.TrimSpace(f.guards.Replay) == "":
		return query.Spec{}, nil, usageErr("--ticket is required: the replay is recorded under it")
	case f.run && f.dryRun:
		return query.Spec{}, nil, usageErr("--run and --dry-run exclude each other")
	}
	f.guards.Replay = strings.TrimSpace(f.guards.Replay)
	spec, err := query.Load(f.file)
	if err != nil {
		return query.Spec{}, nil, &cliError{code: exitUsage, msg: err.Error()}
	}
	if spec.Source.Kafka == nil {
		return query.Spec{}, nil, usageErr("source: replay sets a Kafka source's startingOffsets; query %s does not read Kafka", spec.Name)
	}
	if filepath.Clean(strings.TrimSuffix(spec.CheckpointLocation, "/")) == filepath.Clean(strings.TrimSuffix(f.checkpoint, "/")) {
		return query.Spec{}, nil, usageErr("--checkpoint %s is the query's current checkpointLocation: a replay starts on a new one", f.checkpoint)
	}
	spec.CheckpointLocation = f.checkpoint
	spec.Source.Kafka.StartingOffsets = strings.TrimSpace(f.offsets)
	if err := microbatch.Check(spec); err != nil {
		return query.Spec{}, nil, &cliError{code: exitUsage, msg: err.Error()}
	}
	if err := newCheckpointIsEmpty(ctx, f.checkpoint, objstore.Options{S3: f.s3}); err != nil {
		return query.Spec{}, nil, err
	}
	j, err := json.Marshal(spec)
	if err != nil {
		return query.Spec{}, nil, err
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		return query.Spec{}, nil, err
	}
	header := fmt.Sprintf("# Replay of %s under ticket %s, approved by %s at %s:\n# driver replay -f %s --checkpoint %s --starting-offsets '%s' --ticket %s\n",
		f.file, f.guards.Replay, f.guards.By(who), time.Now().UTC().Format(time.RFC3339), f.file, f.checkpoint, spec.Source.Kafka.StartingOffsets, f.guards.Replay)
	b := append([]byte(header), y...)
	if f.out == "" {
		f.out = strings.TrimSuffix(f.file, filepath.Ext(f.file)) + ".replay.yaml"
	}
	if err := os.WriteFile(f.out, b, 0o644); err != nil {
		return query.Spec{}, nil, fmt.Errorf("--out: %w", err)
	}
	// What is started is what was written.
	written, err := query.Load(f.out)
	if err != nil {
		return query.Spec{}, nil, fmt.Errorf("the written spec %s does not load: %w", f.out, err)
	}
	return written, b, nil
}

// newCheckpointIsEmpty refuses a checkpoint location that already holds a
// checkpoint; it creates nothing.
func newCheckpointIsEmpty(ctx context.Context, path string, opts objstore.Options) error {
	st, err := openExisting(ctx, path, opts)
	if errors.Is(err, errNotFound) {
		return nil // a local directory not made yet
	}
	if err != nil {
		return fmt.Errorf("--checkpoint %s: %w", path, err)
	}
	meta, err := checkpoint.New(st).ReadMetadata(ctx)
	switch {
	case errors.Is(err, objstore.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("--checkpoint %s: %w", path, err)
	}
	return usageErr("--checkpoint %s already holds query %s's checkpoint (id %s, created %s): a replay starts on a new, empty checkpoint", path, meta.Name, meta.QueryID, meta.CreatedAt)
}
