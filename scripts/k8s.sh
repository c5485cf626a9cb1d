#!/usr/bin/env bash
# A real single-node Kubernetes cluster on this machine, for the chart's e2e
# test (scripts/k8s-e2e.sh). Everything is built from the Go module proxy and
# Debian packages; the binaries are cached outside the repository, like the
# S3 test server in scripts/test.sh.
#
#   scripts/k8s.sh deps     apt packages: containerd runc CNI plugins iptables conntrack
#   scripts/k8s.sh build    Kubernetes v1.37.2, etcd v3.6.16, CoreDNS v1.15.0, Helm v3.22.0
#                           (about 20 minutes of both cores, once; run it niced)
#   scripts/k8s.sh build-cluster   the same without Helm (scripts/test.sh installs
#                           Helm itself and runs this in the background meanwhile)
#   scripts/k8s.sh up       start the cluster (about 15 s); kubeconfig: $K8SX_DIR/kc-admin.yaml
#   scripts/k8s.sh down     stop it and remove its state (about 20 s)
#   scripts/k8s.sh image T  build the Sluice image (deploy/mkimage) and import it as T
#   scripts/k8s.sh env      print the exports a shell needs to use the cluster
#
# Settings that are not obvious (see scripts/k8s/config): containerd's
# restrict_oom_score_adj = true (the VM lacks CAP_SYS_RESOURCE; without it
# every sandbox fails "can't get final child's PID from pipe"), and the
# kubelet's failCgroupV1: false (cgroup v1 hybrid mounts). Pods run
# FROM-scratch images imported into containerd, with imagePullPolicy: Never;
# no registry is reachable. CoreDNS answers cluster names only (no forward).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HERE=$ROOT/scripts/k8s
cache="${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}"
K8S_VERSION=v1.37.2
ETCD_VERSION=v3.6.16
COREDNS_VERSION=v1.15.0
HELM_VERSION=v3.22.0
export K8SX_DIR="${K8SX_DIR:-$cache/k8s}"
BIN=$K8SX_DIR/bin
HELM="$cache/bin/helm-$HELM_VERSION"

log() { echo "k8s.sh: $*" >&2; }

install_helm() {
  [ -x "$HELM" ] && return 0
  log "installing helm $HELM_VERSION into $cache/bin (2-5 minutes, once)"
  mkdir -p "$cache/bin"
  local tmp; tmp=$(mktemp -d)
  # the version flags a release build sets (else `helm version` says v3.22 and
  # offline renders assume Kubernetes 1.20)
  GOBIN="$tmp" GOFLAGS=-mod=mod go install -ldflags "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  mv "$tmp/helm" "$HELM"; rmdir "$tmp"
}

