package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/corral-sched/corral/internal/api"
)

// TestGPUShareDashboard: the dashboard's GPU grid shows a MIG GPU's
// slices, free or with their holder, and a shared GPU's MPS shares.
func TestGPUShareDashboard(t *testing.T) {
	ctx := browser(t)
	s := gpuShareUp(t)
	slice := s.submit(map[string]any{"command": "sleep 120", "user": "ann", "mig_profile": "3g.40gb"})
	share := s.submit(map[string]any{"command": "sleep 120", "user": "bob", "gpu_share_mib": 20 << 10, "gpu_compute": 25})
	s.waitState(slice.ID, api.StateRunning, 30*time.Second)
	s.waitState(share.ID, api.StateRunning, 30*time.Second)
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/?token="+adminToken+"#/cluster"),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
		chromedp.Click(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
		chromedp.WaitVisible(chromedp.CSS(`.gpu[data-gpu="e2e-node/1"] .part.held`)),
		chromedp.WaitVisible(chromedp.CSS(`.gpu[data-gpu="e2e-node/2"] .part.held`)),
	)
	if err != nil {
		t.Fatalf("cluster page: %v", err)
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	for sel, want := range map[string][]string{
		`.gpu[data-gpu="e2e-node/1"] .parts`: {"3g.40gb · ann", "4g.40gb"},
		`.gpu[data-gpu="e2e-node/2"] .parts`: {"20 GB 25% · bob"},
		`.gpu[data-gpu="e2e-node/0"] .parts`: {"1g.10gb"},
	} {
		got := text(sel)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s says %q, want %q", sel, got, w)
			}
		}
	}
	for g, want := range map[string]string{"1": "allocated", "2": "allocated", "3": "free"} {
		st, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('.gpu[data-gpu="e2e-node/`+g+`"]').dataset.state`))
		if err != nil || st != want {
			t.Errorf("GPU %s's tile is %q (%v), want %s", g, st, err, want)
		}
	}
}
