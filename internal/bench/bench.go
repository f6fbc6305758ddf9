package bench

// corral bench: load tools that measure a running server from outside,
// over its HTTP API, as any client sees it. The figures they print are
// recorded in docs/benchmarks.md.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
	"github.com/corral-sched/corral/internal/cmdkit"
)

// benchMaxStartJobs bounds bench start's --n: the jobs are read back with
// one GET /jobs, whose limit is 100,000.
const benchMaxStartJobs = 100000

// benchFlags are the flags of the bench commands.
type benchFlags struct {
	n, concurrency int
	hold, cleanup  bool
	progress       time.Duration
	timeout        time.Duration
}

func (f *benchFlags) register(cmd *cobra.Command, n int) {
	fl := cmd.Flags()
	fl.IntVar(&f.n, "n", n, "how many jobs to submit")
	fl.IntVar(&f.concurrency, "concurrency", 64, "how many submissions are in flight at once (workers, each on its own keep-alive connection)")
	cmdkit.DurationVar(fl, &f.progress, "progress", time.Second, "how often to print a progress line on stderr (0: never)")
}

func (f *benchFlags) check() error {
	if f.n < 1 {
		return cmdkit.Usagef("--n must be at least 1, not %d", f.n)
	}
	if f.concurrency < 1 || f.concurrency > 10000 {
		return cmdkit.Usagef("--concurrency must be between 1 and 10000, not %d", f.concurrency)
	}
	if f.progress < 0 {
		return cmdkit.Usagef("--progress must not be negative")
	}
	if f.timeout < 0 {
		return cmdkit.Usagef("--timeout must not be negative")
	}
	return nil
}

func (c *cmds) newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench [submit|start|fill|query|failover]",
		Short: "Measure a server: durable submissions per second, job starts per second",
		Long: `Load tools that measure a running Corral server over its HTTP API, the way any
client sees it. They use the same server address and token as the other
commands (--server, --token, $CORRAL_SERVER, $CORRAL_TOKEN, the client config).
Both stop the scheduling loop while they submit, which needs an admin token.
See docs/benchmarks.md for figures and how to reproduce them.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(c.newBenchSubmitCmd(), c.newBenchStartCmd(), c.newBenchFillCmd(), c.newBenchQueryCmd(), c.newBenchFailoverCmd()) // benchfill.go, benchquery.go, benchfailover.go
	return cmd
}

func (c *cmds) newBenchSubmitCmd() *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "submit [--n N] [--concurrency C] [--hold] [--cleanup]",
		Short: "Measure durable submissions: throughput and latency of POST /queue/submit",
		Long: `Submit N jobs (command "true", 1 GPU) from C concurrent workers over
keep-alive connections, each with its own Idempotency-Key, and report the
throughput (acknowledged submissions per second over the whole run), the
latency of acknowledged submissions (p50, p95, p99, max), and the errors by
HTTP status. Every acknowledged submission is durable: the server answers
once the job is committed to its store.

--hold (the default) stops the orchestrator (POST /orchestrator/stop) before
submitting and starts it again afterwards, so that nothing starts while the
tool measures: the figure is the durable-submit path alone. --cleanup (the
default) cancels the submitted jobs that are still queued before the
orchestrator starts again, so that the cluster is left as it was. Both need
an admin token. --hold=false submits with scheduling on, measuring submission
under a running scheduler.

-o json prints one object: n, concurrency, hold, submitted, errors,
errors_by_status, wall_s, submissions_per_s, latency_p50_ms, latency_p95_ms,
latency_p99_ms, latency_max_ms, latency_mean_ms, canceled.`,
		Example: `  corral bench submit --server 127.0.0.1:7450 --n 100000 --concurrency 64
  corral bench submit --n 10000 -o json`,
		Args: cmdkit.ArgsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			cl, err := c.benchClient(f.concurrency)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := c.benchSubmit(ctx, cl, f)
			if err != nil {
				return err
			}
			return c.Emit(res, res.table)
		},
	}
	f.register(cmd, 10000)
	cmd.Flags().BoolVar(&f.hold, "hold", true, "stop the orchestrator while submitting, and start it again afterwards (needs an admin token)")
	cmd.Flags().BoolVar(&f.cleanup, "cleanup", true, "cancel the submitted jobs that are still queued once measured")
	return cmd
}

func (c *cmds) newBenchStartCmd() *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "start [--n N] [--concurrency C] [--timeout D]",
		Short: "Measure job starts per second (command \"true\", 1 GPU each)",
		Long: `Stop the orchestrator, submit N jobs (command "true", 1 GPU each), start the
