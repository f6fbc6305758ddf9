package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/orchestrator"
)

// metrics is the server's Prometheus registry: request latency by route,
// submissions, and gauges read from the orchestrator at scrape time.
type metrics struct {
	reg         *prometheus.Registry
	handler     http.Handler
	requests    *prometheus.HistogramVec
	submissions prometheus.Counter
}

func newMetrics(o *orchestrator.Orchestrator) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "corral_api_request_duration_seconds", Help: "API request latency by route and status code.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1, 5},
	}, []string{"route", "code"})
	m.submissions = prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_job_submissions_total", Help: "Jobs accepted by POST /queue/submit."})
	m.reg.MustRegister(m.requests, m.submissions, &stateCollector{o: o},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) observe(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Observe(d.Seconds())
}

// stateCollector reads jobs and GPUs from the orchestrator at scrape time.
type stateCollector struct{ o *orchestrator.Orchestrator }

var (
	descJobs   = prometheus.NewDesc("corral_jobs", "Jobs by state.", []string{"state"}, nil)
	descQueue  = prometheus.NewDesc("corral_queue_length", "Queued jobs by priority.", []string{"priority"}, nil)
	descGPUs   = prometheus.NewDesc("corral_gpus", "GPUs by state (free, allocated, held).", []string{"state"}, nil)
	descCycles = prometheus.NewDesc("corral_scheduling_cycles_total", "Scheduling cycles run.", nil, nil)
	descCycle  = prometheus.NewDesc("corral_scheduling_cycle_last_seconds", "Duration of the last scheduling cycle.", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobs, descQueue, descGPUs, descCycles, descCycle} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[api.State]int{}
	for _, j := range c.o.Jobs(orchestrator.JobFilter{Limit: 1 << 30}) {
		counts[j.State]++
	}
	for _, s := range api.States {
		ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
	byPrio := map[string]int{}
	for _, q := range c.o.Queue().QueuedJobs {
		byPrio[q.Priority.String()]++
	}
	for p := api.PriorityLow; p <= api.PriorityCritical; p++ {
		ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(byPrio[p.String()]), p.String())
	}
	cs := c.o.Cluster(context.Background())
	ch <- prometheus.MustNewConstMetric(descGPUs, prometheus.GaugeValue, float64(cs.AvailableGPUs), "free")
	ch <- prometheus.MustNewConstMetric(descGPUs, prometheus.GaugeValue, float64(cs.AllocatedGPUs-cs.HeldGPUs), "allocated")
	ch <- prometheus.MustNewConstMetric(descGPUs, prometheus.GaugeValue, float64(cs.HeldGPUs), "held")
	st := c.o.Status()
	ch <- prometheus.MustNewConstMetric(descCycles, prometheus.CounterValue, float64(st.Cycles))
	ch <- prometheus.MustNewConstMetric(descCycle, prometheus.GaugeValue, st.LastCycleMS/1000)
}
