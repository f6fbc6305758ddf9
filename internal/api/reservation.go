package api

import "time"

// Booking flags (Slurm's reservation flag names; docs/bookings.md).
const (
	BookingFlex       = "flex"        // jobs in the booking may run past its end
	BookingMagnetic   = "magnetic"    // the booking's users' jobs land in it without --reservation
	BookingIgnoreJobs = "ignore_jobs" // booked even where running jobs are expected to overlap
	BookingDaily      = "daily"       // repeats every day
	BookingWeekly     = "weekly"      // repeats every week
	BookingMaint      = "maint"       // maintenance: nobody's jobs run in it
)

// Reservation is a booking: GPUs set aside for some users over
// an interval. Allocation names the specific GPUs it blocks, chosen when
// it is created; the scheduler treats them as a blocked interval.
type Reservation struct {
	Name    string   `json:"name"`
	GPUs    int      `json:"gpus"`               // GPUs booked, in all
	Nodes   []string `json:"nodes,omitempty"`    // the nodes asked for; empty: any
	GPUType string   `json:"gpu_type,omitempty"` // the GPU model asked for; empty: any
	// Start and End bound the booking (of its next occurrence, when it
	// repeats).
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Users   []string  `json:"users"`
	Project string    `json:"project,omitempty"`
	Flags   []string  `json:"flags,omitempty"`
	// Owner is who made it (charged for its idle GPU-hours).
	Owner      string       `json:"owner"`
	CreatedAt  time.Time    `json:"created_at"`
	Allocation []Allocation `json:"allocation"`
	// State: "scheduled" (before its start), "active" (in its window),
	// "released" (unused past the purge time, or deleted), "ended".
	State string `json:"state"`
	// UsedAt is when a job of the booking first ran in it; nil: never.
	UsedAt *time.Time `json:"used_at,omitempty"`
	// ReleasedAt is when it was released (purged unused, or deleted
	// after its start); EndedAt when its last window closed.
	ReleasedAt *time.Time `json:"released_at,omitempty"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
	// UsedGPUSeconds is the GPU time jobs of the booking used in its
	// current occurrence so far (as last counted); IdleGPUSeconds the
	// booked-but-idle GPU time of its closed occurrences, in all, charged
	// to its Owner (docs/bookings.md).
	UsedGPUSeconds float64 `json:"used_gpu_seconds,omitempty"`
	IdleGPUSeconds float64 `json:"idle_gpu_seconds,omitempty"`
	// Occurrence counts the windows of a repeating booking that closed
	// before the current one (0: its first).
	Occurrence int `json:"occurrence,omitempty"`
}
