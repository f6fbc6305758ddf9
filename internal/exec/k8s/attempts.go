package k8s

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/breaker"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/exec/k8s/pod"
)

// key names an attempt.
type key struct {
	job     string
	attempt int
}

// attempt is one attempt the executor follows. Its fields are guarded by
// the executor's mu.
type attempt struct {
	task     exec.Task
	objs     pod.Attempt
	ranks    []*rank
	created  bool // every object was created (or the attempt was adopted)
	adopted  bool // to be checked against the pods the API server has
	started  bool // Started was sent
	stopping bool // a stop was asked: a pod that goes away was terminated
	grace    time.Duration
	failed   *exec.Update // the first rank's end that was a failure
	ending   bool         // every rank ended; its logs are being flushed
}

// rank is one pod of an attempt.
type rank struct {
	seen bool         // the informer saw the pod
	end  *exec.Update // its end, once known
	log  *rankLog
}

// rankLogPath is where rank r's output goes: the attempt's log for rank 0,
// N.rankR.log beside it for the others (the orchestrator's RankLogPath).
func rankLogPath(logPath string, r int) string {
	if r == 0 || logPath == "" {
		return logPath
	}
	return strings.TrimSuffix(logPath, ".log") + ".rank" + strconv.Itoa(r) + ".log"
}

func (e *Executor) newAttempt(t exec.Task) *attempt {
	a := &attempt{task: t, objs: pod.Build(t, e.opts), grace: e.cfg.Grace}
	for i := range a.objs.Pods {
		a.ranks = append(a.ranks, &rank{log: newRankLog(rankLogPath(t.LogPath, i), e.cfg.MaxLogSize)})
	}
	return a
}

// Start creates the attempt's pods (and a gang's Service) in the
// background and returns: it is called from the orchestrator's loop,
// which must not wait on the network. While the API server cannot be
// reached the creation is retried behind the breaker; a creation the
// server refuses ends the attempt (Exited with Err). A node that is not
// a usable node of the cluster is refused here.
func (e *Executor) Start(ctx context.Context, t exec.Task) error {
	synced := false
	select {
	case <-e.synced:
		synced = true
	default:
	}
	for _, rk := range pod.Ranks(t) {
		name := NodeName(rk.NodeID)
		if name == "" {
			return fmt.Errorf("k8s: node %s is not a Kubernetes node (their ids start with %q)", rk.NodeID, NodePrefix)
		}
		e.mu.Lock()
		ok := e.ready[rk.NodeID]
		e.mu.Unlock()
		if synced && !ok && e.br.Snapshot().State == breaker.Closed {
			return fmt.Errorf("k8s: node %s is not a Ready, schedulable node with GPUs of the cluster", name)
		}
	}
	a := e.newAttempt(t)
	k := key{t.JobID, t.Attempt}
	e.mu.Lock()
	e.tasks[k] = a
	e.mu.Unlock()
	go e.create(context.WithoutCancel(ctx), k, a)
	return nil
}

// retryWait is how long a call refused for an unreachable server waits
// before it is tried again: until the breaker's next probe, at least 100ms.
func (e *Executor) retryWait() time.Duration {
	s := e.br.Snapshot()
	if d := s.RetryAt.Sub(e.cfg.Now()); d > 100*time.Millisecond {
		return min(d, 10*time.Second)
	}
	return 200 * time.Millisecond
}

