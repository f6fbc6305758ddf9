package export

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func secs(s float64) *api.Seconds { v := api.Seconds(s); return &v }

// jobs are the golden cases: a plain one-node job, a two-node gang with
// everything set, and a CPU-only job with an awkward name and env.
var jobs = map[string]api.Job{
	"single": {ID: "j01single", User: "ana", Project: "default", Command: "python train.py --lr 3e-4", GPUCount: 2, Nodes: 1,
		Priority: api.PriorityNormal, MaxRetries: 0},
	"gang": {ID: "j01gang", Name: "big-run", User: "bo", Project: "vision", Command: "torchrun --nnodes=$CORRAL_NUM_NODES --node_rank=$CORRAL_NODE_RANK train.py",
		Workdir: "/data/runs", Env: map[string]string{"HF_HOME": "/data/hf", "QUOTE": "it's \"x\""}, GPUCount: 8, GPUType: "H100", Nodes: 2,
		Priority: api.PriorityHigh, TimeLimit: secs(90061), MaxRetries: 3, NodeLabels: map[string]string{"zone": "a"}, MemMiB: 65536, CPUs: 15.5,
		DependsOn: "afterok:j01prev"},
	"cpu": {ID: "j01CPU_only", Name: "x", User: "cy", Project: "p", Command: "echo 'hi'", Nodes: 1, Env: map[string]string{"1BAD": "no", "OK": "yes"},
		TimeLimit: secs(59.5)},
}

func TestGolden(t *testing.T) {
	for name, j := range jobs {
		for _, format := range Formats {
			t.Run(name+"/"+format, func(t *testing.T) {
				got, err := Write(format, j, Options{})
				if err != nil {
					t.Fatal(err)
				}
				path := filepath.Join("testdata", name+"."+format+".golden")
				if *update {
					if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (go test ./internal/export -update writes it)", err)
				}
				if got != string(want) {
					t.Errorf("%s differs from %s:\n%s", format, path, got)
				}
			})
		}
	}
}

func TestUnknownFormat(t *testing.T) {
	if _, err := Write("lsf", jobs["single"], Options{}); err == nil || !strings.Contains(err.Error(), "slurm, k8s or pbs") {
		t.Errorf("Write(lsf): %v", err)
	}
}

func TestKubernetesNamesAndImage(t *testing.T) {
	out := Kubernetes(api.Job{ID: strings.Repeat("AB_", 40), Command: "true"}, Options{Image: "pytorch/pytorch:2.5"})
	if !strings.Contains(out, `image: pytorch/pytorch:2.5`) || strings.Contains(out, "placeholder") {
		t.Errorf("image not used:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "  name: "); ok && (len(v) > 63 || strings.ContainsAny(v, "_ABCDEFGHIJKLMNOPQRSTUVWXYZ")) {
			t.Errorf("name %q is not a DNS-1123 label", v)
		}
	}
}

func TestClock(t *testing.T) {
	for _, c := range []struct {
		s    float64
		day  bool
		want string
	}{{59.5, true, "00:01:00"}, {90061, true, "1-01:01:01"}, {90061, false, "25:01:01"}, {0, false, "00:00:00"}} {
		if got := clock(c.s, c.day); got != c.want {
			t.Errorf("clock(%v, %v) = %s, want %s", c.s, c.day, got, c.want)
		}
	}
}
