package notify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/mail"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// EndpointStore is where endpoints, and users' own defaults
// (DefaultsStore), are kept (store.Store).
type EndpointStore interface {
	PutEndpoint(ctx context.Context, e store.EndpointRecord) error
	DeleteEndpoint(ctx context.Context, id string) error
	Endpoints(ctx context.Context) ([]store.EndpointRecord, error)
	DefaultsStore
}

// Limits on an endpoint.
const (
	maxURLLen       = 2048
	maxSecretLen    = 256
	maxEndpoints    = 10000
	maxPerOwner     = 20
	minSecretLength = 8
)

// Target is an endpoint with its secrets, for a Deliverer.
type Target struct {
	ID      string
	Kind    string
	URL     string
	Secret  string
	Address string
}

// endpoint is an endpoint in memory: its public record and its secrets.
type endpoint struct {
	pub    api.Endpoint // URL, Secret and Address empty
	tgt    Target
	broken bool // its secrets cannot be opened (notify.key was replaced): it gets nothing
}

// stored is an endpoint as the store keeps it: secrets sealed.
type stored struct {
	api.Endpoint
	SealedURL     string `json:"sealed_url,omitempty"`
	SealedSecret  string `json:"sealed_secret,omitempty"`
	SealedAddress string `json:"sealed_address,omitempty"`
}

// Registry holds the notification endpoints: every one in memory (routing
// a batch's events costs map lookups, under a read lock), each written to
// the store before it is used or listed.
type Registry struct {
	st   EndpointStore
	seal *Sealer
	now  func() time.Time

	// changing serializes Add and Remove, which write to the store
	// without holding mu: routing (under the orchestrator's lock) never
	// waits for a store write.
	changing sync.Mutex
	mu       sync.RWMutex
	eps      map[string]*endpoint
	byOwner  map[string][]string     // ownerKey -> endpoint ids, sorted: routing is a lookup
	defaults map[string]userDefaults // user -> their own defaults (defaults.go)
	// allowLocal: URLs naming a loopback, link-local or unspecified
	// address are taken (AllowLocal; --notify-allow-local).
	allowLocal bool
}

// AllowLocal makes Add take URLs whose host is a loopback, link-local or
// unspecified address (or localhost), as HTTP{AllowLocal: true} delivers
// to them. Call it before the registry is used.
func (r *Registry) AllowLocal(allow bool) { r.allowLocal = allow }

// ownerKey indexes endpoints by whose events they get.
func ownerKey(scope, owner string) string { return scope + "/" + owner }

// index adds or removes e in byOwner. mu held for writing.
func (r *Registry) index(e *endpoint, add bool) {
	k := ownerKey(e.pub.Scope, e.pub.Owner)
	ids := slices.DeleteFunc(r.byOwner[k], func(id string) bool { return id == e.pub.ID })
	if add && !e.broken {
		ids = append(ids, e.pub.ID)
		slices.Sort(ids)
	}
	if len(ids) == 0 {
		delete(r.byOwner, k)
		return
	}
	r.byOwner[k] = ids
}

// Unreadable is the target an endpoint shows when its secrets cannot be
// opened with the current key.
const Unreadable = "(unreadable: notify.key is not the one it was sealed with; remove it and add it again)"

// NewRegistry loads the endpoints of st, opening their secrets with seal.
// An endpoint whose secrets do not open (the key file was replaced) is
// kept, listed with the target Unreadable, routed nothing, and may be
// removed.
func NewRegistry(ctx context.Context, st EndpointStore, seal *Sealer, now func() time.Time) (*Registry, error) {
	if now == nil {
		now = time.Now
	}
	r := &Registry{st: st, seal: seal, now: now, eps: map[string]*endpoint{}, byOwner: map[string][]string{}}
	if err := r.loadDefaults(ctx); err != nil {
		return nil, err
	}
	recs, err := st.Endpoints(ctx)
	if err != nil {
		return nil, fmt.Errorf("notify endpoints: %w", err)
	}
	for _, rec := range recs {
		var s stored
		if err := json.Unmarshal([]byte(rec.Data), &s); err != nil {
			return nil, fmt.Errorf("notify endpoint %s: %w", rec.ID, err)
		}
		e := &endpoint{pub: s.Endpoint, tgt: Target{ID: s.ID, Kind: s.Kind}}
		for _, f := range []struct {
			sealed string
			to     *string
		}{{s.SealedURL, &e.tgt.URL}, {s.SealedSecret, &e.tgt.Secret}, {s.SealedAddress, &e.tgt.Address}} {
			if *f.to, err = seal.Open(f.sealed); err != nil {
				e.broken, e.tgt = true, Target{ID: s.ID, Kind: s.Kind}
				e.pub.Target = Unreadable
				break
			}
		}
		r.eps[rec.ID] = e
		r.index(e, true)
	}
	return r, nil
}

