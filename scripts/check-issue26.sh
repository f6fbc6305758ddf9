#!/bin/bash
# check-issue26.sh: issue 26's "How it will be checked", played as a black
# box against a fresh build. On a shared box, as root, with two Unix
# accounts (ana and bo, made if absent; CHECK_USERS names others): `corral up` runs every job as its
# owner's account; each user signs in from their own shell (corral login
# through the login socket), activates a virtualenv and submits
# `python train.py`; #SBATCH/#CORRAL batch scripts; a secret set in corral
# up's own environment is looked for in every job; Slurm-style times, and
# the time limit's kill on time; a job in a locally built image (a busybox
# rootfs imported with podman) canceled mid-run; -o/-e files named with
# patterns. Prints PASS or FAIL for each check, SKIP where the machine
# lacks something, and exits 1 if any check failed.
#
#   sudo scripts/check-issue26.sh            # builds corral from this tree
#   CORRAL_BIN=/path/to/corral scripts/check-issue26.sh
#
# Needs root, Go (unless CORRAL_BIN), python3 with venv, and for the image
# checks podman and `apt-get download busybox-static`. Everything it makes
# lives under $CHECK_DIR (default: a new /tmp/corral-check26.XXXX), removed
# at the end unless KEEP=1; the accounts it made are removed too.
set -u

[ "$(id -u)" = 0 ] || { echo "check-issue26: run as root" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=${CHECK_DIR:-$(mktemp -d /tmp/corral-check26.XXXXXX)}
mkdir -p "$W"
chmod 0755 "$W"
mkdir -p "$W/bin"
PORT=${CHECK_PORT:-$((20000 + $$ % 20000))}
URL=http://127.0.0.1:$PORT
SECRET=agent-secret-$$-$RANDOM
IMAGE=localhost/corral-check26-$$:1
# The two accounts: ana and bo, or CHECK_USERS="NAME1 NAME2" (on a machine
# where other tests make and remove accounts of those names).
set -- ${CHECK_USERS:-ana bo}
U1=$1 U2=$2
passed=0 failed=0 skipped=0
made_users=""
up_pid=""

pass() { passed=$((passed + 1)); echo "PASS  $*"; }
fail() { failed=$((failed + 1)); echo "FAIL  $*"; }
skip() { skipped=$((skipped + 1)); echo "SKIP  $*"; }
contains() { case "$1" in *"$2"*) return 0 ;; esac; return 1; }
check() { # check NAME COMMAND...: PASS when COMMAND succeeds
	name=$1
	shift
	if "$@"; then pass "$name"; else fail "$name"; fi
}

cleanup() {
	[ -n "$up_pid" ] && kill "$up_pid" 2>/dev/null && wait "$up_pid" 2>/dev/null
	podman rmi --force "$IMAGE" >/dev/null 2>&1
	for u in $made_users; do userdel -r "$u" >/dev/null 2>&1; done
	if [ "${KEEP:-0}" = 1 ]; then echo "kept: $W"; else rm -rf "$W"; fi
}
trap cleanup EXIT

# json EXPR: evaluate a Python expression over the JSON on stdin (d).
json() { python3 -c 'import json,sys; d=json.load(sys.stdin); v=eval(sys.argv[1]); print("" if v is None else v)' "$1"; }
# as USER CMD: run CMD in USER's own login shell, with corral on PATH and
# this server as the default.
as() {
	u=$1
	shift
	timeout 300 su - "$u" -c "export PATH=$W/bin:\$PATH CORRAL_SERVER=$URL CORRAL_LOGIN_SOCKET=$W/login.sock; $*"
}
# job ID: the job as the admin sees it (JSON).
job() { CORRAL_TOKEN=$ADMIN "$W/bin/corral" --server "$URL" show -o json "$1"; }
# wait_state ID STATE... : wait (up to 60s) until the job is in one of the states.
wait_state() {
	id=$1
	shift
	for _ in $(seq 600); do
		st=$(job "$id" 2>/dev/null | json 'd["state"]')
		for s in "$@"; do [ "$st" = "$s" ] && return 0; done
		sleep 0.1
	done
	echo "      job $id is $st, not $*" >&2
	return 1
}

echo "== build and start (work dir $W)"
if [ -n "${CORRAL_BIN:-}" ]; then
	cp "$CORRAL_BIN" "$W/bin/corral"
else
	(cd "$ROOT" && go build -o "$W/bin/corral" ./cmd/corral) || { echo "check-issue26: go build failed" >&2; exit 2; }
fi
chmod 0755 "$W/bin/corral"
for u in $U1 $U2; do
	if ! id "$u" >/dev/null 2>&1; then
		useradd --create-home --shell /bin/bash "$u" || { echo "check-issue26: useradd $u failed" >&2; exit 2; }
		made_users="$made_users $u"
	fi
