package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/proto/sluicepb"
)

// generationJSON is one registry generation as history prints it in JSON.
type generationJSON struct {
	Generation      int64  `json:"generation"`
	ID              string `json:"id"`
	Desired         string `json:"desired"`
	Change          string `json:"change"`
	ChangedBy       string `json:"changedBy"`
	ChangedAt       string `json:"changedAt"`
	AllowFirstStart bool   `json:"allowFirstStart,omitempty"`
	AllowReplay     bool   `json:"allowReplay,omitempty"`
	Ticket          string `json:"ticket,omitempty"`
	ApprovedBy      string `json:"approvedBy,omitempty"`
	// Principal and Role are the authenticated caller; Reason the reason
	// or ticket given; the fingerprints the secret-free spec fingerprints
	// before and after the change.
	Principal         string `json:"principal,omitempty"`
	Role              string `json:"role,omitempty"`
	Reason            string `json:"reason,omitempty"`
	FingerprintBefore string `json:"fingerprintBefore,omitempty"`
	FingerprintAfter  string `json:"fingerprintAfter,omitempty"`
	// Pruned: the generation is gone from the registry; this is its audit
	// entry (no spec).
	Pruned bool `json:"pruned,omitempty"`
	// SpecSHA256 names the spec so a reader sees which generations changed
	// it; Spec is the spec itself.
	SpecSHA256 string `json:"specSha256,omitempty"`
	Spec       string `json:"spec,omitempty"`
}

func toGenerationJSON(g *sluicepb.QueryGeneration) generationJSON {
	out := generationJSON{Generation: g.Generation, ID: g.Id, Desired: g.Desired, Change: g.Change,
		ChangedBy: g.ChangedBy, ChangedAt: g.ChangedAt, AllowFirstStart: g.AllowFirstStart,
		AllowReplay: g.AllowReplay, Ticket: g.Ticket, ApprovedBy: g.ApprovedBy,
		Principal: g.Principal, Role: g.Role, Reason: g.Reason,
		FingerprintBefore: g.FingerprintBefore, FingerprintAfter: g.FingerprintAfter, Pruned: g.Pruned}
	if !g.Pruned {
		sum := sha256.Sum256(g.Spec)
		out.SpecSHA256, out.Spec = hex.EncodeToString(sum[:]), string(g.Spec)
	}
	return out
}

func newHistoryCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "history NAME",
		Short: "Show a query's audit trail: every change, who, when and why",
		Long: `Show a query's audit trail, oldest first: each submit, update, stop and
resume, who made it (the authenticated principal and role, and the client's
user@host) and when, why (--reason), the approvals given with their ticket,
and the spec's secret-free fingerprint before and after. -o json adds the
retained generations' specs.`,
		Args: cobra.ExactArgs(1),
	}
	cf.add(cmd.Flags(), "table")
	return clientCmd(cmd, func(cmd *cobra.Command, args []string) error {
		cl, closeConn, err := cf.dial()
		if err != nil {
			return err
		}
		defer closeConn()
		ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
		defer cancel()
		resp, err := cl.QueryHistory(ctx, &sluicepb.QueryHistoryRequest{Name: args[0]})
		if err != nil {
			return cf.callErr(err, args[0])
		}
		gens := make([]generationJSON, 0, len(resp.Generations))
		for _, g := range resp.Generations {
			gens = append(gens, toGenerationJSON(g))
		}
		if cf.output == "json" {
			return writeJSON(cmd.OutOrStdout(), gens)
		}
		return writeHistory(cmd.OutOrStdout(), gens)
	})
}

// writeHistory prints one line per generation.
func writeHistory(w io.Writer, gens []generationJSON) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GEN\tCHANGE\tDESIRED\tCHANGED AT\tPRINCIPAL\tBY\tREASON\tAPPROVAL\tFINGERPRINT")
	for _, g := range gens {
		approval := "-"
		switch {
		case g.AllowFirstStart && g.AllowReplay:
			approval = "first-start+replay"
		case g.AllowFirstStart:
			approval = "first-start"
		case g.AllowReplay:
			approval = "replay"
		}
		if approval != "-" {
			approval += " ticket " + orDash(g.Ticket) + " by " + orDash(g.ApprovedBy)
		}
		principal := "-"
		if g.Principal != "" {
			principal = g.Principal + " (" + orDash(g.Role) + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Generation, orDash(g.Change), g.Desired, g.ChangedAt, principal, orDash(g.ChangedBy), orDash(g.Reason), approval, fingerprints(g))
	}
	return tw.Flush()
}

// fingerprints is "before→after" (12 characters each) of the spec's
// fingerprint, "after" alone when unchanged or the first; a generation
// written before fingerprints were recorded shows its spec's SHA-256.
func fingerprints(g generationJSON) string {
	short := func(s string) string {
		if len(s) > 12 {
			return s[:12]
		}
		return s
	}
	switch {
	case g.FingerprintAfter == "" && g.SpecSHA256 != "":
		return "sha256 " + short(g.SpecSHA256)
	case g.FingerprintAfter == "":
		return "-"
	case g.FingerprintBefore == "" || g.FingerprintBefore == g.FingerprintAfter:
		return short(g.FingerprintAfter)
	}
	return short(g.FingerprintBefore) + "->" + short(g.FingerprintAfter)
}
