package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// The synthetic team trace: a working week of a team of 15 sharing 16
// GPUs (two nodes of 8), the workload Corral is built for. Five kinds of
// work, each with its own rhythm:
//
//   - notebooks: one GPU (sometimes two) for an interactive session of
//     half an hour to four hours, opened in working hours;
//   - debug runs: one GPU for a few minutes, through the working day;
//   - sweeps: bursts of 8 to 30 one-GPU trials of one script, submitted
//     together, each 15 minutes to 2 hours, some in the evening to run
//     overnight;
//   - training: 4 GPUs for 2 to 12 hours, and 8-GPU gangs for 3 to 16
//     hours, the same few runs resubmitted through the week;
//   - big runs: 16-GPU gangs (both nodes) for 6 to 24 hours, a few a week,
//     mostly started on a Friday evening.
//
// Users belong to four projects; each user has a habit (what share of
// their work is of each kind). Run times are lognormal around each run
// name's typical time, so the same name runs for about as long each time
// (what a predictor can learn). The trace is a pure function of the seed.

// TeamWeekStart is the Monday 00:00 UTC the synthetic week starts on.
var TeamWeekStart = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)

// teamUsers are the synthetic team: user, project, and the weights of
// their habits (notebook, debug, sweep, train4, gang8, gang16).
var teamUsers = []struct {
	user, project string
	habit         [6]float64
}{
	{"ana", "vision", [6]float64{3, 3, 2, 1, 1, 0}},
	{"bo", "vision", [6]float64{2, 2, 3, 2, 1, 0}},
	{"chen", "vision", [6]float64{1, 2, 1, 1, 2, 1}},
	{"dara", "vision", [6]float64{4, 3, 1, 0, 0, 0}},
	{"eli", "nlp", [6]float64{1, 1, 1, 2, 2, 1}},
	{"fay", "nlp", [6]float64{2, 3, 2, 1, 1, 0}},
	{"gus", "nlp", [6]float64{1, 1, 4, 1, 0, 0}},
	{"hana", "nlp", [6]float64{3, 2, 1, 1, 1, 0}},
	{"ivo", "rl", [6]float64{1, 2, 4, 1, 0, 0}},
	{"jin", "rl", [6]float64{2, 2, 2, 2, 1, 0}},
	{"kai", "rl", [6]float64{3, 3, 1, 0, 0, 0}},
	{"lea", "speech", [6]float64{2, 2, 2, 2, 1, 1}},
	{"max", "speech", [6]float64{1, 3, 3, 1, 0, 0}},
	{"noa", "speech", [6]float64{3, 2, 1, 1, 1, 0}},
	{"oli", "speech", [6]float64{1, 1, 1, 1, 2, 1}},
}

// teamKind is one kind of work: GPUs, the typical run time of a run name
// (a range the name's median is drawn from), and how many names a user
// reuses.
type teamKind struct {
	name       string
	gpus       []int
	lo, hi     time.Duration
	names      int
	sigma      float64 // spread of one name's run times (lognormal)
	perDay     float64 // submissions (or bursts) per user per working day, at habit weight 1
	burstLo    int     // sweeps: trials per burst
	burstHi    int
	eveningOdd float64 // chance a submission is made in the evening (18-23h)
}

var teamKinds = []teamKind{
	{name: "notebook", gpus: []int{1, 1, 1, 2}, lo: 30 * time.Minute, hi: 4 * time.Hour, names: 3, sigma: 0.6, perDay: 0.6},
	{name: "debug", gpus: []int{1}, lo: 2 * time.Minute, hi: 12 * time.Minute, names: 4, sigma: 0.5, perDay: 1.5},
	{name: "sweep", gpus: []int{1}, lo: 15 * time.Minute, hi: 2 * time.Hour, names: 3, sigma: 0.35, perDay: 0.12, burstLo: 8, burstHi: 30, eveningOdd: 0.3},
	{name: "train", gpus: []int{4}, lo: 2 * time.Hour, hi: 12 * time.Hour, names: 2, sigma: 0.3, perDay: 0.2, eveningOdd: 0.3},
	{name: "gang8", gpus: []int{8}, lo: 3 * time.Hour, hi: 16 * time.Hour, names: 2, sigma: 0.25, perDay: 0.07, eveningOdd: 0.4},
	{name: "gang16", gpus: []int{16}, lo: 6 * time.Hour, hi: 24 * time.Hour, names: 1, sigma: 0.25, perDay: 0.05, eveningOdd: 0.6},
}

