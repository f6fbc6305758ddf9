package refs

import (
	"errors"
	"testing"
)

func TestNumberID(t *testing.T) {
	read := func(n int64) (string, bool, error) {
		switch n {
		case 7:
			return "j7", true, nil
		case 9:
			return "", false, errors.New("the store is down")
		}
		return "", false, nil
	}
	for _, tc := range []struct {
		ref string
		n   int64
		id  string
		ok  bool
	}{
		{"7", 7, "j7", true},
		{"7_3", 7, "j7_3", true},
		{"8", 8, "", true},   // no such number
		{"9_1", 9, "", true}, // the store cannot say
		{"j7", 0, "", false},
		{"7_x", 0, "", false},
	} {
		n, id, ok := NumberID(tc.ref, read)
		if n != tc.n || id != tc.id || ok != tc.ok {
			t.Errorf("%q: %d %q %v, want %d %q %v", tc.ref, n, id, ok, tc.n, tc.id, tc.ok)
		}
	}
}
