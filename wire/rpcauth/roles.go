package rpcauth

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/proto/sluicepb"
)

// Role is what a credential may do on the driver.
type Role string

// Roles. An operator may do everything a viewer may. The executor role is
// the cluster credential's: the executor-side services (register,
// heartbeat, tasks, shuffle), and nothing on the CLI's ControlService once
// any viewer or operator credential is configured.
const (
	RoleViewer   Role = "viewer"
	RoleOperator Role = "operator"
	RoleExecutor Role = "executor"
)

// ParseRole parses viewer, operator or executor.
func ParseRole(s string) (Role, error) {
	switch r := Role(strings.ToLower(strings.TrimSpace(s))); r {
	case RoleViewer, RoleOperator, RoleExecutor:
		return r, nil
	}
	return "", fmt.Errorf("role %q: must be viewer, operator or executor", s)
}

// allows reports whether a credential of role r may do what needs need.
func (r Role) allows(need Role) bool {
	switch need {
	case RoleViewer:
		return r == RoleViewer || r == RoleOperator
	case RoleOperator:
		return r == RoleOperator
	case RoleExecutor:
		return r == RoleExecutor
	}
	return false
}

// Principal is the authenticated caller of a driver call.
type Principal struct {
	// Name is the token's name in its roles file, the client
	// certificate's subject common name, or "cluster-token" (the cluster
	// credential), or "anonymous" where nothing authenticates callers.
	Name string
	Role Role
	// Via says how it authenticated: token, certificate, cluster-token,
	// none.
	Via string
}

// String is "name (role)".
func (p Principal) String() string { return p.Name + " (" + string(p.Role) + ")" }

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal the driver's interceptor
// authenticated for this call.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// ControlRoles maps each ControlService method to the role it needs: the
// read-only calls need viewer, the calls that change the registry need
// operator. A ControlService method not listed needs operator.
var ControlRoles = map[string]Role{
	sluicepb.ControlService_ListQueries_FullMethodName:   RoleViewer,
	sluicepb.ControlService_QueryStatus_FullMethodName:   RoleViewer,
	sluicepb.ControlService_QueryProgress_FullMethodName: RoleViewer,
	sluicepb.ControlService_QueryHistory_FullMethodName:  RoleViewer,
	sluicepb.ControlService_SubmitQuery_FullMethodName:   RoleOperator,
	sluicepb.ControlService_StopQuery_FullMethodName:     RoleOperator,
}

const controlPrefix = "/" + "sluice.v1.ControlService/"

// NeededRole returns the role a call of fullMethod on the driver needs.
func NeededRole(fullMethod string) Role {
	if r, ok := ControlRoles[fullMethod]; ok {
		return r
	}
	if strings.HasPrefix(fullMethod, controlPrefix) {
		return RoleOperator
	}
	return RoleExecutor
}

// Roles is the driver's credentials beyond the cluster token: named
// viewer and operator tokens, and client-certificate common names mapped
// to roles (with mutual TLS). Its tokens files are re-read when they
// change (size or modification time, checked at most every
// tokensRecheck): a file that fails to load keeps the previous tokens. It
// is safe for concurrent use once configured.
type Roles struct {
	mu     sync.RWMutex
	tokens []roleToken // static, then the files'
	static []roleToken
	files  []tokensFile
	certs  map[string]Role
	// checked is when the files were last looked at.
	checked time.Time
	// Logger logs re-reads and failed ones (nil: discard).
	Logger *slog.Logger
	now    func() time.Time
}

type roleToken struct {
	name, token string
	role        Role
}

type tokensFile struct {
	path  string
	role  Role
	size  int64
	mtime time.Time
}

// tokensRecheck is how often the tokens files are looked at for changes.
const tokensRecheck = time.Second

// Enabled reports whether any viewer or operator credential is
// configured. Without one, the cluster credential keeps every right on
// the ControlService.
func (r *Roles) Enabled() bool {
	if r == nil {
		return false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.tokens) > 0 || len(r.certs) > 0
}

