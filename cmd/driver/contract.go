package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/query"
)

// contract is what the team that owns a query's source must guarantee;
// its JSON field names are stable for scripts.
type contract struct {
	Query           string          `json:"query"`
	Environment     string          `json:"environment"`
	Source          string          `json:"source"`
	Topics          string          `json:"topics,omitempty"`
	Bootstrap       string          `json:"bootstrapServers,omitempty"`
	Path            string          `json:"path,omitempty"`
	Format          string          `json:"format"`
	Fields          []contractField `json:"fields"`
	EventTimeField  string          `json:"eventTimeField,omitempty"`
	EventTimeZone   string          `json:"eventTimeZone,omitempty"`
	WatermarkDelay  string          `json:"watermarkDelay,omitempty"`
	RecoveryWindow  string          `json:"recoveryWindow"`
	LongestOutage   string          `json:"longestOutage"`
	NeededRetention string          `json:"neededRetention"`
	FailOnDataLoss  *bool           `json:"failOnDataLoss,omitempty"`
	MaxPerTrigger   string          `json:"maxOffsetsPerTrigger,omitempty"`
	StartingOffsets string          `json:"startingOffsets,omitempty"`
	Checkpoint      string          `json:"checkpointLocation"`
	Sink            string          `json:"sink"`
	Notes           []string        `json:"notes"`
}

type contractField struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Required bool   `json:"required"`
	From     string `json:"from,omitempty"`
}