// Add checks req and stores a new endpoint of scope and owner (the caller
// has checked that createdBy may). The answer carries the URL, secret
// and address: the only time they are shown.
func (r *Registry) Add(ctx context.Context, req api.EndpointRequest, createdBy string) (api.Endpoint, error) {
	t := Target{Kind: strings.TrimSpace(req.Kind)}
	switch t.Kind {
	case api.EndpointSlack, api.EndpointWebhook:
		u, err := checkURL(req.URL, r.allowLocal)
		if err != nil {
			return api.Endpoint{}, api.Invalid("url", "%s", err.Error())
		}
		t.URL = u
		if req.Address != "" {
			return api.Endpoint{}, api.Invalid("address", "is for email endpoints; a %s endpoint takes url", t.Kind)
		}
	case api.EndpointEmail:
		a, err := mail.ParseAddress(strings.TrimSpace(req.Address))
		if err != nil || len(a.Address) > 254 || a.Name != "" {
			return api.Endpoint{}, api.Invalid("address", "is not an email address (want name@example.com)")
		}
		t.Address = a.Address
		if req.URL != "" {
			return api.Endpoint{}, api.Invalid("url", "is for slack and webhook endpoints; an email endpoint takes address")
		}
	default:
		return api.Endpoint{}, api.Invalid("kind", "want slack, webhook or email, not %q", truncate(req.Kind, 40))
	}
	if req.Secret != "" {
		if t.Kind != api.EndpointWebhook {
			return api.Endpoint{}, api.Invalid("secret", "only webhook endpoints are signed")
		}
		if len(req.Secret) < minSecretLength || len(req.Secret) > maxSecretLen {
			return api.Endpoint{}, api.Invalid("secret", "must be %d to %d characters", minSecretLength, maxSecretLen)
		}
		t.Secret = req.Secret
	}
	if t.Kind == api.EndpointWebhook && t.Secret == "" {
		return api.Endpoint{}, api.Invalid("secret", "is required: a webhook's body is signed with it (X-Corral-Signature)")
	}
	owner := req.User
	switch req.Scope {
	case api.ScopeProject:
		owner = req.Project
	case api.ScopeCluster:
		owner = ""
	}
	var id [8]byte
	rand.Read(id[:])
	t.ID = "ne_" + hex.EncodeToString(id[:])
	pub := api.Endpoint{ID: t.ID, Kind: t.Kind, Scope: req.Scope, Owner: owner, Target: redact(t), HasSecret: t.Secret != "",
		CreatedAt: r.now().UTC(), CreatedBy: createdBy}
	s := stored{Endpoint: pub}
	var err error
	for _, f := range []struct {
		plain string
		to    *string
	}{{t.URL, &s.SealedURL}, {t.Secret, &s.SealedSecret}, {t.Address, &s.SealedAddress}} {
		if *f.to, err = r.seal.Seal(f.plain); err != nil {
			return api.Endpoint{}, err
		}
	}
	data, err := json.Marshal(s)
	if err != nil {
		return api.Endpoint{}, err
	}
	r.changing.Lock()
	defer r.changing.Unlock() // the limits hold against what is stored
	r.mu.RLock()
	total, n := len(r.eps), 0
	for _, e := range r.eps {
		if e.pub.Scope == pub.Scope && e.pub.Owner == pub.Owner {
			n++
		}
	}
	r.mu.RUnlock()
	if total >= maxEndpoints {
		return api.Endpoint{}, api.Conflict("too_many_endpoints", "the cluster has %d notification endpoints, the most it keeps", maxEndpoints)
	}
	if n >= maxPerOwner {
		return api.Endpoint{}, api.Conflict("too_many_endpoints", "%s %q has %d notification endpoints, the most it may have", pub.Scope, pub.Owner, n)
	}
	if err := r.st.PutEndpoint(ctx, store.EndpointRecord{ID: t.ID, Data: string(data)}); err != nil {
		return api.Endpoint{}, &api.Error{Status: 503, Code: "store_unavailable", Message: err.Error()}
	}
	r.mu.Lock()
	e := &endpoint{pub: pub, tgt: t}
	r.eps[t.ID] = e
	r.index(e, true)
	r.mu.Unlock()
	shown := pub
	shown.URL, shown.Secret, shown.Address = t.URL, t.Secret, t.Address
	return shown, nil
}