// AddTokensFile adds the tokens of file, each of role: one "NAME TOKEN"
// per line; blank lines and lines starting with # are skipped. Names and
// tokens must be unique across files.
func (r *Roles) AddTokensFile(file string, role Role) error {
	if role != RoleViewer && role != RoleOperator {
		return fmt.Errorf("tokens file %s: role %q: must be viewer or operator (the executors' credential is the cluster token)", file, role)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	files := append(append([]tokensFile(nil), r.files...), tokensFile{path: file, role: role})
	tokens, files, err := loadTokens(r.static, files)
	if err != nil {
		return err
	}
	r.tokens, r.files = tokens, files
	return nil
}

// loadTokens reads every file after static, checking names and tokens
// unique; it returns the files with their size and modification time.
func loadTokens(static []roleToken, files []tokensFile) ([]roleToken, []tokensFile, error) {
	tokens := append([]roleToken(nil), static...)
	out := make([]tokensFile, len(files))
	for i, f := range files {
		fi, err := os.Stat(f.path)
		if err != nil {
			return nil, nil, fmt.Errorf("%s tokens file: %w", f.role, err)
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return nil, nil, fmt.Errorf("%s tokens file: %w", f.role, err)
		}
		n := 0
		for line, text := range strings.Split(string(b), "\n") {
			text = strings.TrimSpace(text)
			if text == "" || strings.HasPrefix(text, "#") {
				continue
			}
			fields := strings.Fields(text)
			if len(fields) != 2 {
				return nil, nil, fmt.Errorf("%s tokens file %s line %d: has %d fields: must be NAME TOKEN", f.role, f.path, line+1, len(fields))
			}
			if tokens, err = addToken(tokens, fields[0], fields[1], f.role); err != nil {
				return nil, nil, fmt.Errorf("%s tokens file %s line %d: %w", f.role, f.path, line+1, err)
			}
			n++
		}
		if n == 0 {
			return nil, nil, fmt.Errorf("%s tokens file %s holds no token: must have lines NAME TOKEN", f.role, f.path)
		}
		f.size, f.mtime = fi.Size(), fi.ModTime()
		out[i] = f
	}
	return tokens, out, nil
}

// refresh re-reads the tokens files if one changed since the last look
// (at most every tokensRecheck).
func (r *Roles) refresh() {
	r.mu.RLock()
	now := time.Now
	if r.now != nil {
		now = r.now
	}
	due := len(r.files) > 0 && now().Sub(r.checked) >= tokensRecheck
	r.mu.RUnlock()
	if !due {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if now().Sub(r.checked) < tokensRecheck {
		return
	}
	r.checked = now()
	changed := false
	for _, f := range r.files {
		fi, err := os.Stat(f.path)
		if err != nil || fi.Size() != f.size || !fi.ModTime().Equal(f.mtime) {
			changed = true
			break
		}
	}
	if !changed {
		return
	}
	log := r.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tokens, files, err := loadTokens(r.static, r.files)
	if err != nil {
		log.Error("a tokens file changed and does not load: keeping the previous tokens until it changes again", "err", err)
		// Remember what failed, so the next look waits for another change
		// instead of logging this every second.
		for i, f := range r.files {
			if fi, serr := os.Stat(f.path); serr == nil {
				r.files[i].size, r.files[i].mtime = fi.Size(), fi.ModTime()
			}
		}
		return
	}
	r.tokens, r.files = tokens, files
	log.Info("tokens files re-read", "principals", len(tokens))
}

// minTokenLen is the shortest role token accepted.
const minTokenLen = 16

// AddToken adds one named token of role (beside the files').
func (r *Roles) AddToken(name, token string, role Role) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	static, err := addToken(r.static, name, token, role)
	if err != nil {
		return err
	}
	if _, err := addToken(r.tokens, name, token, role); err != nil {
		return err
	}
	tokens, _, err := loadTokens(static, r.files)
	if err != nil {
		return err
	}
	r.static, r.tokens = static, tokens
	return nil
}

func addToken(tokens []roleToken, name, token string, role Role) ([]roleToken, error) {
	if role != RoleViewer && role != RoleOperator {
		return nil, fmt.Errorf("token %s: role %q: must be viewer or operator (the executors' credential is the cluster token)", name, role)
	}
	if len(token) < minTokenLen {
		return nil, fmt.Errorf("token %s: is %d characters: must be at least %d", name, len(token), minTokenLen)
	}
	for _, t := range tokens {
		if t.name == name {
			return nil, fmt.Errorf("token name %s: given twice: names must be unique (they name the principal in the audit trail)", name)
		}
		if t.token == token {
			return nil, fmt.Errorf("token %s: same token as %s: tokens must be unique", name, t.name)
		}
	}
	return append(tokens, roleToken{name: name, token: token, role: role}), nil
}

// AddCertRole maps a client certificate's subject common name to role
// ("CN=ROLE" as the flag gives it, or "NAME=ROLE").
func (r *Roles) AddCertRole(spec string) error {
	name, role, ok := strings.Cut(spec, "=")
	if strings.EqualFold(name, "CN") && ok {
		// "CN=alice=operator"
		name, role, ok = strings.Cut(role, "=")
	}
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return fmt.Errorf("--principal-role %q: must be COMMON_NAME=ROLE (e.g. alice=operator)", spec)
	}
	rl, err := ParseRole(role)
	if err != nil {
		return fmt.Errorf("--principal-role %q: %w", spec, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.certs == nil {
		r.certs = map[string]Role{}
	}
	r.certs[name] = rl
	return nil
}

// Names lists the configured principals, "name=role", sorted (for the
// start-up log).
func (r *Roles) Names() []string {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for _, t := range r.tokens {
		out = append(out, t.name+"="+string(t.role))
	}
	for cn, rl := range r.certs {
		out = append(out, "CN="+cn+"="+string(rl))
	}
	sort.Strings(out)
	return out
}

// errNoCredential: the call carries no credential the driver knows.
var errNoCredential = errors.New("no credential")

// Authenticator identifies callers of the driver: the cluster token,
// role tokens, client certificates.
type Authenticator struct {
	// Token is the cluster token ("" none).
	Token string
	// Roles holds the viewer and operator credentials (nil: none).
	Roles *Roles
	// Mutual is set when TLS requires a client certificate signed by the
	// cluster's CA.
	Mutual bool
}

// identify returns the principal of a call from its bearer token
// (authorization metadata or header values) and its verified client
// certificate's common name ("" none).
func (a *Authenticator) identify(bearers []string, certCN string) (Principal, error) {
	var tokens []roleToken
	var certs map[string]Role
	if a.Roles != nil {
		a.Roles.refresh()
		a.Roles.mu.RLock()
		tokens, certs = a.Roles.tokens, a.Roles.certs
		a.Roles.mu.RUnlock()
	}
	for _, v := range bearers {
		if a.Token != "" && subtle.ConstantTimeCompare([]byte(v), []byte("Bearer "+a.Token)) == 1 {
			return Principal{Name: "cluster-token", Role: RoleExecutor, Via: "cluster-token"}, nil
		}
		for _, t := range tokens {
			if subtle.ConstantTimeCompare([]byte(v), []byte("Bearer "+t.token)) == 1 {
				return Principal{Name: t.name, Role: t.role, Via: "token"}, nil
			}
		}
	}
	if certCN != "" {
		if rl, ok := certs[certCN]; ok {
			return Principal{Name: certCN, Role: rl, Via: "certificate"}, nil
		}
	}
	if a.Token == "" {
		// Mutual TLS alone (any certificate of the CA is a cluster
		// member), or nothing at all (loopback, --insecure): the
		// cluster credential is the connection itself.
		if a.Mutual && certCN != "" {
			return Principal{Name: certCN, Role: RoleExecutor, Via: "certificate"}, nil
		}
		if !a.Mutual {
			return Principal{Name: "anonymous", Role: RoleExecutor, Via: "none"}, nil
		}
	}
	return Principal{}, errNoCredential
}

// authorize checks that p may call fullMethod; it returns the principal
// the call runs as: without role credentials the cluster credential acts
// as an operator on the ControlService.
func (a *Authenticator) authorize(p Principal, fullMethod string) (Principal, error) {
	need := NeededRole(fullMethod)
	if need != RoleExecutor && p.Role == RoleExecutor && !a.Roles.Enabled() {
		p.Role = RoleOperator
		return p, nil
	}
	if p.Role.allows(need) {
		return p, nil
	}
	method := fullMethod[strings.LastIndex(fullMethod, "/")+1:]
	switch need {
	case RoleViewer:
		return p, status.Errorf(codes.PermissionDenied, "refused: %s needs role viewer or operator; the call's credential is %s (%s)", method, p, roleHint(p))
	case RoleOperator:
		return p, status.Errorf(codes.PermissionDenied, "refused: %s needs role operator; the call's credential is %s (%s)", method, p, roleHint(p))
	}
	return p, status.Errorf(codes.PermissionDenied, "refused: %s is an executor call: it needs role executor (the cluster token, or a cluster member's certificate); the call's credential is %s", method, p)
}

func roleHint(p Principal) string {
	if p.Role == RoleExecutor {
		return "the cluster credential is the executors' and grants nothing on the CLI's service; use a viewer or operator token (--token-file) or certificate"
	}
	return "ask for a credential of the role named"
}

// certCN returns the name of a gRPC call's verified client certificate
// ("" none).
func certCN(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return ""
	}
	return certName(ti.State)
}

// certName is the principal a verified client certificate names: its
// subject common name, else its first DNS name, else its first URI; ""
// when no certificate was verified.
func certName(cs tls.ConnectionState) string {
	if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return ""
	}
	c := cs.PeerCertificates[0]
	switch {
	case c.Subject.CommonName != "":
		return c.Subject.CommonName
	case len(c.DNSNames) > 0:
		return c.DNSNames[0]
	case len(c.URIs) > 0:
		return c.URIs[0].String()
	}
	return "unnamed-certificate"
}

