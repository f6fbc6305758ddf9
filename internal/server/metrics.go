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
	"github.com/corral-sched/corral/internal/feature/history"
	"github.com/corral-sched/corral/internal/orchestrator"
)

// metrics is the server's Prometheus registry: request latency by route,
// submissions, and everything else read from the orchestrator at scrape
// time. docs/metrics.md lists every name; keep it in step.
type metrics struct {
	reg         *prometheus.Registry
	handler     http.Handler
	requests    *prometheus.HistogramVec
	submissions prometheus.Counter
}

func newMetrics(o *orchestrator.Orchestrator, hist history.Ops) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "corral_api_request_duration_seconds", Help: "API request latency by route and status code.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1, 5},
	}, []string{"route", "code"})
	m.submissions = prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_job_submissions_total", Help: "Jobs accepted by POST /queue/submit (idempotent replays not counted)."})
	m.reg.MustRegister(m.requests, m.submissions, &stateCollector{o: o, hist: hist},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) observe(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Observe(d.Seconds())
}

// stateCollector reads jobs and GPUs from the orchestrator at scrape time.
type stateCollector struct {
	o    *orchestrator.Orchestrator
	hist history.Ops // the job counters and cycle durations
}

// gpuLabels are the labels of the per-GPU series, as dcgm-exporter has
// them (gpu, UUID, Hostname, modelName), in Prometheus' lower case.
var gpuLabels = []string{"node", "gpu", "uuid", "model"}

