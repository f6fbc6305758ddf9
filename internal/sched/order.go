package sched

import (
	"container/heap"
	"slices"
	"strings"
	"time"
)

// runningCharge is how much a GPU in use counts toward its user's and
// project's share when fair_share ranks them within a cycle: one hour of
// GPU time. It makes a cycle that hands out many GPUs alternate between
// users instead of giving all of them to the first.
const runningCharge = 3600.0

// UserStanding is a user's fair-share standing as a cycle starts: decayed
// GPU-seconds (usage, running attempts included, see ChargeRunning) plus
// runningCharge per GPU held (held: jobs being preempted left out), per the
// user's weight. The user who stands lower is served first, and under
// fair_share may preempt an equal-priority job only of a user who stands
// higher (see eligible). Callers that predict the core (the simulator's
// test of whether a cycle could preempt) use it to get the same figure.
func UserStanding(p *Policy, user string, usage float64, held int) float64 {
	return userStanding(p, user, usage, float64(held))
}

// userStanding is UserStanding with held in GPU-equivalents: a running
// slice or share counts its fraction of the GPU, as the usage ledger
// charges it.
func userStanding(p *Policy, user string, usage, held float64) float64 {
	return (usage + runningCharge*held) / weight(p.UserWeights, user)
}

// ProjectStanding is UserStanding for a project, by the project's weight:
// fair_share serves projects in this order, then users within each.
func ProjectStanding(p *Policy, project string, usage float64, held int) float64 {
	return projectStanding(p, project, usage, float64(held))
}

// projectStanding is ProjectStanding with held in GPU-equivalents.
func projectStanding(p *Policy, project string, usage, held float64) float64 {
	return (usage + runningCharge*held) / weight(p.ProjectWeights, project)
}

// walker yields queued jobs in the policy's order. placed tells it a job
// got (or will get) GPUs, e of them in GPU-equivalents (a slice or share
// its fraction), which moves fair_share's ranking.
type walker interface {
	next() (*Job, bool)
	placed(j *Job, e float64)
	// again yields the last job once more, when its turn comes again (a
	// group's next job, see group.go).
	again()
}

// staticKey is the sort key of the policies whose order does not change
// within a cycle. Smaller first.
func staticKey(j *Job, p *Policy) time.Time {
	switch p.Name {
	case PolicyPriority, PolicyFairShare:
		// Linear aging: waiting one AgingInterval is worth one priority
		// level, so ordering by effective priority is ordering by
		// submission time minus priority x interval.
		return j.SubmittedAt.Add(-time.Duration(j.Priority) * p.AgingInterval)
	case PolicySJF:
		// Shortest first, aged: the estimate counts down while the job
		// waits, so a job is never overtaken by one submitted more than
		// its own estimate after it. Without an estimate, the GPU time
		// it has attained stands for one (Tiresias): short jobs, which
		// have attained little, still go first.
		if j.NoEstimate {
			return j.SubmittedAt.Add(j.Attained)
		}
		return j.SubmittedAt.Add(j.Estimate)
	}
	return j.SubmittedAt
}

// keyed is a queued job with its sort keys.
type keyed struct {
	key, sub int64
	j        *Job
}

func keyOf(j *Job, p *Policy) keyed {
	return keyed{staticKey(j, p).UnixNano(), j.SubmittedAt.UnixNano(), j}
}

// compareKeyed is the queue order: key, then submission, then id.
func compareKeyed(a, b keyed) int {
	if a.key != b.key {
		if a.key < b.key {
			return -1
		}
		return 1
	}
	if a.sub != b.sub {
		if a.sub < b.sub {
			return -1
		}
		return 1
	}
	return strings.Compare(a.j.ID, b.j.ID)
}

func sortStatic(jobs []*Job, p *Policy) {
	ks := make([]keyed, len(jobs))
	for i, j := range jobs {
		ks[i] = keyOf(j, p)
	}
	slices.SortFunc(ks, compareKeyed)
	for i := range ks {
		jobs[i] = ks[i].j
	}
}

type sliceWalker struct {
	jobs []*Job
	i    int
}

func (w *sliceWalker) next() (*Job, bool) {
	if w.i >= len(w.jobs) {
		return nil, false
	}
	w.i++
	return w.jobs[w.i-1], true
}

func (w *sliceWalker) placed(*Job, float64) {}

func (w *sliceWalker) again() { w.i-- }