// create creates a's objects, retrying while the server is away.
func (e *Executor) create(ctx context.Context, k key, a *attempt) {
	log := e.log.With("job_id", k.job, "attempt", k.attempt)
	ns := e.cfg.Namespace
	steps := []func(ctx context.Context) error{}
	if s := a.objs.Service; s != nil {
		steps = append(steps, func(ctx context.Context) error {
			_, err := e.cfg.Client.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{})
			return err
		})
	}
	for _, p := range a.objs.Pods {
		steps = append(steps, func(ctx context.Context) error {
			_, err := e.cfg.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			return err
		})
	}
	for i := 0; i < len(steps); {
		e.mu.Lock()
		stopping := a.stopping
		e.mu.Unlock()
		if stopping {
			log.Info("stopped before its pods were all created")
			e.deletePods(ctx, k, a)
			return
		}
		err := e.call(func() error {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			defer cancel()
			return steps[i](cctx)
		})
		switch {
		case err == nil, apierrors.IsAlreadyExists(err):
			i++
		case errors.Is(err, breaker.ErrOpen) || Unreachable(err):
			log.Warn("Kubernetes API server unreachable; the pods are created once it answers", "err", err)
			select {
			case <-time.After(e.retryWait()):
			case <-ctx.Done():
				return
			}
		default:
			log.Warn("pod refused by the API server", "err", err)
			e.mu.Lock()
			a.stopping = true
			e.mu.Unlock()
			e.deleteObjects(ctx, a)
			e.finish(k, exec.Update{ExitCode: -1, Err: fmt.Errorf("k8s: create the attempt's objects: %w", err)})
			return
		}
	}
	e.mu.Lock()
	a.created = true
	stopping := a.stopping // a Stop while the last object was created left it to us
	e.mu.Unlock()
	log.Info("pods created", "pods", len(a.objs.Pods))
	if stopping {
		e.deletePods(ctx, k, a)
	}
}

// Adopt follows an attempt whose pods were created before the server
// restarted: once the informers have listed, each pod's status decides
// (running, ended with its exit code, or gone: lost).
func (e *Executor) Adopt(ctx context.Context, t exec.Task) error {
	a := e.newAttempt(t)
	a.created, a.adopted = true, true
	for _, r := range a.ranks {
		if fi, err := os.Stat(r.log.path); err == nil {
			r.log.written = fi.Size() // what was copied before the restart
		}
	}
	k := key{t.JobID, t.Attempt}
	e.mu.Lock()
	e.tasks[k] = a
	e.mu.Unlock()
	select {
	case <-e.synced:
		go e.checkAdopted(k)
	default: // Run's sync calls adoptPending
	}
	return nil
}

// adoptPending checks every adopted attempt once the informers synced.
func (e *Executor) adoptPending(context.Context) {
	e.mu.Lock()
	var ks []key
	for k, a := range e.tasks {
		if a.adopted {
			ks = append(ks, k)
		}
	}
	e.mu.Unlock()
	for _, k := range ks {
		e.checkAdopted(k)
	}
}

// checkAdopted brings an adopted attempt to what its pods say.
func (e *Executor) checkAdopted(k key) {
	e.mu.Lock()
	a, ok := e.tasks[k]
	if !ok || !a.adopted {
		e.mu.Unlock()
		return
	}
	a.adopted = false
	names := make([]string, len(a.objs.Pods))
	for i, p := range a.objs.Pods {
		names[i] = p.Namespace + "/" + p.Name
	}
	e.mu.Unlock()
	missing := 0
	for _, n := range names {
		o, exists, err := e.podInf.GetStore().GetByKey(n)
		if err != nil || !exists {
			missing++
			continue
		}
		e.podChanged(o)
	}
	switch {
	case missing == len(names):
		// None there: the server stopped before it created them (or they
		// were deleted by hand); Unstarted lets the orchestrator requeue
		// an attempt it did not know to run without counting a retry.
		e.lose(k, api.ReasonLost, true, fmt.Errorf("k8s: none of the attempt's pods is in namespace %s (not created before the server stopped, or deleted)", e.cfg.Namespace))
	case missing > 0:
		e.lose(k, api.ReasonLost, false, fmt.Errorf("k8s: %d of the attempt's %d pods are gone from namespace %s (deleted while the server was down?)", missing, len(names), e.cfg.Namespace))
	}
}

// Stop deletes the attempt's pods with gracePeriodSeconds = grace: the
// kubelet sends SIGTERM, then SIGKILL after grace. It returns at once; the
// pods' final status gives the Exited update. While the API server is
// away the deletion is retried behind the breaker.
func (e *Executor) Stop(ctx context.Context, jobID string, att int, grace time.Duration) error {
	k := key{jobID, att}
	e.mu.Lock()
	a, ok := e.tasks[k]
	created := ok && a.created
	if ok {
		a.stopping, a.grace = true, grace
	}
	e.mu.Unlock()
	if created {
		go e.deletePods(context.WithoutCancel(ctx), k, a)
	} // else: create sees stopping and deletes what it made
	return nil
}

