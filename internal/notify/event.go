// Package notify tells people what happened to their jobs and admins what
// needs them. It has three parts:
//
//	orchestrator commit ──Events──▶ Planner ──OutboxItems──▶ store (same transaction as the change)
//	                                                              │
//	                          Sender (its own goroutine) ◀──reads─┘──▶ Deliverer: webhook, Slack, email
//
// The Planner is pure routing: it turns events into one outbox row per
// endpoint that wants them, in the orchestrator's transaction, so a
// notification is durable exactly when its cause is. The Sender drains the
// outbox at its own pace, at least once, with retries and digests; it
// never holds the orchestrator's lock. Endpoints (endpoints.go) keep their
// URLs and secrets sealed in the store (seal.go).
package notify

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Kind is what a notification is about. The names are in the webhook
// body's "kind" and in GET /notifications.
type Kind string

// Job kinds.
const (
	JobBegan            Kind = "job.began"
	JobCompleted        Kind = "job.completed"
	JobFailed           Kind = "job.failed"
	JobCanceled         Kind = "job.canceled"
	JobPreempted        Kind = "job.preempted" // stopped for another job and requeued
	JobLost             Kind = "job.lost"      // its node or agent was lost; requeued
	JobTimeLimitWarning Kind = "job.time_limit_warning"
	JobTimeLimit        Kind = "job.time_limit" // reached: being stopped
	JobDependencyNever  Kind = "job.dependency_never_satisfied"
	JobIdle             Kind = "job.idle"
	JobIdleWarning      Kind = "job.idle_warning" // an interactive job idle: it ends at idle_ends_at unless used
	ArrayFinished       Kind = "array.finished"
)

// Admin alert kinds (to cluster endpoints).
const (
	AlertNodeDown         Kind = "alert.node_down"
	AlertNodeUp           Kind = "alert.node_up"
	AlertGPUTemperature   Kind = "alert.gpu_temperature"
	AlertGPUECC           Kind = "alert.gpu_ecc"
	AlertForeignProcess   Kind = "alert.foreign_process"
	AlertQueueWait        Kind = "alert.queue_wait"
	AlertDiskFull         Kind = "alert.disk_full"
	AlertSchedulerStopped Kind = "alert.scheduler_stopped"
	AlertEndpointFailing  Kind = "alert.endpoint_failing"
)

// Other kinds.
const (
	Test   Kind = "test"   // corral notify test
	Digest Kind = "digest" // several events in one message
)

// ReasonDependencyNeverSatisfied is the reason a job ends with when its
// dependencies can no longer be met (the orchestrator's deps.go sets it).
const ReasonDependencyNeverSatisfied = api.ReasonDependencyNeverSatisfied

// Event is one thing to tell. It is stored in the outbox as JSON, so it
// holds no secret and no env value: a job's env never enters an Event.
type Event struct {
	Kind  Kind       `json:"kind"`
	At    time.Time  `json:"at"`
	Job   *JobInfo   `json:"job,omitempty"`
	Array *ArrayInfo `json:"array,omitempty"`
	Alert *Alert     `json:"alert,omitempty"`
	Text  string     `json:"text,omitempty"` // Test: the sentence to send (and a booking's)
	// Booking is the booking a reservation.* event is about (booking.go).
	Booking *BookingInfo `json:"booking,omitempty"`
	Budget  *BudgetInfo  `json:"budget,omitempty"` // budget.go
}

