package api

// Pending reasons (and a canceled job's reason) of job dependencies
// (depends_on); see docs/dependencies.md.
const (
	// ReasonDependency: the job waits for the jobs its depends_on names.
	ReasonDependency = "dependency"
	// ReasonDependencyNeverSatisfied: its depends_on can no longer be met
	// (afterok on a job that failed, ...). As the reason of a canceled
	// event: the job was canceled for it after the server's
	// --dependency-timeout.
	ReasonDependencyNeverSatisfied = "dependency_never_satisfied"
)

// DependencyRequest is the body of PATCH /queue/{job_id}/dependency: the
// queued job's new depends_on ("" removes it).
type DependencyRequest struct {
	DependsOn *string `json:"depends_on"`
}
