package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/corral-sched/corral/internal/api"
)

// TestUsageDashboardInBrowser opens the dashboard's Usage page in headless
// Chromium: an admin sees allocated against used GPU-hours by user,
// project and week for every user, with the bars in proportion; a user
// signed in with their own token sees only their own usage.
func TestUsageDashboardInBrowser(t *testing.T) {
	ctx := browser(t)
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "8:H100:80", "--node-name", "usage-node")
	if _, errOut, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "price", "set", "H100", "3"); code != 0 {
		t.Fatalf("price set: exit %d: %s", code, errOut)
	}
	alice := s.submit(map[string]any{"user": "alice", "project": "nlp", "gpu_count": 4, "command": "sleep 1"})
	bob := s.submit(map[string]any{"user": "bob", "project": "vision", "gpu_count": 1, "command": "sleep 0.5"})
	s.waitTerminal(alice.ID, 30*time.Second)
	s.waitTerminal(bob.ID, 30*time.Second)
	var bobTok api.NewToken
	s.mustJSON("POST", "/auth/tokens", map[string]any{"user": "bob", "role": "user"}, http.StatusCreated, &bobTok)

	dir := screenshotDir(t)
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		path := filepath.Join(dir, "usage-"+name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
	signIn := func(token string) {
		t.Helper()
		err := chromedp.Do(ctx,
			chromedp.Navigate(s.URL+"/?token="+token+"#/usage"),
			chromedp.WaitVisible(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
			chromedp.Click(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-role=who]`)),
		)
		if err != nil {
			t.Fatalf("sign in: %v", err)
		}
	}

	signIn(adminToken)
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/#/usage"),
		chromedp.WaitVisible(chromedp.CSS(`[data-chart=usage-user] g[data-key=alice] rect.alloc`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-chart=usage-project] g[data-key=vision] rect.alloc`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-chart=usage-week] svg g rect.alloc`)),
	)
	if err != nil {
		t.Fatalf("usage page: %v", err)
	}
	shot("admin")
	// alice's 4 GPUs for 1 s outweigh bob's 1 GPU for 0.5 s: her bar is
	// the longer, by about their GPU-seconds' ratio.
	ratio, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`(() => {
		const w = (k) => +document.querySelector('[data-chart=usage-user] g[data-key="' + k + '"] rect.alloc').getAttribute('width');
		return w('alice') / w('bob');
	})()`))
	if err != nil || ratio < 3 {
		t.Fatalf("alice's bar / bob's bar = %v (%v), want about 8", ratio, err)
	}
	total, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-role=usage-total]`)))
	if err != nil || !strings.Contains(total, "GPU-hours allocated") || !strings.Contains(total, "$") {
		t.Fatalf("total line %q (%v)", total, err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-table=usage-user] tbody tr').length`))
	if err != nil || rows != 2 {
		t.Fatalf("the admin sees %d users (%v), want 2", rows, err)
	}

	// bob sees his own usage only.
	signIn(bobTok.Secret)
	err = chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/#/usage"),
		chromedp.WaitVisible(chromedp.CSS(`[data-chart=usage-user] g[data-key=bob] rect.alloc`)),
	)
	if err != nil {
		t.Fatalf("bob's usage page: %v", err)
	}
	keys, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-chart=usage-user] g[data-key]')].map((g) => g.dataset.key)`))
	if err != nil || len(keys) != 1 || keys[0] != "bob" {
		t.Fatalf("bob sees users %v (%v), want only bob", keys, err)
	}
	shot("user")
}
