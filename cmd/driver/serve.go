package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/driver/dispatch"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/driver/policy"
	"github.com/sluicehq/sluice/driver/registry"
	"github.com/sluicehq/sluice/driver/service"
	"github.com/sluicehq/sluice/fault"
	"github.com/sluicehq/sluice/internal/cliflags"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/wire/rpcauth"
)

// defaultRegistry is the registry of a driver given no --registry: a
// directory in the working directory, fine for a lab; a driver that must
// survive its node needs an object-store URI.
const defaultRegistry = "sluice-registry"

func newServeCmd() *cobra.Command {
	var opts dispatch.DriverOptions
	var files []string
	var tokenFile, progressJSON, registryURI, queriesDir string
	var hc httpConfig
	var tlsFlags tlsconf.Config
	var exitWhenDone, prune bool
	var guards cliflags.Guards
	var minExecutors int
	var s3 objstore.S3Options
	var sourceRetry, leaseTTL, stopTimeout time.Duration
	var viewerTokens, operatorTokens, principalRoles []string
	var policyFile, cpuProfile string
	cmd := &cobra.Command{
		Use:   "serve [--registry URI] [--queries-dir DIR] [--query Q.yaml ...]",
		Short: "Run the driver service: every registered query, on executors",
		Long: `Serve the driver service. The driver holds the registry's lease (a second
driver on the same registry waits as a standby and takes over when the lease
lapses), runs every query whose desired state is running, each from its own
checkpoint, and answers the CLI (submit, stop, list, status, progress).

--registry is an object-store URI (s3://bucket/sluice/registry/) or a local
path; without it the registry is ./` + defaultRegistry + ` in the working
directory, which only suits a lab: a driver restarted on another node finds
its queries only in a shared registry.

--query FILE submits FILE at start (as driver submit would); --queries-dir DIR
submits every *.yaml|*.yml|*.json of DIR at start and on change (a changed
file is applied only if its checkpoint can serve it; a removed file stops
its query only with --prune).

Who may do what (see docs/security.md): --viewer-tokens-file
and --operator-tokens-file hold "NAME TOKEN" lines (re-read when they
change); a viewer may list, status,
progress, history and read the HTTP port, an operator may also submit and
stop. With mutual TLS, --principal-role CN=ROLE maps a client certificate's
common name to a role. Once any of them is given, the cluster token
(--token-file) is the executors' credential alone and grants nothing on the
CLI's service; without them it keeps every right there.

--policy FILE limits the locations a submitted query may use (sources,
topics, sinks, checkpoints, bad records; per principal too): a spec outside
it is refused at submit, naming the field, the value and the rule. Without
--policy any location is accepted (lab freedom; logged as a warning). Two
queries may never share a checkpoint.

SIGINT/SIGTERM changes no desired state: the batches in flight finish (within
--stop-timeout, else they are abandoned and re-run by the next driver; a
batch still waiting for executors has run nothing and is abandoned at
once), the lease is released, the driver exits. A CLI call made while this
driver is still starting waits (up to 10 s) for its first lease attempt
rather than being refused as a standby.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			stopProfile, err := cliflags.StartCPUProfile(cpuProfile)
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, stopProfile()) }()
			ctx := cmd.Context()
			log := logger(cmd)
			var subs [][]byte
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					return fmt.Errorf("--query: %w", err)
				}
				if _, err := service.Parse(b); err != nil {
					return fmt.Errorf("%s: %w", f, err)
				}
				subs = append(subs, b)
			}
			if registryURI == "" {
				registryURI = defaultRegistry
				abs, _ := filepath.Abs(defaultRegistry)
				log.Warn("no --registry: the query registry is a local directory; a driver on another node will not find these queries", "registry", abs)
			}
			store := objstore.Options{S3: s3}
			regStore, err := objstore.Open(ctx, registryURI, store)
			if err != nil {
				return fmt.Errorf("--registry: %w", err)
			}
			tok, err := rpcauth.LoadToken(tokenFile)
			if err != nil {
				return err
			}
			opts.Insecure = tlsFlags.Insecure
			if opts.TLS, err = tlsconf.Open(tlsFlags); err != nil {
				return err
			}
			if tok == "" && (opts.TLS == nil || !opts.TLS.Mutual()) {
				log.Warn("no cluster token (--token-file or " + rpcauth.TokenEnv + ") and no mutual TLS (--tls-ca): any process that reaches the listen address can join; fine on loopback only")
			}
			roles := &rpcauth.Roles{Logger: log}
			for _, f := range viewerTokens {
				if err := roles.AddTokensFile(f, rpcauth.RoleViewer); err != nil {
					return fmt.Errorf("--viewer-tokens-file: %w", err)
				}
			}
			for _, f := range operatorTokens {
				if err := roles.AddTokensFile(f, rpcauth.RoleOperator); err != nil {
					return fmt.Errorf("--operator-tokens-file: %w", err)
				}
			}
			for _, pr := range principalRoles {
				if err := roles.AddCertRole(pr); err != nil {
					return err
				}
			}
			if len(principalRoles) > 0 && (opts.TLS == nil || !opts.TLS.Mutual()) {
				return errors.New("--principal-role maps client certificates to roles: it needs mutual TLS (--tls-ca or --tls-dir)")
			}
			if roles.Enabled() {
				log.Info("roles: the cluster token is the executors' credential; the CLI needs a viewer or operator credential", "principals", roles.Names())
			} else if tok != "" || (opts.TLS != nil && opts.TLS.Mutual()) {
				log.Warn("no --viewer-tokens-file, --operator-tokens-file or --principal-role: every holder of the cluster credential may submit and stop any query")
			}
			var pol *policy.Policy
			if policyFile != "" {
				if pol, err = policy.Load(policyFile); err != nil {
					return err
				}
			} else {
				log.Warn("no --policy: submitted queries may read and write any location the executors can (lab freedom)")
			}
			auth := &rpcauth.Authenticator{Token: tok, Roles: roles, Mutual: opts.TLS != nil && opts.TLS.Mutual()}
			hook, err := fault.FromEnv()
			if err != nil {
				return err
			}
			progressLog, closeProgress, err := monitor.OpenJSONLog(progressJSON)
			if err != nil {
				return err
			}
			defer closeProgress()
			tr := monitor.New(monitor.Options{Health: hc.Health})
			engineOpts := microbatch.Options{
				Logger: log, Hook: hook, Stdout: cmd.OutOrStdout(),
				Store: store, SourceRetryFor: sourceRetry,
				Observer: progress.Observers{monitor.LinePrinter(os.Stderr), progressLog},
			}
			if hc.Addr != "" {
				engineOpts.WrapStore = countStores(tr)
			}
			var drv *dispatch.Driver
			svc := service.New(service.Options{
				Registry:     registry.New(regStore, registry.Options{}),
				Tracker:      tr,
				Lease:        registry.LeaseConfig{TTL: leaseTTL},
				MinExecutors: minExecutors,
				Logger:       log,
				StopTimeout:  stopTimeout,
				Engine:       engineOpts,
				Policy:       pol,
			})
			control := &service.Control{S: svc, Executors: func() int { return len(drv.Members.Live()) }}
			opts.Token, opts.Roles, opts.Logger, opts.Control = tok, roles, log, control
			drv, err = dispatch.NewDriver(opts)
			if err != nil {
				return err
			}
			svc.SetCluster(drv)
			log.Info("driver listening", "address", drv.Addr(), "registry", registryURI)
			serveCtx, stopServe := context.WithCancel(context.Background())
			defer stopServe()
			served := make(chan error, 1)
			go func() { served <- drv.Serve(serveCtx) }()
			if hc.Addr != "" || hc.HealthAddr != "" {
				hc.TLS, hc.Auth = opts.TLS, auth
				stopHTTP, err := serveHTTPWith(ctx, hc, tr, svc.Ready, log)
				if err != nil {
					return err
				}
				defer stopHTTP()
				go trackExecutors(serveCtx, tr, drv)
			}

			runCtx, stopRun := context.WithCancel(ctx)
			defer stopRun()
			ran := make(chan error, 1)
			go func() { ran <- svc.Run(runCtx) }()
			if len(subs) > 0 || queriesDir != "" {
				go submitAtStart(runCtx, svc, subs, files, &guards, log)
			}
			if queriesDir != "" {
				w := &service.Watcher{Dir: queriesDir, Prune: prune, AllowFirstStart: guards.AllowFirstStart(), AllowReplay: guards.AllowReplay(), Ticket: guards.Ticket(), ApprovedBy: guards.By(who), S: svc, Logger: log}
				go w.Run(runCtx)
			}
			var failed error
			if exitWhenDone {
				go func() {
					failed = waitAllDone(runCtx, svc, tr)
					stopRun()
				}()
			}
			err = <-ran
			stopServe()
			if serr := <-served; serr != nil {
				err = errors.Join(err, serr)
			}
			if exitWhenDone && failed != nil {
				err = errors.Join(err, failed)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&registryURI, "registry", "", "query registry: object-store URI (s3://bucket/prefix/) or local path (default ./"+defaultRegistry+")")
	f.StringVar(&queriesDir, "queries-dir", "", "submit the specs of this directory at start and on change")
	f.BoolVar(&prune, "prune", false, "with --queries-dir: a removed file stops its query")
	f.StringArrayVar(&files, "query", nil, "submit this query spec (YAML or JSON) at start; repeatable")
	f.StringVar(&opts.Listen, "listen", dispatch.DefaultDriverListen, "address to serve executors and the CLI on, HOST:PORT, e.g. 0.0.0.0:7077 (port 0: a free port)")
	addHTTPFlags(f, &hc, "")
	f.StringVar(&tokenFile, "token-file", "", "file holding the cluster token (default: $"+rpcauth.TokenEnv+"); with role credentials it is the executors' alone")
	f.StringArrayVar(&viewerTokens, "viewer-tokens-file", nil, "file of viewer credentials, one \"NAME TOKEN\" per line: list, status, progress, history, the HTTP port; repeatable")
	f.StringArrayVar(&operatorTokens, "operator-tokens-file", nil, "file of operator credentials, one \"NAME TOKEN\" per line: a viewer's rights plus submit and stop; repeatable")
	f.StringArrayVar(&principalRoles, "principal-role", nil, "with mutual TLS: CN=ROLE maps a client certificate's common name to viewer or operator; repeatable")
	f.StringVar(&policyFile, "policy", "", "location policy (YAML): the sources, topics, sinks, checkpoints and bad-record locations queries may use, per principal too (default: any)")
	f.DurationVar(&opts.HeartbeatTimeout, "heartbeat-timeout", 5*time.Second, "remove an executor silent for this long, e.g. 5s or 30s")
	f.IntVar(&minExecutors, "min-executors", 1, "executors that must register before a query's first batch")
	f.BoolVar(&exitWhenDone, "exit-when-done", false, "exit once every running query has ended (availableNow, once, failed); non-zero if one failed")
	f.StringVar(&progressJSON, "progress-json", "", "append one JSON progress object per batch to this file")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile from start to exit to this file (go tool pprof FILE)")
	cliflags.ProductionGuards(f, &guards)
	f.DurationVar(&sourceRetry, "source-retry-for", 5*time.Minute, "keep retrying this long when the source or a store is unreachable before failing, e.g. 5m or 30s")
	f.DurationVar(&leaseTTL, "lease-ttl", 10*time.Second, "a standby takes over once the active driver has not renewed the lease for this long, e.g. 10s or 1m")
	f.DurationVar(&stopTimeout, "stop-timeout", 30*time.Second, "on SIGTERM or stop: how long a batch in flight may take to commit before it is abandoned, e.g. 30s or 2m")
	cliflags.S3(f, &s3)
	tlsFlags.Register(f)
	return cmd
}

// submitAtStart submits the --query files once this driver is active.
func submitAtStart(ctx context.Context, svc *service.Service, subs [][]byte, files []string, g *cliflags.Guards, log *slog.Logger) {
	select {
	case <-ctx.Done():
		return
	case <-svc.Activated():
	}
	host, _ := os.Hostname()
	for i, b := range subs {
		res, err := svc.Submit(ctx, service.Submission{Spec: b, AllowFirstStart: g.AllowFirstStart(), Replay: g.AllowReplay(), Ticket: g.Ticket(), ApprovedBy: g.By(who), ChangedBy: "serve --query " + files[i] + "@" + host,
			Principal: service.ConfigPrincipal, Role: service.ConfigRole})
		if err != nil {
			log.Error("--query refused", "file", files[i], "err", err)
			continue
		}
		log.Info("--query "+res.Outcome, "file", files[i], "query", res.Record.Name, "generation", res.Record.Generation, "id", res.Record.ID)
	}
}

// waitAllDone returns once the driver is active and every query whose
// desired state is running has ended; the error joins the failures.
func waitAllDone(ctx context.Context, svc *service.Service, tr *monitor.Tracker) error {
	for {
		// Take the channel before looking, so a change after the look
		// wakes the wait.
		changed := tr.Changed()
		activated := svc.Activated()
		select {
		case <-activated:
			activated = nil // active once: wait for changes only
		default:
		}
		if svc.Ready() == nil {
			if done, err := allDone(tr.List()); done {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-activated:
		}
	}
}

// allDone reports whether every query whose desired state is running has
// ended (none known yet is not done); the error joins the failures.
func allDone(views []monitor.View) (bool, error) {
	if len(views) == 0 {
		return false, nil
	}
	var errs []error
	for _, v := range views {
		if v.Desired == monitor.DesiredRunning && !v.State.Terminal() {
			return false, nil
		}
		if v.State == monitor.Failed {
			errs = append(errs, fmt.Errorf("query %s: %s", v.Name, v.LastError))
		}
	}
	return true, errors.Join(errs...)
}
