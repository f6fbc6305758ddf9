package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/corral-sched/corral/internal/api"
)

// xssPayload is markup that, were it inserted as HTML rather than text,
// would leave elements with data-xss in the page (and run a script).
const xssPayload = `<img src=x data-xss=1 onerror="window.__xss=1">"'><b data-xss=2>x</b>`

// TestSecurityDashboardShowsNamesAsText: what users and agents choose (a job's
// name, command and workdir, a node's labels, a foreign process's user and
// name, an agent's words about its disk, a task's error) is shown by the
// dashboard as text on every page, never as markup: a hostile name cannot
// run a script in an admin's signed-in page.
func TestSecurityDashboardShowsNamesAsText(t *testing.T) {
	ctx := browser(t)
	s := startCluster(t)
	h := &hostileAgent{s: s, node: "evil-dash"}
	r := h.call("/agent/v1/register", map[string]any{
		"node_id": h.node, "agent_id": "evil-agent-dash-0123456789", "hostname": "evil", "tasks": []any{},
		"labels":    map[string]string{"xss": xssPayload},
		"disk_full": "disk " + xssPayload,
		"gpus": []map[string]any{{"index": 0, "uuid": "GPU-d0", "model": "H100", "memory_mib": 81920, "mig": map[string]any{"mode": "enabled",
			"devices": []map[string]any{{"index": 0, "uuid": "MIG-" + xssPayload, "profile": xssPayload, "memory_total": 9856}}}},
			{"index": 1, "uuid": "GPU-d1", "model": "H100", "memory_mib": 81920},
			// GPU 0 is in MIG mode (never handed out whole) and GPU 1 has a
			// foreign process: the job below runs on GPU 2.
			{"index": 2, "uuid": "GPU-d2", "model": "H100", "memory_mib": 81920}},
	})
	var cfg api.AgentConfig
	if r.Status != 200 || json.Unmarshal(r.Body, &cfg) != nil {
		t.Fatalf("register: %s", r)
	}
	h.session = cfg.Session
	// Its first report (without disk_full) lets it take jobs again; the
	// foreign process shows on GPU 1.
	h.sync(map[string]any{"foreign": []map[string]any{{"gpu": 1, "pid": 77, "user": xssPayload, "name": xssPayload}}})
	lost := s.submit(map[string]any{"name": xssPayload, "command": "echo " + xssPayload, "workdir": "/tmp/" + xssPayload,
		"gpu_count": 1, "node_labels": map[string]string{"xss": xssPayload}})
	var work api.AgentWork
	waitFor(t, 20*time.Second, func() string { return "the hostile node was not handed the job" }, func() bool {
		work = h.sync(map[string]any{"foreign": []map[string]any{{"gpu": 1, "pid": 77, "user": xssPayload, "name": xssPayload}}})
		return len(work.Tasks) > 0
	})
	h.sync(map[string]any{"tasks": []map[string]any{{"job_id": lost.ID, "attempt": 0, "rank": 0, "state": "exited", "exit_code": 1, "error": xssPayload}}})
	s.waitTerminal(lost.ID, 20*time.Second)
	queued := s.submit(map[string]any{"name": xssPayload, "command": "true", "gpu_count": 1, "node_labels": map[string]string{"none": "such"}})

	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/?token="+adminToken+"#/cluster"),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
		chromedp.Click(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
		chromedp.WaitVisible(chromedp.CSS(`.node[data-node="evil-dash"]`)),
	)
	if err != nil {
		t.Fatalf("sign in: %v", err)
	}
	// GPU 0 has MIG on, with one device: its tile says so (the device's
	// hostile profile is checked as text below, with the rest).
	mig, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('.node[data-node="evil-dash"] .gpu')).map((g) => (g.querySelector('.mig') || {}).textContent || '')`))
	if err != nil || len(mig) != 3 || mig[0] != "MIG ×1" || mig[1] != "" || mig[2] != "" {
		t.Errorf("MIG badges on the hostile node's GPUs: %q (%v); want GPU 0's only, MIG ×1", mig, err)
	}
	pages := []struct{ hash, ready string }{
		{"#/cluster", `.node[data-node="evil-dash"]`},
		{"#/nodes/evil-dash", `.node[data-node="evil-dash"] .gpu`},
		{"#/queue", `[data-role=queued] tr`},
		{"#/jobs", `[data-role=rows] tr:not(.empty-row)`}, // not "Loading…"
		{"#/jobs/" + lost.ID, `[data-role=events] li`},
		{"#/jobs/" + queued.ID, `[data-role=fields] dd`},
	}
	for _, p := range pages {
		err := chromedp.Do(ctx,
			chromedp.Navigate(s.URL+"/"+p.hash),
			chromedp.WaitVisible(chromedp.CSS(p.ready)),
		)
		if err != nil {
			t.Fatalf("page %s: %v", p.hash, err)
		}
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-xss], [onerror]').length + (window.__xss ? 100 : 0)`))
		if err != nil {
			t.Fatalf("page %s: %v", p.hash, err)
		}
		if n != 0 {
			t.Errorf("page %s put a hostile name in as markup (%d elements)", p.hash, n)
		}
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText + ' ' + Array.from(document.querySelectorAll('[title]')).map((e) => e.title).join(' ')`))
		if err != nil {
			t.Fatalf("page %s: %v", p.hash, err)
		}
		if !strings.Contains(text, `data-xss=2`) && p.hash != "#/cluster" {
			t.Errorf("page %s does not show the hostile name as text", p.hash)
		}
	}
}
