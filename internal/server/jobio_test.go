package server

import (
	"context"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestScriptHiddenFromOthers: a job's batch script is hidden from those
// who may not act on the job (a viewer, another user), as its env is, in
// the job and in the list; its owner and an admin read it.
func TestScriptHiddenFromOthers(t *testing.T) {
	e := newAuthEnv(t)
	j, _, err := e.o.Submit(context.Background(), api.SubmitRequest{User: "alice", Project: "nlp", Workdir: "/tmp", GPUCount: intp(1),
		Script: "#!/bin/sh\nexport HF_TOKEN=" + secretValue + "\n", ScriptName: "train.sh"}, "")
	if err != nil {
		t.Fatal(err)
	}
	for caller, visible := range map[string]bool{"viewer": false, "other": false, "owner": true, "admin": true} {
		for _, path := range []string{"/jobs/" + j.ID, "/jobs"} {
			_, body := e.do(caller, "GET", path, "", nil)
			if strings.Contains(string(body), secretValue) != visible || !strings.Contains(string(body), "train.sh") {
				t.Errorf("%s GET %s: script visible %v, want %v: %s", caller, path, !visible, visible, body)
			}
		}
	}
}
