package server

import (
	"net/http"
	"strings"

	"github.com/corral-sched/corral/internal/lazyre"
)

var pathParam = lazyre.New(`\{([a-z_]+)\}`)

// openapi serves an OpenAPI 3 description generated from the route table,
// so it cannot list a route that does not exist or miss one that does.
func (s *Server) openapi(w http.ResponseWriter, r *http.Request) error {
	paths := map[string]map[string]any{}
	for _, rt := range s.routes {
		if paths[rt.path] == nil {
			paths[rt.path] = map[string]any{}
		}
		op := map[string]any{
			"summary":     rt.summary,
			"operationId": strings.ToLower(rt.method) + strings.NewReplacer("/", "_", "{", "", "}", "", "-", "_", ".", "_").Replace(rt.path),
			"responses": map[string]any{
				"default": map[string]any{"description": "JSON body; errors are {\"error\": {code, message, field}}"},
			},
		}
		var params []map[string]any
		for _, m := range pathParam.FindAllStringSubmatch(rt.path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]string{"type": "string"}})
		}
		if params != nil {
			op["parameters"] = params
		}
		switch rt.access {
		case public:
			op["security"] = []any{} // no token
		case agent:
			op["security"] = []any{map[string][]string{"joinToken": {}}}
		}
		paths[rt.path][strings.ToLower(rt.method)] = op
	}
	return writeJSON(w, http.StatusOK, map[string]any{
		"openapi": "3.0.3",
		"info":    map[string]string{"title": "Corral API", "version": "1"},
		"paths":   paths,
		"components": map[string]any{"securitySchemes": map[string]any{
			"bearerToken": map[string]string{"type": "http", "scheme": "bearer", "description": "an API token (corral token create); its role decides what it may do"},
			"session":     map[string]string{"type": "apiKey", "in": "cookie", "name": sessionCookie, "description": "the dashboard's session; changes also need the " + csrfHeader + " header"},
			"joinToken":   map[string]string{"type": "http", "scheme": "bearer", "description": "the agents' join token (agent protocol only)"},
		}},
		"security": []any{map[string][]string{"bearerToken": {}}, map[string][]string{"session": {}}},
	})
}
