package api

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
)

// Notebook jobs: a job submitted with "notebook": true runs a
// notebook server on the loopback interface of its node (rank 0), on the
// port NotebookPort gives, which the job finds in NotebookPortVar; the
// server's reverse proxy at NotebookPath(job) reaches it.
const (
	// NotebookPortVar names the port the notebook server listens on.
	NotebookPortVar = "CORRAL_NOTEBOOK_PORT"
	// NotebookTokenVar holds the secret the proxy presents to the
	// notebook server (as "Authorization: token SECRET"), so that other
	// accounts on the node cannot use its loopback port. The job's env
	// keeps the job's secret, drawn at submission (shown only to those
	// who see the job's env); each attempt's task gets its own,
	// NotebookSecret of it.
	NotebookTokenVar = "CORRAL_NOTEBOOK_TOKEN"
	// NotebookProxiedHeader marks an answer that came from the notebook
	// server through the proxy (the server's own errors lack it): corral
	// notebook knows the notebook is up when it sees one.
	NotebookProxiedHeader = "X-Corral-Notebook"
	// NotebookURLHeader, on a proxied answer, is the notebook's address
	// under the server's --public-url (absent without one).
	NotebookURLHeader = "X-Corral-Notebook-URL"
	// notebookPortMin and notebookPorts: the range notebook ports are
	// drawn from, below Linux's ephemeral ports (32768 and up) and apart
	// from a gang's master ports (29500..31499).
	notebookPortMin = 20000
	notebookPorts   = 9000
)

// MasterPort is the port rank 0 of a gang listens on for its
// rendezvous (MASTER_PORT): fixed per job and attempt, in 29500..31499,
// so that every executor that places a gang (agents, Slurm, Ray) gives
// its ranks the same one without asking the node.
func MasterPort(jobID string, attempt int) int {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d", jobID, attempt)
	return 29500 + int(h.Sum32()%2000)
}

// NotebookPort is the loopback port a notebook job's attempt listens on:
// fixed per job and attempt, in 20000..28999, so the server knows it
// without a report from the node.
func NotebookPort(jobID string, attempt int) int {
	h := fnv.New32a()
	fmt.Fprintf(h, "notebook/%s/%d", jobID, attempt)
	return notebookPortMin + int(h.Sum32()%notebookPorts)
}

// NotebookSecret is the secret of one attempt of a notebook job whose
// own secret is jobSecret: what was sent to one attempt's port (perhaps
// to whatever else listened there) opens no other attempt's notebook.
func NotebookSecret(jobSecret string, attempt int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "corral-notebook/%d/%s", attempt, jobSecret))
	return hex.EncodeToString(sum[:24])
}

// NotebookPath is the path of a job's notebook through the server's
// proxy, with its trailing slash.
func NotebookPath(jobID string) string { return "/proxy/" + jobID + "/" }