done
ADMIN=check26-admin-token-$$-0123456789abcdef
# The admin's shell leaves things in corral up's environment that no job
# may see: a cloud secret, root's pyenv, OLDPWD.
env AWS_SECRET_ACCESS_KEY="$SECRET" PYENV_ROOT=/root/.pyenv OLDPWD=/root/agent-shell CORRAL_ADMIN_TOKEN="$ADMIN" \
	"$W/bin/corral" up --data-dir "$W/data" --listen "127.0.0.1:$PORT" --simulate-gpus 4 --node-name check26 \
	--run-as user --cancel-grace 2s --login-socket "$W/login.sock" >"$W/up.log" 2>&1 &
up_pid=$!
for _ in $(seq 300); do
	CORRAL_TOKEN=$ADMIN "$W/bin/corral" --server "$URL" nodes >/dev/null 2>&1 && [ -S "$W/login.sock" ] && break
	sleep 0.1
done
CORRAL_TOKEN=$ADMIN "$W/bin/corral" --server "$URL" nodes >/dev/null 2>&1 || { echo "check-issue26: corral up did not start:" >&2; cat "$W/up.log" >&2; exit 2; }

echo "== each user signs in from their own shell"
for u in $U1 $U2; do
	if as "$u" "corral login" >"$W/login-$u.out" 2>&1; then
		pass "$u: corral login through the login socket"
	else
		fail "$u: corral login ($(tail -1 "$W/login-$u.out")); falling back to a token"
		tok=$(CORRAL_TOKEN=$ADMIN "$W/bin/corral" --server "$URL" token create --user "$u" -o json | json 'd.get("secret") or d.get("token")')
		as "$u" "mkdir -p ~/.config/corral" && echo "export CORRAL_TOKEN=$tok" >>"$(getent passwd "$u" | cut -d: -f6)/.profile"
	fi
done

echo "== a venv, activated in the user's shell, and python train.py"
for u in $U1 $U2; do
	h=$(getent passwd "$u" | cut -d: -f6)
	as "$u" "mkdir -p ~/proj && cat > ~/proj/train.py" <<'PY'
import os, sys
print("prefix=" + sys.prefix)
print("uid=%d user=%s home=%s" % (os.getuid(), os.environ.get("USER"), os.environ.get("HOME")))
print("cwd=" + os.getcwd())
print("gpus=" + os.environ.get("CUDA_VISIBLE_DEVICES", "?"))
leaks = [k for k, v in os.environ.items() if "agent-secret" in v or k in ("PYENV_ROOT",) or v == "/root/agent-shell"]
print("agent-env=" + (",".join(sorted(leaks)) or "none"))
PY
	if ! as "$u" "python3 -m venv ~/venv" >"$W/venv-$u.out" 2>&1; then
		skip "$u: python train.py in a venv (python3 -m venv fails here: $(tail -1 "$W/venv-$u.out"))"
		continue
	fi
	out=$(as "$u" "source ~/venv/bin/activate && cd ~/proj && corral run --gpus 2 -- python train.py" 2>"$W/run-$u.err")
	rc=$?
	echo "$out" >"$W/run-$u.out"
	check "$u: corral run --gpus 2 -- python train.py completes (exit $rc)" [ "$rc" = 0 ]
	check "$u: the job's python is the venv's ($h/venv)" grep -qx "prefix=$h/venv" "$W/run-$u.out"
	check "$u: the job runs as $u with its HOME" grep -qx "uid=$(id -u "$u") user=$u home=$h" "$W/run-$u.out"
	check "$u: the job runs in the submitting directory" grep -qx "cwd=$h/proj" "$W/run-$u.out"
	check "$u: the job has its two GPUs" grep -qE '^gpus=[0-9],[0-9]$' "$W/run-$u.out"
	check "$u: nothing of corral up's environment (secret, PYENV_ROOT, OLDPWD) in the job" grep -qx "agent-env=none" "$W/run-$u.out"
	id=$(as "$u" "source ~/venv/bin/activate && cd ~/proj && corral submit --json -- 'source ~/venv/bin/activate && set -o pipefail && python train.py | cat'" | json 'd["id"]')
	wait_state "$id" completed failed canceled
	check "$u: source and pipefail work in the job's shell (bash)" [ "$(job "$id" | json 'd["state"]')" = completed ]
done

echo "== the agent's secret is in no job"
sj=$(as "$U1" "corral submit --json -- env" | json 'd["id"]')
wait_state "$sj" completed failed
as "$U1" "corral logs $sj" >"$W/env-job.out" 2>&1
check "an env job ran" grep -q '^CORRAL_JOB_ID=' "$W/env-job.out"
check "the agent's AWS_SECRET_ACCESS_KEY is in no job's env" sh -c "! grep -q '$SECRET' '$W/env-job.out'"
check "root's PYENV_ROOT and OLDPWD are in no job's env" sh -c "! grep -qE '^(PYENV_ROOT|OLDPWD)=' '$W/env-job.out'"
found=""
for d in "$W"/data/logs/*; do grep -rqs "$SECRET" "$d" && found="$found ${d##*/}"; done
check "no job's log holds the agent's secret" [ -z "$found" ]

