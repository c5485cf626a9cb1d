// Package scripts holds the repository's shell scripts (test.sh, the
// real-cluster scripts, genproto.sh) and, in its tests, checks of their
// decisions that need no tool installed: what scripts/test.sh runs, skips
// and refuses for a given user, environment and PATH (its --plan mode).
//
// It has no Go code of its own and must not: the scripts are the product.
package scripts
