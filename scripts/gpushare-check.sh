#!/usr/bin/env bash
# gpushare-check.sh: MIG slices and MPS shares placed by the scheduler,
# checked from outside (issue 28's "How it will be checked"), against a
# `corral up` it starts on simulated GPUs: GPU 0 in seven 1g.10gb slices,
# GPU 1 a 3g.40gb and a 4g.40gb, GPU 2 shared (MPS, through the agent
# tests' stand-in control binary), GPU 3 plain.
#
#   scripts/gpushare-check.sh [./corral] [-k]    # -k: keep the temp dir
#
# Builds ./corral when it is missing. It submits whole-GPU jobs, slices and
# shares side by side with the CLI (--mig, --gpu-share, --gpu-compute) and
# checks, printing PASS or FAIL for each and a summary (exit 1 on a FAIL):
#   1. bad requests are refused with 422 naming the field;
#   2. no unit (a whole GPU, a slice) is given twice; whole GPUs only on
#      GPU 3; slices only on GPUs 0-1, shares only on GPU 2;
#   3. a slice job sees only its slice (CUDA_VISIBLE_DEVICES=MIG-…), a
#      share gets its MPS environment;
#   4. jobs that cannot get their part wait and say why;
#   5. gpu-status and corral nodes name each slice's and share's holder;
#   6. accounting: each job's gpu_equivalents and gpu_seconds, and GET
#      /usage, charge its fraction (1g.10gb 1/7, 3g.40gb 3/7, 20 GB of 80
#      with 25% compute 1/4);
#   7. as root with cgroup containment: fake device nodes of other GPUs and
#      /dev/mem give a slice or share job EPERM, its own GPU's opens
#      (skipped otherwise).
# Needs curl and jq. About 20 seconds.
set -u
KEEP=0
BIN=""
for a in "$@"; do
	case "$a" in
	-k) KEEP=1 ;;
	*) BIN=$a ;;
	esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "$BIN" ]; then
	BIN=$ROOT/corral
	[ -x "$BIN" ] || (cd "$ROOT" && go build -o corral ./cmd/corral) || { echo "cannot build corral"; exit 1; }
fi
BIN=$(readlink -f "$BIN")
for tool in curl jq; do
	command -v $tool >/dev/null || { echo "needs $tool"; exit 1; }
done

