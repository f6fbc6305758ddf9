#!/usr/bin/env bash
# Checks a team setup end to end, as a stranger would from the README and
# --help alone (issue 27's "How it will be checked"), on one machine, as root:
#
#   - builds corral and starts `corral up` as root WITHOUT --run-as agent
#     (a shared box: each job runs as its owner's Unix account), with 4
#     simulated GPUs on a free loopback port and a data dir of its own;
#   - makes the Unix accounts ana and bo (when absent; removed again at exit);
#   - each signs in with `corral login` through the login socket, with no
#     token handed over, and `corral whoami` says who they are (also from
#     a login shell, su -);
#   - each submits jobs (a plain one, an array --array 0-3, named ones) and
#     `corral queue` / `corral jobs` list only their own; `corral cancel
#     --name eval` by ana cancels only hers; bo cannot cancel ana's job;
#   - jobs addressed by number (`corral cancel 12`), by array task
#     (`corral show 13_2`) and by name (`corral show NAME`; a name several
#     jobs share is refused); completion offers one's own jobs;
#   - a job printing 200,000 lines, then `corral logs --tail 5` returns its
#     last 5 at once;
#   - /openapi.json from the live server validated with the pinned Redocly
#     of clients/ (npm ci there when its tools are missing), and the same
#     as clients/openapi.json;
#   - ana installs the Python client (pip install ./clients/python into a
#     venv, offline) and runs a 20-point sweep that waits for the best
#     result, finding server and token as the CLI does;
#   - the TypeScript client and its sweep example (clients/typescript,
#     typed by the generated openapi.d.ts) compiled with tsc and run with
#     node against the server with ana's token (corral token show);
#   - corral logout, then corral whoami fails; corral version.
#
# Prints PASS or FAIL per check and a summary; exits 1 on any FAIL. Needs
# root, go, python3 (with venv), node and npm (npm ci needs the registry
# once, or clients/node_modules already there). About 30 seconds.
#
#   scripts/check-issue27.sh [-k]     # -k: keep the temp dir (logs) at exit
#   CHECK27_USERS="ana2 bo2" scripts/check-issue27.sh   # other account names
#
# Runs of this script on one machine take turns (flock on
# /tmp/corral-check27.lock): they would share the accounts' config files.
#
# The login socket is the default /run/corral/login.sock unless a live
# server already holds it (then one in the temp dir, named to the accounts
# by $CORRAL_LOGIN_SOCKET, as corral login --help says).
set -uo pipefail

keep=0
[ "${1:-}" = "-k" ] && keep=1
if [ "$(id -u)" != 0 ]; then
  echo "check-issue27: run as root (it makes Unix accounts and runs corral up as root)" >&2
  exit 2
fi
read -r A B <<<"${CHECK27_USERS:-ana bo}"
if [ -z "$A" ] || [ -z "$B" ] || [ "$A" = "$B" ]; then
  echo "check-issue27: CHECK27_USERS names two different accounts" >&2
  exit 2
fi
exec 9>/tmp/corral-check27.lock
if ! flock -w 600 9; then
  echo "check-issue27: another run holds /tmp/corral-check27.lock" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)

tmp=$(mktemp -d /tmp/corral-check27.XXXXXX)
chmod 0755 "$tmp"
bindir=$tmp/bin
data=$tmp/data
mkdir -p "$bindir"
chmod 0755 "$bindir"
made_users=()
up_pid=

pass=0
fail=0
failed=()
ok() { pass=$((pass + 1)); printf 'PASS  %s\n' "$1"; }
bad() {
  fail=$((fail + 1)); failed+=("$1"); printf 'FAIL  %s\n' "$1"
  [ -n "${2:-}" ] && printf '%s\n' "$2" | head -20 | sed 's/^/      /'
  return 0
}

# The admin's commands (root): the token corral up saved, in a config file
# of this run's own rather than root's.
export CORRAL_CONFIG=$tmp/root-config.json
admin() { "$bindir/corral" --server "$url" "$@"; }
# jq_ EXPR: prints a Python expression over the JSON on stdin, j.
jq_() { "$py" -c "import json,sys; j=json.load(sys.stdin); print($1)"; }

