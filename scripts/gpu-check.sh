#!/usr/bin/env bash
# gpu-check.sh: Corral on a real NVIDIA machine, end to end, in about three
# minutes. Run as root on a machine with an NVIDIA driver, PyTorch in
# python3, and nothing else of Corral's running:
#
#   scripts/gpu-check.sh ./corral OUTDIR
#
# It checks, printing PASS or FAIL for each and a summary at the end:
#   1. discovery: `corral up` without --simulate-gpus finds through NVML the
#      GPUs nvidia-smi lists (same UUIDs, models, memory, MIG modes);
#   2. a real PyTorch job under Corral: it sees exactly its GPU, multiplies
#      bf16 matrices on it, and Corral's telemetry shows the GPU busy and
#      its memory used while it runs;
#   3. device isolation: a job given no GPU cannot open /dev/nvidiaN, even
#      with CUDA_VISIBLE_DEVICES unset (the device cgroup, not the
#      environment, keeps it out), nor /dev/mem, a disk or a MIG
#      capability (the closed device filter), while the GPU job beside it
#      runs (and so opens nvidiactl and nvidia-uvm);
#   4. foreign processes: a CUDA process Corral did not start is listed with
#      its pid, and its GPU is not handed out until it ends;
#   5. restarts: kill -9 of `corral up` while a PyTorch job runs; the
#      restarted `corral up` adopts it and it ends with its real exit code;
#   6. `corral bench start` on 8 simulated GPUs beside the bare spawn rate of
#      the same machine;
#   7. MIG, read-only: the MIG devices nvidia-smi lists (nvidia-smi -L,
#      nvidia-smi mig -lgi/-lci) are the ones `corral nodes` shows (UUID,
#      profile, compute slices), and the driver's capability minors are
#      there for the device filter; skipped where no GPU has MIG on;
#   8. MPS shares: `corral up --shared-gpus 0` starts (it finds the MPS
#      control binary); then two PyTorch processes on GPU 0, clients of one
#      private MPS control daemon, each with the environment the agent
#      gives a share (pipe directory, pinned memory limit 4 GiB, 50% of the
#      threads): the one allocating 6 GiB fails, its neighbour allocating
#      2 GiB runs on and completes. Skipped where GPU 0 has MIG on.
#   9. the same placed by the scheduler: two --gpu-share 4G jobs on GPU 0
#      marked shared, the agent starting MPS for them: the greedy one fails,
#      the other completes;
#  10. a researcher's job as the team meets it: corral up as root without
#      --run-as agent, a fresh Unix account signing in through the login
#      socket and submitting from her own directory and venv: the PyTorch
#      job runs as her, there, with her venv's python, on its GPU (the
#      account is made for the check and removed after).
# It never changes a GPU's MIG mode or compute mode (steps 7 and 8 only
# read them; MPS works in the default compute mode; the check's daemon has
# a pipe directory of its own and is told to quit at the end).
# Files: OUTDIR/report.txt (everything printed), gpu-status.json, the
# server logs.
#
# GPU_CHECK_SIMULATE=1 runs the same steps on a machine without a GPU
# (simulated GPUs, sh for python, a simulated MIG layout, the stand-in MPS
# control binary of the agent's tests), to try the script itself.
# GPU_CHECK_ONLY=mig-mps runs steps 0, 7, 8 and 9 alone; GPU_CHECK_ONLY=no-bench
# all but step 6.
set -u
BIN=$(readlink -f "${1:-./corral}")
OUT=$(readlink -f "${2:-./gpu-check-out}")
SIM=${GPU_CHECK_SIMULATE:-0}
mkdir -p "$OUT"
exec > >(tee "$OUT/report.txt") 2>&1