// TeamWeek generates the synthetic team trace (see above) from seed: the
// same seed gives the same jobs. Jobs come in submission order, with ids
// t0001...; Name is the run's name and Command its script, both repeated
// across a user's runs of the same name.
func TeamWeek(seed uint64) []Job {
	r := rand.New(rand.NewPCG(seed, 0x7465616d)) // "team"
	// Each user's run names and their typical run times.
	type run struct {
		name, command string
		typical       time.Duration
	}
	names := make([][][]run, len(teamUsers))
	for u, tu := range teamUsers {
		names[u] = make([][]run, len(teamKinds))
		for k, kd := range teamKinds {
			for n := range kd.names {
				lo, hi := math.Log(kd.lo.Seconds()), math.Log(kd.hi.Seconds())
				typ := time.Duration(math.Exp(lo+r.Float64()*(hi-lo))) * time.Second
				name := fmt.Sprintf("%s-%s-%d", tu.user, kd.name, n+1)
				names[u][k] = append(names[u][k], run{name: name, command: "python " + kd.name + "_" + fmt.Sprint(n+1) + ".py", typical: typ})
			}
		}
	}
	var jobs []Job
	add := func(u, k int, at time.Time, rn run) {
		kd := &teamKinds[k]
		d := time.Duration(float64(rn.typical) * math.Exp(kd.sigma*r.NormFloat64()))
		d = max(d.Round(time.Second), 30*time.Second)
		prio := 2
		if kd.name == "notebook" || kd.name == "debug" {
			prio = 3
		}
		jobs = append(jobs, Job{Submit: at, Duration: d, GPUs: kd.gpus[r.IntN(len(kd.gpus))], User: teamUsers[u].user,
			Project: teamUsers[u].project, Team: teamUsers[u].project, Priority: prio, Name: rn.name, Command: rn.command})
	}
	for day := range 5 {
		morning := TeamWeekStart.Add(time.Duration(day)*24*time.Hour + 9*time.Hour)
		for u, tu := range teamUsers {
			for k, kd := range teamKinds {
				if tu.habit[k] == 0 {
					continue
				}
				rate := kd.perDay * tu.habit[k]
				if kd.name == "gang16" && day == 4 {
					rate *= 3 // the Friday-evening big run
				}
				for n := poisson(r, rate); n > 0; n-- {
					at := morning.Add(time.Duration(r.Float64() * float64(9*time.Hour)))
					if r.Float64() < kd.eveningOdd {
						at = morning.Add(9*time.Hour + time.Duration(r.Float64()*float64(5*time.Hour)))
					}
					at = at.Truncate(time.Second)
					rn := names[u][k][r.IntN(len(names[u][k]))]
					if kd.burstHi == 0 {
						add(u, k, at, rn)
						continue
					}
					for t := kd.burstLo + r.IntN(kd.burstHi-kd.burstLo+1); t > 0; t-- {
						add(u, k, at, rn)
						at = at.Add(time.Duration(r.IntN(3)) * time.Second)
					}
				}
			}
		}
	}
	slices.SortStableFunc(jobs, func(a, b Job) int { return a.Submit.Compare(b.Submit) })
	for i := range jobs {
		jobs[i].ID = fmt.Sprintf("t%04d", i+1)
	}
	return jobs
}

// poisson draws from a Poisson distribution of the given mean (Knuth's
// method: the means here are small).
func poisson(r *rand.Rand, mean float64) int {
	l, k, p := math.Exp(-mean), 0, 1.0
	for {
		p *= r.Float64()
		if p <= l {
			return k
		}
		k++
	}
}
