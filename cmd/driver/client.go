package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/driver/dispatch"
	"github.com/sluicehq/sluice/driver/service"
	"github.com/sluicehq/sluice/internal/cliflags"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/proto/sluicepb"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source/catalog"
	"github.com/sluicehq/sluice/wire/rpcauth"
)

// Exit codes of the client commands.
const (
	exitOK       = 0
	exitError    = 1
	exitUsage    = 2
	exitNotFound = 3
	exitRefused  = 4
)

// ServerEnv names the driver address for the client commands.
const ServerEnv = "SLUICE_DRIVER"

const exitCodesHelp = `
Exit codes: 0 ok; 1 error (no driver listening, a failure); 2 usage (bad
flags or arguments, a spec that fails validation); 3 not found (unknown
query); 4 refused (wrong or missing credential, a credential whose role does
not allow the command, a location outside the driver's policy, a checkpoint
another query uses, a production guard, a change that needs a new
checkpoint, a concurrent change, a standby driver).`

// clientFlags are the flags every client command shares.
type clientFlags struct {
	server, tokenFile, output string
	tls                       tlsconf.Config
}

func (c *clientFlags) add(fs *pflag.FlagSet, defaultOutput string) {
	def := os.Getenv(ServerEnv)
	if def == "" {
		def = dispatch.DefaultDriverListen
	}
	fs.StringVar(&c.server, "server", def, "driver address HOST:PORT, e.g. sluice-driver.streams.svc:7077 (env $"+ServerEnv+")")
	c.tls.RegisterCerts(fs)
	fs.StringVar(&c.tokenFile, "token-file", "", "file holding this client's token: a viewer or operator token, or the cluster token where the driver has no roles (default: $"+rpcauth.TokenEnv+")")
	fs.StringVarP(&c.output, "output", "o", defaultOutput, "output format: table or json")
}

// cliError carries an exit code.
type cliError struct {
	code int
	msg  string
}

func (e *cliError) Error() string { return e.msg }

func usageErr(format string, a ...any) error {
	return &cliError{code: exitUsage, msg: fmt.Sprintf(format, a...)}
}

// clientCmd wraps a client command: flag and argument errors exit 2, and
// errors exit with their code after a one-line message (main exits 1 for
// everything, so the code is set here).
func clientCmd(cmd *cobra.Command, run func(cmd *cobra.Command, args []string) error) *cobra.Command {
	if cmd.Long == "" {
		cmd.Long = cmd.Short
	}
	cmd.Long = strings.TrimSpace(cmd.Long) + "\n" + exitCodesHelp
	args := cmd.Args
	cmd.Args = func(c *cobra.Command, a []string) error {
		if args != nil {
			if err := args(c, a); err != nil {
				exitWith(c, &cliError{code: exitUsage, msg: err.Error()})
			}
		}
		return nil
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		err = cliflags.PlainFlagError(err)
		exitWith(c, &cliError{code: exitUsage, msg: err.Error()})
		return err
	})
	cmd.RunE = func(c *cobra.Command, a []string) error {
		if err := run(c, a); err != nil {
			exitWith(c, err)
		}
		return nil
	}
	return cmd
}

func exitWith(c *cobra.Command, err error) {
	code := exitError
	var ce *cliError
	if errors.As(err, &ce) {
		code = ce.code
	}
	fmt.Fprintln(c.ErrOrStderr(), "error:", err)
	os.Exit(code)
}

func (c *clientFlags) check() error {
	if c.output != "table" && c.output != "json" {
		return usageErr("-o %q: must be table or json", c.output)
	}
	return nil
}

// dial connects to the driver (lazily: errors come with the first call).
func (c *clientFlags) dial() (sluicepb.ControlServiceClient, func(), error) {
	if err := c.check(); err != nil {
		return nil, nil, err
	}
	tok, err := rpcauth.LoadToken(c.tokenFile)
	if err != nil {
		return nil, nil, err
	}
	src, err := tlsconf.Open(c.tls)
	if err != nil {
		return nil, nil, err
	}
	conn, err := grpc.NewClient(c.server, rpcauth.DialOptions(tok, src.ClientConfig())...)
	if err != nil {
		return nil, nil, usageErr("--server %q: %v", c.server, err)
	}
	return sluicepb.NewControlServiceClient(conn), func() { conn.Close() }, nil
}

