package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A data dir that another account owns (say one it made under /tmp before
// the admin ran corral up there), or a symbolic link of another account's
// to one, is refused before anything is read from or written to it; the
// account's own directory, and its own link to it, are not.
func TestSecureDataDirRefusesAnotherAccountsDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory to another account")
	}
	const other = 65534 // nobody
	base := t.TempDir()
	foreign := filepath.Join(base, "foreign")
	if err := os.Mkdir(foreign, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(foreign, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(foreign, other, other); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(base, "mine")
	if err := os.Mkdir(mine, 0o700); err != nil {
		t.Fatal(err)
	}
	foreignLink := filepath.Join(base, "foreign-link")
	if err := os.Symlink(mine, foreignLink); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(foreignLink, other, other); err != nil {
		t.Fatal(err)
	}
	myLink := filepath.Join(base, "my-link")
	if err := os.Symlink(mine, myLink); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, dir, want string
	}{
		{"another account's dir", foreign, "is owned by uid 65534"},
		{"another account's link", foreignLink, "is a symbolic link owned by uid 65534"},
		{"a link of mine to another account's dir", func() string {
			l := filepath.Join(base, "my-link-to-foreign")
			if err := os.Symlink(foreign, l); err != nil {
				t.Fatal(err)
			}
			return l
		}(), "is owned by uid 65534"},
		{"my dir", mine, ""},
		{"my link to my dir", myLink, ""},
		{"a new dir", filepath.Join(base, "new"), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := SecureDataDir(c.dir, "logs")
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("SecureDataDir(%s): %v", c.dir, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("SecureDataDir(%s): %v; want an error saying it %s", c.dir, err, c.want)
			}
		})
	}
	if fi, err := os.Stat(foreign); err != nil || fi.Mode().Perm() != 0o777 {
		t.Errorf("a refused dir was changed: %v %v", fi.Mode(), err)
	}
}

// Lock writes nothing into another account's dir, and never follows a lock
// file that is a symbolic link: root would truncate whatever it names.
func TestLockRefusesAnotherAccountsDirAndLinks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory to another account")
	}
	base := t.TempDir()
	victim := filepath.Join(base, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(base, "foreign")
	if err := os.Mkdir(foreign, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(foreign, "lock")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(foreign, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(foreign); err == nil || !strings.Contains(err.Error(), "is owned by uid 65534") {
		t.Errorf("Lock(another account's dir): %v; want it refused", err)
	}
	mine := filepath.Join(base, "mine")
	if err := os.Mkdir(mine, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(mine, "lock")); err != nil {
		t.Fatal(err)
	}
	if release, err := Lock(mine); err == nil {
		release()
		t.Errorf("Lock(a dir whose lock is a symbolic link) took it")
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "precious" {
		t.Errorf("the file a lock link named is now %q (%v)", b, err)
	}
}
