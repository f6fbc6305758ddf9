#!/usr/bin/env bash
# CI's check of the API contract and its clients (after the Go tests, which
# fail when clients/openapi.json is not what the server serves):
#   1. openapi.json is a valid OpenAPI 3.1 document (Redocly's linter,
#      redocly.yaml's rules);
#   2. the TypeScript types and the Python models are what the document
#      generates now (else: run clients/generate.sh and commit);
#   3. the TypeScript client type-checks (tsc --noEmit);
#   4. the Python client's own tests pass (models against the document,
#      the client against a stand-in server).
# Needs node and npm (the tools install from clients/package-lock.json)
# and python3.
set -euo pipefail
cd "$(dirname "$0")"
bin=node_modules/.bin
[ -x "$bin/redocly" ] && [ -x "$bin/openapi-typescript" ] && [ -x "$bin/tsc" ] ||
  npm ci --no-audit --no-fund --loglevel=error

echo "== lint openapi.json"
"$bin/redocly" lint --config redocly.yaml --format stylish openapi.json

echo "== TypeScript types current"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin/openapi-typescript" openapi.json -o "$tmp/openapi.d.ts" >/dev/null
if ! diff -u typescript/src/openapi.d.ts "$tmp/openapi.d.ts" >"$tmp/diff"; then
  head -40 "$tmp/diff"
  echo "clients/typescript/src/openapi.d.ts is stale: run clients/generate.sh and commit" >&2
  exit 1
fi

echo "== Python models current"
python3 python/gen_models.py --check

echo "== tsc --noEmit"
"$bin/tsc" -p typescript --noEmit

echo "== Python client tests"
(cd python && python3 -m unittest discover -s tests)
echo "clients: ok"
