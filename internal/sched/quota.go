package sched

import (
	"fmt"
	"math"
	"strconv"
)

// Quotas count GPU-equivalents: a whole GPU counts 1, a MIG slice or an
// MPS share its Part.Fraction (a 1g.10gb of an H100 is 1/7), so seven such
// slices fit a 1-GPU quota. Whole GPUs are counted in userGPUs and
// projectGPUs, parts in userParts and projectParts; a quota compares their
// sum.

// quotaEps absorbs the rounding of summed fractions (7 x 1/7 is not
// exactly 1 in floating point).
const quotaEps = 1e-9

// overQuota says how the job would take its user or project past a quota
// ("" when it would not), counting its GPUs whole.
func (c *cycle) overQuota(j *Job) string {
	return c.overQuotaBy(j, float64(j.GPUs*nodesWanted(j)))
}

// overQuotaBy says how taking need more GPU-equivalents would take the
// job's user or project past a quota ("" when it would not).
func (c *cycle) overQuotaBy(j *Job, need float64) string {
	if q, ok := c.p.UserQuotas[j.User]; ok {
		if used := float64(c.userGPUs[j.User]) + c.userParts[j.User]; used+need > float64(q)+quotaEps {
			return fmt.Sprintf("user %s over quota: %s of %d GPUs in use", j.User, fmtEquiv(used), q)
		}
	}
	if q, ok := c.p.ProjectQuotas[j.Project]; ok {
		if used := float64(c.projectGPUs[j.Project]) + c.projectParts[j.Project]; used+need > float64(q)+quotaEps {
			return fmt.Sprintf("project %s over quota: %s of %d GPUs in use", j.Project, fmtEquiv(used), q)
		}
	}
	return ""
}

// quotaRoom is how many more whole GPUs the job's user and project may
// take within their quotas (math.MaxInt when neither has one).
func (c *cycle) quotaRoom(j *Job) int {
	room := math.MaxInt
	left := func(q, whole int, parts float64) int {
		return int(math.Floor(float64(q-whole) - parts + quotaEps))
	}
	if q, ok := c.p.UserQuotas[j.User]; ok {
		room = min(room, left(q, c.userGPUs[j.User], c.userParts[j.User]))
	}
	if q, ok := c.p.ProjectQuotas[j.Project]; ok {
		room = min(room, left(q, c.projectGPUs[j.Project], c.projectParts[j.Project]))
	}
	return room
}

// holdQuota adds a start to what its user and project hold against their
// quotas: n whole GPUs, or its parts' GPU-equivalents.
func (c *cycle) holdQuota(j *Job, ps []Placement, n int) {
	if !j.Fractional() {
		c.userGPUs[j.User] += n
		c.projectGPUs[j.Project] += n
		return
	}
	c.addParts(j.User, j.Project, Equivalents(ps))
}

// addParts charges GPU-equivalents of parts to a user and a project.
func (c *cycle) addParts(user, project string, e float64) {
	if c.userParts == nil {
		c.userParts, c.projectParts = map[string]float64{}, map[string]float64{}
	}
	c.userParts[user] += e
	c.projectParts[project] += e
}

// fmtEquiv writes GPU-equivalents: whole numbers as such (3), others with
// at most two decimals (1.14).
func fmtEquiv(e float64) string {
	if r := math.Round(e); math.Abs(e-r) < 1e-6 {
		return strconv.FormatFloat(r, 'f', -1, 64)
	}
	return strconv.FormatFloat(e, 'f', 2, 64)
}