cleanup() {
  set +e
  if [ -n "$up_pid" ] && kill -0 "$up_pid" 2>/dev/null; then
    # Jobs run under corral up's shim host, which outlives it: end them
    # first (cancel's filters take one state at a time).
    local s deadline=$((SECONDS + 30))
    for s in queued scheduled allocating running; do
      admin cancel -A --yes --state "$s" >/dev/null 2>&1
    done
    while [ $SECONDS -lt $deadline ] && [ "$(admin queue -A -o json 2>/dev/null | jq_ 'len(j.get("queued_jobs") or []) + len(j.get("running_jobs") or [])' 2>/dev/null)" != 0 ]; do
      sleep 0.5
    done
    kill -TERM "$up_pid" 2>/dev/null
    deadline=$((SECONDS + 20))
    while kill -0 "$up_pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    kill -KILL "$up_pid" 2>/dev/null
  fi
  for u in "${made_users[@]}"; do
    userdel -r "$u" >/dev/null 2>&1 || userdel "$u" >/dev/null 2>&1
  done
  if [ "$keep" = 1 ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# ---- build and start
echo "== building corral"
if ! (cd "$root" && go build -o "$bindir/corral" ./cmd/corral) >"$tmp/build.log" 2>&1; then
  cat "$tmp/build.log"
  bad "go build ./cmd/corral"
  exit 1
fi
chmod 0755 "$bindir/corral"
ok "go build ./cmd/corral"

port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port
sock_args=()
user_env=()
if "$py" -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect("/run/corral/login.sock")' 2>/dev/null; then
  echo "note: a live server holds /run/corral/login.sock; this run's socket is $tmp/run/login.sock (\$CORRAL_LOGIN_SOCKET)"
  mkdir -p "$tmp/run" && chmod 0755 "$tmp/run"
  sock_args=(--login-socket "$tmp/run/login.sock")
  user_env=(CORRAL_LOGIN_SOCKET="$tmp/run/login.sock")
fi

echo "== corral up (as root, jobs run as their owners) on $url"
"$bindir/corral" up --simulate-gpus 4 --listen "127.0.0.1:$port" --data-dir "$data" \
  --node-name check27 "${sock_args[@]}" >"$tmp/up.log" 2>&1 &
up_pid=$!
deadline=$((SECONDS + 30))
until curl -fsS "$url/healthz" >/dev/null 2>&1; do
  if ! kill -0 "$up_pid" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
    bad "corral up starts" "$(tail -20 "$tmp/up.log")"
    exit 1
  fi
  sleep 0.2
done
ok "corral up starts (as root, no --run-as agent)"

# ---- the accounts
for u in "$A" "$B"; do
  if ! id "$u" >/dev/null 2>&1; then
    useradd -m -s /bin/bash "$u" && made_users+=("$u")
  fi
done

# as USER SCRIPT: runs SCRIPT in bash as USER, in their home, with a clean
# environment (their HOME, the PATH with corral on it), no token.
as() {
  local u=$1 home
  shift
  home=$(getent passwd "$u" | cut -d: -f6)
  runuser -u "$u" -- env -i HOME="$home" USER="$u" LOGNAME="$u" SHELL=/bin/bash LANG=C.UTF-8 \
    PATH="$bindir:/usr/local/bin:/usr/bin:/bin" "${user_env[@]}" bash -c "cd && $1"
}

# ---- sign-in
for u in "$A" "$B"; do
  out=$(as "$u" 'corral login' 2>&1)
  if [ $? -eq 0 ]; then ok "$u: corral login (the socket, no token handed over)"; else bad "$u: corral login" "$out"; fi
  out=$(as "$u" 'corral whoami -o json' 2>&1)
  who=$(printf '%s' "$out" | jq_ '"%s %s %s" % (j.get("user"), j.get("role"), j.get("server"))' 2>/dev/null)
  if [ "$who" = "$u user $url" ]; then
    ok "$u: corral whoami says $u (user) at $url"
  else
    bad "$u: corral whoami says $u (user) at $url" "$out"
  fi
  # A login shell (su -) finds the same config: HOME as the account's.
  out=$(su - "$u" -c "$bindir/corral whoami" 2>&1)
  if [ $? -eq 0 ] && grep -q "^$u (user" <<<"$out"; then ok "$u: su - $u -c 'corral whoami' says $u"; else bad "$u: su - $u -c 'corral whoami' says $u" "$out"; fi
  mode=$(stat -c %a "$(getent passwd "$u" | cut -d: -f6)/.config/corral/config.json" 2>/dev/null)
  if [ "$mode" = 600 ]; then ok "$u: config file saved, mode 0600"; else bad "$u: config file saved, mode 0600" "mode: ${mode:-none}"; fi
done

# ---- jobs
submit() { # submit USER ARGS...: prints the job's number
  local u=$1
  shift
  as "$u" "corral submit --json $*" | jq_ 'j["number"]'
}
a_plain=$(submit "$A" --gpus 0 -- sleep 600)
a_arr=$(submit "$A" --gpus 0 --array 0-3 -- sleep 600)
a_eval=$(submit "$A" --gpus 0 -J eval -- sleep 600)
a_named=$(submit "$A" --gpus 0 -J "$A-train" -- sleep 600)
b_eval=$(submit "$B" --gpus 0 -J eval -- sleep 600)
b_plain=$(submit "$B" --gpus 0 -- sleep 600)
echo "   $A: plain $a_plain, array $a_arr, eval $a_eval, $A-train $a_named; $B: eval $b_eval, plain $b_plain"
if [ -n "$a_plain" ] && [ -n "$a_arr" ] && [ -n "$a_eval" ] && [ -n "$b_eval" ] && [ -n "$b_plain" ]; then
  ok "submissions print job numbers"
else
  bad "submissions print job numbers"
fi

# only_own USER CMD: every job CMD -o json lists is USER's, and there is one.
only_own() {
  local u=$1 cmd=$2 out
  out=$(as "$u" "$cmd -o json" 2>&1) || { bad "$u: $cmd lists only their jobs" "$out"; return; }
  res=$(printf "%s" "$out" | jq_ '(lambda js: "%d %s" % (len(js), ",".join(sorted({x.get("user","?") for x in js}))))((j.get("jobs") or []) + (j.get("queued_jobs") or []) + (j.get("running_jobs") or []))' 2>&1)
  if [ "$res" = "${res%% *} $u" ] && [ "${res%% *}" -gt 0 ]; then
    ok "$u: $cmd lists only their jobs ($res)"
  else
    bad "$u: $cmd lists only their jobs" "got: $res"
  fi
}
for u in "$A" "$B"; do
  only_own "$u" "corral queue"
  only_own "$u" "corral jobs"
done
out=$(as "$A" 'corral queue -A -o json' 2>&1)
users=$(printf '%s' "$out" | jq_ '",".join(sorted({x["user"] for x in (j.get("queued_jobs") or []) + (j.get("running_jobs") or [])}))' 2>&1)
if [ "$users" = "$(printf '%s\n' "$A" "$B" | sort | paste -sd,)" ]; then ok "$A: corral queue -A lists everyone's ($users)"; else bad "$A: corral queue -A lists everyone's" "got: $users"; fi

# state_of JOB: its state, "canceling" while a cancel is under way.
state_of() { admin show "$1" -o json | jq_ '"canceling" if j.get("cancel_requested") and j["state"] != "canceled" else j["state"]'; }
# ended_state JOB: its state once canceled (a running job's cancel takes
# its SIGTERM's time), or as it is after 10 s.
ended_state() {
  local s deadline=$((SECONDS + 10))
  while s=$(state_of "$1") && [ "$s" != canceled ] && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
  echo "$s"
}
# unfinished STATE: true for a state nobody has canceled and that has not ended.
unfinished() { case "$1" in queued | scheduled | allocating | running) true ;; *) false ;; esac; }

