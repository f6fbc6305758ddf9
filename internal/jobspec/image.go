package jobspec

import (
	"strings"
	"unicode"

	"github.com/corral-sched/corral/internal/api"
)

// A job may run in an OCI image: its agent runs the command
// through the node's container runtime (Podman), inside the attempt's own
// cgroup, as the job's account, with its GPUs, its working directory and
// home, and the host directories of its mounts. Only agents run images:
// the Slurm and Ray pools refuse them here, and their executors refuse a
// job that reaches them anyway (start_failed).

// Bounds on a job's image and mounts.
const (
	maxImageLen = 512
	maxMounts   = 32
	maxMountLen = 4096
)

// validateImage checks the submission's image and mounts and sets them on
// the job; it changes nothing on error. Mounts need an image.
func validateImage(req *api.SubmitRequest, j *api.Job) error {
	img := strings.TrimSpace(req.Image)
	if img == "" {
		if len(req.Mounts) > 0 {
			return api.Invalid("mounts", "bind mounts need an image (image): a job without one sees the node's directories as they are")
		}
		return nil
	}
	if err := checkImageRef(img); err != nil {
		return err
	}
	if j.Pool == api.PoolSlurm || j.Pool == api.PoolRay {
		return api.Invalid("image", "the %s pool cannot run container images: only Corral's agents run them (leave pool empty or use %q)", j.Pool, api.PoolAgents)
	}
	// -o/-e files are written by the agent's tee, which an image lacks.
	if req.Output != "" {
		return api.Invalid("output", "output files are not written for a job in a container image (image): read its log (corral logs), or write the file from the command")
	}
	if req.Error != "" {
		return api.Invalid("error", "error files are not written for a job in a container image (image): read its log (corral logs), or write the file from the command")
	}
	if len(req.Mounts) > maxMounts {
		return api.Invalid("mounts", "has %d mounts; at most %d are allowed", len(req.Mounts), maxMounts)
	}
	var mounts []string
	for _, m := range req.Mounts {
		if _, _, _, err := api.ParseMount(m); err != nil {
			return api.Invalid("mounts", "%s", err.Error())
		}
		if len(m) > maxMountLen {
			return api.Invalid("mounts", "a mount is longer than %d bytes", maxMountLen)
		}
		mounts = append(mounts, m)
	}
	j.Image, j.Mounts = img, mounts
	return nil
}

// checkImageRef refuses what no container runtime would take as an image
// reference: whitespace, control characters, a leading '-' (it would read
// as a flag), overlong names.
func checkImageRef(ref string) error {
	if len(ref) > maxImageLen {
		return api.Invalid("image", "is longer than %d bytes", maxImageLen)
	}
	if strings.HasPrefix(ref, "-") {
		return api.Invalid("image", "%q is not an image reference (it starts with '-')", truncate(ref, 80))
	}
	for _, r := range ref {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r > unicode.MaxASCII {
			return api.Invalid("image", "%q is not an image reference (NAME[:TAG][@DIGEST], e.g. docker.io/pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime)", truncate(ref, 80))
		}
	}
	return nil
}
