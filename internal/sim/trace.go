package sim

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Job is one job of a trace: what was asked and how long it really ran.
type Job struct {
	ID       string        // unique within the trace; the line number when the trace has none
	Submit   time.Time     // when it was submitted
	Duration time.Duration // how long it runs once started (the truth, unknown to the scheduler)
	GPUs     int           // GPUs in all (a gang's total); see Config.NodeGPUs for how it is split
	User     string
	Project  string
	Team     string // whose fairness Jain's index measures
	Priority int    // 1 (low) .. 4 (critical); 0 means normal
	// Estimate is the run time the job's user declared, when the trace
	// says (JSONL estimate_s); zero: none. See EstimateMode.
	Estimate time.Duration
	// Name and Command are the job's name and its command (JSONL name and
	// command), when the trace says: learned estimates look for past runs
	// of the same name or command.
	Name, Command string
	// MIGProfile asks for one MIG slice of a GPU instead of GPUs (JSONL
	// mig_profile: a profile such as 1g.10gb, or any); see mig.go.
	MIGProfile string
	// ShareMiB asks for an MPS share of a shared GPU with this much of its
	// memory instead of GPUs, ShareCompute for this percent of its compute
	// (JSONL gpu_share_mib, gpu_compute); see mig.go.
	ShareMiB     int64
	ShareCompute int
}

// Formats of trace files.
const (
	FormatPhilly = "philly"
	FormatJSONL  = "jsonl"
)

// Sources of a job's team (--teams-from).
const (
	TeamsFromCluster = "cluster" // Philly's virtual cluster (JSONL: project)
	TeamsFromUser    = "user"
	TeamsFromProject = "project"
	TeamsFromNone    = "none" // one team: fair share has nothing to share
)

// ReadFile reads a trace file. format "" guesses from the name: .jsonl and
// .ndjson are JSONL, anything else Philly CSV. teamsFrom picks the column
// that names teams (and, for fair share, users and projects).
func ReadFile(path, format, teamsFrom string) ([]Job, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if format == "" {
		format = FormatPhilly
		if strings.HasSuffix(path, ".jsonl") || strings.HasSuffix(path, ".ndjson") {
			format = FormatJSONL
		}
	}
	var jobs []Job
	switch format {
	case FormatPhilly:
		jobs, err = ReadPhilly(f, teamsFrom)
	case FormatJSONL:
		jobs, err = ReadJSONL(f, teamsFrom)
	default:
		return nil, fmt.Errorf("trace format %q: want %s or %s", format, FormatPhilly, FormatJSONL)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return jobs, nil
}

// ReadPhilly reads the Philly CSV trace (columns timestamp, duration,
// num_gpus, gpu_time, cluster; the header names them, in any order). The
// cluster column is the team unless teamsFrom is "none". Jobs come back in
// submission order, ties in file order.
func ReadPhilly(r io.Reader, teamsFrom string) ([]Job, error) {
	cr := csv.NewReader(bufio.NewReaderSize(r, 1<<20))
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimSpace(h)] = i
	}
	for _, need := range []string{"timestamp", "duration", "num_gpus"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("header has no %q column (want timestamp,duration,num_gpus,gpu_time,cluster)", need)
		}
	}
	clusterCol, hasCluster := col["cluster"]
	var jobs []Job
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		at, err := time.Parse(time.DateTime, rec[col["timestamp"]])
		if err != nil {
			return nil, fmt.Errorf("line %d: timestamp: %w", line, err)
		}
		dur, err := strconv.ParseFloat(rec[col["duration"]], 64)
		if err != nil || dur < 0 || math.IsInf(dur, 0) || math.IsNaN(dur) {
			return nil, fmt.Errorf("line %d: duration %q is not a number of seconds", line, rec[col["duration"]])
		}
		gpus, err := strconv.ParseFloat(rec[col["num_gpus"]], 64)
		if err != nil || gpus < 0 || gpus != math.Trunc(gpus) || gpus > 1e6 {
			return nil, fmt.Errorf("line %d: num_gpus %q is not a whole number", line, rec[col["num_gpus"]])
		}
		team := "default"
		if hasCluster && teamsFrom != TeamsFromNone {
			team = rec[clusterCol]
		}
		jobs = append(jobs, Job{ID: strconv.Itoa(line - 1), Submit: at.UTC(), Duration: seconds(dur), GPUs: int(gpus),
			User: team, Project: team, Team: team})
	}
	sortBySubmit(jobs)
	return jobs, nil
}

