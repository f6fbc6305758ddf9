// Package runtimes is learned run times on the live server, a feature of
// the orchestrator's loop: each attempt that runs to its own end becomes
// a row of the store's runs table, written in the transaction that ends
// it, and a sample of a sched.Predictor; each queued and running job's
// estimate is built from it (Estimator): the user's estimated_duration
// when given, else the predictor's, else the fallback (a user's mean,
// the policy default). At recovery the predictor learns again from the
// most recent rows (Load), so a restart keeps what was learned.
//
//	attempt ends ─▶ Moved ─▶ batch.Runs + Predictor.Observe
//	snapshot ─▶ Estimator ─▶ sched.Job.Estimate (high end), EstimatePoint, EstimateLow
//
// What it reads of the orchestrator's books (a GPU's model) comes through
// Cluster. Its methods are called with the orchestrator's lock held (the
// write lock, but for Basis and an Estimator used by a read); its own
// mutex keeps the predictor safe for readers.
package runtimes

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/sched"
	"github.com/corral-sched/corral/internal/store"
)

// Cluster is what the feature reads of the orchestrator's books: the
// node books themselves (nodebook.Book).
type Cluster interface {
	// GPUModel is the model of a node's GPU ("" when unknown).
	GPUModel(node string, gpu int) string
}

// Book holds the learned run times.
type Book struct {
	cluster Cluster
	mu      sync.Mutex
	pred    *sched.Predictor
	prints  map[string]string // live job id -> its command's fingerprint
	memo    map[query]learned // queued jobs' predictions, until the next sample
}

type query struct {
	user, name, print string
	gpus              int
	limit             time.Duration
}

type learned struct {
	p     sched.Prediction
	ok    bool
	basis string // p.String(user), made once
}

// New returns a Book with no history, keeping the predictor's default
// window and minimum of samples.
func New(c Cluster) *Book {
	return &Book{cluster: c, pred: sched.NewPredictor(0, 0), prints: map[string]string{}, memo: map[query]learned{}}
}

// Counts reports whether a transition ends a run the predictor learns
// from: a running attempt whose process ended on its own (exit code 0,
// another code or a signal, out of memory) or at its time limit. An
// attempt canceled, preempted, lost with its node, reclaimed idle or
// ended with its booking says when something else stopped it, not how
// long the job runs; one that never ran is no run at all.
func Counts(e api.Event) bool {
	if e.From != api.StateRunning {
		return false
	}
	switch e.Reason {
	case api.ReasonExited, api.ReasonExitCode, api.ReasonOutOfMemory, api.ReasonTimeLimit:
		return true
	}
	return false
}

// Fingerprint is the fingerprint of a job's command (and script) that
// the runs table keeps: the first 16 hex digits of its SHA-256.
func Fingerprint(j *api.Job) string {
	h := sha256.New()
	h.Write([]byte(j.Command))
	if j.Script != "" {
		h.Write([]byte{0})
		h.Write([]byte(j.Script))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Moved writes the run row of an attempt that ended a run (Counts) in
// tx and learns from it, and forgets an ended job's fingerprint
// (feature.Mover).
func (b *Book) Moved(tx feature.Tx, j *api.Job, e api.Event) {
	if !Counts(e) || j.StartedAt == nil {
		if j.State.Terminal() {
			b.forget(j.ID)
		}
		return
	}
	end := tx.Now()
	if j.FinishedAt != nil {
		end = *j.FinishedAt
	}
	ran := end.Sub(*j.StartedAt)
	if ran < 0 {
		return
	}
	r := store.RunRow{JobID: j.ID, Attempt: j.RetryCount, User: j.User, Project: j.Project, Name: j.Name,
		GPUs: gpusOf(j), Ran: ran, EndedAt: end, Outcome: e.Reason}
	if j.TimeLimit != nil {
		r.TimeLimit = j.TimeLimit.Duration()
	}
	if len(j.Allocation) > 0 {
		r.GPUModel = b.cluster.GPUModel(j.Allocation[0].NodeID, j.Allocation[0].GPUID)
	}
	b.mu.Lock()
	r.CommandFP = b.print(j)
	delete(b.prints, j.ID)
	b.observe(r)
	b.mu.Unlock()
	batch := tx.Batch()
	batch.Runs = append(batch.Runs, r)
}

// Load learns again from the most recent runs the store kept
// (feature.Loader).
func (b *Book) Load(st *store.State) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range st.Runs {
		b.observe(r)
	}
}

// observe teaches the predictor one run. b.mu held.
func (b *Book) observe(r store.RunRow) {
	b.pred.Observe(sched.Attempt{User: r.User, Project: r.Project, Name: r.Name, Command: r.CommandFP, GPUs: r.GPUs,
		GPUModel: r.GPUModel, TimeLimit: r.TimeLimit, Ran: r.Ran})
	clear(b.memo)
}

func (b *Book) forget(id string) {
	b.mu.Lock()
	delete(b.prints, id)
	b.mu.Unlock()
}

// print is j's fingerprint, computed once while it lives. b.mu held.
func (b *Book) print(j *api.Job) string {
	fp, ok := b.prints[j.ID]
	if !ok {
		fp = Fingerprint(j)
		b.prints[j.ID] = fp
	}
	return fp
}

// gpusOf is the GPUs a job's attempt holds (or asks for, before one).
func gpusOf(j *api.Job) int {
	if n := len(j.Allocation); n > 0 {
		return n
	}
	return j.GPUCount * max(j.Nodes, 1)
}
