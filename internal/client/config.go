package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The client config file remembers a token per server, so that the CLI
// (and any other program using this package) finds one without being
// told: `corral up` writes its admin token there for its own address.
//
// It lives at $CORRAL_CONFIG, else <user config dir>/corral/config.json
// (~/.config/corral/config.json on Linux), mode 0600:
//
//	{"default_server": "https://head:7450",
//	 "servers": {"http://127.0.0.1:7450": {"token": "corral_...", "data_dir": "/home/ana/.corral"}}}
//
// `corral login` writes the default server and that server's token;
// `corral logout` forgets a server's token. CORRAL_SERVER and --server
// take precedence over the default server, CORRAL_TOKEN and --token over
// the token.

// ServerConfig is what the config file keeps about one server.
type ServerConfig struct {
	Token   string `json:"token"`
	DataDir string `json:"data_dir,omitempty"` // the server's data dir, when it is local
}

// Config is the client config file.
type Config struct {
	// DefaultServer is the server of client commands that name none
	// (no --server, no CORRAL_SERVER); "": DefaultServer.
	DefaultServer string                  `json:"default_server,omitempty"`
	Servers       map[string]ServerConfig `json:"servers"`
}

// ConfigPath is where the client config file is: $CORRAL_CONFIG, else
// <user config dir>/corral/config.json.
func ConfigPath() (string, error) {
	if p := os.Getenv("CORRAL_CONFIG"); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("client config: %w", err)
	}
	return filepath.Join(dir, "corral", "config.json"), nil
}

// LoadConfig reads the client config file; a missing file is an empty
// config.
func LoadConfig() (Config, error) {
	c := Config{Servers: map[string]ServerConfig{}}
	path, err := ConfigPath()
	if err != nil {
		return c, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("client config: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("client config %s: %w", path, err)
	}
	if c.Servers == nil {
		c.Servers = map[string]ServerConfig{}
	}
	return c, nil
}

// TokenFor returns the token the config file keeps for server (any form
// NormalizeServerURL accepts), "" when none. localhost and 127.0.0.1 are
// the same server.
func TokenFor(server string) string {
	base, err := NormalizeServerURL(server)
	if err != nil {
		return ""
	}
	c, err := LoadConfig()
	if err != nil {
		return ""
	}
	for _, k := range aliases(base) {
		if sc, ok := c.Servers[k]; ok && sc.Token != "" {
			return sc.Token
		}
	}
	return ""
}

// aliases are the spellings of a loopback server's address.
func aliases(base string) []string {
	out := []string{base}
	u, err := url.Parse(base)
	if err != nil {
		return out
	}
	host, port := u.Hostname(), u.Port()
	var others []string
	switch host {
	case "localhost":
		others = []string{"127.0.0.1", "::1"}
	case "127.0.0.1":
		others = []string{"localhost"}
	case "::1":
		others = []string{"localhost"}
	}
	for _, h := range others {
		v := *u
		v.Host = net.JoinHostPort(h, port)
		if port == "" {
			v.Host = h
			if strings.Contains(h, ":") {
				v.Host = "[" + h + "]"
			}
		}
		out = append(out, v.String())
	}
	return out
}

// LocalURL is the address a client on this machine uses for a server
// listening on addr (HOST:PORT): a wildcard host becomes loopback.
func LocalURL(scheme, addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return scheme + "://" + addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// SaveServer records sc for server in the config file, atomically and
// under a lock, so that several `corral up` starting at once keep each
// other's entries.
func SaveServer(server string, sc ServerConfig) (path string, err error) {
	base, err := NormalizeServerURL(server)
	if err != nil {
		return "", err
	}
	return UpdateConfig(func(c *Config) error {
		c.Servers[base] = sc
		return nil
	})
}

// UpdateConfig changes the config file with fn, atomically and under a
// lock (a concurrent update waits), keeping it mode 0600. An unreadable
// file is started over.
func UpdateConfig(fn func(*Config) error) (path string, err error) {
	path, err = ConfigPath()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return path, fmt.Errorf("client config: %w", err)
	}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return path, fmt.Errorf("client config: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return path, fmt.Errorf("client config: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	c, err := LoadConfig()
	if err != nil {
		c = Config{Servers: map[string]ServerConfig{}} // unreadable: start over
	}
	if err := fn(&c); err != nil {
		return path, err
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return path, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.json")
	if err != nil {
		return path, fmt.Errorf("client config: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return path, fmt.Errorf("client config: %w", err)
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return path, fmt.Errorf("client config: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return path, fmt.Errorf("client config: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return path, fmt.Errorf("client config: %w", err)
	}
	return path, nil
}

// ConfigKey is the key under which the config file keeps server: the
// spelling it has there already (localhost and 127.0.0.1 are one
// server), else its normalized form.
func (c Config) ConfigKey(server string) (string, error) {
	base, err := NormalizeServerURL(server)
	if err != nil {
		return "", err
	}
	for _, k := range aliases(base) {
		if _, ok := c.Servers[k]; ok {
			return k, nil
		}
	}
	return base, nil
}

// SaveLogin records a token `corral login` got for server, keeping what
// the file knows of it otherwise (its data dir), and makes server the
// default server when makeDefault is set.
func SaveLogin(server, token string, makeDefault bool) (path string, err error) {
	return UpdateConfig(func(c *Config) error {
		key, err := c.ConfigKey(server)
		if err != nil {
			return err
		}
		sc := c.Servers[key]
		sc.Token = token
		c.Servers[key] = sc
		if makeDefault {
			c.DefaultServer = key
		}
		return nil
	})
}

// ForgetToken removes the token the config file keeps for server (and
// the server's entry when nothing else is kept of it); the default
// server stays. It reports whether there was a token.
func ForgetToken(server string) (path string, had bool, err error) {
	path, err = UpdateConfig(func(c *Config) error {
		key, err := c.ConfigKey(server)
		if err != nil {
			return err
		}
		sc, ok := c.Servers[key]
		had = ok && sc.Token != ""
		sc.Token = ""
		if sc == (ServerConfig{}) {
			delete(c.Servers, key)
		} else if ok {
			c.Servers[key] = sc
		}
		return nil
	})
	return path, had, err
}
