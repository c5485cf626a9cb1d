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
	// SpecSHA256 names the spec so a reader sees which generations changed
	// it; Spec is the spec itself.
	SpecSHA256 string `json:"specSha256"`
	Spec       string `json:"spec"`
}

func toGenerationJSON(g *sluicepb.QueryGeneration) generationJSON {
	sum := sha256.Sum256(g.Spec)
	return generationJSON{Generation: g.Generation, ID: g.Id, Desired: g.Desired, Change: g.Change,
		ChangedBy: g.ChangedBy, ChangedAt: g.ChangedAt, AllowFirstStart: g.AllowFirstStart,
		AllowReplay: g.AllowReplay, Ticket: g.Ticket, ApprovedBy: g.ApprovedBy,
		SpecSHA256: hex.EncodeToString(sum[:]), Spec: string(g.Spec)}
}

func newHistoryCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "history NAME",
		Short: "Show a query's retained registry generations, oldest first: each submit, update, stop and resume, who made it and when, the approvals given with their ticket, and which spec (its SHA-256; -o json has the spec)",
		Args:  cobra.ExactArgs(1),
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
	fmt.Fprintln(tw, "GEN\tCHANGE\tDESIRED\tCHANGED AT\tBY\tAPPROVAL\tSPEC")
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
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Generation, orDash(g.Change), g.Desired, g.ChangedAt, orDash(g.ChangedBy), approval, g.SpecSHA256[:12])
	}
	return tw.Flush()
}
