//go:build !cgo

package gpu

import "fmt"

func openNVML() (Source, error) {
	return nil, fmt.Errorf("%w: this corral binary was built without cgo, which NVML needs", ErrNoNVML)
}