// callErr turns a gRPC error into a one-line message and an exit code.
func (c *clientFlags) callErr(err error, name string) error {
	st, _ := status.FromError(err)
	back := service.FromStatus(err)
	switch st.Code() {
	case codes.Unavailable:
		if errors.Is(back, service.ErrStandby) {
			return &cliError{code: exitRefused, msg: fmt.Sprintf("the driver at %s is a standby (another driver holds the lease): %s", c.server, st.Message())}
		}
		return &cliError{code: exitError, msg: fmt.Sprintf("no driver listening at %s (start one with driver serve, or set --server or %s)", c.server, ServerEnv)}
	case codes.DeadlineExceeded:
		return &cliError{code: exitError, msg: fmt.Sprintf("the driver at %s did not answer in time", c.server)}
	case codes.Unauthenticated:
		return &cliError{code: exitRefused, msg: fmt.Sprintf("refused by the driver at %s: wrong or missing cluster token or role token (give the CLI a viewer or operator token, or the cluster token where the driver has no roles, with --token-file or %s): %s", c.server, rpcauth.TokenEnv, st.Message())}
	case codes.PermissionDenied:
		// A role that does not allow the call, or the location policy:
		// the message names the role or the field, value and rule.
		msg := st.Message()
		if !strings.HasPrefix(msg, "refused") {
			msg = "refused: " + msg
		}
		return &cliError{code: exitRefused, msg: msg}
	case codes.NotFound:
		if name != "" {
			return &cliError{code: exitNotFound, msg: fmt.Sprintf("no query named %q on the driver at %s (driver list shows them)", name, c.server)}
		}
		return &cliError{code: exitNotFound, msg: st.Message()}
	case codes.InvalidArgument:
		return &cliError{code: exitUsage, msg: st.Message()}
	case codes.FailedPrecondition, codes.Aborted, codes.AlreadyExists:
		return &cliError{code: exitRefused, msg: "refused: " + st.Message()}
	case codes.Unimplemented:
		return &cliError{code: exitError, msg: fmt.Sprintf("the driver at %s does not serve this command (an older version): %s", c.server, st.Message())}
	}
	return &cliError{code: exitError, msg: st.Message()}
}

// submitRequest is a SubmitQueryRequest carrying the guards' approval.
func submitRequest(spec []byte, g *cliflags.Guards, wait bool, reason string) *sluicepb.SubmitQueryRequest {
	return &sluicepb.SubmitQueryRequest{Spec: spec, AllowFirstStart: g.AllowFirstStart(), AllowReplay: g.AllowReplay(),
		Ticket: g.Ticket(), ApprovedBy: g.By(who), Wait: wait, ChangedBy: who(), Reason: reason}
}

// reasonUsage is --reason's help.
const reasonUsage = "the change's reason or ticket, recorded in the driver's audit trail (driver history)"

func who() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// loadSpec reads and validates a spec file as driver run does.
func loadSpec(file string) ([]byte, query.Spec, error) {
	if file == "" {
		return nil, query.Spec{}, usageErr("-f QUERY.yaml is required")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, query.Spec{}, usageErr("-f: %v", err)
	}
	spec, err := query.Load(file)
	if err == nil {
		err = catalog.Validate(spec)
	}
	if err != nil {
		return nil, query.Spec{}, &cliError{code: exitUsage, msg: err.Error()}
	}
	return b, spec, nil
}

