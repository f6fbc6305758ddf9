package orchestrator

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestNotebookSubmission: a notebook job gets its own secret (hidden from
// nobody who sees its env, never the same twice) and its task the
// attempt's port; what a notebook cannot be is refused naming the field.
func TestNotebookSubmission(t *testing.T) {
	h := start(t, "", nil)
	a := h.submit(api.SubmitRequest{Command: "nb", User: "ana", GPUCount: gpus(1), Notebook: true, Env: map[string]string{"A": "1"}})
	b := h.submit(api.SubmitRequest{Command: "nb", User: "ana", GPUCount: gpus(1), Notebook: true})
	if !a.Notebook || len(a.Env[api.NotebookTokenVar]) != 48 || a.Env[api.NotebookTokenVar] == b.Env[api.NotebookTokenVar] || a.Env["A"] != "1" {
		t.Fatalf("notebook jobs: %v %v / %v", a.Notebook, a.Env, b.Env)
	}
	for range 2 {
		task := h.nextStart()
		j := a
		if task.JobID == b.ID {
			j = b
		}
		if got, want := task.Env[api.NotebookPortVar], strconv.Itoa(api.NotebookPort(j.ID, 0)); got != want {
			t.Errorf("task of %s: %s=%q, want %s", j.ID, api.NotebookPortVar, got, want)
		}
		if got, want := task.Env[api.NotebookTokenVar], api.NotebookSecret(j.Env[api.NotebookTokenVar], 0); got != want || got == j.Env[api.NotebookTokenVar] {
			t.Errorf("task of %s: %s=%q, want the attempt's secret %q", j.ID, api.NotebookTokenVar, got, want)
		}
	}
	plain := h.submit(api.SubmitRequest{Command: "x", User: "ana", GPUCount: gpus(1)})
	if plain.Notebook || plain.Env[api.NotebookTokenVar] != "" {
		t.Errorf("a plain job: notebook %v env %v", plain.Notebook, plain.Env)
	}
	if task := h.nextStart(); task.Env[api.NotebookPortVar] != "" {
		t.Errorf("a plain job's task has %s", api.NotebookPortVar)
	}

	for name, req := range map[string]api.SubmitRequest{
		"an array": {Command: "nb", User: "ana", GPUCount: gpus(1), Array: "0-3", Notebook: true},
	} {
		_, _, err := h.o.Submit(context.Background(), req, "")
		var e *api.Error
		if !errors.As(err, &e) || e.Status != 422 || e.Field != "notebook" {
			t.Errorf("%s: %v, want 422 naming notebook", name, err)
		}
	}
}
