package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/agent/gpu"
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/orchestrator"
	"github.com/corral-sched/corral/internal/server"
	"github.com/corral-sched/corral/internal/store"
)

// notifyFlags are the notification flags of `corral server` and `corral
// up` (docs/notifications.md).
type notifyFlags struct {
	publicURL     string
	smtp          string
	smtpFrom      string
	smtpUser      string
	smtpPassFile  string
	smtpStartTLS  bool
	smtpCA        string
	digestWindow  time.Duration
	retryBackoff  time.Duration
	alertGPUTemp  int
	alertQueueP95 time.Duration
	simFaults     string // up only: --simulate-faults
	alertDiskFree float64
	allowLocal    bool // --notify-allow-local
}

func (f *notifyFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.publicURL, "public-url", "", "the dashboard's address as people reach it (e.g. https://corral.example.com): notifications link to each job's page under it, and corral notebook prints notebook addresses under it")
	fl.StringVar(&f.smtp, "smtp", "", "SMTP server host:port for email notifications (corral notify add email); empty: no email")
	fl.StringVar(&f.smtpFrom, "smtp-from", "", "the From address of notification emails (required with --smtp)")
	fl.StringVar(&f.smtpUser, "smtp-user", "", "SMTP AUTH PLAIN user; the password comes from $CORRAL_SMTP_PASSWORD or --smtp-password-file")
	fl.StringVar(&f.smtpPassFile, "smtp-password-file", "", "a file holding the SMTP password (instead of $CORRAL_SMTP_PASSWORD)")
	fl.BoolVar(&f.smtpStartTLS, "smtp-starttls", true, "upgrade SMTP connections with STARTTLS, refusing servers without it (false: plain text, for a relay on localhost)")
	fl.StringVar(&f.smtpCA, "smtp-ca", "", "a PEM file of CA certificates to trust for the SMTP server's certificate (default: the system's)")
	cmdkit.DurationVar(fl, &f.digestWindow, "notify-digest-window", time.Minute, "more than 5 notifications for one endpoint within this window go out as one digest")
	cmdkit.DurationVar(fl, &f.retryBackoff, "notify-retry-backoff", 2*time.Second, "wait before a failed notification's first retry; it doubles per try, up to 15m, for 24h")
	fl.IntVar(&f.alertGPUTemp, "alert-gpu-temp", orchestrator.DefaultAlertGPUTemp, "GPU temperature in Celsius that raises an admin alert")
	cmdkit.DurationVar(fl, &f.alertQueueP95, "alert-queue-wait", 0, "raise an admin alert when the queue wait p95 stays above this for 15 minutes (0: off)")
	fl.BoolVar(&f.allowLocal, "notify-allow-local", false, "let webhook and Slack endpoints name loopback, link-local or unspecified addresses (a receiver on this machine); without it they are refused")
	fl.Float64Var(&f.alertDiskFree, "alert-disk-free", 5, "raise an admin alert when the data dir's disk has less than this percent free (0: off)")
}

// simFaultsHelp is --simulate-faults' help (up, agent).
const simFaultsHelp = `with --simulate-gpus: a JSON file of made-up GPU faults, [{"gpu":0,"temperature":95,"ecc_errors":2}], read at each report (for demos and tests of the admin alerts)`

// applySimFaults points simulated GPUs at a faults file ("": none).
func applySimFaults(src gpu.Source, path string) error {
	if path == "" {
		return nil
	}
	fs, ok := src.(interface{ SetFaultsFile(string) })
	if !ok {
		return cmdkit.Usagef("--simulate-faults needs --simulate-gpus")
	}
	fs.SetFaultsFile(path)
	return nil
}

// notifier is the notification machinery of a control plane.
type notifier struct {
	planner *notify.Planner
	sender  *notify.Sender
	routes  server.Notifications
	disk    *notify.DiskWatcher
}

// loopDied raises alert.scheduler_stopped when the orchestrator's loop
// has ended with an error: the row is durable, so the alert goes out after
// the next start if this process ends first.
func (n *notifier) loopDied(err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ev := notify.Event{Kind: notify.AlertSchedulerStopped, At: time.Now().UTC(),
		Alert: &notify.Alert{Message: fmt.Sprintf("the scheduler's loop stopped (%v); the server is shutting down", err)}}
	n.sender.Raise(ctx, ev)
}

// diskEvery is how often the data dir's free space is checked.
const diskEvery = time.Minute

// run runs the sender and the disk watcher until ctx ends.
func (n *notifier) run(ctx context.Context) {
	done := make(chan struct{})
	go func() { n.disk.Run(ctx, diskEvery); close(done) }()
	n.sender.Run(ctx)
	<-done
}

