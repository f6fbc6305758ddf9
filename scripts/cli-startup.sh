#!/bin/bash
# cli-startup.sh: per-call time of the corral CLI beside its baselines, as
# docs/benchmarks.md ("CLI start-up") reports it.
#
#   scripts/cli-startup.sh [-n N] [-r ROUNDS] CORRAL_BIN [CORRAL_BIN...]
#
# Runs ROUNDS times (default 5), in turn so that load on the machine hits
# them alike, a shell loop of N (default 100) calls of each of:
#   true           /bin/true: fork+exec, the floor
#   NAME:help      CORRAL_BIN --help: process start, package init, cobra
#   NAME:submit    CORRAL_BIN submit --gpus 0 -- true: a real, durable
#                  submit to $CORRAL_SERVER
#   sbatch         sbatch --wrap true, when a Slurm answers
#                  (scripts/slurm-local.sh up; eval "$(scripts/slurm-local.sh env)")
# (NAME is the binary's file name, so two builds can be compared in one
# run). It prints, per loop, wall-clock and CPU (user+sys of the loop's
# processes) milliseconds per call, then the median of each over the
# rounds. The corral server must be running, with $CORRAL_SERVER and
# $CORRAL_TOKEN (or the client config) pointing at it; the submitted jobs
# need no GPU and exit at once.
set -euo pipefail
N=100
ROUNDS=5
while getopts n:r: o; do
	case $o in
	n) N=$OPTARG ;;
	r) ROUNDS=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-n N] [-r ROUNDS] CORRAL_BIN [CORRAL_BIN...]" >&2; exit 2; }
cd /tmp

loop() { # name, command...: one line "name wall_ms cpu_ms" per call
	local name=$1 out
	shift
	out=$( { TIMEFORMAT='%R %U %S'; time (for ((i = 0; i < N; i++)); do "$@" >/dev/null 2>&1; done); } 2>&1)
	echo "$out" | awk -v n="$N" -v name="$name" '{printf "%-22s %8.2f %8.2f\n", name, $1*1000/n, ($2+$3)*1000/n}'
}

have_slurm=0
if command -v sbatch >/dev/null && sbatch --wrap true >/dev/null 2>&1; then
	have_slurm=1
fi

echo "loop                    wall ms   cpu ms  (per call)"
results=$(for ((r = 1; r <= ROUNDS; r++)); do
	loop true /bin/true
	for bin in "$@"; do
		b=$(basename "$bin")
		loop "$b:help" "$bin" --help
		loop "$b:submit" "$bin" submit --gpus 0 -- true
	done
	[ $have_slurm = 0 ] || loop sbatch sbatch --wrap true
done)
echo "$results"
echo "median of $ROUNDS rounds of $N calls:"
for k in $(echo "$results" | awk '{print $1}' | sort -u); do
	w=$(echo "$results" | awk -v k="$k" '$1==k {print $2}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	c=$(echo "$results" | awk -v k="$k" '$1==k {print $3}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	printf "%-22s %8.2f %8.2f\n" "$k" "$w" "$c"
done
