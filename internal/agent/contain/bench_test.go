package contain

import (
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
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
		parent := benchParent(b)
		for i := range b.N {
			cg, err := benchOpen(parent, NameOf("bench", i, 0), spec)
			if err != nil {
				b.Fatal(err)
			}
			runGated(b, argv, cg)
			if err := cg.Destroy(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchParent is a node's parent for the benchmark, or a skip where
// cgroups cannot be written.
func benchParent(b *testing.B) string {
	b.Helper()
	parent := Parent("bench-node", strconv.Itoa(os.Getpid()))
	if mode, err := Probe(parent); mode == ProcessGroup {
		b.Skipf("no cgroups here: %v", err)
	}
	b.Cleanup(func() {
		Sweep(parent, func(string) bool { return false })
		Remove(parent)
	})
	return parent
}

// benchOpen makes an attempt's cgroup the way the agent does.
func benchOpen(parent, name string, spec Spec) (*Cgroup, error) {
	return Open(filepath.Join(parent, name), spec)
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