// setUp opens the endpoints (sealed with <data-dir>/notify.key) and builds
// the planner and the sender; jobs is read at delivery time.
func (f *notifyFlags) setUp(ctx context.Context, st *store.Store, dataDir string, jobs notify.JobSource, logger *slog.Logger) (*notifier, error) {
	if f.publicURL != "" {
		u, err := url.Parse(f.publicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, cmdkit.Usagef("--public-url %q: want an http or https URL", f.publicURL)
		}
	}
	if f.digestWindow <= 0 || f.retryBackoff <= 0 {
		return nil, cmdkit.Usagef("--notify-digest-window and --notify-retry-backoff must be more than 0")
	}
	if f.alertGPUTemp < 1 || f.alertGPUTemp > 200 {
		return nil, cmdkit.Usagef("--alert-gpu-temp %d: want 1 to 200", f.alertGPUTemp)
	}
	if f.alertQueueP95 < 0 {
		return nil, cmdkit.Usagef("--alert-queue-wait must not be negative")
	}
	if f.alertDiskFree < 0 || f.alertDiskFree >= 100 || f.alertDiskFree != f.alertDiskFree {
		return nil, cmdkit.Usagef("--alert-disk-free %g: want 0 (off) to under 100", f.alertDiskFree)
	}
	h := notify.NewHTTP(f.allowLocal)
	router := notify.Router{api.EndpointSlack: h, api.EndpointWebhook: h}
	if f.smtp != "" {
		m, err := f.mailer()
		if err != nil {
			return nil, err
		}
		router[api.EndpointEmail] = m
	}
	seal, err := notify.OpenSealer(filepath.Join(dataDir, notify.KeyFile))
	if err != nil {
		return nil, err
	}
	reg, err := notify.NewRegistry(ctx, st, seal, nil)
	if err != nil {
		return nil, err
	}
	reg.AllowLocal(f.allowLocal)
	if n := reg.Broken(); n > 0 {
		logger.Error("notification endpoints cannot be read: their secrets were sealed with another notify.key; they get nothing until removed and added again", "endpoints", n)
	}
	n := &notifier{}
	n.sender = notify.NewSender(notify.SenderConfig{Store: st, Registry: reg, Deliverer: router, Jobs: jobs,
		PublicURL: f.publicURL, Logger: logger, RetryBase: f.retryBackoff, DigestWindow: f.digestWindow})
	n.planner = notify.NewPlanner(reg, n.sender.Kick)
	n.sender.SetPlanner(n.planner)
	n.routes = server.Notifications{Endpoints: reg, Sender: n.sender, Log: st}
	n.disk = &notify.DiskWatcher{Path: dataDir, MinFree: f.alertDiskFree, Raise: n.sender.Raise, Logger: logger}
	return n, nil
}

// mailer checks the --smtp flags.
func (f *notifyFlags) mailer() (notify.SMTP, error) {
	if _, _, err := net.SplitHostPort(f.smtp); err != nil {
		return notify.SMTP{}, cmdkit.Usagef("--smtp %q: want host:port", f.smtp)
	}
	if f.smtpFrom == "" {
		return notify.SMTP{}, cmdkit.Usagef("--smtp needs --smtp-from")
	}
	m := notify.SMTP{Addr: f.smtp, From: f.smtpFrom, User: f.smtpUser, StartTLS: f.smtpStartTLS}
	if f.smtpUser != "" {
		m.Password = os.Getenv("CORRAL_SMTP_PASSWORD")
		if f.smtpPassFile != "" {
			b, err := os.ReadFile(f.smtpPassFile)
			if err != nil {
				return notify.SMTP{}, fmt.Errorf("--smtp-password-file: %w", err)
			}
			m.Password = strings.TrimRight(string(b), "\r\n")
		}
		if m.Password == "" {
			return notify.SMTP{}, cmdkit.Usagef("--smtp-user needs a password: $CORRAL_SMTP_PASSWORD or --smtp-password-file")
		}
		if !f.smtpStartTLS {
			return notify.SMTP{}, cmdkit.Usagef("--smtp-user needs --smtp-starttls: the password is not sent in the clear")
		}
	}
	if f.smtpCA != "" {
		pem, err := os.ReadFile(f.smtpCA)
		if err != nil {
			return notify.SMTP{}, fmt.Errorf("--smtp-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return notify.SMTP{}, cmdkit.Usagef("--smtp-ca %s holds no PEM certificate", f.smtpCA)
		}
		m.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return m, nil
}

// jobSource hands the sender the orchestrator once it exists.
type jobSource struct{ o **orchestrator.Orchestrator }

func (j jobSource) LogTail(id string, attempt, n int) []string {
	if *j.o == nil {
		return nil
	}
	return (*j.o).LogTail(id, attempt, n)
}

func (j jobSource) JobEnv(id string) map[string]string {
	if *j.o == nil {
		return nil
	}
	return (*j.o).JobEnv(id)
}
