#!/usr/bin/env bash
# peak-figures.sh prints the four figures of issue 29 (avg JCT and longest
# wait against FCFS without backfill, GPUs busy while jobs wait, makespan
# over its lower bound), and the makespan over the arrival bound
# (makespan_arrival_bound_s: no schedule beats either bound), for the
# default fair_share + backfill policy, on the shared Philly months at
# 64x8 and 40x8 and on the synthetic team week,
# with exact, noisy and learned estimates: every figure in
# docs/scheduling.md ("Busy at peak, fair at the tail") comes from it.
#
# Usage: scripts/peak-figures.sh [CORRAL_BINARY] [-- extra sim flags]
#   SIZES="64x8 40x8" ESTIMATES="exact noisy learned" SEEDS="1 2 3" TRACE=... to narrow it.
# The baseline is FCFS without backfill, best-fit placement (the issue's).
# One replay at a time (a 64x8 replay takes 15-20 s of CPU, 40x8 up to 150 s).
set -euo pipefail
bin=${1:-}
[ "$#" -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
if [ -z "$bin" ]; then
	bin=$(mktemp -d)/corral
	go build -o "$bin" ./cmd/corral
fi
trace=${TRACE:-$(dirname "$0")/../../shared/traces/philly-2017-09-10.csv}
[ -f "$trace" ] || trace=/work/shared/traces/philly-2017-09-10.csv
sizes=${SIZES:-64x8 40x8}
estimates=${ESTIMATES:-exact noisy learned}
seeds=${SEEDS:-1 2 3}

sim() { nice "$bin" sim --json --timing=false "$@"; }

# row LABEL BASE_JSON RUN_JSON
row() {
	jq -rn --arg l "$1" --argjson b "$2" --argjson r "$3" '
	  def f(x): (x*1000|round)/1000;
	  "| \($l) | \(f($r.avg_jct_s/$b.avg_jct_s))x | \(f($r.max_queue_s/$b.max_queue_s))x | \(f($r.backlog_utilization)) | \(f($r.makespan_s/$r.makespan_lower_bound_s)) | \(f($r.makespan_s/$r.makespan_arrival_bound_s)) | " +
	  (if $r.estimates_within_50pct == null then "" else "\(($r.estimates_within_50pct*100|round))% / \(($r.estimates_off_2x*100|round))%" end) + " |"'
}

echo "| run | avg JCT | longest wait | busy while waiting | makespan / bound | makespan / arrival bound | within ±50% / off >2x |"
echo "|---|---|---|---|---|---|---|"
for c in $sizes; do
	base=$(sim --trace "$trace" --cluster "$c" --policy fcfs --placement best-fit)
	for e in $estimates; do
		row "$c $e" "$base" "$(sim --trace "$trace" --cluster "$c" --policy fair_share --backfill --estimates "$e" "$@")"
	done
done
for s in $seeds; do
	t=synthetic:team-week:$s
	base=$(sim --trace "$t" --cluster 2x8 --policy fcfs --placement best-fit)
	for e in $estimates; do
		row "team-week $s $e" "$base" "$(sim --trace "$t" --cluster 2x8 --policy fair_share --backfill --estimates "$e" "$@")"
	done
done
