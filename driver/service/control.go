package service

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/driver/registry"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/proto/sluicepb"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/wire/rpcauth"
)

// Error reasons carried in a google.rpc.ErrorInfo (see control.proto).
const (
	ReasonNotFound     = "NOT_FOUND"
	ReasonConflict     = "CONFLICT"
	ReasonInvalidSpec  = "INVALID_SPEC"
	ReasonGuard        = "GUARD"
	ReasonIncompatible = "INCOMPATIBLE"
	ReasonStandby      = "STANDBY"
	ReasonPolicy       = "POLICY"
	ReasonCheckpoint   = "CHECKPOINT_IN_USE"
)

const errorDomain = "sluice.dev"

var reasons = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{registry.ErrNotFound, codes.NotFound, ReasonNotFound},
	{registry.ErrConflict, codes.Aborted, ReasonConflict},
	{ErrInvalidSpec, codes.InvalidArgument, ReasonInvalidSpec},
	{microbatch.ErrProductionGuard, codes.FailedPrecondition, ReasonGuard},
	{checkpoint.ErrIncompatibleCheckpoint, codes.FailedPrecondition, ReasonIncompatible},
	{ErrStandby, codes.Unavailable, ReasonStandby},
	{ErrPolicy, codes.PermissionDenied, ReasonPolicy},
	{ErrCheckpointInUse, codes.FailedPrecondition, ReasonCheckpoint},
}

// ToStatus maps an error of the service to a gRPC status error with an
// ErrorInfo naming the reason.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !errors.Is(err, context.Canceled) {
		if s, _ := status.FromError(err); s.Code() != codes.Unknown {
			return err
		}
	}
	code, reason := codes.Internal, ""
	switch {
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			code, reason = r.code, r.reason
			break
		}
	}
	st := status.New(code, err.Error())
	if reason != "" {
		if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: errorDomain}); derr == nil {
			st = d
		}
	}
	return st.Err()
}

// statusError keeps a status's message and matches the sentinel its reason
// names.
type statusError struct {
	msg  string
	code codes.Code
	is   error
}

func (e *statusError) Error() string        { return e.msg }
func (e *statusError) Is(target error) bool { return e.is != nil && target == e.is }

// GRPCStatus keeps the code for callers that look at it.
func (e *statusError) GRPCStatus() *status.Status { return status.New(e.code, e.msg) }

// FromStatus turns a status error from the control service back into an
// error matching the service's sentinels (registry.ErrNotFound, ...).
func FromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.OK {
		return err
	}
	out := &statusError{msg: st.Message(), code: st.Code()}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.Domain != errorDomain {
			continue
		}
		for _, r := range reasons {
			if r.reason == info.Reason {
				out.is = r.err
			}
		}
	}
	return out
}

// actor is the authenticated caller of a call (rpcauth.PrincipalFrom) with
// what the client says.
func actor(ctx context.Context, changedBy, reason string) Actor {
	a := Actor{ChangedBy: changedBy, Reason: reason}
	if p, ok := rpcauth.PrincipalFrom(ctx); ok {
		a.Principal, a.Role = p.Name, string(p.Role)
	}
	return a
}

// specFor returns a registered spec as the caller may see it: as
// submitted for an operator (and where there are no roles), and for a
// viewer as JSON with every secret Kafka option's value replaced by
// "[redacted]".
func specFor(ctx context.Context, text string) []byte {
	if text == "" {
		return nil
	}
	p, ok := rpcauth.PrincipalFrom(ctx)
	if !ok || p.Role != rpcauth.RoleViewer {
		return []byte(text)
	}
	return redactSpec(text)
}

// redactSpec is text as JSON without secret values (nil when it does not
// parse: a viewer gets nothing rather than the secrets).
func redactSpec(text string) []byte {
	spec, err := query.Parse([]byte(text))
	if err != nil {
		return nil
	}
	b, err := json.MarshalIndent(spec.Redacted(), "", "  ")
	if err != nil {
		return nil
	}
	return b
}

// Control is the ControlService over a Service.
type Control struct {
	sluicepb.UnimplementedControlServiceServer
	S *Service
	// Executors counts the registered executors (nil: 0).
	Executors func() int
}

// SubmitQuery implements ControlService.
func (c *Control) SubmitQuery(ctx context.Context, req *sluicepb.SubmitQueryRequest) (*sluicepb.SubmitQueryResponse, error) {
	a := actor(ctx, req.ChangedBy, req.Reason)
	res, err := c.S.Submit(ctx, Submission{Spec: req.Spec, AllowFirstStart: req.AllowFirstStart, Replay: req.AllowReplay, Ticket: req.Ticket, ApprovedBy: req.ApprovedBy, ChangedBy: req.ChangedBy,
		Principal: a.Principal, Role: a.Role, Reason: a.Reason})
	if err != nil {
		return nil, ToStatus(err)
	}
	resp := &sluicepb.SubmitQueryResponse{QueryId: res.Record.ID, Name: res.Record.Name, Generation: res.Record.Generation, Outcome: res.Outcome, Message: res.Message}
	if req.Wait && res.Outcome != "unchanged" {
		v, err := c.S.WaitStarted(ctx, res.Record.Name, res.Record.Generation)
		if err != nil {
			return nil, ToStatus(err)
		}
		resp.State = string(v.State)
	} else if v, ok := c.S.tr.Get(res.Record.Name); ok {
		resp.State = string(v.State)
	}
	return resp, nil
}