out=$(as "$B" "corral cancel $a_plain" 2>&1)
if [ $? -ne 0 ] && unfinished "$(state_of "$a_plain")"; then
  ok "$B cannot cancel $A's job $a_plain"
else
  bad "$B cannot cancel $A's job $a_plain" "$out"
fi

out=$(as "$A" 'corral cancel --name eval' 2>&1)
rc=$?
sa=$(ended_state "$a_eval")
sb=$(state_of "$b_eval")
if [ $rc -eq 0 ] && [ "$sa" = canceled ] && unfinished "$sb"; then
  ok "$A: corral cancel --name eval cancels hers only (hers $sa, $B's $sb)"
else
  bad "$A: corral cancel --name eval cancels hers only" "exit $rc, hers $sa, $B's $sb
$out"
fi

out=$(as "$A" "corral cancel $a_plain" 2>&1)
if [ $? -eq 0 ] && [ "$(ended_state "$a_plain")" = canceled ]; then
  ok "$A: corral cancel $a_plain (a number)"
else
  bad "$A: corral cancel $a_plain (a number)" "$out"
fi

out=$(as "$A" "corral show ${a_arr}_2 -o json" 2>&1)
idx=$(printf '%s' "$out" | jq_ 'j.get("array_task_id", j.get("array_index"))' 2>/dev/null)
num=$(printf '%s' "$out" | jq_ 'j.get("number")' 2>/dev/null)
if [ "$idx" = 2 ]; then
  ok "$A: corral show ${a_arr}_2 (an array task) is task 2 ($num)"
