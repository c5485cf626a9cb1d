// Package rpcauth builds every credential of the gRPC and HTTP servers and
// clients of both processes, in one place: the cluster token checked on
// every call of every service (ServerOptions, DialOptions, a Pool of
// client connections), TLS from internal/tlsconf (mutual with a CA,
// certificates re-read when their files change), and on the driver's
// server the roles (Roles, Authenticator, DriverServerOptions): viewer and
// operator credentials (tokens files, client-certificate names) for the
// CLI's ControlService, the cluster credential (role executor) for the
// rest; the principal rides in the call's context (PrincipalFrom).
//
// CheckListen refuses a non-loopback listen address where no peer must
// authenticate (no token, no mutual TLS) unless insecure is set.
//
// gRPC buffers a whole message before the token is checked, so
// MaxMessageBytes is what an unauthenticated peer can make a server
// allocate per stream.
package rpcauth