echo "== #SBATCH and #CORRAL batch scripts, -o/-e with patterns"
as "$U1" "cat > ~/proj/sweep.sh" <<'SH'
#!/bin/bash
#SBATCH --gres=gpu:2 -J sweep -t 0:30
#SBATCH -o logs/%x-%j.out -e logs/%x-%j.err
#SBATCH --partition=gpu --qos=high
#CORRAL --priority high
set -o pipefail
echo "script: gpus=$CUDA_VISIBLE_DEVICES args=$# $1 user=$(id -un)"
echo "to stderr" >&2
SH
as "$U1" "mkdir -p ~/proj/logs"
out=$(as "$U1" "cd ~/proj && chmod -x sweep.sh && corral submit --json sweep.sh 'a b'" 2>"$W/sweep.err")
sid=$(echo "$out" | json 'd["id"]')
as "$U1" "echo 'echo EDITED' >> ~/proj/sweep.sh" # sbatch copies the script at submission
check "#SBATCH --gres=gpu:2 gives 2 GPUs" [ "$(echo "$out" | json 'd["gpu_count"]')" = 2 ]
check "#SBATCH -J sweep names the job" [ "$(echo "$out" | json 'd["name"]')" = sweep ]
check "#SBATCH -t 0:30 is a 30-second limit from #SBATCH" [ "$(echo "$out" | json '"%g %s" % (d["time_limit"], d["time_limit_from"])')" = "30 #SBATCH" ]
check "#CORRAL --priority high" [ "$(echo "$out" | json 'd["priority"]')" = high ]
check "one warning names the #SBATCH options Corral does not share" grep -q -- "--partition=gpu, --qos=high" "$W/sweep.err"
wait_state "$sid" completed failed
ah=$(getent passwd "$U1" | cut -d: -f6)
check "the script (not executable, edited after submission) ran as submitted" [ "$(job "$sid" | json 'd["state"]')" = completed ]
check "-o %x-%j: logs/sweep-$sid.out holds stdout" grep -qx "script: gpus=[0-9],[0-9] args=1 a b user=$U1" "$ah/proj/logs/sweep-$sid.out"
check "-e %x-%j: logs/sweep-$sid.err holds stderr" grep -qx "to stderr" "$ah/proj/logs/sweep-$sid.err"
check "the -o file belongs to $U1" [ "$(stat -c %U "$ah/proj/logs/sweep-$sid.out" 2>/dev/null)" = "$U1" ]
check "the edit after submission changed nothing" sh -c "! grep -q EDITED '$ah/proj/logs/sweep-$sid.out'"
check "corral show says where the time limit came from" sh -c "CORRAL_TOKEN=$ADMIN '$W/bin/corral' --server $URL show $sid | grep -q 'Time limit:.*30s (#SBATCH)'"
# The command line wins over the headers; -o/-e on the command line, %u.
out=$(as "$U1" "cd ~/proj && corral submit --json -t 1 -o 'logs/%u-%j.out' sweep.sh" 2>/dev/null)
cid=$(echo "$out" | json 'd["id"]')
check "-t 1 on the command line wins over #SBATCH -t (60 s, from flag)" [ "$(echo "$out" | json '"%g %s" % (d["time_limit"], d["time_limit_from"])')" = "60 flag" ]
wait_state "$cid" completed failed
check "-o %u-%j: logs/$U1-$cid.out" grep -q "script: " "$ah/proj/logs/$U1-$cid.out"

echo "== Slurm-style times, and the kill at the limit"
for c in "1 60" "90 5400" "1:30:00 5400" "2-00:00:00 172800" "0:05 5" "1-12 129600"; do
	set -- $c
	out=$(as "$U2" "corral submit --json --begin tomorrow -t $1 -- true" 2>&1)
	got=$(echo "$out" | json 'd["time_limit"]' 2>/dev/null)
	check "-t $1 is $2 s" [ "${got%.0}" = "$2" ]
	id=$(echo "$out" | json 'd["id"]' 2>/dev/null) && as "$U2" "corral cancel $id" >/dev/null 2>&1
