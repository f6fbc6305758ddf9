package api

// ReasonIdle ends an interactive job that stayed idle (no connection
// attached, GPUs under its class's idle_threshold) for its class's
// idle_window (docs/interactive.md). Its state is canceled.
const ReasonIdle = "idle"

// ClassIdle is one class's idle reclaim settings (Policies.Classes): an
// interactive job with no shell or proxy connection attached and its GPUs
// under IdleThreshold percent for IdleWindow ends with reason idle; its
// owner is warned IdleWarn before. IdleWindow 0: never reclaimed.
type ClassIdle struct {
	IdleThreshold int     `json:"idle_threshold"`
	IdleWindow    Seconds `json:"idle_window"`
	IdleWarn      Seconds `json:"idle_warn"`
}

// ClassIdleUpdate changes a class's idle settings; omitted fields keep
// their value.
type ClassIdleUpdate struct {
	IdleThreshold *int     `json:"idle_threshold,omitempty"`
	IdleWindow    RawValue `json:"idle_window,omitempty"`
	IdleWarn      RawValue `json:"idle_warn,omitempty"`
}
