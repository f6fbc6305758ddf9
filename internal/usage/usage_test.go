package usage

import (
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC) // a Monday

func rec(user, project, model string, gpus int, start, end time.Duration, used float64) Record {
	s, e := t0.Add(start), t0.Add(end)
	return Record{Kind: KindJob, ID: user + start.String(), User: user, Project: project, GPUModel: model, Node: "n1",
		GPUs: gpus, Start: s, End: e, GPUSeconds: float64(gpus) * e.Sub(s).Seconds(), UsedGPUSeconds: used}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func TestAggregateClipsAndGroups(t *testing.T) {
	recs := []Record{
		rec("ana", "vision", "NVIDIA H100 80GB", 2, 0, time.Hour, 3600),       // 7200 gs, half used
		rec("bo", "vision", "A100", 1, 30*time.Minute, 90*time.Minute, 0),     // 3600 gs
		rec("ana", "nlp", "NVIDIA H100 80GB", 1, 2*time.Hour, 3*time.Hour, 0), // 3600 gs
	}
	prices := Prices{"H100": 2, "h100 80gb": 3}
	cases := []struct {
		name         string
		by           string
		since, until time.Time
		want         map[string]float64 // key -> gpu seconds
		cost         map[string]float64
	}{
		{"all by user", ByUser, time.Time{}, time.Time{}, map[string]float64{"ana": 10800, "bo": 3600}, map[string]float64{"ana": 9, "bo": 0}},
		{"by project", ByProject, time.Time{}, time.Time{}, map[string]float64{"vision": 10800, "nlp": 3600}, nil},
		{"clipped to first hour", ByUser, t0, t0.Add(time.Hour), map[string]float64{"ana": 7200, "bo": 1800}, map[string]float64{"ana": 6}},
		{"window after everything", ByUser, t0.Add(4 * time.Hour), time.Time{}, map[string]float64{}, nil},
		{"by gpu type", ByGPUType, time.Time{}, time.Time{}, map[string]float64{"NVIDIA H100 80GB": 10800, "A100": 3600}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := Aggregate(recs, c.by, c.since, c.until, prices)
			if len(rep.Rows) != len(c.want) {
				t.Fatalf("rows %+v, want %v", rep.Rows, c.want)
			}
			var total float64
			for _, r := range rep.Rows {
				if !near(r.GPUSeconds, c.want[r.Key]) {
					t.Errorf("%s: %v gpu-seconds, want %v", r.Key, r.GPUSeconds, c.want[r.Key])
				}
				if want, ok := c.cost[r.Key]; ok && !near(r.Cost, want) {
					t.Errorf("%s: cost %v, want %v", r.Key, r.Cost, want)
				}
				total += r.GPUSeconds
			}
			if !near(rep.Total.GPUSeconds, total) {
				t.Errorf("total %v, want %v", rep.Total.GPUSeconds, total)
			}
		})
	}
}

func TestEfficiencyAndWeeks(t *testing.T) {
	r := rec("ana", "vision", "H100", 1, -24*time.Hour, 24*time.Hour, 86400) // straddles the Monday
	rep := Aggregate([]Record{r}, ByWeek, time.Time{}, time.Time{}, nil)
	if len(rep.Rows) != 2 || rep.Rows[0].Key != "2026-10-26" || rep.Rows[1].Key != "2026-11-02" {
		t.Fatalf("weeks %+v", rep.Rows)
	}
	for _, row := range rep.Rows {
		if !near(row.GPUSeconds, 86400) || !near(row.Efficiency, 0.5) {
			t.Errorf("week %s: %v gpu-seconds, efficiency %v", row.Key, row.GPUSeconds, row.Efficiency)
		}
	}
}

func TestCSV(t *testing.T) {
	rep := Aggregate([]Record{rec("ana", "v", "H100", 2, 0, time.Hour, 0)}, ByGPUType, time.Time{}, time.Time{}, Prices{"H100": 2.49})
	got := string(CSV(rep))
	want := "gpu_type,records,gpu_seconds,gpu_hours,used_gpu_seconds,used_gpu_hours,efficiency,cost\nH100,1,7200.000,2.000000,0.000,0.000000,0.0000,4.9800\n"
	if got != want {
		t.Fatalf("csv:\n%s\nwant:\n%s", got, want)
	}
}

func TestParseTimeAndValid(t *testing.T) {
	if tm, err := ParseTime("2026-11-01", time.UTC); err != nil || !tm.Equal(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("date: %v %v", tm, err)
	}
	if _, err := ParseTime("yesterday", time.UTC); err == nil {
		t.Fatal("a bad date was accepted")
	}
	if err := (Record{Kind: "x", ID: "a"}).Valid(); err == nil || !strings.HasPrefix(err.Error(), "kind") {
		t.Fatalf("bad kind: %v", err)
	}
	if err := ValidPrice("H100", -1); err == nil || !strings.HasPrefix(err.Error(), "dollars_per_hour") {
		t.Fatalf("negative price: %v", err)
	}
}
