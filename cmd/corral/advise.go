package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/advise"
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
)

// adviceReport is corral advise -o json: the profile and the options.
type adviceReport struct {
	Profile  api.LoadProfile `json:"profile"`
	Currency string          `json:"currency"`
	Options  []advise.Option `json:"options"`
}

func (c *cli) newAdviseCmd() *cobra.Command {
	var since, pricesFile string
	var printPrices bool
	cmd := &cobra.Command{
		Use:   "advise",
		Short: "Compare running the recorded load on the cluster with cloud GPU instances",
		Long: `corral advise reads the cluster's usage history (GPU-hours, peak and typical
GPUs held at once, the GPU counts and GPU memory of jobs) and prices the same
load per month on the cluster and on cloud instances (H100, A100, A10G and T4
families, on-demand and spot), cheapest first, each with a short rationale.

Prices come from a table shipped with corral; --print-prices writes it, and
--prices FILE reads an edited copy (your region, discounts, the amortised
on-premises cost of your own GPUs). No network calls are made.

  corral advise --since 30d
  corral advise --print-prices > prices.json
  corral advise --prices prices.json`,
		Args: argsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printPrices {
				_, err := c.stdout.Write(advise.DefaultPrices)
				return err
			}
			data := advise.DefaultPrices
			if pricesFile != "" {
				var err error
				if data, err = os.ReadFile(pricesFile); err != nil {
					return fmt.Errorf("--prices: %w", err)
				}
			}
			prices, err := advise.ParsePrices(data)
			if err != nil {
				return fmt.Errorf("--prices %s: %w", pricesFile, err)
			}
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (adviceReport, error) {
				p, err := cl.Advise(ctx, since)
				if err != nil {
					return adviceReport{}, err
				}
				return adviceReport{Profile: p, Currency: prices.Currency, Options: advise.Recommend(p, prices)}, nil
			}, printAdvice)
		},
	}
	cmd.Flags().StringVar(&since, "since", "30d", "how far back to read: days (30d), a duration (720h) or an RFC 3339 time")
	cmd.Flags().StringVar(&pricesFile, "prices", "", "a price table (JSON) instead of the shipped one (see --print-prices)")
	cmd.Flags().BoolVar(&printPrices, "print-prices", false, "print the shipped price table, to edit and pass back with --prices")
	return cmd
}

func printAdvice(w io.Writer, r adviceReport) error {
	p := r.Profile
	days, unit := p.Until.Sub(p.Since).Hours()/24, "days"
	if days < 1.5 {
		unit = "day"
	}
	fmt.Fprintf(w, "Load over %.0f %s (%s to %s): %d jobs, %.1f GPU-hours\n", days, unit, p.Since.Local().Format("2006-01-02"), p.Until.Local().Format("2006-01-02"), p.Jobs, p.GPUHours)
	fmt.Fprintf(w, "GPUs held at once: peak %d, typical %g, 90th percentile %g; largest job %d GPUs per node\n", p.PeakGPUs, p.TypicalGPUs, p.P90GPUs, p.MaxJobGPUs)
	if len(p.ClusterGPUs) > 0 {
		models := make([]string, 0, len(p.ClusterGPUs))
		for m, n := range p.ClusterGPUs {
			models = append(models, fmt.Sprintf("%d x %s", n, m))
		}
		slices.Sort(models)
		fmt.Fprintf(w, "Cluster: %s\n", strings.Join(models, ", "))
	}
	if len(r.Options) == 0 {
		_, err := fmt.Fprintln(w, "\nNothing to advise: no GPU was used in the period and the cluster has no GPUs.")
		return err
	}
	fmt.Fprintf(w, "\nPer month at this rate of use (%s), cheapest first:\n", r.Currency)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OPTION\tMONTHLY\tCOVERS\tWHY")
	for _, o := range r.Options {
		fmt.Fprintf(tw, "%s\t%s\t%.0f%%\t%s\n", o.Name, money(o.Monthly), 100*o.Covers, o.Rationale)
	}
	return tw.Flush()
}

// money prints an amount: whole units from 100 up, cents below.
func money(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
