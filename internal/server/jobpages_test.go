package server

import (
	"bytes"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestWriteJobListAsWriteJSON: GET /jobs's answer, written a job at a
// time, is byte for byte what the encoder wrote of the whole page.
func TestWriteJobListAsWriteJSON(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	two := []api.Job{
		{ID: "j2", Command: "echo <a> & \"b\"", Env: map[string]string{"K": "v"}, SubmittedAt: at, Allocation: []api.Allocation{}},
		{ID: "j1", Command: "x", SubmittedAt: at, Allocation: []api.Allocation{{NodeID: "n1", GPUID: 3}}},
	}
	for name, l := range map[string]api.JobList{
		"empty":           {Jobs: []api.Job{}},
		"jobs":            {Jobs: two},
		"with cursor":     {Jobs: two, NextCursor: "j1"},
		"with arrays":     {Jobs: two[:1], Arrays: []api.Array{{ID: "a1", TaskCount: 3}}, NextCursor: "j2"},
		"arrays, no jobs": {Jobs: []api.Job{}, Arrays: []api.Array{{ID: "a1"}}},
	} {
		t.Run(name, func(t *testing.T) {
			want, got := httptest.NewRecorder(), httptest.NewRecorder()
			if err := writeJSON(want, 200, l); err != nil {
				t.Fatal(err)
			}
			if err := writeJobList(got, l); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
				t.Errorf("got\n%s\nwant\n%s", got.Body.Bytes(), want.Body.Bytes())
			}
		})
	}
}
