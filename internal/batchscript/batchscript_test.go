package batchscript

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseHeader(t *testing.T) {
	cases := []struct {
		name, script   string
		corral, sbatch []string
		ignored        []string
		bad            bool
	}{
		{name: "sweep", script: "#!/bin/bash\n#SBATCH --gres=gpu:2 -J sweep -t 0:05\n#SBATCH -o out-%j.log\n#SBATCH --error=err-%x.log\necho hi\n#SBATCH --mem=1G\n",
			sbatch: []string{"--gpus", "2", "-J", "sweep", "-t", "0:05", "-o", "out-%j.log", "-e", "err-%x.log"}},
		{name: "corral lines", script: "#!/bin/sh\n# a comment\n\n#CORRAL --gpus 1 --name 'my job' # trailing\n#CORRAL --env A=\"x y\"\ntrue\n",
			corral: []string{"--gpus", "1", "--name", "my job", "--env", "A=x y"}},
		{name: "short forms and types", script: "#SBATCH -G a100:4\n#SBATCH -t1:00:00\n#SBATCH -N 2 -c 8 --mem 64G\n#SBATCH --gpus-per-node=8 --gres=gpu:h100:2\n",
			sbatch: []string{"--gpus", "4", "--gpu-type", "a100", "-t", "1:00:00", "-N", "2", "--cpus", "8", "--mem", "64G", "--gpus", "8", "--gpus", "2", "--gpu-type", "h100"}},
		{name: "unshared named", script: "#SBATCH --partition=gpu -n 4 --exclusive --qos high\n#SBATCH --gres=tmpfs:10G\n#SBATCH --account=vision --mail-type=END,FAIL\n",
			sbatch:  []string{"--project", "vision", "--notify", "end,fail"},
			ignored: []string{"--partition=gpu", "-n 4", "--exclusive", "--qos high", "--gres=tmpfs:10G"}},
		{name: "begin signal array dependency", script: "#SBATCH --begin=now+1hour --signal=B:USR1@90 -a 0-9%2 -d afterok:1\n",
			sbatch: []string{"--begin", "now+1hour", "--signal", "B:USR1@90", "--array", "0-9%2", "--dependency", "afterok:1"}},
		{name: "#SBATCHX is no directive", script: "#SBATCHX -t 5\n#SBATCH\n", sbatch: nil},
		{name: "bad quote", script: "#CORRAL --name 'x\n", bad: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, err := ParseHeader(c.script)
			if c.bad {
				if err == nil {
					t.Fatalf("want an error, got %+v", h)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(h.Corral, c.corral) || !reflect.DeepEqual(h.Sbatch, c.sbatch) || !reflect.DeepEqual(h.Ignored, c.ignored) {
				t.Fatalf("got\n corral %q\n sbatch %q\n ignored %q\nwant\n corral %q\n sbatch %q\n ignored %q", h.Corral, h.Sbatch, h.Ignored, c.corral, c.sbatch, c.ignored)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	f := Fields{'j': "42", 'x': "sweep", 'u': "ana", 'A': "7", 'a': "3", 'N': "node1", 't': "0"}
	cases := []struct {
		in, want string
		final    bool
	}{
		{"out-%j.log", "out-42.log", true},
		{"%x_%u_%A_%a_%N_%t", "sweep_ana_7_3_node1_0", true},
		{"%%j", "%j", true},
		{"%%j", "%%j", false},
		{"%4a", "0003", true},
		{"%4x", "sweep", true},
		{"%n-%j", "%n-42", false},
		{"trailing%", "trailing%", true},
	}
	for _, c := range cases {
		if got := Expand(c.in, f, c.final); got != c.want {
			t.Errorf("Expand(%q, final %v) = %q, want %q", c.in, c.final, got, c.want)
		}
	}
	for _, bad := range []string{"", "a%", "%q.log", "x\ny"} {
		if CheckPattern(bad) == nil {
			t.Errorf("CheckPattern(%q) = nil, want an error", bad)
		}
	}
	if err := CheckPattern("/tmp/%u/%x-%4j_%%.out"); err != nil {
		t.Error(err)
	}
}

func TestParseSignal(t *testing.T) {
	cases := []struct {
		in   string
		want Signal
		bad  bool
	}{
		{in: "USR1", want: Signal{Name: "USR1", Number: 10, Lead: 60 * time.Second}},
		{in: "B:SIGUSR2@120", want: Signal{Name: "USR2", Number: 12, Lead: 120 * time.Second, Batch: true}},
		{in: "b:term@5m", want: Signal{Name: "TERM", Number: 15, Lead: 5 * time.Minute, Batch: true}},
		{in: "10@0", want: Signal{Name: "USR1", Number: 10}},
		{in: "R:USR1", bad: true},
		{in: "FOO", bad: true},
		{in: "USR1@-1", bad: true},
		{in: "USR1@70000", bad: true},
	}
	for _, c := range cases {
		got, err := ParseSignal(c.in)
		if c.bad != (err != nil) || !c.bad && got != c.want {
			t.Errorf("ParseSignal(%q) = %+v, %v; want %+v (bad %v)", c.in, got, err, c.want, c.bad)
		}
	}
	if s := (Signal{Name: "USR1", Lead: 90 * time.Second, Batch: true}).String(); s != "B:USR1@90" {
		t.Errorf("String = %q", s)
	}
}

// FuzzParseHeader: never panics, and the flags it makes come in pairs,
// a flag then its value.
func FuzzParseHeader(f *testing.F) {
	f.Add("#!/bin/bash\n#SBATCH --gres=gpu:2 -J sweep -t 0:05\n#CORRAL --gpus 1\necho\n")
	f.Add("#SBATCH -G a100:4 --partition gpu\n")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHeader(s)
		if err != nil {
			return
		}
		if len(h.Sbatch)%2 != 0 {
			t.Fatalf("odd flags %q", h.Sbatch)
		}
		for i := 0; i < len(h.Sbatch); i += 2 {
			if !strings.HasPrefix(h.Sbatch[i], "-") {
				t.Fatalf("%q is not a flag in %q", h.Sbatch[i], h.Sbatch)
			}
		}
	})
}

// FuzzExpand: never panics, and a pattern without % is itself.
func FuzzExpand(f *testing.F) {
	f.Add("out-%j-%4a.%%")
	f.Fuzz(func(t *testing.T, p string) {
		got := Expand(p, Fields{'j': "1", 'a': "2"}, true)
		if !strings.Contains(p, "%") && got != p {
			t.Fatalf("Expand(%q) = %q", p, got)
		}
	})
}

// ShellCommand's heredoc ends where the script does, whatever the script
// holds.
func TestShellCommandDelimiter(t *testing.T) {
	s := "#!/bin/sh\necho CORRAL_SCRIPT_EOF\n"
	got := ShellCommand(s, "'a b'")
	if !strings.Contains(got, "<<'CORRAL_SCRIPT_EOF_X'\n"+s+"CORRAL_SCRIPT_EOF_X\n") || !strings.Contains(got, "\"$f\" 'a b'\n") {
		t.Fatalf("ShellCommand:\n%s", got)
	}
}
