package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

func TestNotebookCommand(t *testing.T) {
	const flags = ` --port="$CORRAL_NOTEBOOK_PORT" --ip=127.0.0.1 --no-browser --ServerApp.base_url="/proxy/$CORRAL_JOB_ID/" --ServerApp.allow_remote_access=True` +
		` --NotebookApp.base_url="/proxy/$CORRAL_JOB_ID/" --NotebookApp.allow_remote_access=True`
	const env = `JUPYTER_TOKEN="$CORRAL_NOTEBOOK_TOKEN" exec `
	for _, c := range []struct{ in, want string }{
		{"jupyter lab", env + "jupyter lab" + flags},
		{"jupyter notebook --notebook-dir ~/w", env + "jupyter notebook --notebook-dir ~/w" + flags},
		{"/opt/conda/bin/jupyter-lab", env + "/opt/conda/bin/jupyter-lab" + flags},
		{"jupyter-notebook", env + "jupyter-notebook" + flags},
		{"jupyter server", env + "jupyter server" + flags},
		{"jupyter console", "jupyter console"},
		{"jupyter", "jupyter"},
		{"python -m http.server $CORRAL_NOTEBOOK_PORT", "python -m http.server $CORRAL_NOTEBOOK_PORT"},
		{"./jupyterish lab", "./jupyterish lab"},
	} {
		if got := notebookCommand(c.in); got != c.want {
			t.Errorf("notebookCommand(%q)\n got %s\nwant %s", c.in, got, c.want)
		}
	}
}

// TestNotebookRequest: corral notebook submits a notebook of class
// interactive with the submit flags, and with --no-wait prints its URL
// at once.
func TestNotebookRequest(t *testing.T) {
	f := newFakeServer(t)
	job := sampleJob()
	f.on("POST", "/queue/submit", 201, job)
	r := f.run("notebook", "--gpus", "2", "--time-limit", "4h", "--cmd", "./stub --x", "--no-wait")
	if r.code != 0 || strings.TrimSpace(r.stdout) != f.srv.URL+"/proxy/"+job.ID+"/" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	var req api.SubmitRequest
	if err := json.Unmarshal(f.last().Body, &req); err != nil {
		t.Fatal(err)
	}
	if !req.Notebook || req.Class != api.ClassInteractive || req.Command != "./stub --x" || req.GPUCount == nil || *req.GPUCount != 2 || string(req.TimeLimit) != `"4h"` {
		t.Errorf("the submission: %+v", req)
	}
	for name, args := range map[string][]string{
		"an array":     {"notebook", "--array", "0-3"},
		"two nodes":    {"notebook", "--nodes", "2"},
		"an empty cmd": {"notebook", "--cmd", " "},
		"an argument":  {"notebook", "jupyter"},
	} {
		if r := f.run(args...); r.code != 2 {
			t.Errorf("%s: exit %d (%s), want 2", name, r.code, r.stderr)
		}
	}
}