// newWalker returns the policy's walker over the queue. userGPUs and
// projectGPUs are the GPU-equivalents each user and project holds now (for
// fair_share's in-cycle charge).
//
// Under fair_share, the jobs starving at now (see Starving) come first,
// while the starving hold less than their share of the GPUs (budget); a
// zero now starves none.
func newWalker(queue []Job, p *Policy, usage Usage, userGPUs, projectGPUs map[string]float64, now time.Time, budget starveBudget) walker {
	w, _ := newWalkerSorted(queue, p, usage, userGPUs, projectGPUs, now, budget)
	return w
}

// newWalkerSorted is newWalker, and also returns the queue in the
// policy's static order (CompareQueued).
func newWalkerSorted(queue []Job, p *Policy, usage Usage, userGPUs, projectGPUs map[string]float64, now time.Time, budget starveBudget) (walker, []*Job) {
	jobs := make([]*Job, len(queue))
	for i := range queue {
		jobs[i] = &queue[i]
	}
	sortStatic(jobs, p)
	if p.Name != PolicyFairShare {
		return &sliceWalker{jobs: jobs}, jobs
	}
	starving := starvingOf(jobs, p, now, budget.after)
	if budget.light {
		budget.nFull = len(starving)
		starving = append(starving, lightStarvingOf(jobs, p, now, budget.after, budget.lightAfter)...)
	}
	var tail []*Job
	if budget.onTail {
		tail = tailOf(jobs, budget.tail, now, p)
	}
	if len(starving) > 0 && budget.oldest && !budget.oldestGoes(starving[0], now) {
		budget.oldest = false
	}
	fw := newFairWalker(jobs, p, usage, userGPUs, projectGPUs)
	if len(tail) == 0 && (len(starving) == 0 || budget.used >= budget.cap && !budget.oldest) {
		return fw, jobs
	}
	fw.done = make(map[*Job]bool, len(starving)+len(tail))
	return &starveWalker{tail: sliceWalker{jobs: tail}, first: sliceWalker{jobs: starving}, rest: fw, budget: budget}, jobs
}

// Order returns the queue in the order a cycle considers it, as if every
// job got its GPUs (fair_share re-ranks users as it goes).
func Order(queue []Job, p Policy) []Job {
	p = p.WithDefaults()
	w := newWalker(queue, &p, Usage{}, nil, nil, time.Time{}, starveBudget{})
	out := make([]Job, 0, len(queue))
	for j, ok := w.next(); ok; j, ok = w.next() {
		out = append(out, *j)
		w.placed(j, wholeOf(j))
	}
	return out
}

// wholeOf is what a job holds in GPU-equivalents counted whole: its GPUs
// on each of its nodes (a part, whose fraction is known only once it is
// placed, as 1).
func wholeOf(j *Job) float64 { return float64(j.GPUs * nodesWanted(j)) }

// OrderWithUsage is Order for fair_share with the users' and projects'
// usage and current GPUs taken into account.
func OrderWithUsage(s Snapshot) []Job {
	p := s.Policy.WithDefaults()
	userGPUs, projectGPUs := shareHoldings(s.Running)
	w := newWalker(s.Queue, &p, s.Usage, userGPUs, projectGPUs, s.Now, budgetOf(&s, &p))
	out := make([]Job, 0, len(s.Queue))
	for j, ok := w.next(); ok; j, ok = w.next() {
		out = append(out, *j)
		w.placed(j, wholeOf(j))
	}
	return out
}

// holdings counts the GPUs each user and project holds (for quotas).
func holdings(running []Running) (users, projects map[string]int) {
	return count(running, true)
}

// shareHoldings counts GPU-equivalents for fair share (a slice or share
// its fraction): jobs being preempted are left out, since their GPUs are
// on their way to the jobs that preempted them; counting them would keep
// the waiting job's user looking under share, and preempting again, until
// the victims are gone.
func shareHoldings(running []Running) (users, projects map[string]float64) {
	users, projects = make(map[string]float64, 8), make(map[string]float64, 8)
	for i := range running {
		if r := &running[i]; !r.Preempting {
			e := Equivalents(r.Placements)
			users[r.User] += e
			projects[r.Project] += e
		}
	}
	return users, projects
}

func count(running []Running, preempting bool) (users, projects map[string]int) {
	users, projects = make(map[string]int, 8), make(map[string]int, 8)
	for _, r := range running {
		if r.Preempting && !preempting {
			continue
		}
		n := 0
		for _, p := range r.Placements {
			n += len(p.GPUs)
		}
		users[r.User] += n
		projects[r.Project] += n
	}
	return users, projects
}

