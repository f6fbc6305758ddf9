package sim

import (
	"bytes"
	"testing"
)

// The trace parsers under fuzzing: any input gives jobs or an error,
// never a panic, and the jobs they give are sane. Seed corpora are in
// testdata/fuzz/<target>; CI runs each target for a few seconds.

func FuzzReadPhilly(f *testing.F) {
	f.Add([]byte("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-03 14:05:00,3600,8,28800,c1\n2017-10-03 14:06:00,60,1,60,c2\n"))
	f.Add([]byte("duration,num_gpus,timestamp\n10,0,2017-10-03 14:05:00\n"))
	f.Add([]byte("timestamp,duration\n"))
	f.Add([]byte("timestamp,duration,num_gpus\n2017-10-03 14:05:00,-1,1.5\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, teams := range []string{TeamsFromCluster, TeamsFromNone} {
			jobs, err := ReadPhilly(bytes.NewReader(data), teams)
			if err == nil {
				checkJobs(t, jobs)
			}
		}
	})
}

func FuzzReadJSONL(f *testing.F) {
	f.Add([]byte(`{"id":"a","submit":0,"duration_s":3600,"gpus":8,"user":"ana","project":"vision","priority":"high","estimate_s":3000,"cluster":"c1"}` + "\n" +
		`# a comment` + "\n\n" + `{"submit":"2026-01-01T00:00:00Z","duration_s":1,"gpus":0}` + "\n"))
	f.Add([]byte(`{"id":"a","submit":1,"duration_s":1,"gpus":1}` + "\n" + `{"id":"a","submit":2,"duration_s":1,"gpus":1}`))
	f.Add([]byte(`{"submit":-1e308,"duration_s":1e308,"gpus":-1,"priority":9}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, teams := range []string{TeamsFromCluster, TeamsFromUser, TeamsFromProject, TeamsFromNone} {
			jobs, err := ReadJSONL(bytes.NewReader(data), teams)
			if err == nil {
				checkJobs(t, jobs)
			}
		}
	})
}

// checkJobs: what a parser accepted is usable by the replay.
func checkJobs(t *testing.T, jobs []Job) {
	t.Helper()
	for i, j := range jobs {
		if j.GPUs < 0 || j.Duration < 0 {
			t.Fatalf("job %d: %d GPUs for %v", i, j.GPUs, j.Duration)
		}
		if i > 0 && j.Submit.Before(jobs[i-1].Submit) {
			t.Fatalf("jobs out of submission order at %d", i)
		}
	}
}
