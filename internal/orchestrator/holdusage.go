package orchestrator

import (
	"encoding/json"
	"math"
	"time"
)

// settingHoldUsage is the store key of the holds' past GPU usage per user,
// as JSON (holdUsage). Jobs' usage is rebuilt from the jobs themselves
// (rebuildLedger); holds leave no job behind, so their usage is kept here,
// written in the transaction that ends the hold.
const settingHoldUsage = "hold_usage"

// holdUse is one user's decayed GPU-seconds of ended holds, as of At.
type holdUse struct {
	GPUSeconds float64   `json:"gpu_seconds"`
	At         time.Time `json:"at"`
}

// chargeHold adds an ended hold's GPU time to its user's (and project
// holdProject's) usage, in the ledger and durably in tx. Loop only.
func (o *Orchestrator) chargeHold(tx *txn, user string, gpuSeconds float64) {
	o.ledger.Add(user, holdProject, gpuSeconds, tx.now)
	if o.holdUse == nil {
		o.holdUse = map[string]holdUse{}
	}
	u := o.holdUse[user]
	if !u.At.IsZero() && tx.now.After(u.At) {
		u.GPUSeconds *= math.Exp2(-float64(tx.now.Sub(u.At)) / float64(o.ledger.HalfLife()))
	}
	u.GPUSeconds += gpuSeconds
	u.At = tx.now
	o.holdUse[user] = u
	raw, err := json.Marshal(o.holdUse)
	if err != nil {
		o.log.Error("hold usage not encoded", "err", err)
		return
	}
	if tx.batch.Settings == nil {
		tx.batch.Settings = map[string]string{}
	}
	tx.batch.Settings[settingHoldUsage] = string(raw)
}

// readHoldUsage reads the holds' usage from the stored settings. Before
// the loop runs.
func (o *Orchestrator) readHoldUsage(settings map[string]string) {
	raw := settings[settingHoldUsage]
	if raw == "" {
		return
	}
	if err := json.Unmarshal([]byte(raw), &o.holdUse); err != nil {
		o.log.Warn("stored hold usage unreadable; holds' past usage is forgotten", "err", err)
		o.holdUse = nil
	}
}

// addHoldUsage adds the holds' usage to the ledger, each user's at its
// time (the ledger decays it from there). From rebuildLedger.
func (o *Orchestrator) addHoldUsage() {
	for user, u := range o.holdUse {
		o.ledger.Add(user, holdProject, u.GPUSeconds, u.At)
	}
}
