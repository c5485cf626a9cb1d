// Package tlsconf owns the transport-security settings every Sluice command
// shares: the --tls-cert, --tls-key, --tls-ca, --tls-dir and --insecure
// flags, and the server and client *tls.Config built from them.
//
// The certificate, key and CA files are re-read when they change (their
// size or modification time), on the next handshake, so certificates that
// cert-manager rotates in place are picked up without a restart;
// connections already open keep the certificate they were made with.
//
// With a CA, TLS is mutual: servers require a client certificate the CA
// signed and every client presents its own certificate. Without a CA,
// servers do not ask for client certificates and clients verify servers
// against the system roots.
//
// It does not listen, dial or check tokens: package cluster adds the
// resulting configs to gRPC, and the HTTP server uses the server config.
package tlsconf
