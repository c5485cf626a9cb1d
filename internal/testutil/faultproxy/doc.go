// Package faultproxy puts faults between a process under test and the
// servers it talks to, for chaos tests:
//
//   - HTTP is a reverse proxy for an S3-compatible server. For a seeded,
//     configurable fraction of requests it answers 500 InternalError, 503
//     ServiceUnavailable or 503 SlowDown (with S3's XML error body), resets
//     the connection before the request reaches the server, forwards the
//     request and then resets the connection (a lost response: the write
//     happened, the client does not know), or forwards it late. Rules fail
//     every write of one named object, and Hold parks the next matching
//     request until the test releases it.
//   - TCP is a byte-level proxy the test can cut (a partition: nothing flows,
//     nothing is refused; or a rejection: every connection is reset) and
//     restore.
//
// It owns only the proxies. It does not know S3 semantics beyond the error
// body and the request path (path-style /bucket/key), keeps the Host header
// as the client sent it (SigV4 signs it), and listens on 127.0.0.1 only. It
// is test support: nothing outside tests should import it.
package faultproxy
