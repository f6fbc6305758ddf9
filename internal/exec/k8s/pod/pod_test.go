package pod

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/corral-sched/corral/internal/exec"
)

func TestBuild(t *testing.T) {
	nodeName := func(id string) string { return strings.TrimPrefix(id, "k8s-") }
	for name, c := range map[string]struct {
		task      exec.Task
		image     string // the pods' image
		service   bool
		master    string
		deadline  int64 // activeDeadlineSeconds; 0: none
		commandIn string
	}{
		"one node, default image": {
			task:  exec.Task{JobID: "j1", Command: "nvidia-smi", Ranks: []exec.Rank{{NodeID: "k8s-a", GPUs: []int{0, 1}}}},
			image: "default:1", master: "127.0.0.1", commandIn: "nvidia-smi",
		},
		"gang, own image, time limit": {
			task: exec.Task{JobID: "j2", Attempt: 3, Command: "torchrun", Image: "own:2", TimeLimit: 90500 * time.Millisecond,
				Ranks: []exec.Rank{{NodeID: "k8s-a", GPUs: []int{0}}, {NodeID: "k8s-b", GPUs: []int{0}}}},
			image: "own:2", service: true, master: "corral-j2-3", deadline: 91 + 60, commandIn: "torchrun",
		},
		"odd ids and user, a script": {
			task: exec.Task{JobID: strings.Repeat("Job_ID.", 20), User: "ana maría@lab", Command: "a b", Script: "#!/bin/sh\necho hi\n",
				NodeID: "k8s-a", GPUs: []int{0}},
			image: "default:1", master: "127.0.0.1", commandIn: "echo hi",
		},
	} {
		t.Run(name, func(t *testing.T) {
			a := Build(c.task, Options{Namespace: "ns", Image: "default:1", NodeName: nodeName, Grace: 1500 * time.Millisecond})
			ranks := Ranks(c.task)
			if len(a.Pods) != len(ranks) || (a.Service != nil) != c.service {
				t.Fatalf("%d pods, service %v", len(a.Pods), a.Service != nil)
			}
			for r, p := range a.Pods {
				if errs := validation.IsDNS1123Subdomain(p.Name); len(errs) > 0 || len(p.Name) > 63 {
					t.Errorf("pod name %q: %v", p.Name, errs)
				}
				for k, v := range p.Labels {
					if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
						t.Errorf("label %s=%q: %v", k, v, errs)
					}
				}
				ct := p.Spec.Containers[0]
				env := map[string]string{}
				for _, e := range ct.Env {
					env[e.Name] = e.Value
				}
				if p.Spec.NodeName != nodeName(ranks[r].NodeID) || p.Spec.RestartPolicy != "Never" || ct.Image != c.image ||
					*p.Spec.TerminationGracePeriodSeconds != 2 || !strings.Contains(ct.Command[2], c.commandIn) {
					t.Errorf("rank %d: node %q restart %q image %q grace %d command %q", r, p.Spec.NodeName, p.Spec.RestartPolicy, ct.Image,
						*p.Spec.TerminationGracePeriodSeconds, ct.Command)
				}
				if g := ct.Resources.Limits[ResourceGPU]; int(g.Value()) != len(ranks[r].GPUs) {
					t.Errorf("rank %d: %s GPUs, want %d", r, g.String(), len(ranks[r].GPUs))
				}
				if env["CORRAL_MASTER_ADDR"] != c.master || env["CORRAL_NODE_RANK"] != string(rune('0'+r)) || env["CORRAL_NODE_ID"] != ranks[r].NodeID {
					t.Errorf("rank %d env %v", r, env)
				}
				if d := p.Spec.ActiveDeadlineSeconds; (d == nil) != (c.deadline == 0) || d != nil && *d != c.deadline {
					t.Errorf("rank %d activeDeadlineSeconds %v, want %d", r, d, c.deadline)
				}
			}
			if a.Service != nil && (a.Service.Name != c.master || a.Service.Spec.Selector[LabelRank] != "0" || a.Service.Spec.ClusterIP != "None") {
				t.Errorf("service %+v", a.Service)
			}
		})
	}
}