// fairWalker ranks projects by share, then users within a project by
// share, then a user's jobs by aged priority. A share is (decayed
// GPU-seconds + runningCharge per GPU held) / weight; it grows as the cycle
// places jobs, so GPUs are dealt out in turn.
type fairWalker struct {
	p        *Policy
	projects projectHeap
	byName   map[string]*fairProject
	last     *fairUser // whose job next yielded last
	done     map[*Job]bool
}

type fairProject struct {
	name  string
	share float64
	users userHeap
	index int
}

type fairUser struct {
	name    string
	share   float64
	jobs    []*Job // in aged-priority order
	next    int
	project *fairProject
	index   int
}

func newFairWalker(jobs []*Job, p *Policy, usage Usage, userGPUs, projectGPUs map[string]float64) *fairWalker {
	w := &fairWalker{p: p, byName: map[string]*fairProject{}}
	type userKey struct{ project, user string }
	users := map[userKey]*fairUser{}
	for _, j := range jobs {
		fp := w.byName[j.Project]
		if fp == nil {
			fp = &fairProject{name: j.Project,
				share: projectStanding(p, j.Project, usage.Projects[j.Project], projectGPUs[j.Project])}
			w.byName[j.Project] = fp
		}
		key := userKey{j.Project, j.User}
		fu := users[key]
		if fu == nil {
			fu = &fairUser{name: j.User, project: fp,
				share: userStanding(p, j.User, usage.Users[j.User], userGPUs[j.User])}
			users[key] = fu
			fp.users = append(fp.users, fu)
		}
		fu.jobs = append(fu.jobs, j)
	}
	for _, fp := range w.byName {
		for i, fu := range fp.users {
			fu.index = i
		}
		heap.Init(&fp.users)
		fp.index = len(w.projects)
		w.projects = append(w.projects, fp)
	}
	heap.Init(&w.projects)
	return w
}

func (w *fairWalker) next() (*Job, bool) {
	for w.projects.Len() > 0 {
		fp := w.projects[0]
		if fp.users.Len() == 0 {
			heap.Pop(&w.projects)
			continue
		}
		fu := fp.users[0]
		if fu.next >= len(fu.jobs) {
			heap.Pop(&fp.users)
			continue
		}
		j := fu.jobs[fu.next]
		fu.next++
		if w.done[j] {
			continue // yielded already, as a starving job (starve.go)
		}
		w.last = fu
		return j, true
	}
	return nil, false
}

func (w *fairWalker) placed(j *Job, e float64) {
	fp := w.byName[j.Project]
	if fp == nil {
		return
	}
	charge := runningCharge * e
	fp.share += charge / weight(w.p.ProjectWeights, j.Project)
	for _, fu := range fp.users {
		if fu.name == j.User {
			fu.share += charge / weight(w.p.UserWeights, j.User)
			if fu.index >= 0 {
				heap.Fix(&fp.users, fu.index)
			}
			break
		}
	}
	if fp.index >= 0 && fp.index < w.projects.Len() && w.projects[fp.index] == fp {
		heap.Fix(&w.projects, fp.index)
	}
}

func (w *fairWalker) again() {
	if w.last != nil {
		w.last.next--
	}
}

type projectHeap []*fairProject

func (h projectHeap) Len() int { return len(h) }
func (h projectHeap) Less(a, b int) bool {
	if h[a].share != h[b].share {
		return h[a].share < h[b].share
	}
	return h[a].name < h[b].name
}
func (h projectHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a]; h[a].index = a; h[b].index = b }
func (h *projectHeap) Push(x any)   { p := x.(*fairProject); p.index = len(*h); *h = append(*h, p) }
func (h *projectHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	*h = old[:len(old)-1]
	p.index = -1
	return p
}

type userHeap []*fairUser

func (h userHeap) Len() int { return len(h) }
func (h userHeap) Less(a, b int) bool {
	if h[a].share != h[b].share {
		return h[a].share < h[b].share
	}
	return h[a].name < h[b].name
}
func (h userHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a]; h[a].index = a; h[b].index = b }
func (h *userHeap) Push(x any)   { u := x.(*fairUser); u.index = len(*h); *h = append(*h, u) }
func (h *userHeap) Pop() any {
	old := *h
	u := old[len(old)-1]
	*h = old[:len(old)-1]
	u.index = -1
	return u
}
