#!/bin/sh
# k8s-local.sh: a real Kubernetes control plane on 127.0.0.1, for testing
# the Kubernetes executor (docs/executors.md, "Testing against a real API
# server"). No container runtime exists here: kwok plays the kubelet of
# fake nodes with GPUs.
#
#   scripts/k8s-local.sh build   build kube-apiserver, etcd and kwok from the
#                                Go module proxy (test/k8s, its own module)
#                                into $K8S_LOCAL_BIN, once per version
#   scripts/k8s-local.sh up      start etcd, kube-apiserver and kwok, and
#                                create $K8S_LOCAL_NODES nodes (default 2,
#                                corral-k1, corral-k2, ...) with
#                                $K8S_LOCAL_GPUS nvidia.com/gpu each
#                                (default 2) and GPU Feature Discovery's
#                                labels; wait until they are Ready
#   scripts/k8s-local.sh down    stop what up started
#   scripts/k8s-local.sh env     print the export lines: KUBECONFIG for
#                                corral server --executor k8s, and
#                                CORRAL_K8S_BIN for the Go tests
#
# Everything lives under $K8S_LOCAL_DIR (default /tmp/corral-k8s): etcd's
# data, the API server's certificates, a static admin token, logs, pids.
# kwok's default stages move pods bound to its nodes to Running and delete
# them once deleted; a test plays the rest of the kubelet's part by
# writing a pod's status (container terminated, exit code) through the API.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
VERSION=$(awk '$1 == "k8s.io/kubernetes" {print $2}' "$ROOT/test/k8s/go.mod" | head -n 1)
BIN=${K8S_LOCAL_BIN:-${HOME:-/root}/.cache/corral-ci/k8s-$VERSION}
DIR=${K8S_LOCAL_DIR:-/tmp/corral-k8s}
NODES=${K8S_LOCAL_NODES:-2}
GPUS=${K8S_LOCAL_GPUS:-2}
ETCD_PORT=${K8S_LOCAL_ETCD_PORT:-23790}
API_PORT=${K8S_LOCAL_API_PORT:-26443}
TOKEN=corral-local-admin
API=https://127.0.0.1:$API_PORT

die() { echo "k8s-local: $*" >&2; exit 1; }