// JobInfo is what a message says about a job.
type JobInfo struct {
	ID             string   `json:"id"`
	Name           string   `json:"name,omitempty"`
	User           string   `json:"user"`
	Project        string   `json:"project"`
	State          string   `json:"state"`
	Reason         string   `json:"reason,omitempty"`
	Message        string   `json:"message,omitempty"`
	ExitCode       *int     `json:"exit_code,omitempty"`
	RuntimeSeconds float64  `json:"runtime_seconds,omitempty"`
	GPUs           int      `json:"gpus"`
	Nodes          []string `json:"nodes,omitempty"`
	Attempt        int      `json:"attempt"`
	ArrayJobID     string   `json:"array_job_id,omitempty"`
	// Filled by the sender, never stored: the job's dashboard page
	// (--public-url) and, for failures, its log's last lines.
	URL     string   `json:"url,omitempty"`
	LogTail []string `json:"log_tail,omitempty"`

	notify      string // the job's notify field (routing only)
	notifyTasks bool
}

// ArrayInfo sums up a finished job array.
type ArrayInfo struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	User      string `json:"user"`
	Project   string `json:"project"`
	Tasks     int    `json:"tasks"`
	Completed int    `json:"completed"`
	Failed    int    `json:"failed"`
	Canceled  int    `json:"canceled"`
	URL       string `json:"url,omitempty"`

	notify string
}

// Alert is an admin alert.
type Alert struct {
	Node    string `json:"node,omitempty"`
	GPU     *int   `json:"gpu,omitempty"`
	Message string `json:"message"`
}

// Job returns the JobInfo of j as it is now (no env, no command).
func Job(j *api.Job, now time.Time) *JobInfo {
	ji := &JobInfo{ID: j.ID, Name: j.Name, User: j.User, Project: j.Project, State: string(j.State), Reason: j.Reason,
		Message: j.Message, GPUs: j.GPUCount * max(j.Nodes, 1), Attempt: j.RetryCount, ArrayJobID: j.ArrayJobID,
		notify: j.Notify, notifyTasks: j.NotifyTasks}
	if j.ExitCode != nil {
		c := *j.ExitCode
		ji.ExitCode = &c
	}
	if j.StartedAt != nil {
		end := now
		if j.FinishedAt != nil {
			end = *j.FinishedAt
		}
		if d := end.Sub(*j.StartedAt); d > 0 {
			ji.RuntimeSeconds = d.Seconds()
		}
	}
	for _, a := range j.Allocation {
		if !slices.Contains(ji.Nodes, a.NodeID) {
			ji.Nodes = append(ji.Nodes, a.NodeID)
		}
	}
	return ji
}

// FromTransition returns the event a job's transition e is, if it is one
// people are told about. j is the job after the transition.
func FromTransition(j *api.Job, e api.Event) (Event, bool) {
	ev := Event{At: e.At, Job: Job(j, e.At)}
	switch {
	case e.To == api.StateRunning && e.From != api.StateRunning:
		ev.Kind = JobBegan
	case e.Reason == ReasonDependencyNeverSatisfied:
		ev.Kind = JobDependencyNever
	case e.To == api.StateCompleted:
		ev.Kind = JobCompleted
	case e.To == api.StateFailed:
		ev.Kind = JobFailed
	case e.To == api.StateCanceled:
		ev.Kind = JobCanceled
	case e.To == api.StateQueued && e.Reason == api.ReasonPreempted:
		ev.Kind = JobPreempted
	case e.To == api.StateQueued && (e.Reason == api.ReasonNodeLost || e.Reason == api.ReasonLost):
		ev.Kind = JobLost
	default:
		return Event{}, false
	}
	// The transition's own state and message, not the job's latest: a
	// batch may carry several transitions of one job.
	ev.Job.State, ev.Job.Reason, ev.Job.Message = string(e.To), e.Reason, e.Message
	return ev, true
}

// classes returns the notify classes an event belongs to.
func classes(k Kind) []string {
	switch k {
	case JobBegan:
		return []string{api.NotifyBegin}
	case JobCompleted, JobCanceled:
		return []string{api.NotifyEnd}
	case JobFailed, JobDependencyNever:
		return []string{api.NotifyEnd, api.NotifyFail}
	case JobLost, JobTimeLimitWarning, JobTimeLimit:
		return []string{api.NotifyFail}
	case JobPreempted, JobIdle, JobIdleWarning:
		return []string{api.NotifyPreempt}
	case ArrayFinished:
		return []string{api.NotifyEnd, api.NotifyFail}
	}
	return nil
}

