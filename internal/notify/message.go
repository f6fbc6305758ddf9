package notify

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Item is one outbox event with its id (event_id: receivers drop
// duplicates by it, as delivery is at least once).
type Item struct {
	EventID string
	Event
}

// Message is what one delivery carries: one event, or several as a
// digest.
type Message struct {
	EventID string // the event's, or the digest's
	Items   []Item
}

// Digest reports whether the message carries several events.
func (m Message) Digest() bool { return len(m.Items) > 1 }

// Kind is the message's kind: its event's, or Digest.
func (m Message) Kind() Kind {
	if m.Digest() {
		return Digest
	}
	return m.Items[0].Kind
}

// Subject is the message's one line: its event's summary, or the digest's
// count.
func (m Message) Subject() string {
	if !m.Digest() {
		return m.Items[0].Summary()
	}
	kinds := map[Kind]int{}
	for _, it := range m.Items {
		kinds[it.Kind]++
	}
	var parts []string
	for _, k := range []Kind{JobFailed, JobCompleted, JobCanceled, JobPreempted, JobLost, JobBegan} {
		if n := kinds[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, kindText(k)))
			delete(kinds, k)
		}
	}
	other := 0
	for _, n := range kinds {
		other += n
	}
	if other > 0 {
		parts = append(parts, fmt.Sprintf("%d other", other))
	}
	return fmt.Sprintf("Corral digest: %d events (%s)", len(m.Items), strings.Join(parts, ", "))
}

// digestShown bounds the events a digest's text spells out.
const digestShown = 20

// Text is the message as plain text: what an email's body and a Slack
// message's fallback say.
func (m Message) Text() string {
	var b strings.Builder
	b.WriteString(m.Subject())
	b.WriteString("\n")
	if !m.Digest() {
		writeDetails(&b, m.Items[0].Event)
		return b.String()
	}
	for i, it := range m.Items {
		if i == digestShown {
			fmt.Fprintf(&b, "… and %d more (corral notify log)\n", len(m.Items)-digestShown)
			break
		}
		fmt.Fprintf(&b, "• %s\n", it.Summary())
		if it.Job != nil && it.Job.URL != "" {
			fmt.Fprintf(&b, "  %s\n", it.Job.URL)
		}
	}
	return b.String()
}

func writeDetails(b *strings.Builder, ev Event) {
	switch {
	case ev.Job != nil:
		j := ev.Job
		fmt.Fprintf(b, "User: %s   Project: %s   State: %s\n", j.User, j.Project, j.State)
		var gpus string
		if j.GPUs > 0 {
			gpus = fmt.Sprintf("   GPUs: %d", j.GPUs)
			if len(j.Nodes) > 0 {
				gpus += " on " + strings.Join(j.Nodes, ", ")
			}
		}
		fmt.Fprintf(b, "Runtime: %s%s   Attempt: %d\n", runtimeText(j.RuntimeSeconds), gpus, j.Attempt)
		if j.ExitCode != nil {
			fmt.Fprintf(b, "Exit code: %d\n", *j.ExitCode)
		}
		if j.URL != "" {
			fmt.Fprintf(b, "Dashboard: %s\n", j.URL)
		}
		if len(j.LogTail) > 0 {
			fmt.Fprintf(b, "Last %d log lines:\n", len(j.LogTail))
			for _, l := range j.LogTail {
				b.WriteString("  " + l + "\n")
			}
		}
	case ev.Array != nil && ev.Array.URL != "":
		fmt.Fprintf(b, "Dashboard: %s\n", ev.Array.URL)
	case ev.Alert != nil && ev.Alert.Node != "":
		fmt.Fprintf(b, "Node: %s\n", ev.Alert.Node)
	}
}

func runtimeText(s float64) string {
	if s <= 0 {
		return "-"
	}
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
}

// JobURL is a job's dashboard page under publicURL ("" without one).
func JobURL(publicURL, jobID string) string {
	if publicURL == "" {
		return ""
	}
	return strings.TrimSuffix(publicURL, "/") + "/#/jobs/" + url.PathEscape(jobID)
}

// webhookEvent is one event in a webhook body.
type webhookEvent struct {
	EventID string `json:"event_id"`
	Event
	Summary string `json:"summary"`
}

// WebhookBody is a generic webhook's JSON body. One event:
//
//	{"event_id": "...", "kind": "job.failed", "at": ..., "job": {...}, "summary": "...", "text": "..."}
//
// A digest: {"event_id": "...", "kind": "digest", "count": N, "summary": "...",
// "text": "...", "events": [{"event_id": ..., "kind": ..., ...}, ...]}.
func WebhookBody(m Message) ([]byte, error) {
	if !m.Digest() {
		it := m.Items[0]
		body := struct {
			webhookEvent
			Text string `json:"text"`
		}{webhookEvent{it.EventID, it.Event, it.Summary()}, m.Text()}
		body.Event.Text = ""
		return json.Marshal(body)
	}
	evs := make([]webhookEvent, len(m.Items))
	for i, it := range m.Items {
		evs[i] = webhookEvent{it.EventID, it.Event, it.Summary()}
	}
	return json.Marshal(struct {
		EventID string         `json:"event_id"`
		Kind    Kind           `json:"kind"`
		Count   int            `json:"count"`
		Summary string         `json:"summary"`
		Text    string         `json:"text"`
		Events  []webhookEvent `json:"events"`
	}{m.EventID, Digest, len(m.Items), m.Subject(), m.Text(), evs})
}

// slackText escapes text for Slack's mrkdwn.
func slackText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// SlackBody is a Slack incoming webhook's body: blocks for Slack, and
// text, which Mattermost shows (and Slack uses in notifications).
func SlackBody(m Message) ([]byte, error) {
	type text struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type block struct {
		Type     string `json:"type"`
		Text     *text  `json:"text,omitempty"`
		Elements []text `json:"elements,omitempty"`
	}
	blocks := []block{{Type: "section", Text: &text{"mrkdwn", "*" + slackText(m.Subject()) + "*"}}}
	if !m.Digest() {
		var b strings.Builder
		writeDetails(&b, m.Items[0].Event)
		details, tail, _ := strings.Cut(b.String(), "Last ")
		if d := strings.TrimSpace(details); d != "" {
			blocks = append(blocks, block{Type: "section", Text: &text{"mrkdwn", slackText(d)}})
		}
		if tail != "" {
			blocks = append(blocks, block{Type: "section", Text: &text{"mrkdwn", "```" + slackText(clip("Last "+tail, 2900)) + "```"}})
		}
	} else {
		var b strings.Builder
		for i, it := range m.Items {
			if i == digestShown {
				fmt.Fprintf(&b, "… and %d more\n", len(m.Items)-digestShown)
				break
			}
			fmt.Fprintf(&b, "• %s\n", slackText(it.Summary()))
		}
		blocks = append(blocks, block{Type: "section", Text: &text{"mrkdwn", clip(b.String(), 2900)}})
	}
	blocks = append(blocks, block{Type: "context", Elements: []text{{"mrkdwn", "corral · " + m.EventID}}})
	return json.Marshal(struct {
		Text   string  `json:"text"`
		Blocks []block `json:"blocks"`
	}{slackText(clip(m.Text(), 3900)), blocks})
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
