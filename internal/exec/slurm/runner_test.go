package slurm

import (
	"slices"
	"testing"
)

// TestSlurmEnv: Slurm's commands (and so, through sbatch --export=ALL,
// every job) get Slurm's own settings and a login-like base for the
// server's account, never the rest of the server's environment.
func TestSlurmEnv(t *testing.T) {
	server := []string{"SLURM_CONF=/etc/slurm/x.conf", "SBATCH_PARTITION=gpu", "AWS_SECRET_ACCESS_KEY=s3cr3t", "CORRAL_ADMIN_TOKEN=t",
		"PATH=/root/.pyenv/shims:/usr/bin", "PYENV_ROOT=/root/.pyenv", "HOME=/elsewhere", "OLDPWD=/root"}
	for _, c := range []struct {
		name string
		bin  string
		a    account
		want []string
	}{
		{"root, Slurm in /usr/bin", "/usr/bin", account{name: "root", home: "/root", shell: "/bin/bash", root: true}, []string{
			"HOME=/root", "LOGNAME=root", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"SBATCH_PARTITION=gpu", "SHELL=/bin/bash", "SLURM_CONF=/etc/slurm/x.conf", "USER=root"}},
		{"a service account, Slurm in /opt", "/opt/slurm/bin", account{name: "corral", home: "/var/lib/corral", shell: "/usr/sbin/nologin"}, []string{
			"HOME=/var/lib/corral", "LOGNAME=corral", "PATH=/usr/local/bin:/usr/bin:/bin:/opt/slurm/bin",
			"SBATCH_PARTITION=gpu", "SHELL=/usr/sbin/nologin", "SLURM_CONF=/etc/slurm/x.conf", "USER=corral"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := slurmEnv(server, c.bin, c.a); !slices.Equal(got, c.want) {
				t.Errorf("slurmEnv:\n got %q\nwant %q", got, c.want)
			}
		})
	}
}