// check authenticates and authorizes one gRPC call.
func (a *Authenticator) check(ctx context.Context, method string, logger *slog.Logger) (context.Context, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	p, err := a.identify(md.Get("authorization"), certCN(ctx))
	addr := "unknown"
	if pe, ok := peer.FromContext(ctx); ok {
		addr = pe.Addr.String()
	}
	if err != nil {
		if !a.Roles.Enabled() {
			logger.Warn("refused a call without the cluster token", "method", method, "peer", addr)
			return ctx, status.Error(codes.Unauthenticated, refusal)
		}
		logger.Warn("refused a call without a known credential", "method", method, "peer", addr)
		return ctx, status.Error(codes.Unauthenticated, "refused: the call carries no known credential: give the CLI a viewer or operator token (--token-file or "+TokenEnv+") or a client certificate mapped to a role; executors need the cluster token")
	}
	p, err = a.authorize(p, method)
	if err != nil {
		logger.Warn("refused a call: role", "method", method, "peer", addr, "principal", p.Name, "role", p.Role, "needs", NeededRole(method))
		return ctx, err
	}
	return WithPrincipal(ctx, p), nil
}

// principalStream carries the principal in a stream's context.
type principalStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s principalStream) Context() context.Context { return s.ctx }

// interceptors returns the unary and stream interceptors of a.
func (a *Authenticator) interceptors(logger *slog.Logger) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ctx, err := a.check(ctx, info.FullMethod, logger)
			if err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx, err := a.check(ss.Context(), info.FullMethod, logger)
			if err != nil {
				return err
			}
			return h(srv, principalStream{ss, ctx})
		}),
	}
}

// HTTPHandler wraps the driver's HTTP port (status page, metrics): with
// role credentials configured every request but /healthz and /readyz needs
// a viewer or operator credential, a bearer token (Prometheus'
// authorization) or a client certificate mapped to a role. Without them
// it is h unchanged.
func (a *Authenticator) HTTPHandler(h http.Handler) http.Handler {
	if !a.Roles.Enabled() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/healthz" || req.URL.Path == "/readyz" {
			h.ServeHTTP(w, req)
			return
		}
		cn := ""
		if req.TLS != nil {
			cn = certName(*req.TLS)
		}
		p, err := a.identify(req.Header.Values("Authorization"), cn)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
			http.Error(w, "refused: needs role viewer or operator: send a viewer or operator token (Authorization: Bearer TOKEN) or a client certificate mapped to a role", http.StatusUnauthorized)
			return
		}
		if !p.Role.allows(RoleViewer) {
			http.Error(w, fmt.Sprintf("refused: needs role viewer or operator; the request's credential is %s", p), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, req.WithContext(WithPrincipal(req.Context(), p)))
	})
}