build() {
	if [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/etcd" ] && [ -x "$BIN/kwok" ] && [ -f "$BIN/kwok-stages.yaml" ]; then
		echo "k8s-local: $BIN has kube-apiserver, etcd and kwok ($VERSION)"
		return
	fi
	mkdir -p "$BIN.tmp"
	start=$(date +%s)
	(cd "$ROOT/test/k8s" &&
		go build -trimpath -o "$BIN.tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver &&
		go build -trimpath -o "$BIN.tmp/etcd" go.etcd.io/etcd/server/v3 &&
		go build -trimpath -o "$BIN.tmp/kwok" sigs.k8s.io/kwok/cmd/kwok &&
		stages "$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage" >"$BIN.tmp/kwok-stages.yaml")
	rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
	echo "k8s-local: built kube-apiserver, etcd and kwok $VERSION into $BIN in $(($(date +%s) - start))s"
}

# stages DIR: kwok's own stages (its module's kustomize/stage), one file:
# nodes initialized and kept Ready by heartbeats; pods bound to its nodes
# Running, and removed once deleted.
stages() {
	for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
		pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
		echo "---"
		cat "$1/$f"
	done
}

curl_api() { # METHOD PATH [BODY]
	if [ $# -ge 3 ]; then
		curl -ksf -X "$1" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' --data "$3" "$API$2"
	else
		curl -ksf -X "$1" -H "Authorization: Bearer $TOKEN" "$API$2"
	fi
}

start() { # NAME CMD...
	name=$1; shift
	"$@" >"$DIR/$name.log" 2>&1 &
	echo $! >"$DIR/$name.pid"
}

up() {
	for b in kube-apiserver etcd kwok kwok-stages.yaml; do
		[ -e "$BIN/$b" ] || die "$BIN/$b missing: run scripts/k8s-local.sh build first"
	done
	command -v openssl >/dev/null || die "openssl is needed (the service account key)"
	mkdir -p "$DIR"
	[ -f "$DIR/sa.key" ] || openssl genrsa -out "$DIR/sa.key" 2048 2>/dev/null
	echo "$TOKEN,admin,admin,system:masters" >"$DIR/tokens.csv"
	start etcd "$BIN/etcd" --name=default --data-dir="$DIR/etcd" \
		--listen-client-urls=http://127.0.0.1:$ETCD_PORT --advertise-client-urls=http://127.0.0.1:$ETCD_PORT \
		--listen-peer-urls=http://127.0.0.1:$((ETCD_PORT + 1)) --initial-advertise-peer-urls=http://127.0.0.1:$((ETCD_PORT + 1)) \
		--initial-cluster=default=http://127.0.0.1:$((ETCD_PORT + 1)) --unsafe-no-fsync --log-level=error
	start kube-apiserver "$BIN/kube-apiserver" --etcd-servers=http://127.0.0.1:$ETCD_PORT \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port=$API_PORT --cert-dir="$DIR/certs" \
		--token-auth-file="$DIR/tokens.csv" --authorization-mode=AlwaysAllow \
		--service-account-issuer=https://kubernetes.default.svc \
		--service-account-key-file="$DIR/sa.key" --service-account-signing-key-file="$DIR/sa.key" \
		--service-cluster-ip-range=10.96.0.0/16 --disable-admission-plugins=ServiceAccount \
		--kubelet-preferred-address-types=InternalIP --endpoint-reconciler-type=none
	i=0
	until curl_api GET /readyz >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -lt 300 ] || die "kube-apiserver not ready within 60s; see $DIR/kube-apiserver.log"
		sleep 0.2
	done
	cat >"$DIR/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "$API", insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: "$TOKEN"}
contexts:
- name: local
  context: {cluster: local, user: admin}
current-context: local
EOF
	start kwok "$BIN/kwok" --kubeconfig="$DIR/kubeconfig" --config="$BIN/kwok-stages.yaml" --manage-all-nodes=false \
		--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
		--node-ip=127.0.0.1 --cidr=10.244.0.0/16
	n=1
	while [ $n -le "$NODES" ]; do
		curl_api POST /api/v1/nodes "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"corral-k$n\",
			\"annotations\":{\"kwok.x-k8s.io/node\":\"fake\"},
			\"labels\":{\"type\":\"kwok\",\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3\",\"nvidia.com/gpu.memory\":\"81559\"}},
			\"status\":{\"capacity\":{\"cpu\":\"32\",\"memory\":\"256Gi\",\"pods\":\"110\",\"nvidia.com/gpu\":\"$GPUS\"},
			\"allocatable\":{\"cpu\":\"32\",\"memory\":\"256Gi\",\"pods\":\"110\",\"nvidia.com/gpu\":\"$GPUS\"}}}" >/dev/null ||
			curl_api GET /api/v1/nodes/corral-k$n >/dev/null || # kept in etcd since the last up
			die "node corral-k$n not created"
		n=$((n + 1))
	done
	i=0
	while [ "$(curl_api GET /api/v1/nodes | grep -c '"type": "Ready"' || true)" -lt "$NODES" ]; do
		i=$((i + 1))
		[ $i -lt 300 ] || die "kwok's nodes not Ready within 60s; see $DIR/kwok.log"
		sleep 0.2
	done
	echo "k8s-local: up at $API ($NODES nodes, $GPUS GPUs each); eval \"\$(scripts/k8s-local.sh env)\""
}

down() {
	for name in kwok kube-apiserver etcd; do
		[ -f "$DIR/$name.pid" ] || continue
		pid=$(cat "$DIR/$name.pid")
		kill "$pid" 2>/dev/null || true
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do # its ports free once it exits
			sleep 0.1
			i=$((i + 1))
		done
		kill -9 "$pid" 2>/dev/null || true
		rm -f "$DIR/$name.pid"
	done
}

case ${1:-} in
build) build ;;
up) up ;;
down) down ;;
env)
	echo "export KUBECONFIG=$DIR/kubeconfig"
	echo "export CORRAL_K8S_BIN=$BIN"
	;;
*) die "usage: k8s-local.sh build|up|down|env" ;;
esac