func newSubmitCmd() *cobra.Command {
	var cf clientFlags
	var file string
	var guards cliflags.Guards
	var wait bool
	var timeout time.Duration
	var reason string
	cmd := &cobra.Command{
		Use:   "submit -f QUERY.yaml [--allow-first-start=TICKET] [--allow-replay=TICKET] [--wait] [--reason TEXT]",
		Short: "Submit a query to the running driver",
		Long: `Submit a query to the running driver. A stopped query resumes from its
checkpoint. The same spec again changes nothing and says so; a changed spec is applied
if the query's checkpoint can serve it (same stateful definition), else it is
refused with "new checkpoint required" and the running version is kept.`,
		Args: cobra.NoArgs,
	}
	cf.add(cmd.Flags(), "table")
	cmd.Flags().StringVarP(&file, "file", "f", "", "query spec (YAML or JSON)")
	cliflags.ProductionGuards(cmd.Flags(), &guards)
	cmd.Flags().BoolVar(&wait, "wait", false, "answer once the query runs (or failed to start)")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "with --wait: give up waiting after this long, e.g. 2m or 90s")
	cmd.Flags().StringVar(&reason, "reason", "", reasonUsage)
	return clientCmd(cmd, func(cmd *cobra.Command, _ []string) error {
		b, _, err := loadSpec(file)
		if err != nil {
			return err
		}
		cl, closeConn, err := cf.dial()
		if err != nil {
			return err
		}
		defer closeConn()
		ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
		defer cancel()
		resp, err := cl.SubmitQuery(ctx, submitRequest(b, &guards, wait, reason))
		if err != nil {
			return cf.callErr(err, "")
		}
		if cf.output == "json" {
			return writeJSON(cmd.OutOrStdout(), resp)
		}
		msg := resp.Message
		if resp.State != "" {
			msg += "; state " + resp.State
		}
		fmt.Fprintln(cmd.OutOrStdout(), msg)
		return nil
	})
}

