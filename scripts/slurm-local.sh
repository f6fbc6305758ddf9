#!/bin/sh
# slurm-local.sh: a small Slurm on this machine, for comparing Corral
# with Slurm (docs/benchmarks.md, "CLI start-up") and for testing the Slurm
# executor against a real slurmctld (docs/executors.md, e2e/slurm_test.go).
#
#   scripts/slurm-local.sh up      install nothing; start munged, slurmctld and
#                                  one slurmd per node (corral-n1, corral-n2, ...:
#                                  all on this host, 127.0.0.1, slurmd -N NAME
#                                  on ports 6818, 6819, ...), each with fake
#                                  GPUs, and wait until every node is idle
#   scripts/slurm-local.sh down    stop the three daemons it started
#   scripts/slurm-local.sh status  sinfo, or why not
#   scripts/slurm-local.sh env     print the export line for clients
#
# Needs root and the Debian packages slurm-wlm and munge
# (apt-get install -y slurm-wlm munge). Everything lives under
# $SLURM_LOCAL_DIR (default /tmp/corral-slurm): slurm.conf, state, spool,
# logs and pid files; /etc is not touched except that munged uses the
# package's /etc/munge/munge.key (created if missing). No accounting
# (slurmdbd), no cgroups (proctrack/linuxproc, task/none): jobs run as
# plain processes. $SLURM_LOCAL_NODES nodes (default 2) with
# $SLURM_LOCAL_GPUS fake GPUs each (default 2): gres.conf declares them
# (gpu, type "fake") with File= character devices made by mknod under
# $SLURM_LOCAL_DIR/dev (major 195, as NVIDIA's), so Slurm allocates them
# and sets CUDA_VISIBLE_DEVICES. Clients need SLURM_CONF=$SLURM_LOCAL_DIR/slurm.conf:
#
#   eval "$(scripts/slurm-local.sh env)"; sbatch --wrap true
set -eu

DIR=${SLURM_LOCAL_DIR:-/tmp/corral-slurm}
CONF=$DIR/slurm.conf
HOST=$(hostname -s)
NODES=${SLURM_LOCAL_NODES:-2}
GPUS=${SLURM_LOCAL_GPUS:-2}

die() { echo "slurm-local: $*" >&2; exit 1; }

node_names() {
	i=1
	while [ $i -le "$NODES" ]; do echo "corral-n$i"; i=$((i + 1)); done
}

write_conf() {
	cpus=$(nproc)
	mem=$(awk '/MemTotal/ {print int($2/1024/2)}' /proc/meminfo)
	mkdir -p "$DIR/state" "$DIR/spool" "$DIR/dev"
	: >"$DIR/gres.conf"
	nodes="" lines="" dev=0 i=0
	for n in $(node_names); do
		gres=""
		if [ "$GPUS" -gt 0 ]; then
			first=$dev
			k=0
			while [ $k -lt "$GPUS" ]; do
				[ -c "$DIR/dev/nvidia$dev" ] || mknod "$DIR/dev/nvidia$dev" c 195 $dev
				dev=$((dev + 1)) k=$((k + 1))
			done
			echo "NodeName=$n Name=gpu Type=fake File=$DIR/dev/nvidia[$first-$((dev - 1))]" >>"$DIR/gres.conf"
			gres=" Gres=gpu:fake:$GPUS"
		fi
		lines="$lines
NodeName=$n NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$((6818 + i)) CPUs=$cpus RealMemory=$mem$gres State=UNKNOWN"
		nodes="$nodes${nodes:+,}$n"
		i=$((i + 1))
	done
	cat >"$CONF" <<CONF
ClusterName=corral-local
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
MinJobAge=30
$lines
PartitionName=local Nodes=$nodes Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:64
CONF
}

start_munge() {
	if munge -n </dev/null >/dev/null 2>&1; then
		return # a munged already answers
	fi
	[ -s /etc/munge/munge.key ] || { mungekey --create 2>/dev/null || create-munge-key -f; }
	chown munge:munge /etc/munge/munge.key 2>/dev/null || true
	chmod 0400 /etc/munge/munge.key
	mkdir -p /run/munge /var/lib/munge /var/log/munge
	chown munge:munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
	if id munge >/dev/null 2>&1; then
		runuser -u munge -- /usr/sbin/munged
	else
		/usr/sbin/munged --force
	fi
	pgrep -n -x munged >"$DIR/munged.pid"
	i=0
	until munge -n </dev/null >/dev/null 2>&1; do
		i=$((i + 1)); [ $i -lt 50 ] || die "munged does not answer"
		sleep 0.1
	done
}

up() {
	[ "$(id -u)" = 0 ] || die "run as root"
	command -v slurmctld >/dev/null || die "slurmctld missing: apt-get install -y slurm-wlm munge"
	mkdir -p "$DIR"
	write_conf
	start_munge
	[ -f "$DIR/slurmctld.pid" ] && kill -0 "$(cat "$DIR/slurmctld.pid")" 2>/dev/null ||
		/usr/sbin/slurmctld -f "$CONF"
	for n in $(node_names); do
		[ -f "$DIR/slurmd-$n.pid" ] && kill -0 "$(cat "$DIR/slurmd-$n.pid")" 2>/dev/null ||
			/usr/sbin/slurmd -f "$CONF" -N "$n"
	done
	i=0
	until [ "$(SLURM_CONF=$CONF sinfo -h -N -o %t 2>/dev/null | grep -cx 'idle\|mix\|alloc')" -ge "$NODES" ]; do
		i=$((i + 1)); [ $i -lt 300 ] || die "nodes not idle after 30s; see $DIR/slurmctld.log and $DIR/slurmd-*.log"
		sleep 0.1
	done
	echo "slurm-local: up (nodes $(node_names | tr '\n' ' ')on $HOST); clients: export SLURM_CONF=$CONF"
}

stop_pid() {
	f=$DIR/$1.pid
	[ -f "$f" ] || return 0
	p=$(cat "$f")
	if kill "$p" 2>/dev/null; then
		i=0
		while kill -0 "$p" 2>/dev/null && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
	fi
	rm -f "$f"
}

down() {
	for f in "$DIR"/slurmd-*.pid; do
		[ -f "$f" ] || continue
		n=${f##*/}
		stop_pid "${n%.pid}"
	done
	stop_pid slurmd # an older single-node run's
	stop_pid slurmctld
	stop_pid munged
	echo "slurm-local: down"
}

case "${1:-}" in
up) up ;;
down) down ;;
status) SLURM_CONF=$CONF sinfo ;;
env) echo "export SLURM_CONF=$CONF" ;;
*) echo "usage: $0 up|down|status|env" >&2; exit 2 ;;
esac