// checkURL checks an endpoint's URL: http or https, a host, no user
// info, and (unless allowLocal) a host that is not a loopback,
// link-local or unspecified address nor localhost. A name is checked
// again on every address it resolves to, as each delivery dials it
// (NewClient).
func checkURL(raw string, allowLocal bool) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", fmt.Errorf("is required")
	}
	if len(raw) > maxURLLen {
		return "", fmt.Errorf("is longer than %d characters", maxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", fmt.Errorf("must be an http or https URL with a host and no user info")
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if !allowLocal && (host == "localhost" || strings.HasSuffix(host, ".localhost")) {
		return "", fmt.Errorf("names this server's own machine (%s); notifications are not sent there unless the server runs with --notify-allow-local", host)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if why := localAddress(ip, allowLocal); why != "" {
			return "", fmt.Errorf("names %s, %s", ip.Unmap(), why)
		}
	}
	return u.String(), nil
}

// redact is an endpoint's target as lists show it: the URL's scheme and
// host only (a webhook URL's path often is its secret), the address with
// its local part cut to one letter.
func redact(t Target) string {
	if t.Address != "" {
		local, domain, _ := strings.Cut(t.Address, "@")
		if len(local) > 1 {
			local = local[:1]
		}
		return local + "…@" + domain
	}
	u, err := url.Parse(t.URL)
	if err != nil {
		return "…"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// Remove deletes an endpoint; its undelivered notifications are marked
// failed.
func (r *Registry) Remove(ctx context.Context, id string) error {
	r.changing.Lock()
	defer r.changing.Unlock()
	r.mu.RLock()
	_, ok := r.eps[id]
	r.mu.RUnlock()
	if !ok {
		return api.NotFound("no notification endpoint %q", truncate(id, 40))
	}
	if err := r.st.DeleteEndpoint(ctx, id); err != nil {
		return &api.Error{Status: 503, Code: "store_unavailable", Message: err.Error()}
	}
	r.mu.Lock()
	if e, ok := r.eps[id]; ok {
		r.index(e, false)
		delete(r.eps, id)
	}
	r.mu.Unlock()
	return nil
}

// Get returns an endpoint's public record.
func (r *Registry) Get(id string) (api.Endpoint, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.eps[id]
	if !ok {
		return api.Endpoint{}, false
	}
	return e.pub, true
}

// Broken counts the endpoints whose secrets did not open.
func (r *Registry) Broken() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	n := 0
	for _, e := range r.eps {
		if e.broken {
			n++
		}
	}
	return n
}

// target returns an endpoint with its secrets, for delivery; false when
// there is none or its secrets did not open.
func (r *Registry) target(id string) (Target, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.eps[id]
	if !ok || e.broken {
		return Target{}, false
	}
	return e.tgt, true
}

// List returns the public records of the endpoints keep selects, oldest
// first.
func (r *Registry) List(keep func(api.Endpoint) bool) []api.Endpoint {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := []api.Endpoint{}
	for _, e := range r.eps {
		if keep(e.pub) {
			out = append(out, e.pub)
		}
	}
	slices.SortFunc(out, func(a, b api.Endpoint) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// route returns the endpoints that receive events of a job of user in
// project (scope user and scope project), or, with cluster, the cluster's;
// never an unreadable one. Map lookups under the read lock: the
// orchestrator calls it in its commit.
func (r *Registry) route(user, project string, cluster bool) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if cluster {
		return slices.Clone(r.byOwner[ownerKey(api.ScopeCluster, "")])
	}
	u, p := r.byOwner[ownerKey(api.ScopeUser, user)], r.byOwner[ownerKey(api.ScopeProject, project)]
	if len(u)+len(p) == 0 {
		return nil
	}
	return append(slices.Clone(u), p...)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
