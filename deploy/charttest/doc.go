// Package charttest checks the Helm chart in deploy/helm/sluice without a
// cluster: `helm lint --strict` and `helm template` over the values files in
// testdata, every rendered object decoded strictly into the Kubernetes API
// types (an unknown or misspelt field fails), and the properties that
// matter asserted on the decoded objects: one driver with Recreate, probes,
// resources and the restricted security context on every container, the
// driver's Service name being the one executors and `helm test` dial, no
// secret in a ConfigMap, every role and policy flag's file traced through
// the pod's mounts to the Secret key or ConfigMap the values name, and bad
// values refused with a readable reason. It also parses the shipped
// alerting rules and every query of the Grafana dashboard with Prometheus'
// own code (both must name only metrics and labels docs/observability.md documents)
// and checks the dashboard's ConfigMap.
//
// It lives in the deploy module, apart from the main module, so k8s.io/api
// (a large module) never enters the engine's build or its go.sum. It owns
// no chart logic and must not talk to a cluster; the cluster e2e lives in
// e2e/k8s_test.go, run by scripts/k8s-e2e.sh.
//
// Helm comes from $SLUICE_HELM, else the cache scripts/test.sh installs it
// into; a missing helm fails the tests with the reason, it never skips.
// Under go test -short (scripts/test.sh --quick) the tests that run helm
// skip: the fast loop runs no process.
package charttest
