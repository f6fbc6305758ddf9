package holds

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/feature/featuretest"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

// fakeTx is a feature.Tx: a batch at a time.

// A hold's duration is the server's maximum by default and at most; the
// errors name the field.
func TestDuration(t *testing.T) {
	raw := func(s string) api.RawValue { return api.RawValue(`"` + s + `"`) }
	for name, c := range map[string]struct {
		max  time.Duration
		raw  api.RawValue
		want time.Duration
		bad  bool
	}{
		"default is the maximum": {max: 2 * time.Hour, want: 2 * time.Hour},
		"no maximum":             {want: DefaultTime},
		"asked":                  {max: 2 * time.Hour, raw: raw("30m"), want: 30 * time.Minute},
		"past the maximum":       {max: 2 * time.Hour, raw: raw("3h"), bad: true},
		"under a second":         {raw: raw("0.5s"), bad: true},
		"not a duration":         {raw: raw("soon"), bad: true},
		"long without a maximum": {raw: raw("48h"), want: 48 * time.Hour},
	} {
		t.Run(name, func(t *testing.T) {
			d, err := New(c.max).Duration(c.raw)
			var ae *api.Error
			switch {
			case c.bad && (!errors.As(err, &ae) || ae.Field != "duration"):
				t.Fatalf("err %v; want one naming duration", err)
			case !c.bad && (err != nil || d != c.want):
				t.Fatalf("%v, %v; want %v", d, err, c.want)
			}
		})
	}
}

// Holds expire at their ExpiresAt, or the server's maximum after they
// were taken; an ended hold leaves the books, its row is deleted and its
// GPU time joins its user's decayed usage, stored in the same batch and
// read back at start-up.
func TestExpiryAndUsage(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	b := New(time.Hour)
	exp := t0.Add(30 * time.Minute)
	a := &api.Hold{JobID: "a", User: "ana", HeldAt: t0, ExpiresAt: &exp,
		Allocation: []api.Allocation{{NodeID: "n1", GPUID: 0}, {NodeID: "n1", GPUID: 1}}}
	old := &api.Hold{JobID: "old", User: "bo", HeldAt: t0, Allocation: []api.Allocation{{NodeID: "n2", GPUID: 3}}}
	b.Add(a)
	b.Add(old)
	if due := b.Due(t0.Add(29 * time.Minute)); len(due) != 0 {
		t.Fatalf("due before any expiry: %v", due)
	}
	if due := b.Due(t0.Add(30 * time.Minute)); len(due) != 1 || due[0] != a {
		t.Fatalf("due at 30m: %v; want a", due)
	}
	if due := b.Due(t0.Add(time.Hour)); len(due) != 2 {
		t.Fatalf("due at 1h: %d; want both (old expires at the maximum)", len(due))
	}

	tx := &featuretest.Tx{At: t0.Add(30 * time.Minute)}
	gs, err := b.Ended(tx, a, time.Hour)
	if err != nil || gs != 2*1800 {
		t.Fatalf("ended: %v GPU-seconds, %v; want 3600", gs, err)
	}
	if _, ok := b.Get("a"); ok || len(tx.B.DeleteHolds) != 1 || tx.B.DeleteHolds[0] != "a" {
		t.Fatalf("a still kept, or its row not deleted: %v", tx.B.DeleteHolds)
	}
	// An hour (one half-life) later, ana's second hold adds to half of
	// the first.
	again := &api.Hold{JobID: "a2", User: "ana", HeldAt: t0.Add(80 * time.Minute), Allocation: a.Allocation[:1]}
	b.Add(again)
	tx = &featuretest.Tx{At: t0.Add(90 * time.Minute)}
	if _, err := b.Ended(tx, again, time.Hour); err != nil {
		t.Fatal(err)
	}
	var stored map[string]Used
	if err := json.Unmarshal([]byte(tx.B.Settings[settingUsage]), &stored); err != nil {
		t.Fatalf("stored usage %q: %v", tx.B.Settings[settingUsage], err)
	}
	if u := stored["ana"]; u.GPUSeconds != 3600/2+600 || !u.At.Equal(tx.At) {
		t.Fatalf("ana's usage %+v; want 2400 GPU-seconds as of %v", u, tx.At)
	}
	r := New(time.Hour)
	if err := r.LoadUsage(tx.B.Settings); err != nil {
		t.Fatal(err)
	}
	for user, u := range r.Usage() {
		if user != "ana" || u.GPUSeconds != 2400 {
			t.Fatalf("loaded %s: %+v", user, u)
		}
	}
	if err := r.LoadUsage(map[string]string{settingUsage: "{"}); err == nil {
		t.Fatal("an unreadable setting loaded without an error")
	}
}