func newContractCmd() *cobra.Command {
	var file, output string
	var recovery, outage time.Duration
	cmd := &cobra.Command{
		Use:   "contract -f QUERY.yaml [--recovery-window D] [--longest-outage D]",
		Short: "Print what the query's source team must guarantee",
		Long: `Print what the team that owns the query's source must guarantee: topics,
value format and fields, the event-time field and its zone, the watermark
delay, the retention the topic needs (recovery window + watermark delay +
longest expected outage), failOnDataLoss, maxOffsetsPerTrigger, and where the
checkpoint and the sink are.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "query spec (YAML or JSON)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	cmd.Flags().DurationVar(&recovery, "recovery-window", 24*time.Hour, "how far back an operator must be able to re-run (a restore, a replay), e.g. 24h or 168h")
	cmd.Flags().DurationVar(&outage, "longest-outage", 72*time.Hour, "the longest the query may be down before it resumes (a weekend), e.g. 72h")
	return clientCmd(cmd, func(cmd *cobra.Command, _ []string) error {
		if output != "table" && output != "json" {
			return usageErr("-o %q: must be table or json", output)
		}
		_, spec, err := loadSpec(file)
		if err != nil {
			return err
		}
		c := buildContract(spec.WithDefaults(), recovery, outage)
		if output == "json" {
			return writeJSON(cmd.OutOrStdout(), c)
		}
		return writeContract(cmd.OutOrStdout(), c)
	})
}

func human(d time.Duration) string {
	if d%(24*time.Hour) == 0 && d > 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	if d%time.Hour == 0 && d > 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return d.String()
}

func buildContract(s query.Spec, recovery, outage time.Duration) contract {
	c := contract{Query: s.Name, Environment: string(s.Environment), Format: s.Source.Format, Checkpoint: s.CheckpointLocation,
		RecoveryWindow: human(recovery), LongestOutage: human(outage)}
	if c.Environment == "" {
		c.Environment = string(query.Lab)
	}
	if c.Format == "" {
		c.Format = query.DefaultFormat
	}
	for _, f := range s.Source.Schema {
		c.Fields = append(c.Fields, contractField{Name: f.Name, Type: f.Type, Required: f.Nullable != nil && !*f.Nullable, From: f.From})
	}
	var delay time.Duration
	if w := s.Watermark; w != nil {
		delay = w.Delay.D()
		c.EventTimeField, c.WatermarkDelay = w.Column, human(delay)
		c.EventTimeZone = "each value carries its offset (e.g. 2026-03-02T09:01:00Z); a value without one is read in " + s.SessionZone().String() + " (sessionTimeZone); a JSON integer is epoch seconds"
		c.Notes = append(c.Notes, fmt.Sprintf("events later than %s behind the newest event time are dropped as late", human(delay)))
	}
	retention := recovery + delay + outage
	c.NeededRetention = human(retention)
	if j := s.Join; j != nil {
		note := fmt.Sprintf("the %s dimension at %s (joined on %s) must be readable by the driver when the query starts", j.JoinFormat(), j.Path, strings.Join(j.Keys, ", "))
		if j.RefreshInterval > 0 {
			note += fmt.Sprintf(" and every %s", human(j.RefreshInterval.D()))
		}
		note += "; replace it whole, never rewrite it in place"
		if j.ManifestIDColumn != "" {
			note += fmt.Sprintf(", with one %s in all its rows (a snapshot with two is refused)", j.ManifestIDColumn)
		}
		c.Notes = append(c.Notes, note)
	}
	switch {
	case s.Source.Kafka != nil:
		k := s.Source.Kafka
		c.Source, c.Bootstrap = "kafka", k.BootstrapServers
		c.Topics = k.Subscribe
		if k.SubscribePattern != "" {
			c.Topics = "pattern " + k.SubscribePattern
		}
		if k.Assign != "" {
			c.Topics = "assign " + k.Assign
		}
		fod := k.FailsOnDataLoss()
		c.FailOnDataLoss = &fod
		if k.MaxOffsetsPerTrigger > 0 {
			c.MaxPerTrigger = fmt.Sprint(k.MaxOffsetsPerTrigger)
		} else {
			c.MaxPerTrigger = "unlimited"
		}
		c.StartingOffsets = k.StartingOffsets
		c.Notes = append(c.Notes, fmt.Sprintf("retention.ms of the topic must be at least %d (%s); offsets deleted before the query reads them are data loss", retention.Milliseconds(), human(retention)))
		if fod {
			c.Notes = append(c.Notes, "failOnDataLoss is true: the query stops at data loss rather than skip")
		} else {
			c.Notes = append(c.Notes, "failOnDataLoss is false: offsets lost to retention are skipped and counted (skippedOffsets)")
		}
	case s.Source.File != nil:
		c.Source, c.Path = "file", s.Source.File.Path
		if s.Source.File.MaxFilesPerTrigger > 0 {
			c.MaxPerTrigger = fmt.Sprintf("%d files", s.Source.File.MaxFilesPerTrigger)
		}
		c.Notes = append(c.Notes,
			fmt.Sprintf("files must stay for at least %s", human(retention)),
			"files appear atomically (written aside, then renamed in) with names in increasing order; a file named at or before the last one taken is never read")
	case s.Source.Generator != nil:
		c.Source = "generator (synthetic; no source team)"
	}
	switch {
	case s.Sink.Parquet != nil:
		c.Sink = "parquet " + s.Sink.Parquet.Path
	case s.Sink.JSONBatches != nil:
		c.Sink = "jsonBatches " + s.Sink.JSONBatches.Path
	case s.Sink.Console != nil:
		c.Sink = "console"
	}
	return c
}

func writeContract(w io.Writer, c contract) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("query", c.Query+" ("+c.Environment+")")
	row("source", c.Source)
	row("bootstrap servers", c.Bootstrap)
	row("topics", c.Topics)
	row("path", c.Path)
	row("value format", c.Format)
	var fields []string
	for _, f := range c.Fields {
		s := f.Name + " " + f.Type
		if f.Required {
			s += " (required)"
		}
		if f.From != "" {
			s += " from " + f.From
		}
		fields = append(fields, s)
	}
	row("fields", strings.Join(fields, ", "))
	row("event-time field", c.EventTimeField)
	row("event-time zone", c.EventTimeZone)
	row("watermark delay", c.WatermarkDelay)
	row("needed retention", fmt.Sprintf("%s = recovery window %s + watermark delay %s + longest outage %s", c.NeededRetention, c.RecoveryWindow, orDash(c.WatermarkDelay), c.LongestOutage))
	if c.FailOnDataLoss != nil {
		row("failOnDataLoss", fmt.Sprint(*c.FailOnDataLoss))
	}
	row("maxOffsetsPerTrigger", c.MaxPerTrigger)
	row("startingOffsets", c.StartingOffsets)
	row("checkpoint", c.Checkpoint)
	row("sink", c.Sink)
	for _, n := range c.Notes {
		row("note", n)
	}
	return tw.Flush()
}
