package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/internal/tlstest"
	"github.com/sluicehq/sluice/proto/sluicepb"
)

const (
	viewerTok   = "viewer-token-0000001"
	operatorTok = "operator-token-00001"
)

func testRoles(t *testing.T) *Roles {
	t.Helper()
	r := &Roles{}
	dir := t.TempDir()
	v := filepath.Join(dir, "viewers")
	o := filepath.Join(dir, "operators")
	os.WriteFile(v, []byte("# comment\n\nvera "+viewerTok+"\n"), 0o600)
	os.WriteFile(o, []byte("olga "+operatorTok+"\n"), 0o600)
	if err := r.AddTokensFile(v, RoleViewer); err != nil {
		t.Fatal(err)
	}
	if err := r.AddTokensFile(o, RoleOperator); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRoleTokensFileRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ text, want string }{
		{"vera\n", "must be NAME TOKEN"},
		{"vera short\n", "at least 16"},
		{"# only a comment\n", "holds no token"},
		{"a " + viewerTok + "\na " + operatorTok + "\n", "given twice"},
		{"a " + viewerTok + "\nb " + viewerTok + "\n", "same token as a"},
	} {
		f := filepath.Join(dir, "f")
		os.WriteFile(f, []byte(c.text), 0o600)
		err := (&Roles{}).AddTokensFile(f, RoleViewer)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.text, err, c.want)
		}
	}
	if err := (&Roles{}).AddToken("x", viewerTok, RoleExecutor); err == nil {
		t.Error("an executor role token was accepted")
	}
	for _, bad := range []string{"alice", "CN=alice", "alice=admin", "=operator"} {
		if err := (&Roles{}).AddCertRole(bad); err == nil {
			t.Errorf("--principal-role %q accepted", bad)
		}
	}
	r := &Roles{}
	if err := r.AddCertRole("CN=alice=operator"); err != nil || r.certs["alice"] != RoleOperator {
		t.Errorf("CN=alice=operator: %v %v", err, r.certs)
	}
}

// The role matrix over tokens, without TLS.
func TestAuthorizeMatrix(t *testing.T) {
	submit := sluicepb.ControlService_SubmitQuery_FullMethodName
	stop := sluicepb.ControlService_StopQuery_FullMethodName
	list := sluicepb.ControlService_ListQueries_FullMethodName
	progress := sluicepb.ControlService_QueryProgress_FullMethodName
	register := sluicepb.DriverService_Register_FullMethodName
	withRoles := &Authenticator{Token: "cluster-secret", Roles: testRoles(t)}
	noRoles := &Authenticator{Token: "cluster-secret"}
	open := &Authenticator{Roles: testRoles(t)} // loopback lab: no cluster token
	cases := []struct {
		a      *Authenticator
		bearer string
		method string
		code   codes.Code
		want   string // in the refusal
		who    string // principal on success
	}{
		{withRoles, viewerTok, list, codes.OK, "", "vera"},
		{withRoles, viewerTok, progress, codes.OK, "", "vera"},
		{withRoles, viewerTok, submit, codes.PermissionDenied, "needs role operator", ""},
		{withRoles, viewerTok, stop, codes.PermissionDenied, "needs role operator", ""},
		{withRoles, viewerTok, register, codes.PermissionDenied, "needs role executor", ""},
		{withRoles, operatorTok, submit, codes.OK, "", "olga"},
		{withRoles, operatorTok, list, codes.OK, "", "olga"},
		{withRoles, operatorTok, register, codes.PermissionDenied, "needs role executor", ""},
		{withRoles, "cluster-secret", register, codes.OK, "", "cluster-token"},
		{withRoles, "cluster-secret", list, codes.PermissionDenied, "needs role viewer", ""},
		{withRoles, "cluster-secret", submit, codes.PermissionDenied, "needs role operator", ""},
		{withRoles, "", list, codes.Unauthenticated, "viewer or operator", ""},
		{withRoles, "", register, codes.Unauthenticated, "", ""},
		{withRoles, "wrong-token-wrong-token", submit, codes.Unauthenticated, "", ""},
		// Without role credentials the cluster token keeps every right.
		{noRoles, "cluster-secret", submit, codes.OK, "", "cluster-token"},
		{noRoles, "cluster-secret", register, codes.OK, "", "cluster-token"},
		{noRoles, "", submit, codes.Unauthenticated, "cluster token", ""},
		// No cluster token (loopback): executors need nothing, the CLI a role.
		{open, "", register, codes.OK, "", "anonymous"},
		{open, "", list, codes.PermissionDenied, "needs role viewer", ""},
		{open, operatorTok, submit, codes.OK, "", "olga"},
	}
	for i, c := range cases {
		var bearers []string
		if c.bearer != "" {
			bearers = []string{"Bearer " + c.bearer}
		}
		p, err := c.a.identify(bearers, "")
		if err == nil {
			p, err = c.a.authorize(p, c.method)
		} else {
			err = status.Error(codes.Unauthenticated, "refused: viewer or operator; cluster token")
		}
		if got := status.Code(err); got != c.code {
			t.Errorf("case %d (%s on %s): %v, want %v", i, c.bearer, c.method, err, c.code)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("case %d: %v lacks %q", i, err, c.want)
		}
		if err == nil && p.Name != c.who {
			t.Errorf("case %d: principal %+v, want %s", i, p, c.who)
		}
	}
}

