package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/explain"
	"github.com/sluicehq/sluice/query"
)

func newExplainCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "explain -f QUERY.yaml",
		Short: "Print a query's incremental plan without running it",
		Long: "explain validates the query as run does (same messages, same exit code) and prints its incremental plan, " +
			"as Spark's explain does for a streaming query, with the numbers that matter: partitions, cap per trigger, " +
			"state expected per open window. It opens nothing and creates nothing. A path that run would refuse now " +
			"(an input directory that does not exist yet) is noted on stderr after the plan.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return fmt.Errorf("explain: -f QUERY.yaml is required")
			}
			spec, err := query.Load(file)
			if err != nil {
				return err
			}
			// The spec checks run applies, in run's order, so a wrong spec
			// gets run's message; paths are only noted (below).
			if err := microbatch.CheckSpec(spec); err != nil {
				return err
			}
			plan, err := explain.Plan(spec)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), plan)
			if err := microbatch.Check(spec); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: driver run would refuse this query now:\n%v\n", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "query spec (YAML or JSON)")
	return cmd
}