else
  bad "$A: corral show ${a_arr}_2 (an array task)" "$out"
fi
out=$(as "$A" "corral show ${a_arr}_2" 2>&1)
if [ $? -eq 0 ] && grep -q "${a_arr}_2" <<<"$out"; then
  ok "$A: corral show ${a_arr}_2 prints the task's number"
else
  bad "$A: corral show ${a_arr}_2 prints the task's number" "$out"
fi

out=$(as "$A" "corral show $A-train -o json" 2>&1)
if [ "$(printf '%s' "$out" | jq_ 'j.get("number")' 2>/dev/null)" = "$a_named" ]; then
  ok "$A: corral show $A-train (a name) is job $a_named"
else
  bad "$A: corral show $A-train (a name)" "$out"
fi
out=$(as "$B" "corral show $A-train" 2>&1)
if [ $? -ne 0 ]; then ok "$B: corral show $A-train finds none of his"; else bad "$B: corral show $A-train finds none of his" "$out"; fi

# Shell completion offers the caller's unfinished jobs, by number.
out=$(as "$B" 'corral __complete cancel ""' 2>&1)
nums=$(grep -E '^[0-9]' <<<"$out" | cut -f1 | sort -n | tr '\n' ' ')
if [ "$nums" = "$b_eval $b_plain " ]; then
  ok "$B: completion of corral cancel offers his unfinished jobs ($nums)"
else
  bad "$B: completion of corral cancel offers his unfinished jobs ($b_eval $b_plain)" "$out"
fi

# ---- a large log
out=$(as "$A" 'corral submit --gpus 0 -J biglog --wait -- seq 1 200000' 2>&1)
if [ $? -eq 0 ]; then ok "$A: a job printing 200,000 lines completes"; else bad "$A: a job printing 200,000 lines completes" "$out"; fi
t0=$(date +%s%N)
out=$(as "$A" 'corral logs --tail 5 biglog' 2>&1)
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
want=$(seq 199996 200000)
if [ $rc -eq 0 ] && [ "$out" = "$want" ] && [ $ms -lt 2000 ]; then
  ok "$A: corral logs --tail 5 biglog: the last 5 lines in ${ms} ms"
else
  bad "$A: corral logs --tail 5 biglog: the last 5 lines, quickly" "exit $rc, ${ms} ms:
$out"
fi

# ---- the API contract (any signed-in caller may read it: docs/api.md),
# fetched by ana with the token her corral login saved (corral token show)
home_ana=$(getent passwd "$A" | cut -d: -f6)
out=$(as "$A" "curl -fsS -H \"Authorization: Bearer \$(corral token show)\" $url/openapi.json" 2>&1 >"$tmp/openapi.json")
if [ $? -eq 0 ]; then
  ok "GET /openapi.json"
else
  bad "GET /openapi.json" "$out"
fi
if cmp -s "$tmp/openapi.json" "$root/clients/openapi.json"; then
  ok "/openapi.json is clients/openapi.json"
else
  bad "/openapi.json is clients/openapi.json" "$(diff <("$py" -m json.tool "$tmp/openapi.json" 2>&1) <("$py" -m json.tool "$root/clients/openapi.json") | head)"
fi
tools=$root/clients/node_modules/.bin
if ! [ -x "$tools/redocly" ] || ! [ -x "$tools/tsc" ]; then
  echo "== npm ci in clients/"
  (cd "$root/clients" && npm ci --no-audit --no-fund --loglevel=error) >"$tmp/npm.log" 2>&1 || cat "$tmp/npm.log"
fi
cp "$root/clients/redocly.yaml" "$tmp/redocly.yaml"
out=$(cd "$tmp" && "$tools/redocly" lint --config redocly.yaml --format stylish openapi.json 2>&1)
if [ $? -eq 0 ]; then
  ok "redocly lint /openapi.json (OpenAPI $("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["openapi"])' "$tmp/openapi.json"))"