// Settled deletes the pods and Service of an attempt whose end the
// orchestrator recorded, Config.KeepEnded later: until the end is
// recorded they are kept, so that an end the server reported but did not
// commit before it died is read again from the pods after a restart
// (exec.Settler); after it, for whoever wants to compare (kubectl).
func (e *Executor) Settled(jobID string, att int) {
	t := exec.Task{JobID: jobID, Attempt: att}
	sel := metav1.ListOptions{LabelSelector: fmt.Sprintf("%s=%s,%s=%d", pod.LabelJob, pod.Labels(t, -1)[pod.LabelJob], pod.LabelAttempt, att)}
	time.AfterFunc(e.cfg.KeepEnded, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ns := e.cfg.Namespace
		err := e.call(func() error {
			return e.cfg.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
		})
		if err == nil {
			err = e.call(func() error {
				return ignoreNotFound(e.cfg.Client.CoreV1().Services(ns).Delete(ctx, pod.AttemptName(jobID, att), metav1.DeleteOptions{}))
			})
		}
		if err != nil {
			e.log.Warn("ended attempt's pods not deleted", "job_id", jobID, "attempt", att, "err", err)
		}
	})
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// deletePods deletes the pods of a's ranks that have not ended, with the
// attempt's grace, retrying while the server is away. A pod that was
// never seen and is not there ends its rank as terminated.
func (e *Executor) deletePods(ctx context.Context, k key, a *attempt) {
	e.mu.Lock()
	secs := int64((a.grace + time.Second - 1) / time.Second)
	secs = max(secs, 1) // 0 would remove the object before the kubelet kills the process
	e.mu.Unlock()
	for i, p := range a.objs.Pods {
		e.mu.Lock()
		done, seen := a.ranks[i].end != nil, a.ranks[i].seen
		e.mu.Unlock()
		if done {
			continue
		}
		for {
			err := e.call(func() error {
				dctx, cancel := context.WithTimeout(ctx, callTimeout)
				defer cancel()
				return e.cfg.Client.CoreV1().Pods(p.Namespace).Delete(dctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &secs})
			})
			if errors.Is(err, breaker.ErrOpen) || Unreachable(err) {
				select {
				case <-time.After(e.retryWait()):
					continue
				case <-ctx.Done():
					return
				}
			}
			if apierrors.IsNotFound(err) && !seen {
				e.rankEnded(k, i, &exec.Update{ExitCode: 128 + 15, Signal: "terminated"})
			} else if err != nil && !apierrors.IsNotFound(err) {
				e.log.Warn("pod not deleted", "job_id", k.job, "pod", p.Name, "err", err)
			}
			break
		}
	}
	if s := a.objs.Service; s != nil {
		_ = e.call(func() error {
			return ignoreNotFound(e.cfg.Client.CoreV1().Services(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{}))
		})
	}
}

// deleteObjects removes whatever of a's objects exist, at once.
func (e *Executor) deleteObjects(ctx context.Context, a *attempt) {
	zero := int64(0)
	for _, p := range a.objs.Pods {
		_ = e.call(func() error {
			return ignoreNotFound(e.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
		})
	}
	if s := a.objs.Service; s != nil {
		_ = e.call(func() error {
			return ignoreNotFound(e.cfg.Client.CoreV1().Services(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{}))
		})
	}
}

// keyOf reads an attempt's key and rank from a pod's labels.
func keyOf(p *corev1.Pod) (key, int, bool) {
	att, err1 := strconv.Atoi(p.Labels[pod.LabelAttempt])
	r, err2 := strconv.Atoi(p.Labels[pod.LabelRank])
	job, ok := p.Labels[pod.LabelJob]
	if err1 != nil || err2 != nil || !ok || r < 0 {
		return key{}, 0, false
	}
	return key{job, att}, r, true
}

// lookup finds the attempt of a pod: label values may have been altered
// to fit, so the pod's name is checked against the attempt's own.
func (e *Executor) lookup(p *corev1.Pod) (key, *attempt, int, bool) {
	k, r, ok := keyOf(p)
	if !ok {
		return key{}, nil, 0, false
	}
	for kk, a := range e.tasks {
		if kk.attempt == k.attempt && r < len(a.objs.Pods) && a.objs.Pods[r].Name == p.Name {
			return kk, a, r, true
		}
	}
	return key{}, nil, 0, false
}

// podChanged follows a pod's status: its rank runs (rank 0's start is the
// attempt's Started, and its log is followed) or ended.
func (e *Executor) podChanged(o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	e.mu.Lock()
	k, a, r, ok := e.lookup(p)
	if !ok || a.adopted || a.ranks[r].end != nil {
		e.mu.Unlock()
		return
	}
	a.ranks[r].seen = true
	running, end, digest := StatusOf(p, a.stopping)
	sendStart := r == 0 && running && !a.started
	if sendStart {
		a.started = true
	}
	rl := a.ranks[r].log
	e.mu.Unlock()
	if running {
		e.follow(k, p.Namespace, p.Name, rl)
	}
	if sendStart {
		e.cfg.Sink(exec.Update{JobID: k.job, Attempt: k.attempt, Kind: exec.Started, At: e.cfg.Now(), ImageDigest: digest})
	}
	if end != nil {
		e.rankEnded(k, r, end)
	}
}

// podDeleted ends the rank of a pod that went away before it ended: as
// terminated when a stop was asked, else lost.
func (e *Executor) podDeleted(o any) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	e.mu.Lock()
	k, a, r, ok := e.lookup(p)
	if !ok || a.ranks[r].end != nil {
		e.mu.Unlock()
		return
	}
	stopping := a.stopping
	e.mu.Unlock()
	if _, end, _ := StatusOf(p, stopping); end != nil {
		e.rankEnded(k, r, end)
		return
	}
	if stopping {
		e.rankEnded(k, r, &exec.Update{ExitCode: 128 + 15, Signal: "terminated"})
		return
	}
	e.rankEnded(k, r, &exec.Update{ExitCode: -1, Lost: api.ReasonLost,
		Err: fmt.Errorf("k8s: pod %s/%s was deleted before it ended (not by Corral)", p.Namespace, p.Name)})
}

