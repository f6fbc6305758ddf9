package auth

import (
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// The device flow (as RFC 8628's): the CLI on a laptop asks for a pair of
// codes, its user types the short one in the dashboard where they are
// signed in, and the CLI, polling with the long one, gets a token of the
// user who approved it.
//
// Codes live in memory only, hashed, for DeviceTTL: a restart forgets
// pending sign-ins (the CLI says to start again), which costs a user a
// minute and keeps the store free of short-lived secrets.

// Limits of the device flow.
const (
	DeviceTTL         = 10 * time.Minute
	DeviceInterval    = 2 * time.Second
	maxPendingDevices = 1000
	// userCodeAlphabet has no vowels (no words) and no look-alikes.
	userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"
)

// Devices holds the pending device sign-ins. Create it with NewDevices;
// its methods are safe for concurrent use.
type Devices struct {
	now func() time.Time

	mu     sync.Mutex
	byCode map[string]*device // by Hash(device code)
	byUser map[string]*device // by Hash(user code)
}

type device struct {
	codeHash, userHash string
	expires            time.Time
	approved           *Principal
	approvedAt         time.Time
}

// NewDevices returns an empty set of device sign-ins; now is the clock
// (nil: time.Now).
func NewDevices(now func() time.Time) *Devices {
	if now == nil {
		now = time.Now
	}
	return &Devices{now: now, byCode: map[string]*device{}, byUser: map[string]*device{}}
}

// Start makes a pair of codes: the user code people type (ABCD-EFGH)
// and the device code the CLI polls with.
func (d *Devices) Start() (userCode, deviceCode string, expires time.Time, err error) {
	deviceCode, err = NewSecret()
	if err != nil {
		return "", "", time.Time{}, err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", time.Time{}, fmt.Errorf("device code: %w", err)
	}
	var sb strings.Builder
	for i, c := range b {
		if i == 4 {
			sb.WriteByte('-')
		}
		sb.WriteByte(userCodeAlphabet[int(c)%len(userCodeAlphabet)])
	}
	userCode = sb.String()
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sweep(now)
	if len(d.byCode) >= maxPendingDevices {
		return "", "", time.Time{}, &api.Error{Status: 503, Code: "too_many_sign_ins", Message: fmt.Sprintf("%d device sign-ins are pending; try again in a few minutes", len(d.byCode))}
	}
	dv := &device{codeHash: Hash(deviceCode), userHash: Hash(normalizeUserCode(userCode)), expires: now.Add(DeviceTTL)}
	if _, taken := d.byUser[dv.userHash]; taken {
		return "", "", time.Time{}, api.Conflict("code_taken", "a code collided; try again")
	}
	d.byCode[dv.codeHash] = dv
	d.byUser[dv.userHash] = dv
	return userCode, deviceCode, dv.expires, nil
}

// Approve marks the sign-in of userCode approved by p: the CLI polling
// for it gets a token of p's user.
func (d *Devices) Approve(userCode string, p Principal) error {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sweep(now)
	dv, ok := d.byUser[Hash(normalizeUserCode(userCode))]
	switch {
	case !ok:
		return api.NotFound("no pending sign-in has the code %q (codes last %s; start again with corral login SERVER)", clip(userCode), DeviceTTL)
	case dv.approved != nil:
		return api.Conflict("already_approved", "this sign-in is approved already")
	}
	dv.approved = &p
	dv.approvedAt = now
	return nil
}

// Poll answers the CLI's poll with deviceCode: the approving principal
// once (the sign-in is then forgotten), 409 authorization_pending until
// then, 410 expired_token when the code is unknown, expired or used.
func (d *Devices) Poll(deviceCode string) (Principal, error) {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sweep(now)
	dv, ok := d.byCode[Hash(deviceCode)]
	if !ok {
		return Principal{}, &api.Error{Status: 410, Code: "expired_token", Message: "the device code is unknown, expired or used; start again with corral login SERVER"}
	}
	if dv.approved == nil {
		return Principal{}, api.Conflict("authorization_pending", "the code has not been approved yet")
	}
	delete(d.byCode, dv.codeHash)
	delete(d.byUser, dv.userHash)
	return *dv.approved, nil
}

// sweep forgets expired sign-ins. Lock held.
func (d *Devices) sweep(now time.Time) {
	for k, dv := range d.byCode {
		if !now.Before(dv.expires) {
			delete(d.byCode, k)
			delete(d.byUser, dv.userHash)
		}
	}
}

// normalizeUserCode lets people type a code in any case, with or without
// its dash or spaces.
func normalizeUserCode(s string) string {
	s = strings.ToUpper(s)
	var b strings.Builder
	for _, r := range s {
		if r >= 'A' && r <= 'Z' {
			b.WriteRune(r)
		}
	}
	return b.String()
}