W=$(mktemp -d /tmp/gpushare-check.XXXXXX)
export HOME=$W
PORT=${GPUSHARE_CHECK_PORT:-$((20000 + RANDOM % 20000))}
export CORRAL_SERVER=http://127.0.0.1:$PORT
export CORRAL_TOKEN=gpushare-check-admin-token-0123456789
pass=0 fail=0 skip=0
ok() { echo "PASS: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
skipped() { echo "SKIP: $*"; skip=$((skip + 1)); }
api() { curl -sS -H "Authorization: Bearer $CORRAL_TOKEN" "$@"; }
UP=""
cleanup() {
	[ -n "$UP" ] && kill "$UP" 2>/dev/null && wait "$UP" 2>/dev/null
	if [ $KEEP = 1 ]; then echo "kept $W"; else rm -rf "$W"; fi
}
trap cleanup EXIT

echo "== corral up on simulated MIG slices and a shared GPU"
CORRAL_ADMIN_TOKEN=$CORRAL_TOKEN "$BIN" up --listen 127.0.0.1:$PORT --data-dir "$W/data" --node-name check-node \
	--simulate-gpus '4:H100:80:mig=0:1g.10gb*7,1:3g.40gb+4g.40gb' --shared-gpus 2 \
	--mps-control "$ROOT/internal/agent/testdata/fake-mps-control" --mps-dir "$W/mps" --notebook-mig 1g.10gb --run-as agent \
	>"$W/up.log" 2>&1 &
UP=$!
for _ in $(seq 100); do
	[ "$(api "$CORRAL_SERVER/cluster/gpu-status" 2>/dev/null | jq -r '.total_gpus // 0')" = 4 ] && break
	sleep 0.2
done
[ "$(api "$CORRAL_SERVER/cluster/gpu-status" | jq -r .total_gpus)" = 4 ] || { bad "corral up did not come up with 4 GPUs"; tail -20 "$W/up.log"; exit 1; }

echo "== 1. bad requests"
refuse() { # BODY FIELD
	local r
	r=$(api -w '\n%{http_code}' -X POST -H 'Content-Type: application/json' -d "$1" "$CORRAL_SERVER/queue/submit")
	if [ "$(echo "$r" | tail -1)" = 422 ] && [ "$(echo "$r" | head -n -1 | jq -r .error.field)" = "$2" ]; then
		ok "refused naming $2: $1"
	else
		bad "$1: want 422 naming $2, got $r"
	fi
}
refuse '{"command":"true","gpu_count":2,"mig_profile":"1g.10gb"}' gpu_count
refuse '{"command":"true","mig_profile":"1g.10gb","gpu_share_mib":1024}' gpu_share_mib
refuse '{"command":"true","gpu_compute":30}' gpu_compute
refuse '{"command":"true","mig_profile":"huge"}' mig_profile
refuse '{"command":"true","nodes":2,"gpu_share_mib":1024}' nodes

echo "== submitting whole GPUs, slices and shares"
DEVS=$W/dev
mkdir -p "$DEVS"
CMD="env | grep -E '^CUDA' | sort; for f in $DEVS/*; do err=\$( (: <>\"\$f\") 2>&1 ); case \"\$err\" in *'not permitted'*) echo \"dev \${f##*/} EPERM\";; *) echo \"dev \${f##*/} ok\";; esac; done; echo ready; sleep 300"
if [ "$(id -u)" = 0 ]; then
	for g in 0 1 2 3; do mknod "$DEVS/nvidia$g" c 195 $g 2>/dev/null; done
	mknod "$DEVS/mem" c 1 1 2>/dev/null
fi
sub() { # USER ARGS... -> job id
	local u=$1
	shift
	"$BIN" submit -o json --user "$u" "$@" -- "$CMD" | jq -r .id
}
declare -A ID FRAC
ID[slice3g]=$(sub sa --mig 3g.40gb); FRAC[slice3g]=$(echo "3/7" | bc -l)
ID[sliceany]=$(sub sb --mig any --gpu-mem 15); FRAC[sliceany]=$(echo "4/7" | bc -l)
ID[slice1g]=$(sub sc --mig 1g.10gb); FRAC[slice1g]=$(echo "1/7" | bc -l)
ID[share20]=$(sub alice --gpu-share 20G --gpu-compute 25); FRAC[share20]=0.25
ID[share40]=$(sub alice --gpu-share 40GiB); FRAC[share40]=0.5
ID[whole]=$(sub wa --gpus 1); FRAC[whole]=1
W3G=$(sub sd --mig 3g.40gb)
WBOB=$(sub bob --gpu-share 10G)
WWHOLE=$(sub wb --gpus 1)

state() { api "$CORRAL_SERVER/jobs/$1" | jq -r .state; }
for k in "${!ID[@]}"; do
	for _ in $(seq 150); do
		st=$(state "${ID[$k]}")
		[ "$st" = running ] && "$BIN" logs "${ID[$k]}" 2>/dev/null | grep -q ready && break
		case $st in completed | failed | canceled) break ;; esac
		sleep 0.2
	done
	[ "$(state "${ID[$k]}")" = running ] || bad "$k (${ID[$k]}) is not running: $(api "$CORRAL_SERVER/jobs/${ID[$k]}" | jq -c '{state,pending_message,message}')"
done

