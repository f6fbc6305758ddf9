package cmdkit

import "strings"

// ParseEnv reads the K=V pairs of flag (--env, --label), naming it when
// one is not.
func ParseEnv(flag string, pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t\n") {
			return nil, Usagef("%s %q: want KEY=VALUE", flag, p)
		}
		env[k] = v
	}
	return env, nil
}
