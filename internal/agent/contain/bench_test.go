package contain

import (
	"os"
	osexec "os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkStart measures one start-to-end cycle of `/bin/sh -c true` the
// way the agent runs a job: bare (fork, exec, wait: the baseline), gated
// (the gate's pipe and extra exec, no cgroup), and in a cgroup (made with
// memory, CPU and device limits, the child admitted and released, waited
// for, killed and removed). Run it with
//
//	go test -run '^$' -bench Start -benchmem -count 3 ./internal/agent/contain/
func BenchmarkStart(b *testing.B) {
	argv := []string{"/bin/sh", "-c", "true"}
	spec := Spec{MemMiB: 256, CPUs: 1, GPUMinors: []int{3}}
	b.Run("bare", func(b *testing.B) {
		for range b.N {
			cmd := osexec.Command(argv[0], argv[1:]...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gated", func(b *testing.B) {
		for range b.N {
			runGated(b, argv, nil)
		}
	})
	b.Run("cgroup", func(b *testing.B) {
		tree := benchTree(b)
		var open, run, destroy time.Duration // each phase's share, reported per op
		for i := range b.N {
			t0 := time.Now()
			cg, err := tree.Open(NameOf("bench", i, 0), spec)
			if err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			runGated(b, argv, cg)
			t2 := time.Now()
			if err := cg.Destroy(); err != nil {
				b.Fatal(err)
			}
			open, run, destroy = open+t1.Sub(t0), run+time.Since(t1)-time.Since(t2), destroy+time.Since(t2)
		}
		b.ReportMetric(float64(open.Microseconds())/float64(b.N), "open-µs/op")
		b.ReportMetric(float64(run.Microseconds())/float64(b.N), "run-µs/op")
		b.ReportMetric(float64(destroy.Microseconds())/float64(b.N), "destroy-µs/op")
	})
}

// benchTree is a node's prepared parent for the benchmark, as the agent
// makes it, or a skip where cgroups cannot be written.
func benchTree(b *testing.B) *Tree {
	b.Helper()
	parent := Parent("bench-node", strconv.Itoa(os.Getpid()))
	tree, err := NewTree(parent, NodeDevices{})
	if err != nil {
		b.Skipf("no cgroups here: %v", err)
	}
	b.Cleanup(func() {
		Sweep(parent, func(string) bool { return false })
		Remove(parent)
	})
	prepErr := tree.Prepare()
	if mode, err := Probe(parent); mode == ProcessGroup {
		b.Skipf("no cgroups here: %v", err)
	}
	if prepErr != nil {
		b.Fatal(prepErr)
	}
	return tree
}

// runGated starts argv through the gate, admits it to cg (if any),
// releases it and waits for it.
func runGated(b *testing.B, argv []string, cg *Cgroup) {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	g := Gate(argv)
	cmd := osexec.Command(g[0], g[1:]...)
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	r.Close()
	if cg != nil {
		if err := cg.Add(cmd.Process.Pid); err != nil {
			b.Fatal(err)
		}
	}
	if err := Release(w); err != nil {
		b.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
}