echo "== 2. no unit twice"
api "$CORRAL_SERVER/jobs?limit=1000" >"$W/jobs.json"
units=$(jq -r '.jobs[] | select(.state=="running") | .allocation[] |
	"\(.node_id) \(.gpu_id) \(if .mig then "mig\(.mig.index)" elif .share_mib then "share" else "whole" end)"' "$W/jobs.json")
dups=$(echo "$units" | grep -v ' share$' | sort | uniq -d)
[ -z "$dups" ] && ok "no whole GPU or slice given twice ($(echo "$units" | wc -l) units held)" || bad "given twice: $dups"
wrong=$(echo "$units" | awk '($3=="whole" && $2!=3) || ($3 ~ /^mig/ && $2>1) || ($3=="share" && $2!=2)')
[ -z "$wrong" ] && ok "whole GPUs only on GPU 3, slices on MIG GPUs, shares on the shared GPU" || bad "misplaced: $wrong"
shareMiB=$(jq '[.jobs[] | select(.state=="running") | .allocation[] | select(.share_mib) | .share_mib] | add' "$W/jobs.json")
[ "$shareMiB" -le 81920 ] && ok "the shared GPU's shares hold $shareMiB MiB of 81920" || bad "shared GPU over-committed: $shareMiB MiB"

echo "== 3. what each job sees"
for k in slice3g sliceany slice1g; do
	uuid=$(api "$CORRAL_SERVER/jobs/${ID[$k]}" | jq -r '.allocation[0].mig.uuid')
	if "$BIN" logs "${ID[$k]}" | grep -qx "CUDA_VISIBLE_DEVICES=$uuid" && [[ $uuid == MIG-* ]]; then
		ok "$k sees its slice alone: CUDA_VISIBLE_DEVICES=$uuid"
	else
		bad "$k: want CUDA_VISIBLE_DEVICES=$uuid; log: $("$BIN" logs "${ID[$k]}" | head -5 | tr '\n' ' ')"
	fi
done
log=$("$BIN" logs "${ID[share20]}")
if echo "$log" | grep -qx 'CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20480M' && echo "$log" | grep -qx 'CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25' &&
	echo "$log" | grep -q '^CUDA_MPS_PIPE_DIRECTORY=/'; then
	ok "the 20G/25% share has its MPS environment"
else
	bad "share20's environment: $log"
fi

echo "== 4. why the others wait"
why() { api "$CORRAL_SERVER/jobs/$1" | jq -r '"\(.state): \(.pending_message)"'; }
for pair in "$W3G|needs a free 3g.40gb MIG slice; the 1 on check-node is held by" "$WBOB|needs 10 GB on a shared GPU" "$WWHOLE|needs 1 GPU"; do
	id=${pair%%|*} text=${pair#*|}
	for _ in $(seq 50); do why "$id" | grep -qF "$text" && break; sleep 0.2; done
	w=$(why "$id")
	[[ $w == queued:*"$text"* ]] && ok "waits: $w" || bad "$id: $w; want queued saying \"$text\""
done

echo "== 5. who holds what"
api "$CORRAL_SERVER/cluster/gpu-status" >"$W/gpu-status.json"
h=$(jq -r '.nodes[0].gpus[1].mig.devices[0].allocated_to' "$W/gpu-status.json")
[ "$h" = "${ID[slice3g]}" ] && ok "gpu-status: GPU 1's 3g.40gb held by $h" || bad "gpu-status: GPU 1 slice 0 held by $h, want ${ID[slice3g]}"
n=$(jq '.nodes[0].gpus[2].shares | length' "$W/gpu-status.json")
[ "$n" = 2 ] && ok "gpu-status: GPU 2 has alice's 2 shares" || bad "gpu-status: GPU 2 has $n shares"
"$BIN" nodes >"$W/nodes.txt"
grep -q '2/share .*MPS share of alice, 25% compute' "$W/nodes.txt" && grep -q "1/0 .*MIG 3g.40gb.*${ID[slice3g]}" "$W/nodes.txt" &&
	ok "corral nodes lists the slices' and shares' holders" || bad "corral nodes: $(cat "$W/nodes.txt")"

echo "== 7. devices outside a job's own"
if [ "$(id -u)" = 0 ] && [ -e "$DEVS/mem" ] && jq -r '.nodes[0].containment' "$W/gpu-status.json" | grep -q '^cgroup'; then
	l=$("$BIN" logs "${ID[slice3g]}")
	echo "$l" | grep -qx 'dev nvidia1 ok' && echo "$l" | grep -qx 'dev nvidia0 EPERM' && echo "$l" | grep -qx 'dev nvidia3 EPERM' && echo "$l" | grep -qx 'dev mem EPERM' &&
		ok "the slice job on GPU 1 opens its GPU's node alone (other GPUs and /dev/mem: EPERM)" || bad "slice job's devices: $(echo "$l" | grep '^dev' | tr '\n' ' ')"
	l=$("$BIN" logs "${ID[share20]}")
	echo "$l" | grep -qx 'dev nvidia2 ok' && echo "$l" | grep -qx 'dev nvidia3 EPERM' &&
		ok "the share on GPU 2 opens its GPU's node alone" || bad "share's devices: $(echo "$l" | grep '^dev' | tr '\n' ' ')"
else
	skipped "device nodes: needs root and cgroup containment (containment: $(jq -r '.nodes[0].containment' "$W/gpu-status.json"))"
fi

echo "== 6. accounting"
for k in "${!ID[@]}"; do
	e=$(api "$CORRAL_SERVER/jobs/${ID[$k]}" | jq -r .gpu_equivalents)
	[ "$(echo "d=$e-${FRAC[$k]}; if (d<0) d=-d; d<0.000001" | bc -l)" = 1 ] && ok "$k: gpu_equivalents $e" || bad "$k: gpu_equivalents $e, want ${FRAC[$k]}"
done
for k in "${!ID[@]}"; do api -X DELETE "$CORRAL_SERVER/queue/${ID[$k]}" >/dev/null; done
for k in "${!ID[@]}"; do
	for _ in $(seq 100); do
		case $(state "${ID[$k]}") in completed | failed | canceled) break ;; esac
		sleep 0.1
	done
	j=$(api "$CORRAL_SERVER/jobs/${ID[$k]}")
	secs=$(echo "$j" | jq '((.finished_at | sub("\\.[0-9]+";"") | fromdate) - (.started_at | sub("\\.[0-9]+";"") | fromdate))')
	gs=$(echo "$j" | jq .gpu_seconds)
	# Whole seconds from the timestamps: allow one second of the fraction either way.
	[ "$(echo "d=$gs-${FRAC[$k]}*$secs; if (d<0) d=-d; d<=${FRAC[$k]}*1.01+0.01" | bc -l)" = 1 ] &&
		ok "$k: $gs GPU-seconds over ~${secs}s at ${FRAC[$k]:0:6}" || bad "$k: $gs GPU-seconds over ~${secs}s, want ${FRAC[$k]} of a GPU"
done
api "$CORRAL_SERVER/usage?by=user" >"$W/usage.json"
for k in slice3g slice1g whole; do
	u=$(api "$CORRAL_SERVER/jobs/${ID[$k]}" | jq -r .user)
	got=$(jq --arg u "$u" '[.rows[] | select(.key==$u) | .gpu_seconds] | add // 0' "$W/usage.json")
	want=$(api "$CORRAL_SERVER/jobs/${ID[$k]}" | jq .gpu_seconds)
	[ "$(echo "d=$got-$want; if (d<0) d=-d; d<0.01" | bc -l)" = 1 ] && ok "usage of $u: $got GPU-seconds, as its job" || bad "usage of $u: $got, its job $want"
done
for id in "$W3G" "$WBOB" "$WWHOLE"; do
	for _ in $(seq 100); do [ "$(state "$id")" = running ] && break; sleep 0.1; done
	[ "$(state "$id")" = running ] && ok "$id runs once the parts are free" || bad "$id: $(why "$id")"
	api -X DELETE "$CORRAL_SERVER/queue/$id" >/dev/null
done

echo
echo "passed $pass, failed $fail, skipped $skip"
[ $fail = 0 ]
