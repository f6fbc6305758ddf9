#!/usr/bin/env bash
# Regenerates the API contract and everything made from it, after a change
# to a route or to a type of internal/api:
#   clients/openapi.json                   (from the route table and the Go types)
#   clients/typescript/src/openapi.d.ts    (openapi-typescript)
#   clients/python/corral/models.py        (clients/python/gen_models.py)
# Commit the results. clients/check.sh (CI) fails while any is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
go test ./internal/server -run '^TestOpenAPIFileCurrent$' -count=1 -update >/dev/null
python3 clients/python/gen_models.py
cd clients
[ -x node_modules/.bin/openapi-typescript ] || npm ci --no-audit --no-fund --loglevel=error
node_modules/.bin/openapi-typescript openapi.json -o typescript/src/openapi.d.ts
echo "regenerated clients/openapi.json, clients/typescript/src/openapi.d.ts, clients/python/corral/models.py"
