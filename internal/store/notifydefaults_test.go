package store

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
)

// TestNotifyDefaultsDurable: users' defaults put, replaced and deleted are
// as left after the store is reopened.
func TestNotifyDefaultsDurable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []NotifyDefaultRecord{{"ana", `{"notify":"end"}`}, {"bob", `{"notify":"none"}`}, {"ana", `{"notify":"begin"}`}, {"cy", `{"notify":"all"}`}} {
		if err := s.PutNotifyDefault(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteNotifyDefault(ctx, "cy"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteNotifyDefault(ctx, "nobody"); err != nil {
		t.Fatalf("deleting none: %v", err)
	}
	s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.NotifyDefaults(ctx)
	want := []NotifyDefaultRecord{{"ana", `{"notify":"begin"}`}, {"bob", `{"notify":"none"}`}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("after reopening: %+v %v, want %+v", got, err, want)
	}
}
