// Package slurmtest brings up, for tests, the local Slurm of
// scripts/slurm-local.sh: two nodes, corral-n1 and corral-n2, with two fake
// GPUs each, on this machine.
package slurmtest

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// Dir is where the local Slurm lives: the script's default. Its ports are
// fixed, so one test at a time uses it (Up takes a lock).
const Dir = "/tmp/corral-slurm"

// Up brings the local Slurm up with script (the path of
// scripts/slurm-local.sh) and returns the path of its slurm.conf, for
// SLURM_CONF. It skips the test when Slurm is not installed or the test
// does not run as root. The packages that use it take turns through a
// lock file held until the test ends; a Slurm it started is stopped then.
// Jobs whose name starts with prefix, left by an earlier run or by this
// one, are canceled before and after.
func Up(t testing.TB, script, prefix string) (conf string) {
	t.Helper()
	if _, err := exec.LookPath("sbatch"); err != nil {
		t.Skip("Slurm is not installed (apt-get install -y slurm-wlm munge): sbatch not in $PATH")
	}
	if _, err := os.Stat("/usr/sbin/slurmctld"); err != nil {
		t.Skip("Slurm is not installed (apt-get install -y slurm-wlm munge): no /usr/sbin/slurmctld")
	}
	if os.Geteuid() != 0 {
		t.Skip("the local Slurm needs root (scripts/slurm-local.sh)")
	}
	lock, err := os.OpenFile(Dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() }) // runs last: releases the lock
	wasUp := exec.Command("sh", "-c", "kill -0 $(cat "+Dir+"/slurmctld.pid)").Run() == nil
	up := exec.Command("sh", script, "up")
	up.Env = append(os.Environ(), "SLURM_LOCAL_DIR="+Dir)
	if out, err := up.CombinedOutput(); err != nil {
		t.Fatalf("slurm-local.sh up: %v\n%s", err, out)
	}
	if !wasUp {
		t.Cleanup(func() {
			down := exec.Command("sh", script, "down")
			down.Env = append(os.Environ(), "SLURM_LOCAL_DIR="+Dir)
			down.Run()
		})
	}
	conf = Dir + "/slurm.conf"
	cancelLeft := func() {
		c := exec.Command("sh", "-c", `squeue -h -o "%i %j" | awk -v p="`+prefix+`" 'index($2, p) == 1 {print $1}' | xargs -r scancel`)
		c.Env = append(os.Environ(), "SLURM_CONF="+conf)
		c.Run()
	}
	cancelLeft()
	t.Cleanup(cancelLeft)
	return conf
}
