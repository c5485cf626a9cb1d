package dispatch

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/testutil/tlstest"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/proto/sluicepb"
	"github.com/sluicehq/sluice/wire/rpcauth"
)

// echoControl answers ListQueries and SubmitQuery with the caller's
// principal.
type echoControl struct {
	sluicepb.UnimplementedControlServiceServer
}

func (echoControl) ListQueries(ctx context.Context, _ *sluicepb.ListQueriesRequest) (*sluicepb.ListQueriesResponse, error) {
	p, _ := rpcauth.PrincipalFrom(ctx)
	return &sluicepb.ListQueriesResponse{Queries: []*sluicepb.QueryInfo{{Name: p.Name, Desired: string(p.Role)}}}, nil
}

func (echoControl) SubmitQuery(ctx context.Context, _ *sluicepb.SubmitQueryRequest) (*sluicepb.SubmitQueryResponse, error) {
	p, _ := rpcauth.PrincipalFrom(ctx)
	return &sluicepb.SubmitQueryResponse{Name: p.Name}, nil
}

// With mutual TLS, the client certificate's common name is the principal,
// mapped to a role by --principal-role; an unmapped certificate is a
// cluster member (executor) and grants nothing on the ControlService.
func TestCertificateNamesThePrincipal(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs a driver serving gRPC on loopback")
	}
	ca := tlstest.NewCA(t, "roles-ca")
	dirs := map[string]string{}
	for _, cn := range []string{"driver", "alice", "bob", "exec-7"} {
		d := filepath.Join(t.TempDir(), cn)
		tlstest.WriteDir(t, d, ca.Issue(t, cn, time.Time{}, time.Time{}), ca)
		dirs[cn] = d
	}
	roles := &rpcauth.Roles{}
	for _, s := range []string{"CN=alice=operator", "bob=viewer"} {
		if err := roles.AddCertRole(s); err != nil {
			t.Fatal(err)
		}
	}
	d, err := NewDriver(DriverOptions{Listen: "127.0.0.1:0", TLS: tlsSource(t, tlsconf.Config{Dir: dirs["driver"]}), Roles: roles, Control: echoControl{}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	client := func(cn string) sluicepb.ControlServiceClient {
		conn, err := grpc.NewClient(d.Addr(), rpcauth.DialOptions("", tlsSource(t, tlsconf.Config{Dir: dirs[cn]}).ClientConfig())...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return sluicepb.NewControlServiceClient(conn)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	if resp, err := client("alice").SubmitQuery(cctx, &sluicepb.SubmitQueryRequest{}); err != nil || resp.Name != "alice" {
		t.Fatalf("alice (operator) submit: %v %v", resp, err)
	}
	if resp, err := client("bob").ListQueries(cctx, &sluicepb.ListQueriesRequest{}); err != nil || resp.Queries[0].Name != "bob" || resp.Queries[0].Desired != "viewer" {
		t.Fatalf("bob (viewer) list: %v %v", resp, err)
	}
	if _, err := client("bob").SubmitQuery(cctx, &sluicepb.SubmitQueryRequest{}); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "needs role operator") || !strings.Contains(err.Error(), "bob (viewer)") {
		t.Fatalf("bob (viewer) submit: %v", err)
	}
	if _, err := client("exec-7").ListQueries(cctx, &sluicepb.ListQueriesRequest{}); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "needs role viewer") || !strings.Contains(err.Error(), "exec-7 (executor)") {
		t.Fatalf("an unmapped certificate lists: %v", err)
	}
}
