package agent

import (
	"fmt"
	"os"
	"path/filepath"
)

// A job reads its preemption notice at $CORRAL_PREEMPT_NOTICE. The data
// dir is private (0700), so a job that runs as another account than the
// agent's (runas.go) could not reach a notice under it: its notice goes
// in a directory of its own, made with a random name under the system's
// temporary directory, owned by the agent and readable by all (a notice
// holds no secret; the job's account cannot write there, so it cannot
// point the agent's writes elsewhere). The path is kept in the task's
// record (record.go) for an agent that adopts the task, and the directory
// is removed when the task is forgotten. A job that runs as the agent's
// own account finds its notice beside its log, as before.

// prepareNotice chooses the task's notice path for a job run under cred
// (nil: the agent's account), creating its directory when it has one of
// its own. Called before the task starts.
func (t *tasks) prepareNotice(tk *task, cred *credential) error {
	t.mu.Lock()
	made := tk.notice != ""
	t.mu.Unlock()
	if cred == nil || made {
		return nil // beside the log (noticeOf), or made already (an image's task, container_task.go)
	}
	dir, err := os.MkdirTemp("", "corral-notice-")
	if err != nil {
		return fmt.Errorf("preemption notice: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("preemption notice: %w", err)
	}
	path := filepath.Join(dir, "notice")
	t.mu.Lock()
	tk.notice = path
	t.mu.Unlock()
	return nil
}

// noticeOf is the notice path of task k: its own (prepareNotice), else
// beside its log.
func (t *tasks) noticeOf(k taskKey) string {
	t.mu.Lock()
	p := ""
	if tk := t.byKey[k]; tk != nil {
		p = tk.notice
	}
	t.mu.Unlock()
	if p != "" {
		return p
	}
	return t.noticePath(k)
}

// putNotice writes a notice at path: 0644 in a directory of its own
// (the job may run as another account), 0600 beside the log.
func putNotice(path string, own bool, text string) error {
	if !own {
		return writeFileAtomic(path, []byte(text))
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil { // whatever the umask
		return err
	}
	return os.Rename(tmp, path)
}

// dropNotice removes a task's own notice directory, if it has one.
func dropNotice(tk *task) {
	if tk.notice != "" {
		os.RemoveAll(filepath.Dir(tk.notice))
	}
}