// lose ends every rank of the attempt that has not ended with Lost reason
// (and Unstarted: no rank ever ran).
func (e *Executor) lose(k key, reason string, unstarted bool, err error) {
	e.mu.Lock()
	a, ok := e.tasks[k]
	var open []int
	if ok {
		for i, r := range a.ranks {
			if r.end == nil {
				open = append(open, i)
			}
		}
	}
	e.mu.Unlock()
	for _, i := range open {
		e.rankEnded(k, i, &exec.Update{ExitCode: -1, Lost: reason, Unstarted: unstarted, Err: err})
	}
}

// rankEnded records a rank's end. A failed rank stops the rest of the
// gang; the attempt ends once every rank has, its logs flushed, with the
// status of the first rank that failed unasked (else rank 0's).
func (e *Executor) rankEnded(k key, r int, u *exec.Update) {
	e.mu.Lock()
	a, ok := e.tasks[k]
	if !ok || a.ranks[r].end != nil {
		e.mu.Unlock()
		return
	}
	a.ranks[r].end = u
	// A rank that fails before any stop was asked decides the attempt's
	// end and stops the rest; ends after a stop are its consequences
	// (rank 0's end is then the attempt's).
	failed := u.ExitCode != 0 || u.Err != nil || u.Lost != ""
	stopRest := failed && a.failed == nil && !a.stopping
	if stopRest {
		a.failed = u
	}
	done := true
	for _, x := range a.ranks {
		done = done && x.end != nil
	}
	if stopRest && !done {
		a.stopping = true
	}
	if done {
		a.ending = true
	}
	e.mu.Unlock()
	switch {
	case done:
		go e.complete(k, a)
	case stopRest:
		go e.deletePods(context.Background(), k, a)
	}
}

// complete flushes the ranks' logs and reports the attempt's end.
func (e *Executor) complete(k key, a *attempt) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, r := range a.ranks {
		e.flush(ctx, k, a.objs.Pods[i].Namespace, a.objs.Pods[i].Name, r.log)
	}
	e.mu.Lock()
	u := a.failed
	if u == nil {
		u = a.ranks[0].end
	}
	e.mu.Unlock()
	e.finish(k, *u)
}

// finish forgets the attempt and reports its end, timed by the server's
// clock.
func (e *Executor) finish(k key, u exec.Update) {
	e.mu.Lock()
	_, ok := e.tasks[k]
	delete(e.tasks, k)
	e.mu.Unlock()
	if !ok {
		return
	}
	u.JobID, u.Attempt, u.Kind, u.At = k.job, k.attempt, exec.Exited, e.cfg.Now()
	e.cfg.Sink(u)
}
