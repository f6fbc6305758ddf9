package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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

// failoverFlags are bench failover's.
type failoverFlags struct {
	store       string
	servers     int
	kills       int
	rate        float64
	concurrency int
	pause       time.Duration
	warmup      time.Duration
	gpus        int
	runFor      time.Duration
	dir         string
}

// killRound is one kill of the leader.
type killRound struct {
	Killed      string  `json:"killed"`
	NewLeader   string  `json:"new_leader"`
	LeaderS     float64 `json:"new_leader_s"`   // kill to a /healthz naming a new leader
	FirstAckS   float64 `json:"first_ack_s"`    // kill to the first acknowledged submission begun after it
	AckedDuring int     `json:"acked_in_round"` // acknowledged between this kill and the next
}

// failoverResult is bench failover's report.
type failoverResult struct {
	Servers       int            `json:"servers"`
	Kills         []killRound    `json:"kills"`
	TargetRate    float64        `json:"target_rate"`
	BaselineRate  float64        `json:"baseline_rate"` // acknowledged/s over the warm-up, before any kill
	Rate          float64        `json:"rate"`          // acknowledged/s over the whole run
	Acked         int            `json:"acked"`
	Failed        int            `json:"failed"` // submissions that got no acknowledgement (never retried)
	FailedBy      map[string]int `json:"failed_by,omitempty"`
	Lost          int            `json:"lost"` // acknowledged, not in the store afterwards
	Duplicated    int            `json:"duplicated"`
	Runs          int            `json:"runs"`         // job processes that started
	RanTwice      int            `json:"ran_twice"`    // a job's attempt started more than once
	GPUOverlaps   int            `json:"gpu_overlaps"` // two jobs on one GPU at once
	MaxLeaderS    float64        `json:"max_new_leader_s"`
	MaxFirstAckS  float64        `json:"max_first_ack_s"`
	WallS         float64        `json:"wall_s"`
	ServerLogsDir string         `json:"logs_dir"`
}

func (r *failoverResult) ok() bool {
	return r.Lost == 0 && r.Duplicated == 0 && r.RanTwice == 0 && r.GPUOverlaps == 0 && len(r.Kills) > 0
}

func (r *failoverResult) table(w io.Writer) error {
	t := cmdkit.NewTable(w, "KILL", "KILLED", "NEW LEADER", "LEADER AFTER", "FIRST ACK AFTER", "ACKED")
	for i, k := range r.Kills {
		t.Row(strconv.Itoa(i+1), k.Killed, k.NewLeader, fmt.Sprintf("%.2fs", k.LeaderS), fmt.Sprintf("%.2fs", k.FirstAckS), strconv.Itoa(k.AckedDuring))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "submissions: target %.0f/s, %.0f/s before the first kill (baseline), %.0f/s over the run; %d acknowledged, %d not\n",
		r.TargetRate, r.BaselineRate, r.Rate, r.Acked, r.Failed)
	if len(r.FailedBy) > 0 {
		fmt.Fprintf(w, "not acknowledged, by reason: %v\n", r.FailedBy)
	}
	fmt.Fprintf(w, "fail-over: longest %.2fs to a new leader, %.2fs to the first acknowledgement\n", r.MaxLeaderS, r.MaxFirstAckS)
	fmt.Fprintf(w, "checks: %d acknowledged jobs lost, %d duplicated, %d of %d job runs twice, %d GPU overlaps\n",
		r.Lost, r.Duplicated, r.RanTwice, r.Runs, r.GPUOverlaps)
	fmt.Fprintf(w, "logs: %s\n", r.ServerLogsDir)
	return nil
}