// LongJob is how long a job must run for its end to be told by default.
const LongJob = 10 * time.Minute

// Wants reports whether a job whose notify field is notify wants an
// event of kind k. The built-in default (""): fail and preempt for every
// job, end for jobs that ran longer than LongJob (runtime). An explicit
// value (a job's own, or its user's own defaults) that says end means
// every end, however long the job ran.
func Wants(notify string, k Kind, runtime time.Duration) bool {
	cs := classes(k)
	if len(cs) == 0 {
		return false
	}
	switch notify {
	case api.NotifyNone:
		return false
	case api.NotifyAll:
		return true
	case "":
		if slices.Contains(cs, api.NotifyFail) || slices.Contains(cs, api.NotifyPreempt) {
			return true
		}
		return (slices.Contains(cs, api.NotifyEnd)) && (runtime > LongJob || k == ArrayFinished)
	}
	for c := range strings.SplitSeq(notify, ",") {
		if slices.Contains(cs, c) {
			return true
		}
	}
	return false
}

// taskWanted reports whether an array task's event goes out on its own:
// with notify_tasks every wanted one, else only failures (which become
// digests when there are many).
func taskWanted(ji *JobInfo, k Kind) bool {
	if ji.notifyTasks {
		return true
	}
	return k == JobFailed || k == JobDependencyNever || k == JobTimeLimit
}

// Summary is one line saying what happened.
func (ev Event) Summary() string {
	switch {
	case ev.Job != nil:
		j := ev.Job
		s := fmt.Sprintf("%s %s (%s): %s", jobWord(j), jobLabel(j), j.User, kindText(ev.Kind))
		if j.Message != "" && ev.Kind != JobBegan {
			s += ": " + j.Message
		}
		return s
	case ev.Array != nil:
		a := ev.Array
		name := a.ID
		if a.Name != "" {
			name = a.Name + " (" + a.ID + ")"
		}
		return fmt.Sprintf("Array %s (%s) finished: %d tasks, %d completed, %d failed, %d canceled", name, a.User, a.Tasks, a.Completed, a.Failed, a.Canceled)
	case ev.Alert != nil:
		return fmt.Sprintf("[%s] %s", strings.TrimPrefix(string(ev.Kind), "alert."), ev.Alert.Message)
	}
	if ev.Text != "" {
		return ev.Text
	}
	return string(ev.Kind)
}

func jobWord(j *JobInfo) string {
	if j.ArrayJobID != "" {
		return "Task"
	}
	return "Job"
}

func jobLabel(j *JobInfo) string {
	if j.Name != "" {
		return j.Name + " (" + j.ID + ")"
	}
	return j.ID
}

func kindText(k Kind) string {
	switch k {
	case JobBegan:
		return "began running"
	case JobCompleted:
		return "completed"
	case JobFailed:
		return "failed"
	case JobCanceled:
		return "was canceled"
	case JobPreempted:
		return "was preempted and requeued"
	case JobLost:
		return "was lost with its node and requeued"
	case JobTimeLimitWarning:
		return "has used 80% of its time limit"
	case JobTimeLimit:
		return "reached its time limit and is being stopped"
	case JobDependencyNever:
		return "will never run: its dependencies can no longer be satisfied"
	case JobIdle:
		return "is idle: its GPUs are under the idle threshold"
	case JobIdleWarning:
		return "is idle (nothing attached, GPUs quiet) and will be ended unless used"
	}
	return string(k)
}

// ArrayEvent is the array.finished event of a; notify is its tasks'
// notify field.
func ArrayEvent(a *ArrayInfo, notify string, at time.Time) Event {
	a.notify = notify
	return Event{Kind: ArrayFinished, At: at.UTC(), Array: a}
}