// StopQuery implements ControlService.
func (c *Control) StopQuery(ctx context.Context, req *sluicepb.StopQueryRequest) (*sluicepb.StopQueryResponse, error) {
	rec, v, err := c.S.StopAs(ctx, req.Name, req.Now, time.Duration(req.TimeoutMs)*time.Millisecond, actor(ctx, req.ChangedBy, req.Reason))
	if err != nil {
		return nil, ToStatus(err)
	}
	msg := "query " + rec.Name + " stopped"
	if req.Now {
		msg += " (the batch in flight, if any, was abandoned; the next start re-runs it)"
	}
	return &sluicepb.StopQueryResponse{Name: rec.Name, Generation: rec.Generation, State: string(v.State), Message: msg}, nil
}

func (c *Control) info(rec registry.Record) *sluicepb.QueryInfo {
	qi := &sluicepb.QueryInfo{
		Name: rec.Name, Id: rec.ID, Desired: string(rec.Desired), Generation: rec.Generation,
		ChangedBy: rec.ChangedBy, ChangedAt: rec.ChangedAt.UTC().Format(time.RFC3339),
		State: string(monitor.Pending),
	}
	if v, ok := c.S.tr.Get(rec.Name); ok {
		qi.State, qi.StateSince, qi.LastError = string(v.State), v.StateSince.UTC().Format(time.RFC3339), v.LastError
		if !v.LastErrorAt.IsZero() {
			qi.LastErrorAt = v.LastErrorAt.UTC().Format(time.RFC3339)
		}
		v.Desired, v.Generation = monitor.Desired(rec.Desired), rec.Generation
		// The last batch that read data, for the max event time and
		// rates when the latest one was a no-data batch.
		var lastData *progress.Report
		recent := c.S.tr.Progress(rec.Name, 0)
		for i := len(recent) - 1; i >= 0; i-- {
			if !recent[i].NoData {
				lastData = recent[i]
				break
			}
		}
		qi.ViewJson, _ = json.Marshal(struct {
			monitor.View
			LastData *progress.Report `json:"lastData,omitempty"`
		}{v, lastData})
	}
	return qi
}

// ListQueries implements ControlService.
func (c *Control) ListQueries(ctx context.Context, _ *sluicepb.ListQueriesRequest) (*sluicepb.ListQueriesResponse, error) {
	if err := c.S.awaitActive(ctx); err != nil {
		return nil, ToStatus(err)
	}
	recs, err := c.S.reg.List(ctx)
	if err != nil {
		return nil, ToStatus(err)
	}
	resp := &sluicepb.ListQueriesResponse{}
	for _, rec := range recs {
		resp.Queries = append(resp.Queries, c.info(rec))
	}
	return resp, nil
}

// QueryStatus implements ControlService.
func (c *Control) QueryStatus(ctx context.Context, req *sluicepb.QueryStatusRequest) (*sluicepb.QueryStatusResponse, error) {
	if err := c.S.awaitActive(ctx); err != nil {
		return nil, ToStatus(err)
	}
	rec, err := c.S.reg.Get(ctx, req.Name)
	if err != nil {
		return nil, ToStatus(err)
	}
	resp := &sluicepb.QueryStatusResponse{Query: c.info(rec), Spec: specFor(ctx, rec.Spec)}
	if c.Executors != nil {
		resp.Executors = int32(c.Executors())
	}
	return resp, nil
}

// QueryHistory implements ControlService.
func (c *Control) QueryHistory(ctx context.Context, req *sluicepb.QueryHistoryRequest) (*sluicepb.QueryHistoryResponse, error) {
	if err := c.S.awaitActive(ctx); err != nil {
		return nil, ToStatus(err)
	}
	recs, err := c.S.reg.History(ctx, req.Name)
	if err != nil {
		return nil, ToStatus(err)
	}
	resp := &sluicepb.QueryHistoryResponse{}
	for _, r := range recs {
		resp.Generations = append(resp.Generations, &sluicepb.QueryGeneration{
			Generation: r.Generation, Id: r.ID, Desired: string(r.Desired), Change: r.Change,
			ChangedBy: r.ChangedBy, ChangedAt: r.ChangedAt.UTC().Format(time.RFC3339),
			AllowFirstStart: r.AllowFirstStart, AllowReplay: r.AllowReplay,
			Ticket: r.Ticket, ApprovedBy: r.ApprovedBy, Spec: specFor(ctx, r.Spec),
			Principal: r.Principal, Role: r.Role, Reason: r.Reason,
			FingerprintBefore: r.FingerprintBefore, FingerprintAfter: r.FingerprintAfter, Pruned: r.Pruned,
		})
	}
	return resp, nil
}

// QueryProgress implements ControlService.
func (c *Control) QueryProgress(req *sluicepb.QueryProgressRequest, stream sluicepb.ControlService_QueryProgressServer) error {
	ctx := stream.Context()
	if err := c.S.awaitActive(ctx); err != nil {
		return ToStatus(err)
	}
	rec, err := c.S.reg.Get(ctx, req.Name)
	if err != nil {
		return ToStatus(err)
	}
	var follow <-chan *progress.Report
	if req.Follow {
		ch, stop := c.S.tr.Follow(monitor.Ref{Name: rec.Name})
		defer stop()
		follow = ch
	}
	n := int(req.N)
	if n <= 0 && !req.Follow {
		n = 10
	}
	var last ids.BatchID = -1
	send := func(p *progress.Report) error {
		b, err := json.Marshal(p)
		if err != nil {
			return err
		}
		last = p.BatchID
		return stream.Send(&sluicepb.QueryProgressEvent{ProgressJson: b})
	}
	if n > 0 {
		for _, p := range c.S.tr.Progress(rec.Name, n) {
			if err := send(p); err != nil {
				return err
			}
		}
	}
	if follow == nil {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case p, ok := <-follow:
			if !ok {
				return nil
			}
			if p.BatchID <= last {
				continue
			}
			if err := send(p); err != nil {
				return err
			}
		}
	}
}