func (c *cmds) newBenchFailoverCmd() *cobra.Command {
	f := &failoverFlags{}
	cmd := &cobra.Command{
		Use:   "failover --store postgres://... [--servers 3] [--kills 10] [--rate 1000]",
		Short: "Kill the leader of servers sharing PostgreSQL under submission load; count what is lost",
		Long: `Start --servers corral server processes on one PostgreSQL database (each its
own data dir and port, on 127.0.0.1) and a corral agent with --gpus simulated
GPUs, all given every server's address. Submit at --rate per second from
--concurrency workers (each submission with its own Idempotency-Key, through a
client that knows every server), and every --pause kill -9 the leader (the one
whose /healthz says so), --kills times, starting it again at once (it comes
back as a follower).

For each kill it reports how long until a /healthz names a new leader and
until the first submission begun after the kill is acknowledged. Then it
checks, through the leader: every acknowledged job is in the store (lost),
no job name twice (duplicated), no job attempt started twice (each job's
command appends its start and end to a log, with its GPUs), and no GPU held
by two jobs at once. It exits 1 when a check fails.

Use a database of its own: it is written to (and left as it is at the end).`,
		Example: `  corral bench failover --store postgres://corral@127.0.0.1:5432/bench --kills 10 --rate 1000`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !strings.HasPrefix(f.store, "postgres://") && !strings.HasPrefix(f.store, "postgresql://") {
				return cmdkit.Usagef("--store: want a postgres:// URL (fail-over needs a shared database)")
			}
			if f.servers < 2 || f.kills < 1 || f.rate <= 0 || f.concurrency < 1 || f.gpus < 1 || f.pause <= 0 || f.warmup <= 0 {
				return cmdkit.Usagef("--servers must be at least 2; --kills, --rate, --concurrency, --gpus, --pause and --warmup positive")
			}
			res, err := c.benchFailover(cmd.Context(), f)
			if err != nil {
				return err
			}
			if err := c.Emit(res, res.table); err != nil {
				return err
			}
			if !res.ok() {
				return errors.New("bench failover: a check failed (see above)")
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.store, "store", "", "the PostgreSQL database the servers share (postgres://...)")
	fl.IntVar(&f.servers, "servers", 3, "how many servers")
	fl.IntVar(&f.kills, "kills", 10, "how many times the leader is killed")
	fl.Float64Var(&f.rate, "rate", 1000, "submissions per second to aim at")
	fl.IntVar(&f.concurrency, "concurrency", 64, "concurrent submitting workers")
	cmdkit.DurationVar(fl, &f.pause, "pause", 15*time.Second, "time from a new leader to the next kill")
	cmdkit.DurationVar(fl, &f.warmup, "warmup", 5*time.Second, "submitting before the first kill (the baseline rate)")
	fl.IntVar(&f.gpus, "gpus", 8, "simulated GPUs of the agent")
	cmdkit.DurationVar(fl, &f.runFor, "job-time", 200*time.Millisecond, "how long each job runs")
	fl.StringVar(&f.dir, "dir", "", "where the servers' data dirs and logs go (default: a new temporary directory)")
	return cmd
}

// fleetProc is one server or agent process of the bench.
type fleetProc struct {
	name, url string
	args, env []string
	log       string
	cmd       *exec.Cmd
	done      chan struct{}
}

func (p *fleetProc) start() error {
	out, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	p.cmd = exec.Command(self, p.args...)
	p.cmd.Env = append(os.Environ(), p.env...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.done = make(chan struct{})
	go func() { p.cmd.Wait(); out.Close(); close(p.done) }()
	return nil
}

func (p *fleetProc) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

func (p *fleetProc) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.kill()
	}
}

// role asks a server's /healthz for its role.
func role(ctx context.Context, url string) string {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/healthz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var h struct{ Role string }
	json.NewDecoder(resp.Body).Decode(&h)
	return h.Role
}

