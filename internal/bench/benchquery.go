package bench

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/client"
	"github.com/corral-sched/corral/internal/cmdkit"
)

type queryResult struct {
	What   string  `json:"what"`
	N      int     `json:"n"`
	Rows   int     `json:"rows"` // jobs in the last answer
	P50MS  float64 `json:"latency_p50_ms"`
	P95MS  float64 `json:"latency_p95_ms"`
	P99MS  float64 `json:"latency_p99_ms"`
	MaxMS  float64 `json:"latency_max_ms"`
	MeanMS float64 `json:"latency_mean_ms"`
}

func (r queryResult) table(w io.Writer) error {
	_, err := fmt.Fprintf(w, "%s x%d (%d jobs each): p50 %.1fms, p95 %.1fms, p99 %.1fms, max %.1fms, mean %.1fms\n",
		r.What, r.N, r.Rows, r.P50MS, r.P95MS, r.P99MS, r.MaxMS, r.MeanMS)
	return err
}

func (c *cmds) newBenchQueryCmd() *cobra.Command {
	var (
		n         int
		what, usr string
		limit     int
	)
	cmd := &cobra.Command{
		Use:   "query [--what jobs|queue] [--user U] [--limit L] [--n N]",
		Short: "Measure the latency of GET /jobs or GET /queue",
		Long: `Send N requests, one after the other, and report their latency (p50, p95, p99,
max, mean; the client's view: request, answer and decoding). --what jobs
sends GET /jobs?user=U&limit=L (the user's newest jobs, from the store's
indexes when they ended); --what queue sends GET /queue?limit=L. Each user
gets a different one of user0..user99 in turn when --user is "each".`,
		Example: `  corral bench query --what jobs --user user7 --limit 100 --n 500
  corral bench query --what queue --n 100`,
		Args: cmdkit.ArgsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if n < 1 || limit < 0 || (what != "jobs" && what != "queue") {
				return cmdkit.Usagef("--n must be at least 1, --limit not negative, --what jobs or queue")
			}
			cl, err := c.benchClient(1)
			if err != nil {
				return err
			}
			res := queryResult{What: "GET /" + what, N: n}
			lat := make([]time.Duration, 0, n)
			for i := range n {
				t0 := time.Now()
				if what == "queue" {
					q, err := cl.QueuePage(cmd.Context(), limit, "")
					if err != nil {
						return err
					}
					res.Rows = len(q.QueuedJobs)
				} else {
					u := usr
					if u == "each" {
						u = fmt.Sprintf("user%d", i%100)
					}
					l, err := cl.Jobs(cmd.Context(), client.JobFilter{User: u, Limit: limit})
					if err != nil {
						return err
					}
					res.Rows = len(l.Jobs)
				}
				lat = append(lat, time.Since(t0))
			}
			res.P50MS, res.P95MS, res.P99MS, res.MaxMS, res.MeanMS = latencyMS(lat)
			return c.Emit(res, res.table)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&n, "n", 200, "how many requests")
	fl.StringVar(&what, "what", "jobs", "what to ask: jobs (GET /jobs) or queue (GET /queue)")
	fl.StringVar(&usr, "user", "", `GET /jobs's user filter ("each": user0..user99 in turn)`)
	fl.IntVar(&limit, "limit", 100, "the page size asked for (0: the server's default)")
	return cmd
}

// fileMiB is the size of the file at path in MiB (0 when there is none).
func fileMiB(path string) float64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return float64(fi.Size()) / (1 << 20)
}
