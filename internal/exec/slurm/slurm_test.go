package slurm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

var errUnknown = errors.New("exit status 1: slurm_load_jobs error: Invalid job id specified")

func newTestExec(t *testing.T, f *fakeRunner, book NodeBook, partition string) (*Executor, *updates) {
	t.Helper()
	u := &updates{}
	cfg := Config{Runner: f, Sink: u.sink, ScriptDir: t.TempDir(), Partition: partition, Grace: 5 * time.Second,
		Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }}
	if book != nil {
		cfg.Book = book
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e, u
}

func task(t *testing.T, job string, nodes ...string) exec.Task {
	dir := t.TempDir()
	tk := exec.Task{JobID: job, Command: "echo hi", LogPath: filepath.Join(dir, "0.log"), NoticePath: filepath.Join(dir, "0.preempt"),
		Env: map[string]string{"A": "it's", "1BAD": "x"}}
	for i, n := range nodes {
		tk.Ranks = append(tk.Ranks, exec.Rank{NodeID: n, GPUs: []int{i, i + 1}})
	}
	tk.NodeID, tk.GPUs = tk.Ranks[0].NodeID, tk.Ranks[0].GPUs
	return tk
}

func TestParseNodes(t *testing.T) {
	out, err := os.ReadFile("testdata/nodes.txt")
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := ParseNodes(out)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		gpus          int
		down, drained bool
		addr          string
	}
	wants := map[string]want{
		"corral-n1": {2, false, false, "127.0.0.1"},
		"corral-n2": {2, false, true, "127.0.0.1"},
		"gpu3":      {6, true, false, "10.0.0.3"},
		"gpu4":      {2, false, true, "10.0.0.4"},
		"cpu1":      {0, false, false, "10.0.0.5"},
	}
	if len(nodes) != len(wants) {
		t.Fatalf("got %d nodes, want %d", len(nodes), len(wants))
	}
	for _, n := range nodes {
		w := wants[n.Name]
		if n.GPUCount() != w.gpus || n.Down() != w.down || n.Drained() != w.drained || n.Addr != w.addr {
			t.Errorf("%s: gpus %d down %v drained %v addr %s; want %+v", n.Name, n.GPUCount(), n.Down(), n.Drained(), n.Addr, w)
		}
	}
	reg := nodes[2].Registration("v")
	if reg.Labels["pool"] != "slurm" || len(reg.GPUs) != 6 || reg.GPUs[0].Model != "a100" || reg.GPUs[5].Model != "v100" || reg.GPUs[5].Index != 5 {
		t.Errorf("gpu3's registration: %+v", reg)
	}
}

func TestParseJobAnswers(t *testing.T) {
	out, err := os.ReadFile("testdata/job-failed.txt")
	if err != nil {
		t.Fatal(err)
	}
	j, err := ParseScontrolJob(out)
	if err != nil || j.State != "FAILED" || !j.HasExit || j.ExitCode != 143 || j.Signal != 0 {
		t.Errorf("scontrol: %+v %v", j, err)
	}
	j, err = ParseSacct([]byte("42|CANCELLED by 0|0:15\n"))
	if err != nil || j.State != "CANCELLED" || j.Signal != 15 {
		t.Errorf("sacct: %+v %v", j, err)
	}
	for in, want := range map[string]string{"17\n": "17", "18;cluster\n": "18", "sbatch: warning: x\n19\n": "19"} {
		if id, err := ParseJobID([]byte(in)); id != want || err != nil {
			t.Errorf("ParseJobID(%q) = %q, %v", in, id, err)
		}
	}
	if _, err := ParseJobID([]byte("sbatch: error: Batch job submission failed")); err == nil {
		t.Error("ParseJobID took an error message")
	}
}

func TestNodesRegisteredSeenDownAndCordoned(t *testing.T) {
	f := newFake()
	out, _ := os.ReadFile("testdata/nodes.txt")
	f.set("scontrol show -o node", string(out), nil)
	book := newBook()
	e, _ := newTestExec(t, f, book, "")
	e.PollOnce(context.Background())
	if len(book.registered) != 5 || book.seen["corral-n1"] != 1 || book.down["gpu3"] != 1 || book.seen["gpu3"] != 0 {
		t.Fatalf("registered %d, seen %v, down %v", len(book.registered), book.seen, book.down)
	}
	if want := []string{"corral-n2 cordon", "gpu4 cordon"}; !slices.Equal(book.actions, want) {
		t.Fatalf("actions %v, want %v", book.actions, want)
	}
	// Slurm resumes corral-n2: it is uncordoned, once; nothing is registered again.
	f.set("scontrol show -o node", strings.Replace(string(out), "IDLE+DRAIN", "IDLE", 1), nil)
	book.registered = map[string]api.AgentRegistration{}
	e.PollOnce(context.Background())
	e.PollOnce(context.Background())
	if want := []string{"corral-n2 cordon", "gpu4 cordon", "corral-n2 uncordon"}; !slices.Equal(book.actions, want) {
		t.Fatalf("actions %v, want %v", book.actions, want)
	}
	if len(book.registered) != 0 {
		t.Errorf("unchanged nodes registered again: %v", book.registered)
	}
}

