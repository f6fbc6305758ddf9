package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

func TestImageFlags(t *testing.T) {
	wd, _ := os.Getwd()
	for _, c := range []struct {
		name   string
		f      imageFlags
		image  string
		mounts []string
		bad    bool
	}{
		{"none", imageFlags{}, "", nil, false},
		{"image and mounts", imageFlags{image: " localhost/x:1 ", mounts: []string{"/data:/data:ro", "/s:/s"}}, "localhost/x:1", []string{"/data:/data:ro", "/s:/s"}, false},
		{"relative source", imageFlags{image: "i", mounts: []string{"data:/data"}}, "i", []string{filepath.Join(wd, "data") + ":/data"}, false},
		{"mount without image", imageFlags{mounts: []string{"/a:/b"}}, "", nil, true},
		{"relative target", imageFlags{image: "i", mounts: []string{"/a:b"}}, "", nil, true},
		{"bad option", imageFlags{image: "i", mounts: []string{"/a:/b:rx"}}, "", nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var req api.SubmitRequest
			err := c.f.apply(&req)
			if (err != nil) != c.bad {
				t.Fatalf("apply: %v, want error %v", err, c.bad)
			}
			if !c.bad && (req.Image != c.image || !slices.Equal(req.Mounts, c.mounts)) {
				t.Errorf("image %q mounts %q, want %q %q", req.Image, req.Mounts, c.image, c.mounts)
			}
		})
	}
}