// Holds are running work in the snapshot, one placement per node, their
// estimate their expiry; the why-pending of a job waiting for GPUs names
// at most three of them.
func TestSnapshotAndNote(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	b := New(0)
	exp := t0.Add(2 * time.Hour)
	for _, id := range []string{"d", "c", "b", "a"} {
		b.Add(&api.Hold{JobID: id, User: "ana", HeldAt: t0, ExpiresAt: &exp,
			Allocation: []api.Allocation{{NodeID: "n1", GPUID: 0}, {NodeID: "n1", GPUID: 1}, {NodeID: "n2", GPUID: 4}}})
	}
	var snap sched.Snapshot
	b.AddToSnapshot(&snap, t0.Add(time.Hour))
	if len(snap.Running) != 4 {
		t.Fatalf("%d running; want 4", len(snap.Running))
	}
	r := snap.Running[0]
	if len(r.Placements) != 2 || len(r.Placements[0].GPUs) != 2 || r.Estimate != 2*time.Hour || r.Project != Project || r.Class != sched.ClassInteractive {
		t.Fatalf("running %+v", r)
	}
	v := api.Job{State: api.StateQueued, PendingReason: sched.ReasonResources, PendingMessage: "needs 8 GPUs"}
	b.Note(&v)
	want := "needs 8 GPUs; GPUs 0-1 on n1, GPU 4 on n2 held by ana's hold a until 11:00 UTC; "
	if !strings.HasPrefix(v.PendingMessage, want) || !strings.HasSuffix(v.PendingMessage, "; and 1 more holds") {
		t.Fatalf("note %q", v.PendingMessage)
	}
	other := api.Job{State: api.StateQueued, PendingReason: "dependency", PendingMessage: "waits"}
	if b.Note(&other); other.PendingMessage != "waits" {
		t.Fatalf("a job waiting for no GPU got a note: %q", other.PendingMessage)
	}
}

// TestAsJob: a waiting hold becomes an interactive job named for it that
// sleeps for its duration, with a time limit a minute longer.
func TestAsJob(t *testing.T) {
	req := api.AllocateRequest{JobID: "nb1", GPUCount: 2, GPUType: "H100"}
	sreq, limit := AsJob(req, "ana", 90*time.Minute)
	if sreq.Name != "nb1" || sreq.User != "ana" || sreq.Command != "sleep 5400" || sreq.Class != api.ClassInteractive ||
		sreq.GPUCount == nil || *sreq.GPUCount != 2 || sreq.GPUType != "H100" || string(sreq.TimeLimit) != `"1h30m0s"` {
		t.Fatalf("request = %+v", sreq)
	}
	if limit.Duration() != 91*time.Minute {
		t.Fatalf("time limit = %s, want 1h31m", limit.Duration())
	}
}

// TestAsJobPart: a waiting hold of a slice or a share becomes a job asking
// for the same part.
func TestAsJobPart(t *testing.T) {
	for name, part := range map[string]api.GPUPart{
		"slice": {MIGProfile: "1g.10gb"},
		"share": {GPUShareMiB: 20 << 10, GPUCompute: 25},
	} {
		sreq, _ := AsJob(api.AllocateRequest{JobID: "nb", GPUCount: 1, GPUPart: part}, "ana", time.Hour)
		if sreq.GPUPart != part || sreq.GPUCount == nil || *sreq.GPUCount != 1 {
			t.Errorf("%s: request %+v, want part %+v of 1 GPU", name, sreq, part)
		}
	}
}

// TestNotePart: a hold of a slice or a share is named as that part in
// other jobs' why-pending.
func TestNotePart(t *testing.T) {
	tests := map[string]struct {
		a    api.Allocation
		want string
	}{
		"a slice":     {api.Allocation{NodeID: "n1", GPUID: 0, MIG: &api.AllocatedSlice{Index: 3, Profile: "1g.10gb"}, Fraction: 1.0 / 7}, "needs a GPU; the 1g.10gb slice 3 of GPU 0 on n1 held by ana's hold h"},
		"a share":     {api.Allocation{NodeID: "n1", GPUID: 1, ShareMiB: 20 << 10, Fraction: 0.25}, "needs a GPU; a 20 GiB share of GPU 1 on n1 held by ana's hold h"},
		"a small one": {api.Allocation{NodeID: "n1", GPUID: 1, ShareMiB: 1500, Fraction: 0.02}, "needs a GPU; a 1500 MiB share of GPU 1 on n1 held by ana's hold h"},
		"a whole GPU": {api.Allocation{NodeID: "n1", GPUID: 2}, "needs a GPU; GPU 2 on n1 held by ana's hold h"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := New(0)
			b.Add(&api.Hold{JobID: "h", User: "ana", Allocation: []api.Allocation{tc.a}})
			v := api.Job{State: api.StateQueued, PendingReason: sched.ReasonResources, PendingMessage: "needs a GPU"}
			if b.Note(&v); v.PendingMessage != tc.want {
				t.Errorf("note %q, want %q", v.PendingMessage, tc.want)
			}
		})
	}
}
