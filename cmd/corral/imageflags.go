package main

import (
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/api"
)

// imageFlags are the container flags of corral submit and corral run
// (docs/jobs.md, "Container images"): the image the job runs
// in, and the host directories bound into it.
type imageFlags struct {
	image  string
	mounts []string
}

func (f *imageFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.image, "image", "", "run the job in this OCI image through the node's Podman, e.g. docker.io/pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime: as you, with your GPUs, working directory and home (pulled before the job's clock starts)")
	fl.StringArrayVar(&f.mounts, "mount", nil, "with --image: bind a host directory into the container, SRC:DST[:ro] (repeatable; a relative SRC is from the current directory)")
}

// apply sets the request's image and mounts; a relative mount source is
// made absolute here, where the user's current directory is known.
func (f imageFlags) apply(req *api.SubmitRequest) error {
	req.Image = strings.TrimSpace(f.image)
	if len(f.mounts) > 0 && req.Image == "" {
		return usagef("--mount needs --image: a job without one sees the node's directories as they are")
	}
	for _, m := range f.mounts {
		src, rest, ok := strings.Cut(m, ":")
		if ok && src != "" && !filepath.IsAbs(src) {
			abs, err := filepath.Abs(src)
			if err != nil {
				return usagef("--mount %q: %v", m, err)
			}
			m = abs + ":" + rest
		}
		if _, _, _, err := api.ParseMount(m); err != nil {
			return usagef("--mount: %v", err)
		}
		req.Mounts = append(req.Mounts, m)
	}
	return nil
}

// showImage adds a job's image, its digest and its mounts to corral
// show's lines (kv), where it has an image.
func showImage(kv func(k, v string), j api.Job) {
	if j.Image == "" {
		return
	}
	kv("Image", j.Image)
	if j.ImageDigest != "" {
		kv("Image digest", j.ImageDigest)
	}
	if len(j.Mounts) > 0 {
		kv("Mounts", strings.Join(j.Mounts, " "))
	}
}