func newStopCmd() *cobra.Command {
	var cf clientFlags
	var now bool
	var timeout time.Duration
	var reason string
	cmd := &cobra.Command{
		Use:   "stop NAME [--now] [--timeout D] [--reason TEXT]",
		Short: "Stop a query once its batch in flight commits",
		Long: `Stop a query: the batch in flight commits first (or, with --now, is
abandoned and re-run on the next start). Past --timeout the batch in flight
is abandoned (never half-committed).`,
		Args: cobra.ExactArgs(1),
	}
	cf.add(cmd.Flags(), "table")
	cmd.Flags().BoolVar(&now, "now", false, "abandon the batch in flight")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long the batch in flight may take to commit, e.g. 1m or 30s")
	cmd.Flags().StringVar(&reason, "reason", "", reasonUsage)
	return clientCmd(cmd, func(cmd *cobra.Command, args []string) error {
		cl, closeConn, err := cf.dial()
		if err != nil {
			return err
		}
		defer closeConn()
		ctx, cancel := context.WithTimeout(cmd.Context(), timeout+30*time.Second)
		defer cancel()
		resp, err := cl.StopQuery(ctx, &sluicepb.StopQueryRequest{Name: args[0], Now: now, TimeoutMs: timeout.Milliseconds(), ChangedBy: who(), Reason: reason})
		if err != nil {
			return cf.callErr(err, args[0])
		}
		if cf.output == "json" {
			return writeJSON(cmd.OutOrStdout(), resp)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s; state %s (generation %d)\n", resp.Message, resp.State, resp.Generation)
		return nil
	})
}

// queryJSON is a query as list and status print it in JSON.
type queryJSON struct {
	Name        string           `json:"name"`
	ID          string           `json:"id"`
	Desired     string           `json:"desired"`
	Generation  int64            `json:"generation"`
	State       string           `json:"state"`
	StateSince  string           `json:"stateSince,omitempty"`
	LastError   string           `json:"lastError,omitempty"`
	LastErrorAt string           `json:"lastErrorAt,omitempty"`
	ChangedBy   string           `json:"changedBy"`
	ChangedAt   string           `json:"changedAt"`
	Restarts    int              `json:"restarts"`
	Latest      *progress.Report `json:"latest,omitempty"`
	// LastData is the last batch that read data (Latest may be a no-data
	// batch).
	LastData  *progress.Report `json:"lastData,omitempty"`
	Executors *int32           `json:"executors,omitempty"`
	// Health is the driver's verdict: healthy, idle, incident or
	// inactive, with its reason.
	Health *monitor.HealthStatus `json:"health,omitempty"`
	// Rates are the input and processing rates over the last minute.
	Rates *monitor.Rates `json:"recentRates,omitempty"`
}

func toJSON(q *sluicepb.QueryInfo) queryJSON {
	out := queryJSON{Name: q.Name, ID: q.Id, Desired: q.Desired, Generation: q.Generation, State: q.State, StateSince: q.StateSince,
		LastError: q.LastError, LastErrorAt: q.LastErrorAt, ChangedBy: q.ChangedBy, ChangedAt: q.ChangedAt}
	var v struct {
		monitor.View
		LastData *progress.Report `json:"lastData"`
	}
	if len(q.ViewJson) > 0 && json.Unmarshal(q.ViewJson, &v) == nil {
		out.Latest, out.Restarts, out.LastData, out.Health, out.Rates = v.Latest, v.Restarts, v.LastData, v.Health, v.Rates
	}
	return out
}

func newListCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{Use: "list", Short: "List the driver's queries and their states", Args: cobra.NoArgs,
		Long: `List the driver's queries: desired and observed state, generation, last batch and its time, id.`}
	cf.add(cmd.Flags(), "table")
	return clientCmd(cmd, func(cmd *cobra.Command, _ []string) error {
		cl, closeConn, err := cf.dial()
		if err != nil {
			return err
		}
		defer closeConn()
		ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
		defer cancel()
		resp, err := cl.ListQueries(ctx, &sluicepb.ListQueriesRequest{})
		if err != nil {
			return cf.callErr(err, "")
		}
		qs := make([]queryJSON, 0, len(resp.Queries))
		for _, q := range resp.Queries {
			qs = append(qs, toJSON(q))
		}
		if cf.output == "json" {
			return writeJSON(cmd.OutOrStdout(), qs)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tDESIRED\tSTATE\tGEN\tLAST BATCH\tLAST BATCH AT\tID")
		for _, q := range qs {
			batch, at := "-", "-"
			if q.Latest != nil {
				batch, at = fmt.Sprint(q.Latest.BatchID), q.Latest.Timestamp
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", q.Name, q.Desired, q.State, q.Generation, batch, at, q.ID)
		}
		return tw.Flush()
	})
}

func newStatusCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{Use: "status NAME", Short: "Show a query's state, health, rates, lag and last error", Args: cobra.ExactArgs(1),
		Long: `Show a query's desired and observed state, health (healthy, idle,
incident, inactive) with its reason, last batch, watermark and max event
time, input and processing rates over the last minute, source lag, state
rows and memory, state budget, executors, restarts and last error.`}
	cf.add(cmd.Flags(), "table")
	return clientCmd(cmd, func(cmd *cobra.Command, args []string) error {
		cl, closeConn, err := cf.dial()
		if err != nil {
			return err
		}
		defer closeConn()
		ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
		defer cancel()
		resp, err := cl.QueryStatus(ctx, &sluicepb.QueryStatusRequest{Name: args[0]})
		if err != nil {
			return cf.callErr(err, args[0])
		}
		q := toJSON(resp.Query)
		q.Executors = &resp.Executors
		if cf.output == "json" {
			return writeJSON(cmd.OutOrStdout(), q)
		}
		return writeStatus(cmd.OutOrStdout(), q)
	})
}

func writeStatus(w io.Writer, q queryJSON) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("name", q.Name)
	row("id", q.ID)
	row("desired", fmt.Sprintf("%s (generation %d, by %s at %s)", q.Desired, q.Generation, q.ChangedBy, q.ChangedAt))
	row("state", fmt.Sprintf("%s since %s", q.State, q.StateSince))
	if h := q.Health; h != nil {
		row("health", fmt.Sprintf("%s: %s", h.Health, h.Reason))
	}
	if p := q.Latest; p != nil {
		row("last batch", fmt.Sprintf("%d at %s (%d rows)", p.BatchID, p.Timestamp, p.NumInputRows))
		row("watermark", orDash(p.EventTime["watermark"]))
		d := p
		if q.LastData != nil {
			d = q.LastData
		}
		row("max event time", orDash(d.EventTime["max"]))
		if d != p {
			row("last data batch", fmt.Sprintf("%d at %s (%d rows)", d.BatchID, d.Timestamp, d.NumInputRows))
		}
		if r := q.Rates; r != nil {
			// Over the last minute, as the status page's summary: a
			// last batch that found no data does not make them 0.
			row("input rate", fmt.Sprintf("%.1f rows/s over the last %s (%d rows in %d batches; batch %d: %.1f rows/s)",
				r.InputRowsPerSecond, r.Window.Round(time.Second), r.InputRows, r.Batches, d.BatchID, d.InputRowsPerSecond))
			row("processing rate", fmt.Sprintf("%.1f rows/s over the time those batches took (batch %d: %.1f rows/s)",
				r.ProcessedRowsPerSecond, d.BatchID, d.ProcessedRowsPerSecond))
		} else {
			row("input rate", fmt.Sprintf("%.1f rows/s (batch %d)", d.InputRowsPerSecond, d.BatchID))
			row("processing rate", fmt.Sprintf("%.1f rows/s (batch %d)", d.ProcessedRowsPerSecond, d.BatchID))
		}
		lag := "-"
		for _, s := range p.Sources {
			if v, ok := s.Metrics["totalLag"]; ok {
				lag = fmt.Sprintf("%d offsets", v)
			}
		}
		row("source lag", lag)
		var stateRows int64
		for _, op := range p.StateOperators {
			stateRows += op.NumRowsTotal
		}
		row("state rows", fmt.Sprint(stateRows))
		writeStateCost(row, p)
	} else {
		row("last batch", "none yet")
	}
	if q.Executors != nil {
		row("executors", fmt.Sprint(*q.Executors))
	}
	if q.Restarts > 0 {
		row("restarts", fmt.Sprint(q.Restarts))
	}
	if q.LastError != "" {
		row("last error", q.LastError+" (at "+q.LastErrorAt+")")
	} else {
		row("last error", "-")
	}
	return tw.Flush()
}

