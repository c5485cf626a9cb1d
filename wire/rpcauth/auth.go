package rpcauth

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// TokenEnv names the environment variable holding the cluster token when
// no token file is given.
const TokenEnv = "SLUICE_TOKEN"

// LoadToken returns the cluster token: the content of file (surrounding
// whitespace trimmed) when file is set, else $SLUICE_TOKEN; "" when
// neither is set. A token that is empty or only whitespace is an error: a
// blank token must not silently turn authentication off.
func LoadToken(file string) (string, error) {
	if file == "" {
		v, ok := os.LookupEnv(TokenEnv)
		if !ok {
			return "", nil
		}
		tok := strings.TrimSpace(v)
		if tok == "" {
			return "", fmt.Errorf("%s is set but empty or only whitespace: the cluster token must not be empty; unset it to run without a token", TokenEnv)
		}
		return tok, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read --token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("--token-file %s is empty or only whitespace: the cluster token must not be empty", file)
	}
	return tok, nil
}

// MaxMessageBytes bounds one gRPC message, received or sent, on every
// server and client: gRPC reads a whole message before any interceptor
// checks the token, so this is what an unauthenticated peer can make a
// server allocate per stream. Large payloads travel in pieces well below
// it, whatever a record's size: shuffle partials in chunks of about
// wire.DefaultChunkBytes, a chunk larger than shuffle.DefaultPieceBytes
// (one large record) in pieces the owner joins, and a reduce task's rows
// for a driver-side sink cut at reduceRowChunkBytes, through a row too
// (the driver joins them). What is left whole is control: specs, owner
// lists, and the driver's answers to clients (ListQueries holds every
// query's last progress), which is why it stays at gRPC's default.
const MaxMessageBytes = 4 << 20

// KeepaliveTime is how long a client's connection may stay silent before
// it pings its peer (gRPC's minimum for clients), and KeepaliveTimeout how
// long it waits for the answer before it closes the connection and
// redials.
const (
	KeepaliveTime    = 10 * time.Second
	KeepaliveTimeout = 5 * time.Second
)

// refusal is the error a peer without the token gets.
const refusal = "refused: the call carries no Sluice cluster token or a wrong one; give every driver, executor and CLI the same --token-file or " + TokenEnv

// ServerOptions returns the options of a server that refuses every call,
// on every service, whose token differs from token ("" disables the check),
// and serves TLS with tlsCfg (nil: plaintext; see tlsconf.Source's
// ServerConfig). Refusals, and failed TLS handshakes with their cause, are
// logged with the peer's address.
func ServerOptions(token string, tlsCfg *tls.Config, logger *slog.Logger) []grpc.ServerOption {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	opts := baseServerOptions(tlsCfg, logger)
	if token == "" {
		return opts
	}
	check := func(ctx context.Context, method string) error {
		md, _ := metadata.FromIncomingContext(ctx)
		for _, v := range md.Get("authorization") {
			if subtle.ConstantTimeCompare([]byte(v), []byte("Bearer "+token)) == 1 {
				return nil
			}
		}
		addr := "unknown"
		if p, ok := peer.FromContext(ctx); ok {
			addr = p.Addr.String()
		}
		logger.Warn("refused a call without the cluster token", "method", method, "peer", addr)
		return status.Error(codes.Unauthenticated, refusal)
	}
	return append(opts,
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := check(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := check(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	)
}

// DriverServerOptions returns the options of the driver's server: every
// call is authenticated by a (cluster token, role tokens, client
// certificates) and authorized by the role its method needs (see
// NeededRole); the principal rides in the call's context (PrincipalFrom).
// TLS and the limits are ServerOptions'.
func DriverServerOptions(a *Authenticator, tlsCfg *tls.Config, logger *slog.Logger) []grpc.ServerOption {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return append(baseServerOptions(tlsCfg, logger), a.interceptors(logger)...)
}

func baseServerOptions(tlsCfg *tls.Config, logger *slog.Logger) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes),
		// Clients ping every KeepaliveTime, idle or not: allow it (the
		// default policy answers a ping more often than every 5 minutes
		// with GOAWAY), and ping silent clients so a dead one's
		// connection is closed.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveTime / 2, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 3 * KeepaliveTime, Timeout: KeepaliveTimeout}),
	}
	if tlsCfg != nil {
		opts = append(opts, grpc.Creds(loggedCreds{credentials.NewTLS(tlsCfg), logger}))
	}
	return opts
}