// jsonlJob is one line of a JSONL trace; see the package doc.
type jsonlJob struct {
	ID       string          `json:"id"`
	Submit   json.RawMessage `json:"submit"`
	Duration *float64        `json:"duration_s"`
	GPUs     *int            `json:"gpus"`
	User     string          `json:"user"`
	Project  string          `json:"project"`
	Priority api.RawValue    `json:"priority"`
	Estimate *float64        `json:"estimate_s"`
	Cluster  string          `json:"cluster"`
	Name     string          `json:"name"`
	Command  string          `json:"command"`
	MIG      string          `json:"mig_profile"`
	Share    int64           `json:"gpu_share_mib"`
	Compute  int             `json:"gpu_compute"`
}

// jsonlEpoch is the time numeric submit offsets count from.
var jsonlEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// ReadJSONL reads a trace with one JSON object per line (see the package
// doc for the fields). Blank lines and lines starting with # are skipped.
func ReadJSONL(r io.Reader, teamsFrom string) ([]Job, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var jobs []Job
	ids := map[string]bool{}
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		var in jsonlJob
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		j, err := in.job(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if ids[j.ID] {
			return nil, fmt.Errorf("line %d: job id %q appears twice", line, j.ID)
		}
		ids[j.ID] = true
		switch teamsFrom {
		case TeamsFromUser:
			j.Team = j.User
		case TeamsFromNone:
			j.Team = "default"
		case TeamsFromProject:
			j.Team = j.Project
		default: // cluster: the cluster field, else the project
			j.Team = j.Project
			if in.Cluster != "" {
				j.Team = in.Cluster
			}
		}
		jobs = append(jobs, j)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sortBySubmit(jobs)
	return jobs, nil
}

func (in *jsonlJob) job(line int) (Job, error) {
	j := Job{ID: in.ID, User: in.User, Project: in.Project, Name: in.Name, Command: in.Command}
	if j.ID == "" {
		j.ID = strconv.Itoa(line)
	}
	if j.User == "" {
		j.User = "default"
	}
	if j.Project == "" {
		j.Project = j.User
	}
	var err error
	if j.Submit, err = parseSubmit(in.Submit); err != nil {
		return j, err
	}
	if in.Duration == nil || *in.Duration < 0 || math.IsNaN(*in.Duration) || *in.Duration > 1e9 {
		return j, errors.New("duration_s: want the seconds the job ran, 0 to 1e9")
	}
	j.Duration = seconds(*in.Duration)
	if in.GPUs == nil || *in.GPUs < 0 || *in.GPUs > 1e6 {
		return j, errors.New("gpus: want a number of GPUs, 0 or more")
	}
	j.GPUs = *in.GPUs
	j.MIGProfile = strings.ToLower(strings.TrimSpace(in.MIG))
	switch {
	case in.Share < 0 || in.Share > 1<<30:
		return j, errors.New("gpu_share_mib: want the MiB of a share, 1 or more")
	case in.Compute < 0 || in.Compute > 100:
		return j, errors.New("gpu_compute: want a percent of a GPU's compute, 0 to 100")
	case in.Compute > 0 && in.Share == 0:
		return j, errors.New("gpu_compute: needs gpu_share_mib")
	case in.Share > 0 && j.MIGProfile != "":
		return j, errors.New("gpu_share_mib: a job takes a MIG slice or an MPS share, not both")
	}
	j.ShareMiB, j.ShareCompute = in.Share, in.Compute
	if in.Estimate != nil {
		if *in.Estimate <= 0 || math.IsNaN(*in.Estimate) || *in.Estimate > 1e9 {
			return j, errors.New("estimate_s: want seconds above 0")
		}
		j.Estimate = seconds(*in.Estimate)
	}
	if !api.IsNull(in.Priority) {
		p, err := api.ParsePriorityJSON(in.Priority)
		if err != nil {
			return j, fmt.Errorf("priority: %w", err)
		}
		j.Priority = int(p)
	}
	return j, nil
}

// parseSubmit reads a submission time: RFC 3339, or seconds since the
// trace's epoch (2000-01-01 UTC; only differences matter).
func parseSubmit(raw json.RawMessage) (time.Time, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return time.Time{}, errors.New("submit: missing (RFC 3339 time or seconds)")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return time.Time{}, fmt.Errorf("submit: %w", err)
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("submit: %w", err)
		}
		return t.UTC(), nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f < 0 || f > 1e10 {
		return time.Time{}, errors.New("submit: want an RFC 3339 time or seconds 0 to 1e10")
	}
	return jsonlEpoch.Add(seconds(f)), nil
}

func seconds(f float64) time.Duration { return time.Duration(math.Round(f * 1e9)) }

func sortBySubmit(jobs []Job) {
	slices.SortStableFunc(jobs, func(a, b Job) int { return a.Submit.Compare(b.Submit) })
}
