package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBookingCalendarInBrowser opens the dashboard's Bookings page in
// headless Chromium against `corral up`: a booking made through the API
// is drawn over its GPUs; the page's form is refused with the server's
// message when it overlaps, and books (and draws) when it does not.
func TestBookingCalendarInBrowser(t *testing.T) {
	ctx := browser(t)
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "8", "--node-name", "cal-node")
	waitFor(t, 30*time.Second, func() string { return "the node did not register" }, func() bool { return s.cluster().TotalGPUs == 8 })
	tomorrow := time.Now().AddDate(0, 0, 1)
	start := time.Date(tomorrow.Year(), tomorrow.Month(), tomorrow.Day(), 9, 0, 0, 0, time.Local)
	s.mustJSON("POST", "/reservations", map[string]any{"name": "vision", "gpus": 4, "start": start.Format(time.RFC3339), "duration": "8h",
		"users": []string{"ana"}, "project": "vision"}, 201, nil)

	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+"`"+sel+"`"+`).length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/?token="+adminToken+"#/bookings"),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
		chromedp.Click(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-gpu="cal-node/0"] .bar[data-booking=vision]`)),
	)
	if err != nil {
		t.Fatalf("bookings page: %v", err)
	}
	if n := count(`.cal-row[data-gpu] .bar[data-booking=vision]`); n != 4 {
		t.Errorf("vision is drawn on %d GPUs, want 4", n)
	}
	if n := count(`[data-role=list] tr[data-booking=vision]`); n != 1 {
		t.Errorf("vision has %d rows in the list, want 1", n)
	}

	// The form, refused: 8 GPUs over vision's window.
	book := func(name, gpus string) {
		t.Helper()
		err := chromedp.Do(ctx,
			chromedp.SetValue(chromedp.CSS(`form[data-role=book] [name=name]`), name),
			chromedp.SetValue(chromedp.CSS(`form[data-role=book] [name=gpus]`), gpus),
			chromedp.SetValue(chromedp.CSS(`form[data-role=book] [name=start]`), start.Format("2006-01-02T15:04")),
			chromedp.SetValue(chromedp.CSS(`form[data-role=book] [name=hours]`), "2"),
			chromedp.Click(chromedp.CSS(`form[data-role=book] button[type=submit]`)),
		)
		if err != nil {
			t.Fatalf("book %s: %v", name, err)
		}
	}
	book("clash", "8")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`[data-role=book-error]`))); err != nil {
		t.Fatalf("no refusal shown: %v", err)
	}
	msg, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-role=book-error]`)))
	if err != nil || !strings.Contains(msg, "gpus:") || !strings.Contains(msg, "are booked by vision") {
		t.Errorf("refusal shown: %q (%v)", msg, err)
	}
	// Beside it: the other 4 GPUs.
	book("beside", "4")
	err = chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(`[data-role=book-ok]`)),
		chromedp.WaitVisible(chromedp.CSS(`.bar[data-booking=beside]`)),
	)
	if err != nil {
		t.Fatalf("booking through the form: %v", err)
	}
	if n := count(`.cal-row[data-gpu] .bar[data-booking=beside]`); n != 4 {
		t.Errorf("beside is drawn on %d GPUs, want 4", n)
	}
	if hidden, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('[data-role=book-error]').hidden`)); !hidden {
		t.Error("the earlier refusal is still shown after a booking succeeded")
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		path := filepath.Join(screenshotDir(t), "dashboard-bookings.png")
		if os.WriteFile(path, png, 0o644) == nil {
			t.Logf("screenshot: %s", path)
		}
	}
}