// leaderOf waits until one of servers says it leads (other than not).
func leaderOf(ctx context.Context, servers []*fleetProc, not *fleetProc, within time.Duration) (*fleetProc, error) {
	deadline := time.Now().Add(within)
	for {
		for _, s := range servers {
			if s != not && role(ctx, s.url) == "leader" {
				return s, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("no server led within %s", within)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (c *cmds) benchFailover(ctx context.Context, f *failoverFlags) (*failoverResult, error) {
	dir := f.dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "corral-failover-"); err != nil {
			return nil, err
		}
	}
	admin, join := "bench"+randomHex(16), "join"+randomHex(16)
	runLog := filepath.Join(dir, "runs.log")
	var servers []*fleetProc
	var addrs []string
	for i := range f.servers {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		url := "http://" + addr
		name := fmt.Sprintf("server-%d", i+1)
		servers = append(servers, &fleetProc{name: name, url: url, log: filepath.Join(dir, name+".log"),
			args: []string{"server", "--store", f.store, "--data-dir", filepath.Join(dir, name), "--listen", addr, "--advertise", url, "--node-ttl", "60s"},
			env:  []string{"CORRAL_ADMIN_TOKEN=" + admin, "CORRAL_JOIN_TOKEN=" + join}})
		addrs = append(addrs, url)
	}
	all := strings.Join(addrs, ",")
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	for _, s := range servers {
		if err := s.start(); err != nil {
			return nil, err
		}
	}
	leader, err := leaderOf(ctx, servers, nil, 60*time.Second)
	if err != nil {
		return nil, err
	}
	agent := &fleetProc{name: "agent", log: filepath.Join(dir, "agent.log"),
		args: []string{"agent", "--server", all, "--simulate-gpus", strconv.Itoa(f.gpus), "--data-dir", filepath.Join(dir, "agent"), "--node-name", "bench-node", "--run-as", "agent"},
		env:  []string{"CORRAL_JOIN_TOKEN=" + join}}
	if err := agent.start(); err != nil {
		return nil, err
	}
	defer agent.stop()
	fmt.Fprintf(c.Stderr, "bench failover: %d servers in %s, %s leads\n", len(servers), dir, leader.url)

	cl := client.New(all, client.WithToken(admin), client.WithUserAgent("corral-bench"), client.WithFailoverWait(60*time.Second),
		client.WithHTTPClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: f.concurrency + 8, DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}}))
	// The agent must be up before jobs can be placed: wait for its GPUs.
	deadline := time.Now().Add(60 * time.Second)
	for {
		cs, err := cl.Cluster(ctx)
		if err == nil && cs.TotalGPUs >= f.gpus {
			break
		}
		select {
		case <-agent.done:
			return nil, fmt.Errorf("the agent exited (see %s)", agent.log)
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the agent did not register its GPUs within 60s (see %s)", agent.log)
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}

	// The load: tickets at --rate, taken by --concurrency workers.
	type ack struct {
		id    string
		begun time.Time
		at    time.Time
	}
	var (
		mu     sync.Mutex
		acks   []ack
		failed atomic.Int64
		whyMu  sync.Mutex
		why    = map[string]int{}
	)
	run := randomHex(4)
	cmdText := fmt.Sprintf(`echo "s $CORRAL_JOB_ID $CORRAL_ATTEMPT $CORRAL_NODE_ID $CUDA_VISIBLE_DEVICES $(date +%%s%%N)" >> %s; sleep %.3f; echo "e $CORRAL_JOB_ID $CORRAL_ATTEMPT $CORRAL_NODE_ID $CUDA_VISIBLE_DEVICES $(date +%%s%%N)" >> %s`,
		runLog, f.runFor.Seconds(), runLog)
	loadCtx, stopLoad := context.WithCancel(ctx)
	tickets := make(chan int, f.concurrency)
	var wg sync.WaitGroup
	for range f.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			one := 1
			for i := range tickets {
				begun := time.Now()
				name := fmt.Sprintf("fo-%s-%d", run, i)
				j, err := cl.Submit(loadCtx, api.SubmitRequest{Name: name, Command: cmdText, GPUCount: &one}, name)
				if err != nil {
					if loadCtx.Err() == nil {
						failed.Add(1)
						whyMu.Lock()
						why[failReason(err)]++
						whyMu.Unlock()
					}
					continue
				}
				mu.Lock()
				acks = append(acks, ack{id: j.ID, begun: begun, at: time.Now()})
				mu.Unlock()
			}
		}()
	}
	go func() {
		defer close(tickets)
		// Each tick offers the tickets due by the clock since the start,
		// not a fixed number per tick: a ticker delivers somewhat fewer
		// ticks than asked (at 1 ms, about 975 a second on a 16-core
		// machine), which capped the load under --rate.
		every := time.Duration(float64(time.Second) / f.rate)
		t := time.NewTicker(max(every, time.Millisecond))
		defer t.Stop()
		begin, offered, i := time.Now(), 0, 0
		for {
			select {
			case <-loadCtx.Done():
				return
			case now := <-t.C:
				for due := int(now.Sub(begin).Seconds() * f.rate); offered < due; offered++ {
					select {
					case tickets <- i:
						i++
					default: // the workers are behind: the rate is not reached
					}
				}
			}
		}
	}()
	acked := func() int { mu.Lock(); defer mu.Unlock(); return len(acks) }
	firstAckAfter := func(t0 time.Time) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range acks {
			if a.begun.After(t0) {
				return a.at, true
			}
		}
		return time.Time{}, false
	}

	start := time.Now()
	res := &failoverResult{Servers: f.servers, TargetRate: f.rate, ServerLogsDir: dir}
	time.Sleep(f.warmup) // the baseline: submitting with no kill
	res.BaselineRate = float64(acked()) / time.Since(start).Seconds()
	for k := range f.kills {
		if ctx.Err() != nil {
			break
		}
		before := acked()
		t0 := time.Now()
		leader.kill()
		next, err := leaderOf(ctx, servers, leader, 60*time.Second)
		if err != nil {
			stopLoad()
			wg.Wait()
			return nil, fmt.Errorf("kill %d: %w", k+1, err)
		}
		round := killRound{Killed: leader.name, NewLeader: next.name, LeaderS: time.Since(t0).Seconds()}
		if err := leader.start(); err != nil { // back, as a follower
			stopLoad()
			wg.Wait()
			return nil, err
		}
		fmt.Fprintf(c.Stderr, "kill %d: %s killed, %s leads after %.2fs\n", k+1, leader.name, next.name, round.LeaderS)
		leader = next
		time.Sleep(f.pause)
		if at, ok := firstAckAfter(t0); ok {
			round.FirstAckS = at.Sub(t0).Seconds()
		} else {
			round.FirstAckS = -1
		}
		round.AckedDuring = acked() - before
		res.Kills = append(res.Kills, round)
		res.MaxLeaderS = max(res.MaxLeaderS, round.LeaderS)
		res.MaxFirstAckS = max(res.MaxFirstAckS, round.FirstAckS)
	}
	stopLoad()
	wg.Wait()
	res.WallS = time.Since(start).Seconds()
	res.Acked, res.Failed, res.FailedBy = len(acks), int(failed.Load()), why
	res.Rate = float64(res.Acked) / res.WallS

	// The checks, through the leader.
	checkCtx := context.WithoutCancel(ctx)
	for _, a := range acks {
		if _, err := cl.Job(checkCtx, a.id); err != nil {
			if errors.Is(err, api.ErrNotFound) {
				res.Lost++
				continue
			}
			return nil, fmt.Errorf("check job %s: %w", a.id, err)
		}
	}
	names := map[string]int{}
	f2 := client.JobFilter{Limit: 10000}
	for {
		l, err := cl.Jobs(checkCtx, f2)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		for _, j := range l.Jobs {
			if strings.HasPrefix(j.Name, "fo-"+run+"-") {
				names[j.Name]++
			}
		}
		if l.NextCursor == "" {
			break
		}
		f2.Cursor = l.NextCursor
	}
	for _, n := range names {
		if n > 1 {
			res.Duplicated += n - 1
		}
	}
	res.Runs, res.RanTwice, res.GPUOverlaps, err = checkRuns(runLog)
	return res, err
}

