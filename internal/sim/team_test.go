package sim

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// The synthetic team trace is a pure function of its seed, and has what
// it promises: 15 users, notebooks, sweeps, 8- and 16-GPU gangs, in one
// working week.
func TestTeamWeek(t *testing.T) {
	a, b, c := TeamWeek(1), TeamWeek(1), TeamWeek(2)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two traces")
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("two seeds gave the same trace")
	}
	for _, seed := range []uint64{1, 2, 3} {
		jobs := TeamWeek(seed)
		users, kinds, sizes := map[string]bool{}, map[string]int{}, map[int]int{}
		var gpuSeconds float64
		for i, j := range jobs {
			users[j.User] = true
			kinds[strings.Split(j.Name, "-")[1]]++
			sizes[j.GPUs]++
			gpuSeconds += float64(j.GPUs) * j.Duration.Seconds()
			if j.Submit.Before(TeamWeekStart) || !j.Submit.Before(TeamWeekStart.Add(5*24*time.Hour)) {
				t.Fatalf("seed %d: job %s submitted %v, outside the working week", seed, j.ID, j.Submit)
			}
			if i > 0 && j.Submit.Before(jobs[i-1].Submit) {
				t.Fatalf("seed %d: jobs not in submission order", seed)
			}
		}
		if len(users) != 15 {
			t.Errorf("seed %d: %d users, want 15", seed, len(users))
		}
		for _, k := range []string{"notebook", "debug", "sweep", "train", "gang8", "gang16"} {
			if kinds[k] == 0 {
				t.Errorf("seed %d: no %s jobs", seed, k)
			}
		}
		if sizes[8] == 0 || sizes[16] == 0 {
			t.Errorf("seed %d: gangs of 8: %d, of 16: %d; want some of each", seed, sizes[8], sizes[16])
		}
		// Busy but feasible: the week's work fills 16 GPUs for 2 to 7 days.
		days := gpuSeconds / 16 / 86400
		if days < 2 || days > 7 {
			t.Errorf("seed %d: %.1f days of work for 16 GPUs", seed, days)
		}
		t.Logf("seed %d: %d jobs, %.1f days of 16 GPUs' work, sizes %v, kinds %v", seed, len(jobs), days, sizes, kinds)
	}
}