done
out=$(as "$U2" "corral submit --json --begin tomorrow --time-limit 90 --estimate 1:00:00 -- true" 2>&1)
check "--time-limit 90 is minutes (5400 s), --estimate 1:00:00 is 3600 s" [ "$(echo "$out" | json '"%g %g" % (d["time_limit"], d["estimated_duration"])')" = "5400 3600" ]
as "$U2" "corral cancel $(echo "$out" | json 'd["id"]')" >/dev/null 2>&1
out=$(as "$U2" "corral submit -t 1:2:3:4 -- true" 2>&1)
rc=$?
check "a bad time is refused (exit $rc) naming the forms" contains "$rc $out" "D-HH:MM:SS"
kid=$(as "$U2" "corral submit --json -t 0:05 -- 'echo started; sleep 120'" | json 'd["id"]')
wait_state "$kid" failed completed canceled
j=$(job "$kid")
ran=$(echo "$j" | json '(__import__("datetime").datetime.fromisoformat(d["finished_at"].replace("Z","+00:00")) - __import__("datetime").datetime.fromisoformat(d["started_at"].replace("Z","+00:00"))).total_seconds()')
check "-t 0:05 stops the job with reason time_limit" [ "$(echo "$j" | json 'd["state"] + " " + d["reason"]')" = "failed time_limit" ]
check "... on time: it ran ${ran}s (limit 5s, grace 2s)" python3 -c "import sys; r=float(sys.argv[1]); sys.exit(0 if 5 <= r <= 7 else 1)" "$ran"

echo "== a job in a locally built image, canceled mid-run"
img_ok=1
if ! command -v podman >/dev/null; then
	skip "image checks: podman is not installed"
	img_ok=0
else
	mkdir -p "$W/img" && (cd "$W/img" && apt-get download busybox-static >/dev/null 2>&1)
	deb=$(ls "$W"/img/busybox-static*.deb 2>/dev/null | head -1)
	if [ -z "$deb" ]; then
		skip "image checks: apt-get download busybox-static failed"
		img_ok=0
	else
		r=$W/img/root
		dpkg-deb -x "$deb" "$r" && (cd "$r" && for a in sh id cat sleep ls echo env pwd; do ln -sf busybox bin/$a; done &&
			mkdir -p tmp etc proc sys dev && chmod 1777 tmp)
		tar -C "$r" -c . | podman import - "$IMAGE" >/dev/null 2>&1 || { fail "podman import of the test image"; img_ok=0; }
	fi
fi
if [ $img_ok = 1 ]; then
	iid=$(as "$U1" "cd ~/proj && corral submit --json --image $IMAGE -- 'echo in-image uid=\$(id -u) pwd=\$(pwd); sleep 300'" | json 'd["id"]')
	wait_state "$iid" running
	for _ in $(seq 300); do as "$U1" "corral logs $iid" 2>/dev/null | grep -q in-image && break; sleep 0.1; done
	check "the image job runs as "$U1" in her directory" sh -c "su - $U1 -c 'PATH=$W/bin:\$PATH CORRAL_SERVER=$URL CORRAL_LOGIN_SOCKET=$W/login.sock corral logs $iid' | grep -qx 'in-image uid=$(id -u $U1) pwd=$ah/proj'"
	check "a container runs for it" sh -c "podman ps --format '{{.Names}}' | grep -q '^corral-$iid'"
	t0=$(date +%s)
	as "$U1" "corral cancel $iid" >/dev/null
	wait_state "$iid" canceled
	t1=$(date +%s)
	check "cancel ends it within the grace ($((t1 - t0))s)" [ $((t1 - t0)) -le 8 ]
	gone=1
	for _ in $(seq 100); do
		podman ps -a --format '{{.Names}}' | grep -q "^corral-$iid" || { gone=0; break; }
		sleep 0.1
	done
	check "nothing of the container is left (podman ps -a)" [ $gone = 0 ]
	check "no process of it is left" sh -c "! pgrep -u $U1 -f 'sleep 300' >/dev/null"
	check "the digest of the image is recorded" [ -n "$(job "$iid" | json 'd.get("image_digest")')" ]
	as "$U1" "cat > ~/proj/img.sh" <<'SH'
#!/bin/sh
echo "script-in-image $1 $(cat /etc/os-release 2>/dev/null | head -1)"
ls /bin/busybox >/dev/null && echo busybox-here
SH
	xid=$(as "$U1" "cd ~/proj && corral submit --json --image $IMAGE img.sh arg1" | json 'd["id"]')
	wait_state "$xid" completed failed
	as "$U1" "corral logs $xid" >"$W/img-script.out" 2>&1
	check "a batch script runs inside the image (corral submit --image IMG img.sh)" grep -q "busybox-here" "$W/img-script.out"
	check "... with its arguments" grep -q "script-in-image arg1" "$W/img-script.out"
	out=$(as "$U1" "cd ~/proj && corral submit --image $IMAGE -o out.log -- true" 2>&1)
	check "-o with an image is refused naming output" contains "$out" "output"
fi

echo
echo "check-issue26: $passed passed, $failed failed, $skipped skipped"
[ $failed = 0 ]