orchestrator, and wait until every one of them has ended. Reports job starts
per second (jobs started / time from starting the orchestrator to the last
start) and completions per second (likewise to the last end), from the
jobs' started_at and finished_at. Meant for an otherwise idle server with
simulated GPUs (corral up --simulate-gpus 8): the progress line counts the
server's queued and running jobs, and the start time is taken on this
machine's clock, so run it on the server's machine. Needs an admin token;
the orchestrator is left running or stopped as it was found. Beside it, in
the same run, the tool measures its baseline: bare fork, exec and wait of
/bin/sh -c true, as many at a time as the server has GPUs, for about a
second (the most starts per second this machine allows now).

-o json prints one object: n, concurrency, gpus, simulated, submitted,
errors, errors_by_status, submit_wall_s, submissions_per_s, started,
completed, failed, first_start_s, last_start_s, last_finish_s, starts_per_s,
completions_per_s, wall_s, baseline_spawns_per_s.`,
		Example: `  corral up --simulate-gpus 8 &
  corral bench start --n 10000`,
		Args: cmdkit.ArgsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if f.n > benchMaxStartJobs {
				return cmdkit.Usagef("--n must be at most %d for bench start, not %d", benchMaxStartJobs, f.n)
			}
			cl, err := c.benchClient(f.concurrency)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := c.benchStart(ctx, cl, f)
			if err != nil {
				return err
			}
			return c.Emit(res, res.table)
		},
	}
	f.register(cmd, 1000)
	cmdkit.DurationVar(cmd.Flags(), &f.timeout, "timeout", 10*time.Minute, "give up when the jobs have not all ended after this long")
	return cmd
}

// benchClient is the CLI's client (same server and token resolution) with a
// transport that keeps a connection per worker alive.
func (c *cmds) benchClient(concurrency int) (*client.Client, error) {
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        concurrency + 8,
		MaxIdleConnsPerHost: concurrency + 8,
		IdleConnTimeout:     90 * time.Second,
	}
	return c.Client(client.WithHTTPClient(&http.Client{Transport: tr}), client.WithUserAgent("corral-bench"))
}

// submitRun is the outcome of submitting N jobs.
type submitRun struct {
	ids       []string        // by submission index; "" where it failed
	latencies []time.Duration // of acknowledged submissions
	errs      map[string]int  // by HTTP status, or "unreachable", "other"
	wall      time.Duration
}

func (r *submitRun) ok() int { return len(r.latencies) }

func (r *submitRun) failed() int {
	n := 0
	for _, v := range r.errs {
		n += v
	}
	return n
}

// errorClass names an error for errors_by_status.
func errorClass(err error) string {
	var ae *api.Error
	switch {
	case errors.As(err, &ae):
		return strconv.Itoa(ae.Status)
	case errors.Is(err, client.ErrUnreachable):
		return "unreachable"
	}
	return "other"
}

// fatalStatus reports whether an answer will not get better by retrying
// (wrong token, wrong server, a full queue while the run holds it), so the
// run stops at once.
func fatalStatus(err error) bool {
	var ae *api.Error
	return errors.As(err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden ||
		ae.Status == http.StatusNotFound || ae.Code == "queue_full")
}

// explainFatal adds what to do to the error that stopped a run.
func explainFatal(err error, n int) error {
	var ae *api.Error
	if errors.As(err, &ae) && ae.Code == "queue_full" {
		return fmt.Errorf("%s: the server's --max-queue-size (or $CORRAL_MAX_QUEUE_SIZE) is below --n %d; start it with --max-queue-size 0 (no limit) or ask for fewer", ae.Message, n)
	}
	return err
}

// newRunID returns a random tag that names this run's jobs and keys.
func newRunID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// submitAll submits n jobs from concurrency workers. It returns early, with
// the error, when the server refuses the token or the route.
func (c *cmds) submitAll(ctx context.Context, cl *client.Client, f *benchFlags, label string) (*submitRun, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	runID := newRunID()
	one := 1
	run := &submitRun{ids: make([]string, f.n), errs: map[string]int{}}
	lat := make([]time.Duration, f.n) // by index, where ids[i] is set
	var next, done, failed atomic.Int64
	var mu sync.Mutex // guards run.errs
	began := time.Now()
	stopProgress := c.progress(f.progress, func(elapsed time.Duration, prev, now int64) string {
		return fmt.Sprintf("%s: %d/%d submitted, %.0f/s, %d errors", label, now, f.n, rate(now-prev, elapsed), failed.Load())
	}, &done)
	var wg sync.WaitGroup
	for w := 0; w < f.concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= f.n || ctx.Err() != nil {
					return
				}
				req := api.SubmitRequest{Name: fmt.Sprintf("bench-%s-%d", runID, i), Command: "true", GPUCount: &one}
				t := time.Now()
				job, err := cl.Submit(ctx, req, fmt.Sprintf("bench-%s-%d", runID, i))
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					failed.Add(1)
					mu.Lock()
					run.errs[errorClass(err)]++
					mu.Unlock()
					if fatalStatus(err) {
						cancel(err)
						return
					}
					continue
				}
				lat[i] = time.Since(t)
				run.ids[i] = job.ID
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	run.wall = time.Since(began)
	stopProgress()
	for i, d := range lat {
		if run.ids[i] != "" {
			run.latencies = append(run.latencies, d)
		}
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return run, explainFatal(err, f.n)
	}
	if err := ctx.Err(); err != nil {
		return run, fmt.Errorf("interrupted after %d submissions: %w", run.ok(), err)
	}
	return run, nil
}

// progress prints line(elapsed since the last line, last count, count) on
// stderr every interval until the returned function is called, which
// prints a last line.
func (c *cmds) progress(interval time.Duration, line func(time.Duration, int64, int64) string, count *atomic.Int64) func() {
	if interval <= 0 {
		return func() {}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		last, prev := time.Now(), count.Load()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				n := count.Load()
				fmt.Fprintln(c.Stderr, line(now.Sub(last), prev, n))
				last, prev = now, n
			}
		}
	}()
	return func() {
		close(stop)
		<-done
	}
}

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// holdOrchestrator stops the scheduling loop when it runs and returns a
// function that starts it again. When it was stopped already, there is
// nothing to undo.
func (c *cmds) holdOrchestrator(ctx context.Context, cl *client.Client, why string) (wasRunning bool, resume func(), err error) {
	st, err := cl.OrchestratorStatus(ctx)
	if err != nil {
		return false, nil, err
	}
	if !st.Running {
		return false, func() {}, nil
	}
	if _, err := cl.StopOrchestrator(ctx); err != nil {
		// describe keeps only an API error's own message: name the flag here.
		return true, nil, fmt.Errorf("%s: stopping the orchestrator: %s", why, c.Describe(err))
	}
	return true, func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := cl.StartOrchestrator(ctx); err != nil {
			fmt.Fprintf(c.Stderr, "corral: warning: the orchestrator could not be started again (run: corral orchestrator start): %s\n", c.Describe(err))
		}
	}, nil
}

// submitResult is bench submit's report.
type submitResult struct {
	Server         string         `json:"server"`
	N              int            `json:"n"`
	Concurrency    int            `json:"concurrency"`
	Hold           bool           `json:"hold"`
	Submitted      int            `json:"submitted"`
	Errors         int            `json:"errors"`
	ErrorsByStatus map[string]int `json:"errors_by_status"`
	WallS          float64        `json:"wall_s"`
	PerS           float64        `json:"submissions_per_s"`
	P50MS          float64        `json:"latency_p50_ms"`
	P95MS          float64        `json:"latency_p95_ms"`
	P99MS          float64        `json:"latency_p99_ms"`
	MaxMS          float64        `json:"latency_max_ms"`
	MeanMS         float64        `json:"latency_mean_ms"`
	Canceled       int            `json:"canceled"`
}

func (c *cmds) benchSubmit(ctx context.Context, cl *client.Client, f *benchFlags) (*submitResult, error) {
	resume := func() {}
	if f.hold {
		_, r, err := c.holdOrchestrator(ctx, cl, "--hold (pass --hold=false to submit with scheduling on)")
		if err != nil {
			return nil, err
		}
		resume = r
	}
	defer resume()
	run, err := c.submitAll(ctx, cl, f, "submit")
	if err != nil {
		if run != nil && f.cleanup {
			c.cancelAll(context.WithoutCancel(ctx), cl, run.ids, f.concurrency)
		}
		return nil, err
	}
	res := &submitResult{Server: cl.BaseURL(), N: f.n, Concurrency: f.concurrency, Hold: f.hold,
		Submitted: run.ok(), Errors: run.failed(), ErrorsByStatus: run.errs,
		WallS: run.wall.Seconds(), PerS: rate(int64(run.ok()), run.wall)}
	res.P50MS, res.P95MS, res.P99MS, res.MaxMS, res.MeanMS = latencyMS(run.latencies)
	if f.cleanup {
		res.Canceled = c.cancelAll(ctx, cl, run.ids, f.concurrency)
	}
	return res, nil
}

// cancelAll cancels the given jobs that are still queued and returns how
// many it canceled. Jobs that already ended (409) are left alone.
func (c *cmds) cancelAll(ctx context.Context, cl *client.Client, ids []string, concurrency int) int {
	var next, canceled atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(ids) || ctx.Err() != nil {
					return
				}
				if ids[i] == "" {
					continue
				}
				if _, err := cl.Cancel(ctx, ids[i], 0); err == nil {
					canceled.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return int(canceled.Load())
}

// latencyMS returns p50, p95, p99, max and mean of ds in milliseconds
// (nearest rank); zeros when ds is empty. ds is sorted in place.
func latencyMS(ds []time.Duration) (p50, p95, p99, maxv, mean float64) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	at := func(p float64) float64 {
		i := int(float64(len(ds))*p+0.999999) - 1
		return ms(ds[max(0, min(i, len(ds)-1))])
	}
	return at(0.50), at(0.95), at(0.99), ms(ds[len(ds)-1]), ms(sum / time.Duration(len(ds)))
}

func (r *submitResult) table(w io.Writer) error {
	held := "scheduling on"
	if r.Hold {
		held = "orchestrator held"
	}
	fmt.Fprintf(w, "bench submit: %d jobs from %d workers to %s (%s)\n", r.N, r.Concurrency, r.Server, held)
	t := cmdkit.NewTable(w)
	t.Row("submitted", strconv.Itoa(r.Submitted))
	t.Row("errors", fmtErrors(r.Errors, r.ErrorsByStatus))
	t.Row("wall", fmt.Sprintf("%.2fs", r.WallS))
	t.Row("throughput", fmt.Sprintf("%.0f submissions/s", r.PerS))
	t.Row("latency", fmt.Sprintf("p50 %.2fms  p95 %.2fms  p99 %.2fms  max %.2fms  mean %.2fms", r.P50MS, r.P95MS, r.P99MS, r.MaxMS, r.MeanMS))
	if r.Canceled > 0 {
		t.Row("cleanup", fmt.Sprintf("%d queued jobs canceled", r.Canceled))
	}
	return t.Flush()
}

// fmtErrors writes an error count with its breakdown: "3 (503: 2, unreachable: 1)".
func fmtErrors(n int, by map[string]int) string {
	if n == 0 {
		return "0"
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, by[k])
	}
	return fmt.Sprintf("%d (%s)", n, strings.Join(parts, ", "))
}