else
  bad "redocly lint /openapi.json" "$out"
fi

# ---- the Python client, as ana, from her own copy of clients/python
rm -rf "$home_ana/corral-python"
cp -r "$root/clients/python" "$home_ana/corral-python"
chown -R "$A": "$home_ana/corral-python"
cat >"$home_ana/sweep.py" <<'EOF'
import corral

client = corral.Client()  # the server and token corral login saved
rates = [10 ** (-5 + i / 5) for i in range(20)]
jobs = [client.submit(f"echo loss $(awk 'BEGIN {{ d = {lr} - 0.001; print d < 0 ? -d : d }}')",
                      gpus=1, name="py-sweep", env={"LR": str(lr)})
        for lr in rates]
ended = client.wait_all(jobs, timeout=120)

def final_loss(job):
    return float(client.logs(job, tail=1).split()[-1])

done = [j for j in ended if j.state == "completed"]
best = min(done, key=final_loss)
print(len(done), "completed; best lr:", best.env["LR"], "loss:", final_loss(best), "user:", best.user)
EOF
chown "$A": "$home_ana/sweep.py"
out=$(as "$A" "$py -m venv venv && venv/bin/python -m pip install --no-index --quiet ./corral-python" 2>&1)
if [ $? -eq 0 ]; then ok "$A: pip install ./clients/python into a venv (offline)"; else bad "$A: pip install ./clients/python into a venv (offline)" "$out"; fi
out=$(as "$A" 'venv/bin/python sweep.py' 2>&1)
if [ $? -eq 0 ] && grep -q '^20 completed; best lr: 0.001 ' <<<"$out" && grep -q "user: $A\$" <<<"$out"; then
  ok "$A: Python 20-point sweep, best lr 0.001"
else
  bad "$A: Python 20-point sweep, best lr 0.001" "$out"
fi

# A name several of ana's jobs have: refused, naming their numbers.
out=$(as "$A" 'corral show py-sweep' 2>&1)
if [ $? -ne 0 ] && grep -q 'ambiguous\|[0-9], [0-9]' <<<"$out"; then
  ok "$A: corral show py-sweep (20 jobs of that name) is refused, naming them"
else
  bad "$A: corral show py-sweep (20 jobs of that name) is refused, naming them" "$out"
fi

# ---- the TypeScript client, compiled from the generated types
tsout=$tmp/ts
out=$("$tools/tsc" -p "$root/clients/typescript" --outDir "$tsout" 2>&1)
if [ $? -eq 0 ]; then ok "tsc: clients/typescript and examples/sweep.ts compile"; else bad "tsc: clients/typescript compiles" "$out"; fi
echo '{"type": "module"}' >"$tsout/package.json"
chmod -R a+rX "$tsout"
out=$(as "$A" "CORRAL_SERVER=$url CORRAL_TOKEN=\$(corral token show) node $tsout/examples/sweep.js" 2>&1)
if [ $? -eq 0 ] && grep -q '^best: lr=0.001' <<<"$out"; then
  ok "$A: TypeScript sweep.js with $A's token: $out"
else
  bad "$A: TypeScript sweep.js, best lr 0.001" "$out"
fi
n=$(admin jobs -A --name lr-sweep --state completed -o json 2>/dev/null | jq_ 'len([x for x in j["jobs"] if x.get("user") == "'"$A"'"])' 2>/dev/null)
if [ "$n" = 20 ]; then ok "the TypeScript sweep's 20 jobs are $A's and completed"; else bad "the TypeScript sweep's 20 jobs are $A's and completed" "found ${n:-none}"; fi

# ---- signing out
out=$(as "$B" 'corral logout && ! corral whoami' 2>&1)
if [ $? -eq 0 ]; then ok "$B: corral logout, then corral whoami fails"; else bad "$B: corral logout, then corral whoami fails" "$out"; fi
out=$(as "$A" 'corral version' 2>&1)
if [ $? -eq 0 ] && grep -q '^server: ' <<<"$out"; then ok "$A: corral version (client and server)"; else bad "$A: corral version (client and server)" "$out"; fi

echo
echo "summary: $pass passed, $fail failed"
for f in "${failed[@]}"; do echo "  FAIL $f"; done
[ "$fail" -eq 0 ]