// tokenCreds attaches the token to every call.
type tokenCreds string

func (t tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

// RequireTransportSecurity is false: without TLS (on loopback, or with
// --insecure) the token rides in clear; with TLS it is encrypted.
func (t tokenCreds) RequireTransportSecurity() bool { return false }

// loggedCreds logs why a server-side TLS handshake failed: a plaintext
// client, a certificate of another CA, an expired one, none.
type loggedCreds struct {
	credentials.TransportCredentials
	log *slog.Logger
}

func (c loggedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		c.log.Warn("refused a connection: TLS handshake failed", "peer", raw.RemoteAddr().String(), "err", err)
	}
	return conn, info, err
}

func (c loggedCreds) Clone() credentials.TransportCredentials {
	return loggedCreds{c.TransportCredentials.Clone(), c.log}
}

// ipCheckedCreds checks that the server's certificate names the IP address
// dialed, when the address is an IP. crypto/tls leaves the connection
// state's server name empty for an IP, so tlsconf's verification against
// the current CA (mutual TLS) checks the chain but cannot check the
// address: without this, any certificate the CA signed would pass for any
// IP. A dial by name (the driver's Service, --tls-peer-name) is checked by
// that verification itself.
type ipCheckedCreds struct {
	credentials.TransportCredentials
}

func (c ipCheckedCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		return conn, info, err
	}
	host, _, serr := net.SplitHostPort(authority)
	if serr != nil {
		host = authority
	}
	if net.ParseIP(host) == nil {
		return conn, info, nil
	}
	ti, ok := info.(credentials.TLSInfo)
	if !ok || len(ti.State.PeerCertificates) == 0 {
		conn.Close()
		return nil, nil, fmt.Errorf("tls: %s presented no certificate", authority)
	}
	if err := ti.State.PeerCertificates[0].VerifyHostname(host); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("tls: verify the server's certificate for the address dialed: %w", err)
	}
	return conn, info, nil
}

func (c ipCheckedCreds) Clone() credentials.TransportCredentials {
	return ipCheckedCreds{c.TransportCredentials.Clone()}
}

// DialOptions returns the options of a client that presents token ("" for
// none) and speaks TLS with tlsCfg (nil: plaintext; see tlsconf.Source's
// ClientConfig).
func DialOptions(token string, tlsCfg *tls.Config) []grpc.DialOption {
	creds := insecure.NewCredentials()
	if tlsCfg != nil {
		creds = ipCheckedCreds{credentials.NewTLS(tlsCfg)}
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// Reconnect quickly: a peer that restarts (a driver, an executor)
		// is back within a second, and gRPC's default first backoff is 1s.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
		// A connection whose peer went silent without closing it (a pod
		// deleted with no RST, a stale conntrack entry, a network
		// partition) still looks ready, and calls on it only time out
		// until TCP gives up (about 15 minutes). Pings find it dead
		// within KeepaliveTime + KeepaliveTimeout and the client redials
		// (resolving the name again).
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout, PermitWithoutStream: true}),
	}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(tokenCreds(token)))
	}
	return opts
}

// IsUnauthenticated reports whether err is a refusal for a missing or
// wrong token.
func IsUnauthenticated(err error) bool { return status.Code(err) == codes.Unauthenticated }

// IsPermissionDenied reports whether err is a refusal for a credential
// whose role does not allow the call.
func IsPermissionDenied(err error) bool { return status.Code(err) == codes.PermissionDenied }