var (
	descJobs      = prometheus.NewDesc("corral_jobs", "Jobs by state.", []string{"state"}, nil)
	descQueue     = prometheus.NewDesc("corral_queue_length", "Queued jobs by priority.", []string{"priority"}, nil)
	descGPUs      = prometheus.NewDesc("corral_gpus", "GPUs by state: free, allocated (to jobs), held (for work outside Corral), foreign (busy with processes Corral did not start), down (on a down node).", []string{"state"}, nil)
	descNodes     = prometheus.NewDesc("corral_nodes", "Nodes by state (up, down, cordoned, draining, drained).", []string{"state"}, nil)
	descCycles    = prometheus.NewDesc("corral_scheduling_cycles_total", "Scheduling cycles run.", nil, nil)
	descCycle     = prometheus.NewDesc("corral_scheduling_cycle_last_seconds", "Duration of the last scheduling cycle.", nil, nil)
	descCycleHist = prometheus.NewDesc("corral_scheduling_cycle_duration_seconds", "Duration of scheduling cycles.", nil, nil)
	descStarts    = prometheus.NewDesc("corral_job_starts_total", "Job attempts that started running.", nil, nil)
	descEnded     = prometheus.NewDesc("corral_jobs_finished_total", "Jobs that ended, by final state.", []string{"state"}, nil)
	descWait      = prometheus.NewDesc("corral_job_wait_seconds", "Time from (re)queueing to running, per start.", nil, nil)
	descUtil      = prometheus.NewDesc("corral_gpu_utilization_percent", "GPU utilization in percent (as DCGM_FI_DEV_GPU_UTIL).", gpuLabels, nil)
	descMemUsed   = prometheus.NewDesc("corral_gpu_memory_used_mib", "GPU framebuffer memory used in MiB (as DCGM_FI_DEV_FB_USED).", gpuLabels, nil)
	descMemFree   = prometheus.NewDesc("corral_gpu_memory_free_mib", "GPU framebuffer memory free in MiB (as DCGM_FI_DEV_FB_FREE).", gpuLabels, nil)
	descMemTotal  = prometheus.NewDesc("corral_gpu_memory_total_mib", "GPU framebuffer memory in MiB.", gpuLabels, nil)
	descTemp      = prometheus.NewDesc("corral_gpu_temperature_celsius", "GPU temperature in degrees Celsius (as DCGM_FI_DEV_GPU_TEMP); absent when unknown.", gpuLabels, nil)
	descAlloc     = prometheus.NewDesc("corral_gpu_allocated", "1 when the GPU is allocated to a job or held, else 0.", gpuLabels, nil)
	descGPUInfo   = prometheus.NewDesc("corral_gpu_info", "Always 1; the GPU's state (free, allocated, held, foreign, down) and whether it is simulated.", append(gpuLabels, "state", "simulated"), nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobs, descQueue, descGPUs, descNodes, descCycles, descCycle, descCycleHist, descStarts, descEnded,
		descWait, descUtil, descMemUsed, descMemFree, descMemTotal, descTemp, descAlloc, descGPUInfo} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counts := c.o.JobStateCounts()
	for _, s := range api.States {
		gauge(descJobs, float64(counts[s]), string(s))
	}
	byPrio := map[string]int{}
	for _, q := range c.o.Queue().QueuedJobs {
		byPrio[q.Priority.String()]++
	}
	for p := api.PriorityLow; p <= api.PriorityCritical; p++ {
		gauge(descQueue, float64(byPrio[p.String()]), p.String())
	}

	cs := c.o.Cluster(context.Background())
	gpus := map[string]int{"free": 0, "allocated": 0, "held": 0, "foreign": 0, "down": 0}
	nodes := map[string]int{orchestrator.NodeUp: 0, orchestrator.NodeDown: 0, orchestrator.NodeCordoned: 0, orchestrator.NodeDraining: 0, orchestrator.NodeDrained: 0}
	for _, n := range cs.Nodes {
		nodes[n.State]++
		for _, g := range n.GPUs {
			state := GPUState(n, g)
			gpus[state]++
			l := []string{n.NodeID, strconv.Itoa(g.ID), g.UUID, g.Model}
			gauge(descUtil, float64(g.Utilization), l...)
			gauge(descMemUsed, float64(g.MemoryUsed), l...)
			gauge(descMemFree, float64(max(g.MemoryTotal-g.MemoryUsed, 0)), l...)
			gauge(descMemTotal, float64(g.MemoryTotal), l...)
			if g.Temperature != nil {
				gauge(descTemp, float64(*g.Temperature), l...)
			}
			alloc := 0.0
			if g.AllocatedTo != nil {
				alloc = 1
			}
			gauge(descAlloc, alloc, l...)
			gauge(descGPUInfo, 1, append(l, state, strconv.FormatBool(g.Simulated || n.Simulated))...)
		}
	}
	for s, v := range gpus {
		gauge(descGPUs, float64(v), s)
	}
	for s, v := range nodes {
		gauge(descNodes, float64(v), s)
	}

	st := c.o.Status()
	ch <- prometheus.MustNewConstMetric(descCycles, prometheus.CounterValue, float64(st.Cycles))
	gauge(descCycle, st.LastCycleMS/1000)
	cyc := c.hist.CycleDurations()
	ch <- prometheus.MustNewConstHistogram(descCycleHist, cyc.Count, cyc.Sum, buckets(history.CycleBuckets, cyc.Counts))

	jc := c.hist.JobCounters()
	ch <- prometheus.MustNewConstMetric(descStarts, prometheus.CounterValue, float64(jc.Starts))
	for _, s := range []api.State{api.StateCompleted, api.StateFailed, api.StateCanceled} {
		ch <- prometheus.MustNewConstMetric(descEnded, prometheus.CounterValue, float64(jc.Ended[s]), string(s))
	}
	ch <- prometheus.MustNewConstHistogram(descWait, jc.WaitCount, jc.WaitSum, buckets(history.WaitBuckets, jc.WaitCounts))
}

func buckets(bounds []float64, counts []uint64) map[float64]uint64 {
	m := make(map[float64]uint64, len(bounds))
	for i, b := range bounds {
		if i < len(counts) {
			m[b] = counts[i]
		}
	}
	return m
}

// GPUState is the state the dashboard and the metrics give a GPU: held
// (for work outside Corral), allocated (to a job), foreign (busy with
// processes Corral did not start), down (its node is down) or free.
func GPUState(n api.Node, g api.GPU) string {
	switch {
	case g.AllocatedTo != nil && g.Held:
		return "held"
	case g.AllocatedTo != nil:
		return "allocated"
	case len(g.Foreign) > 0:
		return "foreign"
	case n.State == orchestrator.NodeDown:
		return "down"
	}
	return "free"
}
