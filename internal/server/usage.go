package server

import (
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/spend"
	"github.com/corral-sched/corral/internal/usage"
)

// usageRoutes are the usage ledger's, prices' and budgets' routes (issue
// 14; docs/usage.md). It also registers the usage metrics.
func (s *Server) usageRoutes() []route {
	s.metrics.reg.MustRegister(&usageCollector{spend: s.feat.Spend})
	return []route{
		{"GET", "/usage", "GPU usage by user, project, gpu-type, node or week over [since, until) (by, since, until, format=csv); users see their own, admins all", s.usage, viewer, ""},
		{"GET", "/prices", "GPU prices in dollars per GPU-hour, by model", s.prices, viewer, ""},
		{"PUT", "/prices/{model}", "Set a GPU model's price per GPU-hour (admin)", s.setPrice, admin, "price.set"},
		{"DELETE", "/prices/{model}", "Remove a GPU model's price (admin)", s.unsetPrice, admin, "price.unset"},
		{"GET", "/budgets", "Monthly budgets with their month-to-date use (users see their own and their projects')", s.budgets, viewer, ""},
		{"PUT", "/budgets/{kind}/{name}", "Set a user's or project's monthly budget (admin)", s.setBudget, admin, "budget.set"},
		{"POST", "/budgets/{kind}/{name}/release", "Lift an exhausted budget's action until next month (admin)", s.releaseBudget, admin, "budget.release"},
		{"DELETE", "/budgets/{kind}/{name}", "Remove a budget (admin)", s.unsetBudget, admin, "budget.unset"},
	}
}

// usage is GET /usage.
func (s *Server) usage(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var uq spend.Query
	uq.By = q.Get("by")
	var err error
	if uq.Since, err = usage.ParseTime(q.Get("since"), time.Local); err != nil {
		return api.Invalid("since", "%s", err.Error())
	}
	if !uq.Since.IsZero() {
		if err := api.CheckTime("since", uq.Since); err != nil { // api/bounds.go
			return err
		}
	}
	if uq.Until, err = usage.ParseTime(q.Get("until"), time.Local); err != nil {
		return api.Invalid("until", "%s", err.Error())
	}
	if !uq.Until.IsZero() {
		if err := api.CheckTime("until", uq.Until); err != nil {
			return err
		}
	}
	format := q.Get("format")
	if format != "" && format != "json" && format != "csv" {
		return api.Invalid("format", "%q is not json or csv", format)
	}
	if p := principal(r); !p.IsAdmin() {
		uq.User = p.User // users see their own usage
	}
	rep, err := s.feat.Spend.Usage(r.Context(), uq)
	if err != nil {
		return err
	}
	if format == "csv" {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, err := w.Write(usage.CSV(rep))
		return err
	}
	return writeJSON(w, http.StatusOK, rep)
}

func (s *Server) prices(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, usage.PriceList{Prices: s.feat.Spend.Prices()})
}

func (s *Server) setPrice(w http.ResponseWriter, r *http.Request) error {
	var req usage.PriceRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.DollarsPerHour == nil {
		return api.Invalid("dollars_per_hour", "missing: the price in dollars per GPU-hour")
	}
	model := r.PathValue("model")
	setTarget(r, model)
	p, err := s.feat.Spend.SetPrice(r.Context(), model, *req.DollarsPerHour)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, usage.PriceList{Prices: p})
}

func (s *Server) unsetPrice(w http.ResponseWriter, r *http.Request) error {
	model := r.PathValue("model")
	setTarget(r, model)
	p, err := s.feat.Spend.UnsetPrice(r.Context(), model)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, usage.PriceList{Prices: p})
}

// budgets is GET /budgets: admins see every budget; others their own
// user's and their projects' (every project's when their token names none).
func (s *Server) budgets(w http.ResponseWriter, r *http.Request) error {
	all := s.feat.Spend.Budgets()
	p := principal(r)
	if !p.IsAdmin() {
		mine := all[:0]
		for _, b := range all {
			if b.Kind == usage.BudgetUser && b.Name == p.User ||
				b.Kind == usage.BudgetProject && (len(p.Projects) == 0 || slices.Contains(p.Projects, b.Name)) {
				mine = append(mine, b)
			}
		}
		all = mine
	}
	return writeJSON(w, http.StatusOK, usage.BudgetList{Budgets: all})
}

func (s *Server) setBudget(w http.ResponseWriter, r *http.Request) error {
	var req usage.BudgetRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	b := usage.Budget{Kind: r.PathValue("kind"), Name: r.PathValue("name"), GPUHours: req.GPUHours, Dollars: req.Dollars, Action: req.Action}
	setTarget(r, b.Key())
	st, err := s.feat.Spend.SetBudget(r.Context(), b)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}

func (s *Server) unsetBudget(w http.ResponseWriter, r *http.Request) error {
	kind, name := r.PathValue("kind"), r.PathValue("name")
	setTarget(r, kind+"/"+name)
	if err := s.feat.Spend.UnsetBudget(r.Context(), kind, name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) releaseBudget(w http.ResponseWriter, r *http.Request) error {
	kind, name := r.PathValue("kind"), r.PathValue("name")
	setTarget(r, kind+"/"+name)
	st, err := s.feat.Spend.ReleaseBudget(r.Context(), kind, name)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}

// usageCollector exports the ledger's all-time totals by user and project
// at scrape time.
type usageCollector struct{ spend spend.Ops }

var (
	descUsageGPUSeconds = prometheus.NewDesc("corral_usage_gpu_seconds_total", "GPU-seconds charged to the usage ledger (ended attempts, holds, idle bookings), by user and project.", []string{"user", "project"}, nil)
	descCostDollars     = prometheus.NewDesc("corral_cost_dollars_total", "Dollars charged at each GPU model's price when the usage was charged, by user and project.", []string{"user", "project"}, nil)
)

func (c *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descUsageGPUSeconds
	ch <- descCostDollars
}

func (c *usageCollector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.spend.Totals() {
		ch <- prometheus.MustNewConstMetric(descUsageGPUSeconds, prometheus.CounterValue, t.GPUSeconds, t.User, t.Project)
		ch <- prometheus.MustNewConstMetric(descCostDollars, prometheus.CounterValue, t.Dollars, t.User, t.Project)
	}
}