deps() {
  local missing=()
  for c in containerd runc ctr iptables conntrack kubectl openssl; do command -v $c >/dev/null || missing+=($c); done
  [ -x /usr/lib/cni/bridge ] || missing+=(cni)
  [ ${#missing[@]} -eq 0 ] && return 0
  # a fresh machine has no package lists yet
  apt-get update -qq >/dev/null
  log "apt-get install: containerd runc containernetworking-plugins iptables conntrack kubectl openssl (missing: ${missing[*]})"
  DEBIAN_FRONTEND=noninteractive apt-get install -y containerd runc containernetworking-plugins iptables conntrack kubectl openssl >/dev/null
}

# build compiles into $BIN; each module is copied to $K8SX_DIR/src so go.sum
# and tidy never write into the repository.
build() {
  install_helm
  build_cluster
}

build_cluster() {
  mkdir -p "$BIN" "$K8SX_DIR/src"
  local src=$K8SX_DIR/src
  if [ ! -x "$BIN/kube-apiserver" ] || [ "$(cat "$BIN/.k8s-version" 2>/dev/null)" != $K8S_VERSION ]; then
    log "building Kubernetes $K8S_VERSION (about 12 minutes on 2 cores, cold)"
    rm -rf "$src/wrapper"; cp -r "$HERE/wrapper" "$src/wrapper"
    (cd "$src/wrapper" && GOFLAGS=-mod=mod go mod tidy && CGO_ENABLED=0 go build \
      -ldflags "-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37" \
      -o "$BIN/" ./cmd/...)
    echo $K8S_VERSION > "$BIN/.k8s-version"
  fi
  if [ ! -x "$BIN/etcd" ]; then
    log "building etcd $ETCD_VERSION"
    rm -rf "$src/etcd"; cp -r "$HERE/etcd" "$src/etcd"
    (cd "$src/etcd" && GOFLAGS=-mod=mod go get go.etcd.io/etcd/server/v3@$ETCD_VERSION && GOFLAGS=-mod=mod go mod tidy && CGO_ENABLED=0 go build -o "$BIN/etcd" .)
  fi
  if [ ! -x "$BIN/coredns" ]; then
    log "building CoreDNS $COREDNS_VERSION (module downloads are slow: about 6 minutes)"
    rm -rf "$src/coredns"; cp -r "$HERE/coredns" "$src/coredns"
    (cd "$src/coredns" && GOFLAGS=-mod=mod go mod tidy && CGO_ENABLED=0 go build -o "$BIN/coredns" .)
  fi
  if [ ! -x "$BIN/pause" ]; then
    (cd "$HERE/pause" && CGO_ENABLED=0 go build -o "$BIN/pause" .)
  fi
  log "built: $(ls "$BIN" | tr '\n' ' ')"
}

C() { ctr -a "$K8SX_DIR/run/containerd.sock" -n k8s.io "$@"; }

# images writes the cluster's own images (pause, CoreDNS) with deploy/mkimage,
# as root: CoreDNS binds port 53.
images() {
  mkdir -p "$K8SX_DIR/images"
  local b
  for b in pause coredns; do
    [ -f "$K8SX_DIR/images/$b.tar" ] && continue
    (cd "$ROOT/deploy" && go run ./mkimage -sluice=false -ca-certs= -user 0:0 -file "$BIN/$b:/$b" -entrypoint "/$b" \
      -tag "k8sx.local/$b:1" -o "$K8SX_DIR/images/$b.tar")
  done
}

# image builds the Sluice image tarball and imports it: scripts/k8s.sh image sluice:e2e
image() {
  local tag=${1:?usage: image TAG}
  local out=$K8SX_DIR/sluice-image.tar
  (cd "$ROOT/deploy" && go run ./mkimage -tag "$tag" -o "$out")
  C images import "$out" >/dev/null
  log "imported $tag"
}

up() {
  deps
  for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy etcd coredns pause; do
    [ -x "$BIN/$b" ] || { log "missing $BIN/$b: run scripts/k8s.sh build first"; exit 1; }
  done
  images
  local D=$K8SX_DIR; cd "$D"
  # A cluster half torn down (an interrupted down, a crashed run) holds the
  # ports, the etcd data and the kubelet's mounts: clean it before starting.
  if [ -n "$(ours)" ] || mount | awk '{print $3}' | grep -qE "^$D/"; then
    log "leftovers of an earlier cluster: taking it down first"
    down
  fi
  mkdir -p run containerd/root containerd/state cni/net.d cni/ipam kubelet pod-logs manifests logs pids
  sed "s#@DIR@#$D#g" "$HERE/config/config.toml" > containerd/config.toml
  sed "s#@DIR@#$D#g" "$HERE/config/10-bridge.conflist" > cni/net.d/10-bridge.conflist
  local f; for f in kubelet-config.yaml kube-proxy-config.yaml coredns.yaml; do sed "s#@DIR@#$D#g" "$HERE/config/$f" > $f; done
  start() { local n=$1; shift; nohup "$@" > logs/$n.log 2>&1 & echo $! > pids/$n.pid; }
  waitfor() { local i; for i in $(seq 1 ${2:-120}); do eval "$1" >/dev/null 2>&1 && return 0; sleep 1; done; log "timeout: $1"; tail -20 logs/*.log >&2; return 1; }
  local t0; t0=$(date +%s)
  if [ ! -f pki/ca.crt ]; then
    mkdir -p pki; (cd pki
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 365 -subj /CN=k8sx-ca 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\n' > apiserver.ext
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj /CN=kube-apiserver 2>/dev/null
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 365 -extfile apiserver.ext 2>/dev/null
    echo extendedKeyUsage=clientAuth > client.ext
    openssl req -newkey rsa:2048 -nodes -keyout kubelet-client.key -out kubelet-client.csr -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" 2>/dev/null
    openssl x509 -req -in kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out kubelet-client.crt -days 365 -extfile client.ext 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null; openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    # static tokens: random per cluster, readable by root only
    local t; for t in admin kcm sched kubelet proxy; do head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > tok-$t; done
    printf '%s\n' "$(cat tok-admin),admin,1,\"system:masters\"" "$(cat tok-kcm),system:kube-controller-manager,2" "$(cat tok-sched),system:kube-scheduler,3" \
      "$(cat tok-kubelet),system:node:vm,4,\"system:nodes\"" "$(cat tok-proxy),system:kube-proxy,5" > tokens.csv
    chmod 600 *.key tok-* tokens.csv)
  fi
  local n
  for n in admin kcm sched kubelet proxy; do
    printf 'apiVersion: v1\nkind: Config\nclusters:\n- cluster: {server: "https://127.0.0.1:36443", certificate-authority: %s/pki/ca.crt}\n  name: k8sx\nusers:\n- name: %s\n  user: {token: %s}\ncontexts:\n- context: {cluster: k8sx, user: %s}\n  name: k8sx\ncurrent-context: k8sx\n' "$D" $n "$(cat pki/tok-$n)" $n > kc-$n.yaml
    chmod 600 kc-$n.yaml
  done
  start containerd containerd --config "$D/containerd/config.toml"
  waitfor "ctr -a $D/run/containerd.sock version" 30
  local t; for t in images/*.tar; do C images import "$t" >/dev/null; done
  start etcd "$BIN/etcd" --data-dir "$D/etcd-data" --listen-client-urls http://127.0.0.1:33790 --advertise-client-urls http://127.0.0.1:33790 \
    --listen-peer-urls http://127.0.0.1:33800 --initial-advertise-peer-urls http://127.0.0.1:33800 --initial-cluster default=http://127.0.0.1:33800
  start apiserver "$BIN/kube-apiserver" --etcd-servers=http://127.0.0.1:33790 --secure-port=36443 --bind-address=0.0.0.0 \
    --tls-cert-file=pki/apiserver.crt --tls-private-key-file=pki/apiserver.key --client-ca-file=pki/ca.crt \
    --service-account-issuer=https://kubernetes.default.svc --service-account-key-file=pki/sa.pub --service-account-signing-key-file=pki/sa.key \
    --token-auth-file=pki/tokens.csv --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --kubelet-client-certificate=pki/kubelet-client.crt --kubelet-client-key=pki/kubelet-client.key \
    --service-cluster-ip-range=10.96.0.0/16 --allow-privileged=true
  local K="kubectl --kubeconfig $D/kc-admin.yaml"
  waitfor "$K get --raw /readyz" 180
  start kcm "$BIN/kube-controller-manager" --kubeconfig=kc-kcm.yaml --authentication-kubeconfig=kc-kcm.yaml --authorization-kubeconfig=kc-kcm.yaml \
    --bind-address=127.0.0.1 --secure-port=30257 --use-service-account-credentials=true \
    --service-account-private-key-file=pki/sa.key --root-ca-file=pki/ca.crt --cluster-signing-cert-file=pki/ca.crt --cluster-signing-key-file=pki/ca.key \
    --allocate-node-cidrs=true --cluster-cidr=10.244.0.0/16 --service-cluster-ip-range=10.96.0.0/16 --leader-elect=false
  start sched "$BIN/kube-scheduler" --kubeconfig=kc-sched.yaml --authentication-kubeconfig=kc-sched.yaml --authorization-kubeconfig=kc-sched.yaml \
    --bind-address=127.0.0.1 --secure-port=30259 --leader-elect=false
  # Pods reach only this machine. A packet from a pod that leaves the pod
  # network after DNAT (FORWARD, destination outside 10.244.0.0/16) is
  # refused: the node address (10.244.0.1, where the tests run S3 and Kafka)
  # is INPUT, not FORWARD, and Services are DNATed to pod IPs before this.
  # Without it a pod that dials a ClusterIP in the moment before kube-proxy
  # has programmed the new Service sends the SYN out of the VM's default
  # route, masqueraded; this VM's network accepts any TCP connection there,
  # and the ESTABLISHED conntrack entry then pins the dead flow (seen: an
  # executor that never registered, its gRPC connection open to nothing).
  # Refused, the dial fails fast and gRPC redials through the Service rule.
  iptables -I FORWARD 1 -s 10.244.0.0/16 ! -d 10.244.0.0/16 -m comment --comment k8sx-egress -j REJECT
  start kubelet "$BIN/kubelet" --config=kubelet-config.yaml --kubeconfig=kc-kubelet.yaml --root-dir="$D/kubelet" --cert-dir="$D/kubelet/pki" --hostname-override=vm
  start proxy "$BIN/kube-proxy" --config=kube-proxy-config.yaml
  waitfor "$K get node vm -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -q True" 180
  log "node Ready after $(( $(date +%s) - t0 ))s"
  $K apply -f coredns.yaml >/dev/null
  waitfor "$K -n default get sa default" 60
  $K -n kube-system rollout status deploy/coredns --timeout=180s >&2
  log "cluster up after $(( $(date +%s) - t0 ))s; export KUBECONFIG=$D/kc-admin.yaml"
}

# ours prints the pids of every process this cluster started, whether or not
# a pid file still names it: the binaries run from $BIN, containerd and its
# shims (matched by this cluster's config and socket paths, so a containerd
# the machine runs for anything else is never touched), and every process in
# the kubepods cgroups (the containers: coredns, pause, the Sluice pods).
# The cgroup tree is the only reliable handle on container processes once
# containerd is gone: their shims are reparented to init.
ours() {
  local D=$K8SX_DIR p cmd
  # /proc/PID/cmdline, not /proc/PID/exe: exe is unreadable for processes
  # outside our own tree on this VM (no CAP_SYS_PTRACE), cmdline always reads.
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    if [ "$p" = $$ ] || [ "$p" = "${BASHPID:-$$}" ]; then continue; fi
    cmd=$(tr '\0' ' ' 2>/dev/null < /proc/$p/cmdline) || continue
    case $cmd in
      ctr\ *) ;;   # our own ctr calls in down
      "$BIN"/*|*"$D/containerd/config.toml"*|*"$D/run/containerd.sock"*) echo $p ;;
    esac
  done
  local procs
  for procs in /sys/fs/cgroup/*/kubepods; do
    [ -d "$procs" ] && find "$procs" -name cgroup.procs -exec cat {} + 2>/dev/null
  done
  return 0
}

# down stops everything up started and leaves the machine as up expects it:
# pods deleted through the API first (the kubelet then runs CNI DEL and
# unmounts volumes properly), then the daemons by pid file, then whatever is
# left by ours() (a previous down that was interrupted, stale pid files),
# then mounts, network namespaces, iptables chains and cgroups. It fails,
# naming them, when processes or mounts survive. Idempotent.
down() {
  local D=$K8SX_DIR t0=$SECONDS; cd "$D" 2>/dev/null || return 0
  local K="kubectl --kubeconfig $D/kc-admin.yaml --request-timeout=10s"
  stop() { local p; p=$(cat pids/$1.pid 2>/dev/null) || return 0; rm -f pids/$1.pid
    # a recycled pid is not ours: check its command line before signalling
    case $(tr '\0' ' ' 2>/dev/null < /proc/$p/cmdline) in "$BIN"/*|containerd\ --config\ "$D"/*) ;; *) return 0 ;; esac
    kill $p 2>/dev/null; for i in $(seq 1 20); do kill -0 $p 2>/dev/null || break; sleep 0.5; done; kill -9 $p 2>/dev/null || true; }
  if [ -f kc-admin.yaml ] && $K get --raw /readyz >/dev/null 2>&1; then
    $K delete deploy,ds,sts,job --all -A --wait=false >/dev/null 2>&1 || true
    $K delete pod --all -A --grace-period=1 --timeout=60s >/dev/null 2>&1 || true
  fi
  stop kubelet; stop proxy; stop sched; stop kcm; stop apiserver; stop etcd
  if [ -S run/containerd.sock ] && ctr -a "$D/run/containerd.sock" version >/dev/null 2>&1; then
    local t c
    for t in $(C task ls -q 2>/dev/null); do C task kill -s SIGKILL $t || true; done; sleep 1
    for t in $(C task ls -q 2>/dev/null); do C task delete -f $t >/dev/null || true; done
    for c in $(C container ls -q 2>/dev/null); do C container delete $c >/dev/null || true; done
  fi
  stop containerd
  # Whatever survived: TERM, a grace, then KILL. Container processes whose
  # shim died are frozen by nobody, so KILL reaches them.
  local left i
  left=$(ours | sort -u | tr '\n' ' ')
  if [ -n "$left" ]; then
    log "stopping leftover processes: $left"
    kill $left 2>/dev/null || true
    for i in $(seq 1 20); do left=$(ours | sort -u | tr '\n' ' '); [ -z "$left" ] && break; sleep 0.5; done
    [ -n "$left" ] && { kill -9 $left 2>/dev/null || true; sleep 1; }
  fi
  "$BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
  set +e
  iptables -t nat -S | grep -oE '^-N CNI-[^ ]+' | cut -d' ' -f2 | while read c; do iptables -t nat -F $c; done
  iptables -t nat -S POSTROUTING | grep -- '-j CNI-' | sed 's/^-A/-D/' | while read r; do iptables -t nat $r; done
  iptables -t nat -S | grep -oE '^-N CNI-[^ ]+' | cut -d' ' -f2 | while read c; do iptables -t nat -X $c; done
  ip link del k8sx0 2>/dev/null
  iptables -S FORWARD | grep -- '--comment k8sx-egress' | sed 's/^-A/-D/' | while read r; do eval iptables $r; done
  for ipt in iptables ip6tables; do for tb in filter nat mangle; do
    $ipt -t $tb -S 2>/dev/null | grep -E '^-A [A-Z]+ .*-j (KUBE|CNI)-' | grep -vE '^-A (KUBE|CNI)-' | sed 's/^-A/-D/' | while read r; do eval $ipt -t $tb $r; done
    for c in $($ipt -t $tb -S 2>/dev/null | grep -oE '^-N (KUBE|CNI)-[^ ]+' | cut -d' ' -f2); do $ipt -t $tb -F $c; done
    for c in $($ipt -t $tb -S 2>/dev/null | grep -oE '^-N (KUBE|CNI)-[^ ]+' | cut -d' ' -f2); do $ipt -t $tb -X $c; done
  done; done
  # Mounts, deepest first. The kubelet bind-mounts its root dir onto itself
  # (to make it a shared mount) and containerd mounts overlays, shm and the
  # pods' network namespaces under its state dir; a mount still busy is
  # detached lazily (it goes when its last user does, and the user is dead).
  local m
  for i in 1 2 3; do
    mount | awk '{print $3}' | grep -E "^$D/|^/run/netns/cni-" | sort -r | while read m; do umount "$m" 2>/dev/null || umount -l "$m"; done
  done
  rm -f /run/netns/cni-*
  for ss in /sys/fs/cgroup/*/kubepods; do find $ss -depth -type d -exec rmdir {} + 2>/dev/null; done
  rm -rf /var/lib/cni/results   # containerd 1.6's CNI cache (not configurable)
  [ "${KEEP_STATE:-0}" = 1 ] || rm -rf etcd-data containerd/root containerd/state kubelet pod-logs cni/ipam
  set -e
  left=$(ours | sort -u | tr '\n' ' ')
  local mounts; mounts=$(mount | awk '{print $3}' | grep -cE "^$D/" || true)
  if [ -n "$left" ] || [ "$mounts" != 0 ]; then
    log "down did not finish: processes left: ${left:-none}; mounts left under $D: $mounts"
    return 1
  fi
  log "down after $((SECONDS - t0))s: no process and no mount of the cluster left"
}

case "${1:-}" in
  deps) deps ;;
  build) build ;;
  build-cluster) build_cluster ;;
  up) up ;;
  down) down ;;
  image) shift; image "$@" ;;
  env) echo "export KUBECONFIG=$K8SX_DIR/kc-admin.yaml SLUICE_HELM=$HELM K8SX_DIR=$K8SX_DIR" ;;
  *) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0" >&2; exit 2 ;;
esac