// writeStateCost adds the state's memory, the approx_count_distinct
// sketches' share of it, and the state budget.
func writeStateCost(row func(k, v string), p *progress.Report) {
	var bytes, rows, sketches, sketchMax int64
	for _, op := range p.StateOperators {
		bytes += op.MemoryUsedBytes
		rows += op.NumRowsTotal
		sketches += op.CustomMetrics["approxCountDistinctSketches"]
		sketchMax += op.CustomMetrics["approxCountDistinctMaxBytes"]
	}
	if len(p.StateOperators) == 0 {
		return
	}
	mem := fmt.Sprintf("%d bytes", bytes)
	if rows > 0 {
		mem += fmt.Sprintf(" (%d per row)", bytes/rows)
	}
	row("state memory", mem)
	if sketches > 0 {
		row("approx_count_distinct", fmt.Sprintf("%d HyperLogLog sketches in state (one per row and measure), up to %d bytes at full precision (16 KiB each); sparse ones are smaller and counted in state memory", sketches, sketchMax))
	}
	if sb := p.StateBudget; sb != nil {
		b := (&query.StateBudget{MaxRows: sb.MaxRows, MaxBytes: sb.MaxBytes, OnExceed: sb.OnExceed}).String()
		if sb.Exceeded {
			row("state budget", "EXCEEDED: "+sb.Message)
		} else {
			row("state budget", "within "+b)
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newProgressCmd() *cobra.Command {
	var cf clientFlags
	var n int
	var follow bool
	cmd := &cobra.Command{
		Use:   "progress NAME [-n N] [--follow]",
		Short: "Print a query's last progress objects as JSON lines",
		Long: `Print a query's last progress objects (Spark's StreamingQueryProgress), one
JSON object per line, oldest first; --follow keeps printing each new batch's.`,
		Args: cobra.ExactArgs(1),
	}
	cf.add(cmd.Flags(), "json")
	cmd.Flags().IntVarP(&n, "n", "n", 10, "how many of the last progress objects")
	cmd.Flags().BoolVarP(&follow, "follow", "F", false, "keep printing each new batch's progress")
	return clientCmd(cmd, func(cmd *cobra.Command, args []string) error {
		cl, closeConn, err := cf.dial()
		if err != nil {
			return err
		}
		defer closeConn()
		ctx := cmd.Context()
		if !follow {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
		}
		stream, err := cl.QueryProgress(ctx, &sluicepb.QueryProgressRequest{Name: args[0], N: int32(n), Follow: follow})
		if err != nil {
			return cf.callErr(err, args[0])
		}
		out := cmd.OutOrStdout()
		for {
			ev, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				if ctx.Err() != nil && follow {
					return nil // Ctrl-C
				}
				return cf.callErr(err, args[0])
			}
			if cf.output == "json" {
				fmt.Fprintln(out, string(ev.ProgressJson))
				continue
			}
			var p progress.Report
			if err := json.Unmarshal(ev.ProgressJson, &p); err != nil {
				return err
			}
			fmt.Fprintln(out, p.Timestamp, p.Line())
		}
	})
}