func TestPartitionFiltersNodes(t *testing.T) {
	f := newFake()
	out, _ := os.ReadFile("testdata/nodes.txt")
	f.set("scontrol show -o node", string(out), nil)
	book := newBook()
	e, _ := newTestExec(t, f, book, "train")
	e.PollOnce(context.Background())
	if len(book.registered) != 2 || book.registered["gpu3"].NodeID == "" || book.registered["gpu4"].NodeID == "" {
		t.Errorf("registered %v, want gpu3 and gpu4", book.registered)
	}
}

func TestStartSubmitsOnePinnedSbatch(t *testing.T) {
	f := newFake()
	f.set("sbatch", "77\n", nil)
	e, _ := newTestExec(t, f, nil, "train")
	e.cfg.Account = "lab"
	tk := task(t, "j1", "n1", "n2")
	tk.TimeLimit = 90 * time.Second
	if err := e.Start(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background(), tk); err != nil { // idempotent
		t.Fatal(err)
	}
	calls := f.called("sbatch")
	if len(calls) != 1 {
		t.Fatalf("sbatch calls %v, want one", calls)
	}
	for _, want := range []string{"--parsable", "--job-name=corral-j1-a0", "--nodes=2", "--nodelist=n1,n2", "--ntasks-per-node=1",
		"--no-requeue", "--gres=gpu:2", "--partition=train", "--account=lab", "--time=3", "--signal=TERM@5", "--output=" + tk.LogPath} {
		if !strings.Contains(calls[0], " "+want) {
			t.Errorf("sbatch %q lacks %s", calls[0], want)
		}
	}
	body, err := os.ReadFile(filepath.Join(e.cfg.ScriptDir, "j1-0.sbatch"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"srun --quiet --nodes=2 --ntasks=2", "'n1') r=0 g='0,1'", "'n2') r=1 g='1,2'", `export A='it'\''s'`, `setsid "$sh" -c 'echo hi'`, "sh=/bin/bash"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("script lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(string(body), "1BAD") {
		t.Error("script exports a variable name the shell cannot take")
	}
}

func TestStartFailsWhenSbatchFails(t *testing.T) {
	f := newFake()
	f.set("sbatch", "", errors.New("sbatch: error: invalid partition"))
	e, u := newTestExec(t, f, nil, "")
	if err := e.Start(context.Background(), task(t, "j1", "n1")); err == nil || !strings.Contains(err.Error(), "invalid partition") {
		t.Fatalf("Start: %v", err)
	}
	f.set("squeue", "", nil)
	e.PollOnce(context.Background())
	if len(u.all()) != 0 {
		t.Errorf("updates after a failed start: %v", u.all())
	}
}

// TestStates drives one attempt through squeue's answers and what Slurm
// says once it forgets the job.
func TestStates(t *testing.T) {
	cases := map[string]struct {
		squeue   []string // one answer per poll, "" = not listed (unknown job)
		scontrol string   // once gone; "" = unknown
		exitFile string   // what the batch script left; "" = nothing
		want     exec.Update
	}{
		"completed":      {[]string{"PENDING", "RUNNING", "COMPLETING", "COMPLETED"}, "", "0", exec.Update{ExitCode: 0}},
		"exit code":      {[]string{"RUNNING", "FAILED"}, "", "3", exec.Update{ExitCode: 3}},
		"gone, file":     {[]string{"RUNNING", ""}, "", "4", exec.Update{ExitCode: 4}},
		"gone, scontrol": {[]string{"RUNNING", ""}, "JobId=5 JobState=FAILED ExitCode=2:0", "", exec.Update{ExitCode: 2}},
		"killed":         {[]string{"RUNNING", "CANCELLED"}, "", "", exec.Update{ExitCode: 137, Signal: "killed"}},
		"node fail":      {[]string{"RUNNING", "NODE_FAIL"}, "", "", exec.Update{ExitCode: -1, Lost: api.ReasonNodeLost}},
		"timeout":        {[]string{"RUNNING", "TIMEOUT"}, "", "143", exec.Update{ExitCode: 143, Signal: "terminated", TimedOut: true}},
		"oom":            {[]string{"RUNNING", "OUT_OF_MEMORY"}, "", "", exec.Update{ExitCode: 137, Signal: "killed", OOMKilled: true}},
		"preempted":      {[]string{"RUNNING", "PREEMPTED", "PREEMPTED", "FAILED"}, "", "143", exec.Update{ExitCode: 143, Signal: "terminated"}},
		"lost":           {[]string{"RUNNING", ""}, "", "", exec.Update{ExitCode: -1, Lost: api.ReasonLost}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFake()
			f.set("sbatch", "5\n", nil)
			f.set("sacct", "", errors.New("exit status 1: Slurm accounting storage is disabled"))
			if c.scontrol != "" {
				f.set("scontrol show -o job", c.scontrol, nil)
			} else {
				f.set("scontrol show -o job", "", errUnknown)
			}
			e, u := newTestExec(t, f, nil, "")
			tk := task(t, "j1", "n1")
			if err := e.Start(context.Background(), tk); err != nil {
				t.Fatal(err)
			}
			for i, st := range c.squeue {
				if i == len(c.squeue)-1 && c.exitFile != "" {
					os.WriteFile(tk.LogPath+".exit", []byte(c.exitFile+"\n"), 0o644)
				}
				if st == "" {
					f.set("squeue", "", errUnknown)
				} else {
					f.set("squeue", "5|"+st+"\n", nil)
				}
				e.PollOnce(context.Background())
				if i < len(c.squeue)-1 {
					for _, x := range u.all() {
						if x.Kind == exec.Exited {
							t.Fatalf("ended at %s (poll %d)", st, i)
						}
					}
				}
			}
			us := u.all()
			if len(us) == 0 || us[len(us)-1].Kind != exec.Exited {
				t.Fatalf("updates %+v: no Exited", us)
			}
			got := us[len(us)-1]
			if got.ExitCode != c.want.ExitCode || got.Signal != c.want.Signal || got.Lost != c.want.Lost || got.TimedOut != c.want.TimedOut || got.OOMKilled != c.want.OOMKilled {
				t.Errorf("Exited %+v, want %+v", got, c.want)
			}
			if c.want.Lost == "" && (us[0].Kind != exec.Started || us[0].PID != 5) {
				t.Errorf("first update %+v, want Started with the Slurm job id as pid", us[0])
			}
			e.PollOnce(context.Background())
			if n := len(u.all()); n != len(us) {
				t.Errorf("updates after the end: %v", u.all()[len(us):])
			}
		})
	}
}

func TestSlurmDownIsNotAnEnd(t *testing.T) {
	f := newFake()
	f.set("sbatch", "5\n", nil)
	f.set("squeue", "", errors.New("exit status 1: slurm_load_jobs error: Unable to contact slurm controller"))
	e, u := newTestExec(t, f, nil, "")
	if err := e.Start(context.Background(), task(t, "j1", "n1")); err != nil {
		t.Fatal(err)
	}
	e.PollOnce(context.Background())
	if len(u.all()) != 0 {
		t.Errorf("updates while the controller is down: %v", u.all())
	}
}

func TestStopSignalsThenCancels(t *testing.T) {
	f := newFake()
	f.set("sbatch", "5\n", nil)
	f.set("squeue", "5|RUNNING\n", nil)
	f.set("scancel", "", nil)
	e, _ := newTestExec(t, f, nil, "")
	ctx := context.Background()
	e.Start(ctx, task(t, "j1", "n1"))
	e.PollOnce(ctx)
	if err := e.Stop(ctx, "j1", 0, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := f.called("scancel"); !slices.Equal(got, []string{"scancel --batch --signal=TERM 5"}) {
		t.Fatalf("scancel calls %v", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(f.called("scancel")) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polls for the grace timer's scancel
	}
	if got := f.called("scancel"); !slices.Equal(got, []string{"scancel --batch --signal=TERM 5", "scancel 5"}) {
		t.Fatalf("scancel calls %v", got)
	}
	if err := e.Stop(ctx, "nope", 0, time.Second); err != nil {
		t.Errorf("Stop of an unknown attempt: %v", err)
	}
}

func TestStopOfAPendingJobCancelsAtOnce(t *testing.T) {
	f := newFake()
	f.set("sbatch", "5\n", nil)
	f.set("squeue", "5|PENDING\n", nil)
	f.set("scancel", "", nil)
	e, _ := newTestExec(t, f, nil, "")
	ctx := context.Background()
	e.Start(ctx, task(t, "j1", "n1"))
	e.PollOnce(ctx)
	e.Stop(ctx, "j1", 0, time.Hour)
	if got := f.called("scancel"); !slices.Equal(got, []string{"scancel 5"}) {
		t.Fatalf("scancel calls %v", got)
	}
}

func TestNoticeWritesTheFile(t *testing.T) {
	f := newFake()
	f.set("sbatch", "5\n", nil)
	e, _ := newTestExec(t, f, nil, "")
	tk := task(t, "j1", "n1")
	e.Start(context.Background(), tk)
	if err := e.Notice(context.Background(), "j1", 0, "preempted by j2"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(tk.NoticePath); string(b) != "preempted by j2\n" {
		t.Errorf("notice file %q", b)
	}
}

func TestAdopt(t *testing.T) {
	t.Run("running", func(t *testing.T) {
		f := newFake()
		f.set("squeue -h -t all --name=corral-j1-a0", "9|RUNNING\n", nil)
		f.set("squeue -h -t all -j", "9|RUNNING\n", nil)
		e, u := newTestExec(t, f, nil, "")
		if err := e.Adopt(context.Background(), task(t, "j1", "n1")); err != nil {
			t.Fatal(err)
		}
		if len(u.all()) != 0 || len(f.calls) != 0 {
			t.Fatalf("Adopt ran %v or reported %v: it only records (the orchestrator is not ready)", f.calls, u.all())
		}
		e.PollOnce(context.Background())
		if us := u.all(); len(us) != 1 || us[0].Kind != exec.Started || us[0].PID != 9 {
			t.Errorf("updates %+v, want Started pid 9", us)
		}
		if len(f.called("sbatch")) != 0 {
			t.Error("an adopted attempt was submitted again")
		}
	})
	t.Run("ended while the server was down", func(t *testing.T) {
		f := newFake()
		f.set("squeue", "", nil)
		e, u := newTestExec(t, f, nil, "")
		tk := task(t, "j1", "n1")
		os.WriteFile(tk.LogPath+".exit", []byte("6\n"), 0o644)
		e.Adopt(context.Background(), tk)
		e.PollOnce(context.Background())
		if us := u.all(); len(us) == 0 || us[len(us)-1].Kind != exec.Exited || us[len(us)-1].ExitCode != 6 || us[len(us)-1].Lost != "" {
			t.Errorf("updates %+v, want Exited 6", us)
		}
	})
	t.Run("lost", func(t *testing.T) {
		f := newFake()
		f.set("squeue", "", nil)
		e, u := newTestExec(t, f, nil, "")
		e.Adopt(context.Background(), task(t, "j1", "n1"))
		e.PollOnce(context.Background())
		if us := u.all(); len(us) != 1 || us[0].Lost != api.ReasonLost {
			t.Errorf("updates %+v, want lost", us)
		}
	})
	t.Run("slurm down at the start", func(t *testing.T) {
		f := newFake()
		f.set("squeue", "", errors.New("exit status 1: Unable to contact slurm controller"))
		f.set("scancel", "", nil)
		e, u := newTestExec(t, f, nil, "")
		if err := e.Adopt(context.Background(), task(t, "j1", "n1")); err != nil {
			t.Fatalf("Adopt with Slurm down: %v (the server would not start)", err)
		}
		e.Stop(context.Background(), "j1", 0, 0) // a stop pending from before the restart
		e.PollOnce(context.Background())
		if len(u.all()) != 0 || len(f.called("scancel")) != 0 {
			t.Fatalf("updates %v, scancels %v while Slurm is down", u.all(), f.called("scancel"))
		}
		f.set("squeue -h -t all --name=corral-j1-a0", "9|RUNNING\n", nil)
		f.set("squeue -h -t all -j", "9|RUNNING\n", nil)
		e.PollOnce(context.Background())
		if us := u.all(); len(us) != 1 || us[0].Kind != exec.Started || us[0].PID != 9 {
			t.Errorf("updates %+v, want Started pid 9 once Slurm answers", us)
		}
		if got := f.called("scancel"); !slices.Equal(got, []string{"scancel 9"}) {
			t.Errorf("scancel calls %v: the stop asked while Slurm was down is carried out", got)
		}
	})
}

// A job with a container image is refused before anything reaches
// sbatch: the Slurm executor does not run images.
func TestStartRefusesImage(t *testing.T) {
	f := newFake()
	e, _ := newTestExec(t, f, nil, "")
	tk := task(t, "j1", "corral-n1")
	tk.Image = "localhost/corral-test:1"
	err := e.Start(context.Background(), tk)
	if err == nil || !strings.Contains(err.Error(), "does not run container images") {
		t.Fatalf("Start: %v, want a refusal naming images", err)
	}
	if calls := f.called("sbatch"); len(calls) > 0 {
		t.Fatalf("sbatch ran: %v", calls)
	}
}
