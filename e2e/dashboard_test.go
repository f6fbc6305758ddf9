package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/corral-sched/corral/internal/api"
)

// chromiumPath finds a Chromium to drive: $CORRAL_CHROMIUM, else the usual
// names on PATH (Debian's package installs /usr/bin/chromium).
func chromiumPath() string {
	if p := os.Getenv("CORRAL_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// screenshotDir is where the browser test saves its screenshots:
// $CORRAL_SCREENSHOT_DIR when set (kept), else the test's temp dir.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("CORRAL_SCREENSHOT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// browser starts headless Chromium for the test and returns its context.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		t.Skip("no chromium binary found (install Debian's chromium package, or set CORRAL_CHROMIUM); the dashboard browser test needs one")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // containers run as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1440, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium (%s): %v", path, err)
	}
	return ctx
}

// TestDashboardInBrowser opens the dashboard in real headless Chromium
// against a real `corral up` with simulated GPUs: the pages show the jobs
// and nodes the test made, and a job's end arrives without a reload.
func TestDashboardInBrowser(t *testing.T) {
	ctx := browser(t)
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "8:H100:80:pairs", "--node-name", "dash-node")
	waitFor(t, 30*time.Second, func() string { return "the node did not register" }, func() bool { return s.cluster().TotalGPUs == 8 })

	gate := filepath.Join(t.TempDir(), "gate")
	train := s.submit(map[string]any{"name": "train-llama", "user": "alice", "project": "nlp", "gpu_count": 2, "estimated_duration": "1h",
		"time_limit": "2:00:00", "time_limit_from": "#SBATCH", // as corral submit sends a script's #SBATCH -t
		"command": "echo epoch 1 loss 0.91; while [ ! -e " + shellQuote(gate) + " ]; do sleep 0.05; done; echo done"})
	eval := s.submit(map[string]any{"name": "eval-sweep", "user": "bob", "project": "vision", "gpu_count": 8, "priority": "low",
		"command": "sleep 60"})
	s.waitState(train.ID, api.StateRunning, 30*time.Second)
	dir := screenshotDir(t)
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		path := filepath.Join(dir, "dashboard-"+name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}

	// Signed out, the page asks for a token and shows nothing else.
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/#/cluster"),
		chromedp.WaitVisible(chromedp.CSS(`form[data-role=signin]`)),
	)
	if err != nil {
		t.Fatalf("sign-in page: %v", err)
	}
	shot("signin")

	// Cluster: the node, its NVLink pairs, and alice's job on two GPUs. The
	// link corral up prints names the user it signs in as and signs in
	// (a cookie session) only at the button; the address no longer holds
	// the token.
	err = chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/?token="+adminToken+"#/cluster"),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
	)
	if err != nil {
		t.Fatalf("sign-in link: %v", err)
	}
	if q := text(`[data-role=confirm-link] p`); !strings.Contains(q, "This link signs you in as admin") {
		t.Errorf("the sign-in link asks %q, want it to name the user it signs in as", q)
	}
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=who]`)),
		chromedp.WaitVisible(chromedp.CSS(`.node[data-node="dash-node"] .gpu[data-state="allocated"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.chart-box svg`)),
	)
	if err != nil {
		t.Fatalf("cluster page: %v", err)
	}
	if href, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`)); err != nil || strings.Contains(href, "token=") {
		t.Errorf("after sign-in the address is %q (%v); it must not keep the token", href, err)
	}
	if who := text(`[data-role=who]`); !strings.Contains(who, "admin") {
		t.Errorf("signed in as %q, want the admin", who)
	}
	allocated, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('.gpu[data-state="allocated"]').length`))
	if err != nil {
		t.Fatal(err)
	}
	node := strings.ToLower(text(`.node[data-node="dash-node"]`)) // as rendered: some labels are upper case
	if allocated != 2 || !strings.Contains(node, "alice") || !strings.Contains(node, "nvlink · gpus 0, 1") || !strings.Contains(node, "simulated") {
		t.Errorf("cluster page: %d allocated GPUs, node card:\n%s", allocated, node)
	}
	shot("cluster")

	// Queue: bob's 8-GPU job waits with its reason; alice's job runs.
	err = chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/#/queue"),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=queued] tr[data-job="`+eval.ID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=running] tr[data-job="`+train.ID+`"]`)),
	)
	if err != nil {
		t.Fatalf("queue page: %v", err)
	}
	if row := text(`[data-role=queued] tr[data-job="` + eval.ID + `"]`); !strings.Contains(row, "eval-sweep") || !strings.Contains(row, "bob") || !strings.Contains(row, "8") {
		t.Errorf("queued row: %q", row)
	}
	if row := text(`[data-role=running] tr[data-job="` + train.ID + `"]`); !strings.Contains(row, "train-llama") || !strings.Contains(row, "dash-node") {
		t.Errorf("running row: %q", row)
	}
	// A change to a queued job reaches its row live (a delta's upsert).
	s.mustJSON("PATCH", "/queue/"+eval.ID+"/priority", map[string]any{"priority": "high"}, 200, nil)
	err = chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`[data-role=queued] tr[data-job="`+eval.ID+`"] .prio-high`)))
	if err != nil {
		t.Fatalf("queue page: the new priority did not arrive: %v", err)
	}
	shot("queue")

	// What-if on bob's queued job (8 GPUs; alice's holds 2 for an hour):
	// with 6 it would start now, with 7 not before hers ends; nothing
	// changes.
	err = chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/#/jobs/"+eval.ID),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=whatif] [data-role=whatif-gpus]`)),
	)
	if err != nil {
		t.Fatalf("job page of a queued job: the what-if panel: %v", err)
	}
	for _, tc := range []struct{ gpus, want string }{{"6", "now (in the next cycle)"}, {"7", "in "}} {
		err = chromedp.Do(ctx,
			chromedp.SetValue(chromedp.CSS(`[data-role=whatif-gpus]`), tc.gpus),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-role=whatif-answer]').textContent = ''`),
			chromedp.Click(chromedp.CSS(`[data-act=whatif]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-role=whatif-when]`)),
		)
		if err != nil {
			t.Fatalf("what-if with %s GPUs: %v", tc.gpus, err)
		}
		if got := text(`[data-role=whatif-answer]`); !strings.Contains(got, "With "+tc.gpus+" GPUs") || !strings.Contains(text(`[data-role=whatif-when]`), tc.want) {
			t.Errorf("what-if with %s GPUs says %q, want %q", tc.gpus, got, tc.want)
		}
	}
	if j := s.job(eval.ID); j.GPUCount != 8 || j.State != api.StateQueued {
		t.Errorf("after what-if: %d GPUs, %s; want 8, queued", j.GPUCount, j.State)
	}
	shot("whatif")

	// Job: alice's job runs, with its log; it ends while the page stays
	// open, and the page shows it without a reload.
	err = chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/#/jobs/"+train.ID),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=state] .state-running`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('[data-role=log]').textContent.includes('epoch 1')`, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Evaluate[chromedp.Void](`window.__notReloaded = true`),
	)
	if err != nil {
		t.Fatalf("job page: %v", err)
	}
	if hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('[data-role=actions]').hidden`)); err != nil || hidden {
		t.Errorf("the admin does not see the running job's actions (hidden %v, %v)", hidden, err)
	}
	// The time limit and the estimate, each with where it came from
	// (time_limit_from, estimate_from).
	if v := text(`[data-role=time-limit]`); v != "2h 00m (#SBATCH)" {
		t.Errorf("job page: time limit %q, want \"2h 00m (#SBATCH)\"", v)
	}
	if v := text(`[data-role=estimate]`); v != "1h 00m (API)" {
		t.Errorf("job page: estimate %q, want \"1h 00m (API)\"", v)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`[data-role=state] .state-completed`)))
	if err != nil {
		t.Fatalf("job page: the end did not arrive: %v", err)
	}
	if kept, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__notReloaded === true`)); err != nil || !kept {
		t.Errorf("the job page was reloaded (%v); the state change should arrive live", err)
	}
	if ev := text(`[data-role=events]`); !strings.Contains(ev, "completed") || !strings.Contains(ev, "running") {
		t.Errorf("events timeline: %q", ev)
	}
	shot("job")

	// Bob's job starts on the freed GPUs: the queue page, open, follows.
	err = chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/#/queue"),
		chromedp.Evaluate[chromedp.Void](`window.__notReloaded = true`),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=running] tr[data-job="`+eval.ID+`"]`)),
	)
	if err != nil {
		t.Fatalf("queue page did not show eval-sweep starting: %v", err)
	}
	if kept, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__notReloaded === true`)); err != nil || !kept {
		t.Errorf("the queue page was reloaded (%v); the start should arrive live", err)
	}

	// A viewer sees the running job but not the actions it may not take.
	var viewer api.NewToken
	s.mustJSON("POST", "/auth/tokens", map[string]any{"user": "vic", "role": "viewer"}, 201, &viewer)
	// Signed in as the admin, the viewer's link asks before it switches:
	// opening it changes nothing.
	err = chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/?token="+viewer.Secret+"#/jobs/"+eval.ID),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
	)
	if err != nil {
		t.Fatalf("the viewer's sign-in link: %v", err)
	}
	if q := text(`[data-role=confirm-link] p`); !strings.Contains(q, "You are signed in as admin") || !strings.Contains(q, "Sign in as vic (viewer) instead?") {
		t.Errorf("the viewer's sign-in link asks %q", q)
	}
	shot("signin-link-switch")
	if me, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch('/auth/whoami').then((r) => r.json()).then((w) => w.user)`, chromedp.EvalAwaitPromise)); err != nil || me != "admin" {
		t.Errorf("after opening the link the session is %q's (%v), want still admin's", me, err)
	}
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=state] .state-running`)),
	)
	if err != nil {
		t.Fatalf("job page as a viewer: %v", err)
	}
	if who := text(`[data-role=who]`); !strings.Contains(who, "vic") || !strings.Contains(who, "viewer") {
		t.Errorf("signed in as %q, want vic the viewer", who)
	}
	if hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('[data-role=actions]').hidden`)); err != nil || !hidden {
		t.Errorf("a viewer sees the job's actions (hidden %v, %v)", hidden, err)
	}
	s.do("DELETE", "/queue/"+eval.ID, nil, nil)

	// Revoking the viewer's token ends the page's live stream at once:
	// the page asks to sign in again and says why.
	s.mustJSON("DELETE", "/auth/tokens/"+viewer.ID, nil, 200, nil)
	err = chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`form[data-role=signin]`)))
	if err != nil {
		t.Fatalf("after revoking the viewer's token: %v", err)
	}
	if msg := text(`.signin [data-role=msg]`); !strings.Contains(msg, "revoked") {
		t.Errorf("the sign-in page after a revocation says %q", msg)
	}
}