// echoControl answers ListQueries and SubmitQuery with the caller's
// principal.
type echoControl struct {
	sluicepb.UnimplementedControlServiceServer
}

func (echoControl) ListQueries(ctx context.Context, _ *sluicepb.ListQueriesRequest) (*sluicepb.ListQueriesResponse, error) {
	p, _ := PrincipalFrom(ctx)
	return &sluicepb.ListQueriesResponse{Queries: []*sluicepb.QueryInfo{{Name: p.Name, Desired: string(p.Role)}}}, nil
}

func (echoControl) SubmitQuery(ctx context.Context, _ *sluicepb.SubmitQueryRequest) (*sluicepb.SubmitQueryResponse, error) {
	p, _ := PrincipalFrom(ctx)
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
	roles := &Roles{}
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
		conn, err := grpc.NewClient(d.Addr(), DialOptions("", tlsSource(t, tlsconf.Config{Dir: dirs[cn]}).ClientConfig())...)
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

// A changed tokens file is re-read: a new token works, a removed one no
// longer does; a file that stops loading keeps the previous tokens.
func TestTokensFileIsReRead(t *testing.T) {
	f := filepath.Join(t.TempDir(), "operators")
	os.WriteFile(f, []byte("olga "+operatorTok+"\n"), 0o600)
	clock := time.Unix(1000, 0)
	r := &Roles{now: func() time.Time { return clock }}
	if err := r.AddTokensFile(f, RoleOperator); err != nil {
		t.Fatal(err)
	}
	a := &Authenticator{Token: "cluster-secret", Roles: r}
	who := func(tok string) string {
		p, err := a.identify([]string{"Bearer " + tok}, "")
		if err != nil {
			return ""
		}
		return p.Name
	}
	if who(operatorTok) != "olga" {
		t.Fatal("the first token")
	}
	const rotated = "operator-token-rotated-2"
	os.WriteFile(f, []byte("oscar "+rotated+"\n"), 0o600)
	os.Chtimes(f, time.Now().Add(time.Minute), time.Now().Add(time.Minute))
	if who(rotated) != "" {
		t.Fatal("re-read before tokensRecheck passed")
	}
	clock = clock.Add(2 * tokensRecheck)
	if who(rotated) != "oscar" || who(operatorTok) != "" {
		t.Fatalf("after the change: rotated %q, old %q", who(rotated), who(operatorTok))
	}
	os.WriteFile(f, []byte("broken line with three\n"), 0o600)
	os.Chtimes(f, time.Now().Add(2*time.Minute), time.Now().Add(2*time.Minute))
	clock = clock.Add(2 * tokensRecheck)
	if who(rotated) != "oscar" {
		t.Fatal("a broken file dropped the previous tokens")
	}
	// Fixed again: read.
	const third = "operator-token-third-03"
	os.WriteFile(f, []byte("otto "+third+"\n"), 0o600)
	os.Chtimes(f, time.Now().Add(3*time.Minute), time.Now().Add(3*time.Minute))
	clock = clock.Add(2 * tokensRecheck)
	if who(third) != "otto" || who(rotated) != "" {
		t.Fatal("the fixed file was not read")
	}
}