// checkRuns reads the jobs' run log: how many attempts started, how many
// of them started more than once, and how many times a GPU of a node was
// held by two jobs at once (an attempt from its start line to its end
// line; one with no end line, killed or still running, counts to the end).
func checkRuns(path string) (runs, twice, overlaps int, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, 0, nil
	}
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.Close()
	type span struct {
		job        string
		start, end int64
	}
	starts := map[string]int{}
	spans := map[string]*span{}  // by job and attempt
	gpus := map[string][]*span{} // by node and GPU
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 6 {
			continue
		}
		kind, job, attempt, node, devs := fs[0], fs[1], fs[2], fs[3], fs[4]
		ns, _ := strconv.ParseInt(fs[5], 10, 64)
		key := job + "/" + attempt
		switch kind {
		case "s":
			starts[key]++
			s := &span{job: job, start: ns, end: 1<<63 - 1}
			spans[key] = s
			for _, g := range strings.Split(devs, ",") {
				gpus[node+"/"+g] = append(gpus[node+"/"+g], s)
			}
		case "e":
			if s := spans[key]; s != nil {
				s.end = ns
			}
		}
	}
	for _, n := range starts {
		runs++
		if n > 1 {
			twice++
		}
	}
	for _, ss := range gpus {
		sort.Slice(ss, func(i, j int) bool { return ss[i].start < ss[j].start })
		for i := 1; i < len(ss); i++ {
			if ss[i].start < ss[i-1].end && ss[i].job != ss[i-1].job {
				overlaps++
			}
		}
	}
	return runs, twice, overlaps, sc.Err()
}

// failReason classes a failed submission for the report.
func failReason(err error) string {
	var ae *api.Error
	switch {
	case errors.As(err, &ae):
		return strconv.Itoa(ae.Status) + " " + ae.Code
	case errors.Is(err, client.ErrUnreachable):
		return "unreachable"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "other: " + err.Error()
}