W=$(mktemp -d /tmp/gpu-check.XXXXXX)
export HOME=$W # corral up leaves its admin token here for the CLI
PORT=${GPU_CHECK_PORT:-7461}
export CORRAL_SERVER=http://127.0.0.1:$PORT
pass=0 fail=0
ok() { echo "PASS: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
step() { echo; echo "== $* ($(date +%T))"; }
UP=
start_up() { # start_up LOGNAME [flags]: corral up on PORT, waits for /healthz
  local name=$1; shift
  setsid "$BIN" up --listen 127.0.0.1:$PORT --data-dir "$W/data" --run-as agent --heartbeat 1s "$@" >>"$OUT/$name.log" 2>&1 &
  UP=$!
  for _ in $(seq 200); do
    curl -sf "$CORRAL_SERVER/healthz" >/dev/null && return 0
    kill -0 $UP 2>/dev/null || break
    sleep 0.1
  done
  echo "corral up did not answer; its log:"; tail -20 "$OUT/$name.log"; return 1
}
stop_up() { [ -n "$UP" ] && kill "$UP" 2>/dev/null && wait "$UP" 2>/dev/null; UP=; }
field() { # field JOB PYTHON-EXPRESSION-OF-j: a value of the job (corral show -o json)
  "$BIN" show -o json "$1" 2>/dev/null | python3 -c "import json,sys; j=json.load(sys.stdin); print($2)"
}
cleanup() {
  stop_up
  [ -n "${MPSUP:-}" ] && echo quit | env -i PATH="$PATH" CUDA_MPS_PIPE_DIRECTORY="$W/mps/pipe" CUDA_MPS_LOG_DIRECTORY="$W/mps/log" "$MPSBIN"
  [ -n "${FOREIGN:-}" ] && kill "$FOREIGN" 2>/dev/null
  pkill -f "corral shim --host" 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT

PY=python3
SIMFLAG=()
if [ "$SIM" = 1 ]; then SIMFLAG=(--simulate-gpus 1); fi

step "0. the machine"
uname -r; nproc; free -g | head -2
echo "cgroup: $(stat -fc %T /sys/fs/cgroup)"
ldd "$BIN" | head -5
if [ "$SIM" != 1 ]; then
  nvidia-smi -L
  nvidia-smi --query-gpu=index,uuid,name,memory.total,pci.bus_id,mig.mode.current,mig.mode.pending --format=csv,noheader | tee "$W/smi.csv"
  ls -l /dev/nvidia* 2>&1 | head -20
  $PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'
  ldconfig -p | grep -q libnvidia-ml || {
    lib=$(find / -name 'libnvidia-ml.so.1' -not -path '/proc/*' 2>/dev/null | head -1)
    echo "libnvidia-ml.so.1 is not in ldconfig's cache; using $lib"
    export LD_LIBRARY_PATH=${lib%/*}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  }
fi

ONLY=${GPU_CHECK_ONLY:-}
if [ "$ONLY" != mig-mps ]; then
step "1. discovery through NVML"
start_up up1 "${SIMFLAG[@]}" || { bad "corral up did not start"; exit 1; }
"$BIN" nodes
"$BIN" nodes -o json >"$OUT/gpu-status.json"
if [ "$SIM" != 1 ]; then
  python3 - "$OUT/gpu-status.json" "$W/smi.csv" <<'EOF' && ok "corral's GPUs are nvidia-smi's (uuid, model, memory, MIG mode)" || bad "corral's GPUs differ from nvidia-smi's"
import csv, json, sys
gpus = [g for n in json.load(open(sys.argv[1]))["nodes"] for g in n["gpus"]]
smi = [[c.strip() for c in r] for r in csv.reader(open(sys.argv[2]))]
good = len(gpus) == len(smi)
print(f"corral: {len(gpus)} GPUs, nvidia-smi: {len(smi)}")
for g, (idx, uuid, name, mem, bus, mig, pending) in zip(sorted(gpus, key=lambda g: g["id"]), smi):
    m = g.get("mig")
    mode = m["mode"] if m else "[N/A]"
    print(f"  GPU {g['id']}: corral {g['uuid']} {g['model']!r} {g['memory_total']} MiB mig={m}; nvidia-smi {uuid} {name!r} {mem} mig={mig}/{pending}")
    good &= g["uuid"] == uuid and g["model"] == name and f"{g['memory_total']} MiB" == mem
    good &= (mig == "[N/A]" and m is None) or mig.lower() == mode
    good &= not g.get("simulated")
sys.exit(0 if good else 1)
EOF
fi

step "2. a PyTorch job, and 3. device isolation beside it"
cat >"$W/torch_job.py" <<'EOF'
import os, sys, time
import torch
print("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"), "CORRAL_GPU_UUIDS", os.environ.get("CORRAL_GPU_UUIDS"))
print("devices", torch.cuda.device_count(), torch.cuda.get_device_name(0), flush=True)
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
keep = torch.empty(8 << 30, dtype=torch.uint8, device="cuda")  # 8 GiB held, for the telemetry
torch.cuda.synchronize()
end, n, t0 = time.time() + float(sys.argv[1]), 0, time.time()
while time.time() < end:
    for _ in range(50):
        c = a @ b
    torch.cuda.synchronize()
    n += 50
dt = time.time() - t0
print(f"matmuls {n} tflops {n * 2 * 8192**3 / dt / 1e12:.0f} checksum_finite {bool(torch.isfinite(c.float().sum()))}", flush=True)
sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
EOF
cat >"$W/isolation.sh" <<'EOF'
echo "CUDA_VISIBLE_DEVICES=[$CUDA_VISIBLE_DEVICES] NVIDIA_VISIBLE_DEVICES=[$NVIDIA_VISIBLE_DEVICES]"
for d in /dev/nvidia[0-9]*; do
  [ -c "$d" ] || continue
  if ( exec 3<>"$d" ) 2>/dev/null; then echo "OPENED $d"; else echo "denied $d"; fi
done
[ -c /dev/nvidiactl ] && { ( exec 3<>/dev/nvidiactl ) 2>/dev/null && echo "nvidiactl opens" || echo "nvidiactl denied"; }
# The closed device filter: /dev/mem (the job runs as root here), the MIG
# capabilities and a disk stay closed; opened read-only, nothing is read.
for d in /dev/mem /dev/nvidia-caps/* $(ls /dev/sd? /dev/nvme?n? /dev/vd? 2>/dev/null | head -1); do
  [ -c "$d" ] || [ -b "$d" ] || continue
  if ( exec 3<"$d" ) 2>/dev/null; then echo "OPENED $d"; else echo "denied $d"; fi
done
env -u CUDA_VISIBLE_DEVICES -u NVIDIA_VISIBLE_DEVICES python3 -c 'import torch; print("torch sees", torch.cuda.device_count(), "GPUs without CUDA_VISIBLE_DEVICES")' 2>&1 | tail -1
nvidia-smi -L 2>&1 | head -3
EOF
if [ "$SIM" = 1 ]; then
  job=$("$BIN" submit -o json --gpus 1 --name torch -- "echo devices 1; sleep 15; echo matmuls 1 checksum_finite True" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
else
  job=$("$BIN" submit -o json --gpus 1 --name torch -- "$PY $W/torch_job.py 20" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
fi
echo "torch job $job"
for _ in $(seq 300); do [ "$(field "$job" 'j["state"]')" = running ] && break; sleep 0.1; done
iso=$("$BIN" submit -o json --gpus 0 --name isolation -- "sh $W/isolation.sh" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
"$BIN" wait "$iso" >/dev/null
echo "--- isolation job's log"; "$BIN" logs "$iso" | tee "$W/iso.log"
if [ "$SIM" = 1 ]; then
  echo "(simulated: no device nodes to try)"
elif grep -q OPENED "$W/iso.log" || grep -q "torch sees [1-9]" "$W/iso.log"; then
  bad "a job given no GPU reached one"
elif grep -q "denied /dev/nvidia" "$W/iso.log"; then
  ok "a job given no GPU cannot open the GPU's device node, nor see it in torch without CUDA_VISIBLE_DEVICES; /dev/mem, a disk and the MIG capabilities stay closed to it"
else
  bad "no GPU device node was tried (is there none?)"
fi
busy=0
for _ in $(seq 40); do
  line=$("$BIN" nodes | awk 'NR==2')
  echo "  nodes: $line"
  util=$("$BIN" nodes -o json | python3 -c 'import json,sys; g=json.load(sys.stdin)["nodes"][0]["gpus"][0]; print(g["utilization"], g["memory_used"], g["allocated_to"] or "")')
  set -- $util
  if [ "${1:-0}" -gt 50 ] && [ "${2:-0}" -gt 8000 ] && [ "${3:-}" = "$job" ]; then busy=1; break; fi
  [ "$(field "$job" 'j["state"]')" = running ] || break
  sleep 0.5
done
[ "$SIM" = 1 ] || { [ $busy = 1 ] && ok "telemetry shows the job's GPU busy (util $1%, $2 MiB used, allocated to it)" || bad "telemetry never showed the GPU busy"; }
"$BIN" wait "$job"; rc=$?
echo "--- torch job's log"; "$BIN" logs "$job" | tee "$W/torch.log"
if [ $rc = 0 ] && grep -q "devices 1" "$W/torch.log" && grep -q "checksum_finite True" "$W/torch.log"; then
  ok "the PyTorch job saw one GPU, ran its matrix products and completed"
else
  bad "the PyTorch job: exit $rc"
fi
"$BIN" show "$job" | head -30

step "4. a foreign process"
if [ "$SIM" != 1 ]; then
  env -u CORRAL_JOB_ID $PY -c 'import torch,time; x=torch.empty(2<<30,dtype=torch.uint8,device="cuda"); torch.cuda.synchronize(); print("foreign up", flush=True); time.sleep(60)' >"$W/foreign.out" 2>&1 &
  FOREIGN=$!
  seen=0
  for _ in $(seq 60); do
    if "$BIN" nodes | grep -q "foreign:$FOREIGN"; then seen=1; break; fi
    sleep 0.5
  done
  "$BIN" nodes
  [ $seen = 1 ] && ok "the foreign process $FOREIGN is listed on its GPU" || bad "the foreign process $FOREIGN was never listed"
  fj=$("$BIN" submit -o json --gpus 1 --name after-foreign -- "echo ran" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  sleep 3 # the job must stay queued while the foreign process holds the GPU
  st=$(field "$fj" 'j["state"] + " " + j.get("pending_reason", "")')
  echo "job $fj while the foreign process runs: $st"
  [ "${st%% *}" = queued ] && ok "no job is given the GPU a foreign process holds ($st)" || bad "a job ran on the foreign process's GPU ($st)"
  kill $FOREIGN; wait $FOREIGN 2>/dev/null; FOREIGN=
  if timeout 60 "$BIN" wait "$fj" >/dev/null; then ok "the job ran once the foreign process ended"; else bad "the job never ran after the foreign process ended"; fi
fi

step "5. kill -9 of corral up under a running GPU job"
if [ "$SIM" = 1 ]; then
  rj=$("$BIN" submit -o json --gpus 1 --name restart -- "echo devices 1; sleep 8; echo matmuls; exit 7" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
else
  rj=$("$BIN" submit -o json --gpus 1 --name restart -- "$PY $W/torch_job.py 10 7" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
fi
for _ in $(seq 300); do grep -q "devices 1" <("$BIN" logs "$rj" 2>/dev/null) && break; sleep 0.1; done
kill -9 "$UP"; wait "$UP" 2>/dev/null; UP=
echo "killed corral up while $rj ran"
start_up up2 "${SIMFLAG[@]}" || bad "corral up did not start again"
"$BIN" wait "$rj"; rc=$?
"$BIN" logs "$rj" | tee "$W/restart.log"
retries=$(field "$rj" 'j["retry_count"]')
echo "exit $rc, state $(field "$rj" 'j["state"]'), retries $retries"
if [ $rc = 7 ] && grep -q matmuls "$W/restart.log" && [ "$retries" = 0 ]; then
  ok "the restarted corral up adopted the job: no retry, its log whole, its real exit code 7"
else
  bad "after the restart: exit $rc, retries $retries"
fi
stop_up
pkill -f "corral shim --host" 2>/dev/null
fi

step "7. MIG devices, read-only"
rm -rf "$W/data"
if [ "$SIM" = 1 ]; then
  start_up up7 --simulate-gpus 2:H100:80:mig=0:3g.40gb+2g.20gb+1g.10gb*2 || bad "corral up with a simulated MIG layout did not start"
  h=$(hostname) # what nvidia-smi -L would print for that layout
  printf '%s\n' "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-sim-$h-0)" \
    "  MIG 3g.40gb     Device  0: (UUID: MIG-sim-$h-0-0)" "  MIG 2g.20gb     Device  1: (UUID: MIG-sim-$h-0-1)" \
    "  MIG 1g.10gb     Device  2: (UUID: MIG-sim-$h-0-2)" "  MIG 1g.10gb     Device  3: (UUID: MIG-sim-$h-0-3)" \
    "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-sim-$h-1)" >"$W/smi-L.txt"
else
  start_up up7 || bad "corral up did not start"
  nvidia-smi -L | tee "$W/smi-L.txt"
  nvidia-smi --query-gpu=index,mig.mode.current,compute_mode --format=csv,noheader
  if grep -q "MIG-" "$W/smi-L.txt"; then
    nvidia-smi mig -lgi 2>&1 | head -40 # listings only: nothing is created or destroyed
    nvidia-smi mig -lci 2>&1 | head -40
    echo "--- /proc/driver/nvidia-caps/mig-minors (first lines), /dev/nvidia-caps, majors:"
    head -5 /proc/driver/nvidia-caps/mig-minors 2>&1; ls -l /dev/nvidia-caps 2>&1 | head -5
    grep -E "nvidia-(caps|uvm)" /proc/devices
  fi
fi
"$BIN" nodes
"$BIN" nodes -o json >"$OUT/gpu-status-mig.json"
if ! grep -q "MIG-" "$W/smi-L.txt"; then
  echo "SKIP: no GPU has MIG on here (nvidia-smi -L lists no MIG device); the check changes no GPU's mode"
else
  python3 - "$OUT/gpu-status-mig.json" "$W/smi-L.txt" <<'EOF' && ok "corral's MIG devices are nvidia-smi's (UUID, profile, per GPU)" || bad "corral's MIG devices differ from nvidia-smi's"
import json, re, sys
smi, gpu = {}, None
for line in open(sys.argv[2]):
    m = re.match(r"GPU (\d+): .*\(UUID: (GPU-[^)]+)\)", line)
    if m:
        gpu = int(m.group(1)); smi[gpu] = []
    m = re.match(r"\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)]+)\)", line)
    if m:
        smi[gpu].append((m.group(3), m.group(1)))
good = True
for n in json.load(open(sys.argv[1]))["nodes"]:
    for g in n["gpus"]:
        m = g.get("mig") or {}
        mine = sorted((d["uuid"], d["profile"]) for d in m.get("devices", []))
        theirs = sorted(smi.get(g["id"], []))
        print(f"  GPU {g['id']}: corral {m.get('mode', 'n/a')} {mine}; nvidia-smi {theirs}")
        if mine:
            slices = [d.get("compute_slices", 0) for d in m["devices"]]
            print(f"    compute slices {slices} of {m.get('compute_slices')}")
            good &= all(s > 0 for s in slices) and m.get("compute_slices", 0) > 0
        good &= mine == theirs
sys.exit(0 if good else 1)
EOF
fi
stop_up

step "8. MPS shares: two PyTorch processes on one GPU, each held to its memory"
rm -rf "$W/data"
MPSBIN=nvidia-cuda-mps-control
[ "$SIM" = 1 ] && MPSBIN=$(readlink -f "$(dirname "$0")/../internal/agent/testdata/fake-mps-control")
mig0=$(awk '/^GPU 0:/{p=1;next} /^GPU /{p=0} p && /^  MIG/' "$W/smi-L.txt" | wc -l)
if ! command -v "$MPSBIN" >/dev/null; then
  bad "no MPS control binary ($MPSBIN) on this machine"
elif [ "$SIM" != 1 ] && [ "$mig0" -gt 0 ]; then
  echo "SKIP: GPU 0 has MIG on; MPS shares are of whole GPUs, and the check changes no GPU's mode"
else
  if start_up up8 "${SIMFLAG[@]}" --shared-gpus 0 --mps-control "$MPSBIN"; then
    ok "corral up takes --shared-gpus 0 (its MPS control binary found)"
  else
    bad "corral up --shared-gpus 0 did not start"
  fi
  stop_up
  # The agent's arrangement for a share (internal/agent/mps.go,
  # docs/cluster.md#mps-shares), made here directly, as the scheduler does
  # not place shares yet: one daemon for GPU 0 alone, a private pipe
  # directory, each client with its own limits.
  MPSD=$W/mps
  mkdir -p -m 0700 "$MPSD" "$MPSD/pipe" "$MPSD/log"
  uuid0=$(grep -o "GPU-[^)]*" "$W/smi-L.txt" | head -1)
  if env -i PATH="$PATH" CUDA_VISIBLE_DEVICES="$uuid0" CUDA_MPS_PIPE_DIRECTORY="$MPSD/pipe" CUDA_MPS_LOG_DIRECTORY="$MPSD/log" "$MPSBIN" -d; then
    MPSUP=1
    cat >"$W/share.py" <<'EOF'
import os, sys, time
import torch
want_gib, secs = float(sys.argv[1]), float(sys.argv[2])
print("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"), "limit", os.environ.get("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"),
      "threads", os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "devices", torch.cuda.device_count(), flush=True)
a = torch.randn(4096, 4096, device="cuda")
try:
    keep = torch.empty(int(want_gib * (1 << 30)), dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
except RuntimeError as e:  # torch.cuda.OutOfMemoryError is one
    print(f"OOM allocating {want_gib} GiB: {str(e).splitlines()[0]}", flush=True)
    sys.exit(3)
print(f"ALLOCATED {want_gib} GiB", flush=True)
end, n = time.time() + secs, 0
while time.time() < end:
    b = a @ a
    torch.cuda.synchronize()
    n += 1
print(f"WORKED {n} matmuls, finite {bool(torch.isfinite(b).all())}", flush=True)
EOF
    share() { # share NAME WANT_GIB SECONDS: one share's process, with the agent's environment for it
      local run=("$PY" "$W/share.py" "$2" "$3")
      if [ "$SIM" = 1 ]; then
        run=(sh -c '[ -p "$CUDA_MPS_PIPE_DIRECTORY/control" ] || exit 9; if [ "$0" -gt 4 ]; then echo OOM; exit 3; fi; echo "ALLOCATED $0 GiB"; sleep "$1"; echo WORKED' "$2" "$3")
      fi
      env CUDA_VISIBLE_DEVICES=0 CUDA_MPS_PIPE_DIRECTORY="$MPSD/pipe" CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4096M \
        CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 "${run[@]}" >"$W/$1.out" 2>&1
    }
    share calm 2 20 &
    CALM=$!
    for _ in $(seq 300); do grep -q ALLOCATED "$W/calm.out" 2>/dev/null && break; sleep 0.1; done
    share greedy 6 5
    grc=$?
    calm_alive=0
    kill -0 $CALM 2>/dev/null && calm_alive=1
    [ "$SIM" = 1 ] || nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
    wait $CALM
    crc=$?
    echo "--- greedy (6 GiB under a 4 GiB limit), exit $grc:"; cat "$W/greedy.out"
    echo "--- calm (2 GiB under a 4 GiB limit), exit $crc, still running when greedy failed: $calm_alive:"; cat "$W/calm.out"
    if [ $grc = 3 ] && grep -q OOM "$W/greedy.out"; then ok "the share allocating past its pinned limit failed"; else bad "the share allocating past its limit did not fail (exit $grc)"; fi
    if [ $crc = 0 ] && [ $calm_alive = 1 ] && grep -q WORKED "$W/calm.out"; then
      ok "its neighbour on the same GPU ran on and completed"
    else
      bad "the neighbour share: exit $crc, running when the other failed: $calm_alive"
    fi
    echo quit | env -i PATH="$PATH" CUDA_MPS_PIPE_DIRECTORY="$MPSD/pipe" CUDA_MPS_LOG_DIRECTORY="$MPSD/log" "$MPSBIN"
    MPSUP=
    tail -5 "$MPSD/log/control.log" 2>/dev/null
  else
    bad "the MPS control daemon did not start"
  fi
fi

step "9. MPS shares placed by the scheduler: two PyTorch jobs on one shared GPU"
# The processes of step 8, now submitted as jobs: the scheduler puts both
# on GPU 0 (marked shared), the agent starts the MPS control daemon for the
# jobs' user and gives each job its share's environment.
rm -rf "$W/data"
if ! command -v "$MPSBIN" >/dev/null; then
  bad "no MPS control binary ($MPSBIN) on this machine"
elif [ "$SIM" != 1 ] && [ "$mig0" -gt 0 ]; then
  echo "SKIP: GPU 0 has MIG on"
elif start_up up9 "${SIMFLAG[@]}" --shared-gpus 0 --mps-control "$MPSBIN"; then
  if [ "$SIM" = 1 ]; then
    # The stand-in fails as an allocation past the pinned limit would.
    cat >"$W/share.sh" <<'EOF'
[ -p "$CUDA_MPS_PIPE_DIRECTORY/control" ] || { echo "no MPS pipe in $CUDA_MPS_PIPE_DIRECTORY"; exit 9; }
echo "CUDA_VISIBLE_DEVICES $CUDA_VISIBLE_DEVICES limit $CUDA_MPS_PINNED_DEVICE_MEM_LIMIT threads $CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
lim=${CUDA_MPS_PINNED_DEVICE_MEM_LIMIT#*=}; lim=${lim%M}
if [ $(($1 * 1024)) -gt "$lim" ]; then echo "OOM allocating $1 GiB"; exit 3; fi
echo "ALLOCATED $1 GiB"; sleep "$2"; echo "WORKED"
EOF
    cmd9() { echo "sh $W/share.sh $1 $2"; }
  else
    cmd9() { echo "$PY $W/share.py $1 $2"; }
  fi
  sub9() { "$BIN" submit -o json --gpus 1 --gpu-share 4G --gpu-compute 50 --name "$1" -- "$(cmd9 "$2" "$3")" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'; }
  ended9() { case $(field "$1" 'j["state"]') in completed|failed|canceled) return 0;; esac; return 1; }
  calm=$(sub9 calm 2 30)
  for _ in $(seq 900); do grep -q ALLOCATED <("$BIN" logs "$calm" 2>/dev/null) && break; ended9 "$calm" && break; sleep 0.1; done
  greedy=$(sub9 greedy 6 5)
  for _ in $(seq 900); do ended9 "$greedy" && break; sleep 0.1; done
  "$BIN" nodes | tee "$W/nodes9.txt"
  calm_state=$(field "$calm" 'j["state"]')
  for _ in $(seq 900); do ended9 "$calm" && break; sleep 0.1; done
  echo "--- greedy job $greedy (6 GiB in a 4 GiB share): $(field "$greedy" 'j["state"] + " exit " + str(j.get("exit_code")) + " " + str(j.get("allocations"))')"
  "$BIN" logs "$greedy" | tee "$W/greedy9.log"
  echo "--- calm job $calm (2 GiB in a 4 GiB share), state when greedy ended: $calm_state; now $(field "$calm" 'j["state"] + " exit " + str(j.get("exit_code")) + " " + str(j.get("allocations"))')"
  "$BIN" logs "$calm" | tee "$W/calm9.log"
  if grep -q "limit 0=4096M threads 50" "$W/calm9.log"; then ok "the share job got its MPS environment from the agent (4096M pinned, 50% of threads)"; else bad "the share job's MPS environment"; fi
  # Together: greedy started on GPU 0 while calm ran there (calm ends last).
  where9() { field "$1" '",".join("%s/%s" % (a.get("node_id"), a.get("gpu_uuid")) for a in (j.get("allocation") or []) if a.get("share_mib"))'; }
  echo "calm on $(where9 "$calm"), greedy on $(where9 "$greedy")"
  if [ -n "$(field "$greedy" 'j.get("started_at") or ""')" ] && [ "$calm_state" = running ] && [ "$(where9 "$calm")" = "$(where9 "$greedy")" ]; then
    ok "both share jobs ran on the same GPU at once"
  else
    bad "the two share jobs did not share the GPU"
  fi
  # NVML lists the MPS server, not its clients, on a shared GPU: the
  # agent's own, not a foreign process (which would keep jobs off the GPU).
  if grep -q "foreign:" "$W/nodes9.txt"; then bad "the agent's MPS server is listed as a foreign process"; else ok "the agent's MPS server is not listed as a foreign process"; fi
  if [ "$(field "$greedy" 'j["exit_code"]')" = 3 ] && grep -q OOM "$W/greedy9.log"; then ok "the job allocating past its share failed (exit 3, out of memory)"; else bad "the job allocating past its share did not fail as expected"; fi
  if [ "$calm_state" = running ] && [ "$(field "$calm" 'j["state"]')" = completed ] && grep -q WORKED "$W/calm9.log"; then
    ok "its neighbour in the same MPS server ran on and completed"
  else
    bad "the neighbour share job: $calm_state when the other ended, now $(field "$calm" 'j["state"]')"
  fi
  stop_up
  pkill -f "corral shim --host" 2>/dev/null
else
  bad "corral up --shared-gpus 0 did not start"
fi

if [ "$ONLY" != mig-mps ]; then
step "10. a researcher's job: corral up as root without --run-as agent, her account, her venv"
# As a team meets it: Corral runs each job as its owner's Unix account.
# A fresh account signs in through the login socket, makes a venv (with
# the machine's PyTorch) and submits from her own directory; the job must
# run as her, there, with her venv's python, on its GPU.
rm -rf "$W/data"
U10=gcana
if ! id "$U10" >/dev/null 2>&1; then useradd -m -s /bin/bash "$U10" && MADE10=1; fi
H10=$(getent passwd "$U10" | cut -d: -f6)
chmod 0755 "$W" # the data directory's parent: the job's shim writes its log as root, but her job must reach its workdir only
setsid "$BIN" up --listen 127.0.0.1:$PORT --data-dir "$W/data" --heartbeat 1s --login-socket "$W/login.sock" "${SIMFLAG[@]}" >>"$OUT/up10.log" 2>&1 &
UP=$!
for _ in $(seq 200); do curl -sf "$CORRAL_SERVER/healthz" >/dev/null && break; sleep 0.1; done
as10() { su - "$U10" -c "export CORRAL_SERVER=$CORRAL_SERVER CORRAL_LOGIN_SOCKET=$W/login.sock; $*"; }
cat >"$W/train.py" <<'EOF'
import os, sys
print("uid", os.getuid(), "cwd", os.getcwd(), "prefix", sys.prefix, flush=True)
try:
    import torch
    a = torch.randn(2048, 2048, device="cuda")
    for _ in range(200):
        b = a @ a
    torch.cuda.synchronize()
    print("devices", torch.cuda.device_count(), "finite", bool(torch.isfinite(b).all()), flush=True)
except ImportError:
    print("devices (no torch here)", flush=True)
open("out.txt", "w").write("trained\n")
EOF
as10 "mkdir -p ~/proj && cp $W/train.py ~/proj/ && python3 -m venv --system-site-packages --without-pip ~/venv" || bad "her venv could not be made"
# The machine's PyTorch may live in a venv of its own (root's PATH finds
# it, her login shell does not): her venv reaches it as a team's shared
# install would, by a .pth file naming its site-packages.
if [ "$SIM" != 1 ] && ! as10 "~/venv/bin/python -c 'import torch'" 2>/dev/null; then
  tsite=$($PY -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
  echo "her venv finds no torch; adding $tsite to it"
  as10 "echo $tsite > \$(~/venv/bin/python -c 'import site; print(site.getsitepackages()[0])')/shared-torch.pth"
fi
if timeout 30 su - "$U10" -c "export CORRAL_SERVER=$CORRAL_SERVER CORRAL_LOGIN_SOCKET=$W/login.sock; $BIN login" </dev/null >"$W/login10.txt" 2>&1; then ok "she signed in through the login socket: $(head -1 "$W/login10.txt")"; else bad "corral login as $U10: $(cat "$W/login10.txt")"; fi
j10=$(as10 "cd ~/proj && . ~/venv/bin/activate && $BIN submit -o json --gpus 1 --name mine -- python train.py" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
for _ in $(seq 900); do case $(field "$j10" 'j["state"]') in completed|failed|canceled) break;; esac; sleep 0.1; done
echo "--- her job $j10: $(field "$j10" 'j["state"] + " " + j["user"] + " exit " + str(j.get("exit_code"))')"
as10 "$BIN logs $j10" | tee "$W/job10.log"
uid10=$(id -u "$U10")
if [ "$(field "$j10" 'j["state"]')" = completed ] && grep -q "uid $uid10 cwd $H10/proj prefix $H10/venv" "$W/job10.log"; then
  ok "her job ran as her account ($uid10), in her directory, with her venv's python"
else
  bad "her job did not run as her, there, with her venv"
fi
if [ "$SIM" = 1 ] || grep -q "devices 1 finite True" "$W/job10.log"; then ok "it saw one GPU and multiplied on it"; else bad "her job's GPU work"; fi
if [ "$(stat -c %U "$H10/proj/out.txt" 2>/dev/null)" = "$U10" ]; then ok "what it wrote is hers ($H10/proj/out.txt)"; else bad "out.txt is not hers"; fi
stop_up
pkill -f "corral shim --host" 2>/dev/null
[ -n "${MADE10:-}" ] && userdel -r "$U10" 2>/dev/null
chmod 0700 "$W"

fi

if [ "$ONLY" != mig-mps ] && [ "$ONLY" != no-bench ]; then
step "6. corral bench start on 8 simulated GPUs"
rm -rf "$W/data"
if start_up up3 --simulate-gpus 8; then
  for n in 3000 3000; do
    "$BIN" bench start --n $n --progress 0 -o json >"$W/bench.json" 2>/dev/null
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("bench start: %d jobs, %.0f starts/s, %.0f completions/s, baseline %.0f spawns/s, %d completed" % (d["n"], d["starts_per_s"], d["completions_per_s"], d["baseline_spawns_per_s"], d["completed"]))' "$W/bench.json"
  done
  stop_up
fi
fi

echo
echo "== summary: $pass passed, $fail failed"
[ $fail = 0 ]
