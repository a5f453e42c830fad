#!/usr/bin/env bash
# Runs a local Kubernetes control plane (etcd + kube-apiserver + kube-controller-manager) on
# 127.0.0.1 only, envtest-style. tests/testbed/README.md says which flags matter and why.
#
# Usage:
#   cluster.sh up DIR [--watch-pid PID]
#       Starts the control plane with its state in DIR (certificates, logs/, etcd/, pids) and prints
#       the path of the admin kubeconfig (DIR/kubeconfig, context "wasmop-local") as the last line
#       of stdout; progress goes to stderr. If the cluster in DIR is already running and ready it is
#       reused. The processes outlive this command. With --watch-pid, a detached watchdog runs
#       `cluster.sh down DIR` once PID has exited (a reused cluster that already has a watchdog
#       also waits for PID; a reused cluster without one is left persistent).
#   cluster.sh down DIR
#       Stops exactly the processes recorded in DIR/pids (TERM, then KILL) and the watchdog, and
#       removes DIR/etcd and DIR/pids. Certificates, kubeconfigs and logs are kept. Safe to repeat.
#   cluster.sh kill DIR etcd|apiserver|controller-manager
#       Kills one component of the running cluster with SIGKILL (a crash, for fault tests) and waits
#       until it is gone. Its data stays.
#   cluster.sh start DIR etcd|apiserver|controller-manager
#       Starts a killed component again on the same ports and data, and waits until it is healthy.
#
# DIR/pids has one line per component, "NAME PID", in start order (etcd, apiserver,
# controller-manager); a killed component keeps its line without a PID until it is started again.
#
# kube-apiserver runs with the alpha feature gate ShardedListAndWatch (KEP-5866) on, so sharded
# watches are filtered by the API server; `wasmop run --shard-filter client` tests the other path.
#
# Environment: WASMOP_CLUSTER_TIMEOUT (seconds to wait for readiness, default 60); the variables of
# build-control-plane.sh (WASMOP_K8S_VERSION, WASMOP_ETCD_VERSION, WASMOP_CACHE).
set -euo pipefail
# No job control: background children then stay out of process-group leadership, so `setsid`
# calls setsid(2) itself instead of forking, and $! is the PID of the real server process.
set +m

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF="$HERE/$(basename "${BASH_SOURCE[0]}")"
TIMEOUT="${WASMOP_CLUSTER_TIMEOUT:-60}"

log() { echo "cluster.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
  echo "usage: $0 up DIR [--watch-pid PID] | $0 down DIR | $0 kill|start DIR etcd|apiserver|controller-manager" >&2
  exit 2
}

# alive PID: the process exists and is not a zombie (an exited child nobody has reaped yet).
alive() {
  local pid=$1 state
  kill -0 "$pid" 2>/dev/null || return 1
  if [[ -r /proc/$pid/stat ]]; then
    state=$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
    [[ "$state" != Z ]]
  fi
}

# ours PID: alive, and its command line mentions $DIR, so a PID recycled after a reboot or a crash
# is never mistaken for (and killed as) one of our servers.
ours() {
  local pid=$1 args
  alive "$pid" || return 1
  args=$(ps -o args= -p "$pid" 2>/dev/null) || return 1
  [[ "$args" == *"$DIR/"* || "$args" == *"$DIR" ]]
}

# Prints N distinct free TCP ports on 127.0.0.1 (all held open together, so they differ).
free_ports() {
  python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# record NAME PID: sets the PID of component NAME in DIR/pids, in place if it has a line, else
# appended (start order). An empty PID marks it stopped.
record() {
  local name=$1 pid=$2 line found= lines=()
  if [[ -f "$DIR/pids" ]]; then
    while read -r line; do
      [[ -n "$line" ]] || continue
      if [[ "${line%% *}" == "$name" ]]; then line="$name $pid" found=1; fi
      lines+=("$line")
    done <"$DIR/pids"
  fi
  [[ -n "$found" ]] || lines+=("$name $pid")
  printf '%s\n' "${lines[@]}" >"$DIR/pids.new"
  mv "$DIR/pids.new" "$DIR/pids"
}

# pid_of NAME: the recorded PID of component NAME (empty when stopped or unknown).
pid_of() {
  local name pid
  [[ -f "$DIR/pids" ]] || return 0
  while read -r name pid; do
    if [[ "$name" == "$1" ]]; then echo "$pid"; fi
  done <"$DIR/pids"
}

# Runs a server detached from this shell's session and terminal, appending to DIR/logs/NAME.log,
# and records its PID. Usage: launch NAME COMMAND [ARGS...]
launch() {
  local name=$1
  shift
  # 9>&- : do not leak the lock file descriptor into long-lived processes.
  setsid "$@" </dev/null >>"$DIR/logs/$name.log" 2>&1 9>&- &
  LAUNCHED_PID=$!
  record "$name" "$LAUNCHED_PID"
}

# Prints the last lines of a log and fails.
fail_with_log() {
  local name=$1 msg=$2
  log "error: $msg; last lines of $DIR/logs/$name.log:"
  tail -n 40 "$DIR/logs/$name.log" >&2 || true
  exit 1
}

# wait_for NAME PID DESCRIPTION COMMAND...: polls COMMAND until it succeeds, failing early if the
# process PID dies and after $TIMEOUT seconds.
wait_for() {
  local name=$1 pid=$2 what=$3 deadline=$((SECONDS + TIMEOUT))
  shift 3
  until "$@" >/dev/null 2>&1; do
    alive "$pid" || fail_with_log "$name" "$name exited before $what"
    ((SECONDS < deadline)) || fail_with_log "$name" "timed out after ${TIMEOUT}s waiting for $what"
    sleep 0.2
  done
}

apiserver_ready() {
  local port
  port=$(cat "$DIR/apiserver.port" 2>/dev/null) || return 1
  [[ "$(curl -sf --max-time 2 --cacert "$DIR/pki/ca.crt" --cert "$DIR/pki/admin.crt" \
    --key "$DIR/pki/admin.key" "https://127.0.0.1:$port/readyz")" == ok ]]
}

# --- certificates ------------------------------------------------------------------------------

# ECDSA P-256 keys: generated instantly, unlike RSA (the service-account key must be RSA).
ec_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }

# sign NAME SUBJECT EXTENSIONS: a fresh key pki/NAME.key and a certificate pki/NAME.crt signed by
# the CA, with the given X.509v3 extension lines.
sign() {
  local name=$1 subj=$2 ext=$3 pki="$DIR/pki"
  ec_key "$pki/$name.key"
  openssl req -new -key "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr"
  printf '%s\n' "$ext" >"$pki/$name.ext"
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days 3650 -extfile "$pki/$name.ext" \
    -out "$pki/$name.crt" 2>/dev/null
  rm -f "$pki/$name.csr" "$pki/$name.ext"
}

make_pki() {
  local pki="$DIR/pki"
  rm -rf "$pki"
  mkdir -p "$pki"
  (
    umask 077
    ec_key "$pki/ca.key"
    openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=wasmop-local-ca" -days 3650 \
      -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" -out "$pki/ca.crt"
    local client="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
    sign apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost"
    sign admin "/O=system:masters/CN=admin" "$client"
    sign controller-manager "/O=system:masters/CN=system:kube-controller-manager" "$client"
    # Service-account token signing key pair.
    openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
    openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  )
}

# write_kubeconfig FILE PORT USER: a kubeconfig with the certificates embedded.
write_kubeconfig() {
  local file=$1 port=$2 user=$3 pki="$DIR/pki"
  (
    umask 077
    cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: wasmop-local
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority-data: $(base64 <"$pki/ca.crt" | tr -d '\n')
users:
- name: $user
  user:
    client-certificate-data: $(base64 <"$pki/$user.crt" | tr -d '\n')
    client-key-data: $(base64 <"$pki/$user.key" | tr -d '\n')
contexts:
- name: wasmop-local
  context:
    cluster: wasmop-local
    user: $user
current-context: wasmop-local
EOF
  )
}

# --- watchdog ----------------------------------------------------------------------------------

# Starts a detached loop that runs `down` once none of the PIDs in DIR/watch-pids is alive.
start_watchdog() {
  echo "$1" >>"$DIR/watch-pids"
  # shellcheck disable=SC2016 # expanded by the watchdog's own bash
  setsid bash -c '
    self=$1 dir=$2
    alive() {
      kill -0 "$1" 2>/dev/null || return 1
      [[ ! -r /proc/$1/stat ]] || [[ "$(sed -E "s/^.*\) ([A-Za-z]).*$/\1/" "/proc/$1/stat" 2>/dev/null)" != Z ]]
    }
    while :; do
      any=
      while read -r p; do
        [[ -n "$p" ]] && alive "$p" && any=1 && break
      done <"$dir/watch-pids" || true
      [[ -n "$any" ]] || break
      sleep 1
    done
    echo "watchdog: watched processes gone, stopping the cluster" >&2
    exec "$self" down "$dir"
  ' watchdog "$SELF" "$DIR" </dev/null >>"$DIR/logs/watchdog.log" 2>&1 9>&- &
  echo "$!" >"$DIR/watchdog.pid"
  log "watchdog $! stops the cluster once PID $1 exits"
}

# --- components ----------------------------------------------------------------------------

# The components in start order; stopped in reverse.
COMPONENTS=(etcd apiserver controller-manager)

# start_component NAME: starts one component with the binaries, ports and data recorded in DIR by
# `up`, and waits until it is healthy.
start_component() {
  local name=$1 bin etcd_port peer_port api_port kcm_port pki="$DIR/pki"
  bin=$(cat "$DIR/bin")
  read -r etcd_port peer_port api_port kcm_port <"$DIR/ports"
  case "$name" in
    etcd)
      log "starting etcd on 127.0.0.1:$etcd_port"
      launch etcd "$bin/etcd" --name=default --data-dir="$DIR/etcd" \
        --listen-client-urls="http://127.0.0.1:$etcd_port" \
        --advertise-client-urls="http://127.0.0.1:$etcd_port" \
        --listen-peer-urls="http://127.0.0.1:$peer_port" \
        --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
        --initial-cluster="default=http://127.0.0.1:$peer_port" \
        --unsafe-no-fsync
      wait_for etcd "$LAUNCHED_PID" "etcd /health" \
        curl -sf --max-time 2 "http://127.0.0.1:$etcd_port/health"
      ;;
    apiserver)
      log "starting kube-apiserver on 127.0.0.1:$api_port"
      launch apiserver "$bin/kube-apiserver" \
        --etcd-servers="http://127.0.0.1:$etcd_port" \
        --bind-address=127.0.0.1 --secure-port="$api_port" --advertise-address=127.0.0.1 \
        --endpoint-reconciler-type=none \
        --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
        --client-ca-file="$pki/ca.crt" \
        --authorization-mode=RBAC \
        --service-cluster-ip-range=10.0.0.0/24 \
        --allow-privileged=true \
        --disable-admission-plugins=ServiceAccount \
        --service-account-issuer="https://127.0.0.1:$api_port/" \
        --service-account-key-file="$pki/sa.pub" \
        --service-account-signing-key-file="$pki/sa.key" \
        --feature-gates=ShardedListAndWatch=true
      wait_for apiserver "$LAUNCHED_PID" "kube-apiserver /readyz" apiserver_ready
      ;;
    controller-manager)
      log "starting kube-controller-manager (health on 127.0.0.1:$kcm_port)"
      launch controller-manager "$bin/kube-controller-manager" \
        --kubeconfig="$DIR/controller-manager.kubeconfig" \
        --controllers=garbage-collector-controller,namespace-controller,deployment-controller,replicaset-controller,resourcequota-controller,clusterrole-aggregation-controller \
        --use-service-account-credentials=false \
        --leader-elect=false \
        --bind-address=127.0.0.1 --secure-port="$kcm_port" \
        --cert-dir="$DIR/kcm-certs"
      # /healthz is always allowed without authentication; it answers once the controllers started.
      wait_for controller-manager "$LAUNCHED_PID" "kube-controller-manager /healthz" \
        curl -skf --max-time 2 "https://127.0.0.1:$kcm_port/healthz"
      ;;
    *) usage ;;
  esac
}

# cmd_kill NAME: SIGKILL of one running component; its line in DIR/pids loses the PID.
cmd_kill() {
  local name=$1 pid
  pid=$(pid_of "$name")
  [[ -n "$pid" ]] && ours "$pid" || die "$name is not running in $DIR"
  log "killing $name ($pid)"
  kill -KILL "$pid"
  for _ in $(seq 100); do alive "$pid" || break; sleep 0.1; done
  ! alive "$pid" || die "$name ($pid) survived SIGKILL"
  record "$name" ""
}

# cmd_start NAME: starts a stopped component again on its ports and data.
cmd_start() {
  local name=$1 pid
  [[ -f "$DIR/ports" && -f "$DIR/pids" ]] || die "no cluster was started in $DIR"
  pid=$(pid_of "$name")
  if [[ -n "$pid" ]] && ours "$pid"; then die "$name is already running ($pid)"; fi
  start_component "$name"
  log "$name is back"
}

# --- commands ----------------------------------------------------------------------------------

# stop PID: TERM, then KILL if it is still alive after 5 s; returns once it is gone.
stop() {
  local pid=$1 deadline=$((SECONDS + 6)) # SECONDS is whole seconds: this is 5 to 6 s
  kill -TERM "$pid" 2>/dev/null || return 0
  while alive "$pid" && ((SECONDS < deadline)); do sleep 0.1; done
  if alive "$pid"; then
    log "$pid did not stop on TERM, killing it"
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done
  fi
}

cmd_down() {
  local pids=() pid
  if [[ -f "$DIR/watchdog.pid" ]]; then
    pid=$(cat "$DIR/watchdog.pid")
    # When the watchdog itself runs `down` (it execs this script), it must not kill itself.
    if [[ "$pid" != "$$" ]] && ours "$pid"; then kill -TERM "$pid" 2>/dev/null || true; fi
  fi
  local name
  if [[ -f "$DIR/pids" ]]; then
    while read -r name pid; do
      [[ -n "$pid" ]] && ours "$pid" && pids+=("$pid")
    done <"$DIR/pids"
  fi
  # Stop in reverse start order (controller-manager, apiserver, etcd): etcd stopped first hangs in
  # its graceful shutdown on the apiserver's open watch streams, and the apiserver on etcd.
  local i
  ((${#pids[@]} == 0)) || log "stopping ${pids[*]}"
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    stop "${pids[i]}"
  done
  rm -rf "$DIR/etcd" "$DIR/kcm-certs"
  rm -f "$DIR/pids" "$DIR/pids.new" "$DIR/watchdog.pid" "$DIR/watch-pids"
}

cmd_up() {
  local watch_pid=$1

  # Reuse a running, ready cluster.
  if [[ -f "$DIR/pids" ]]; then
    local name pid healthy=1
    while read -r name pid; do
      [[ -n "$pid" ]] && ours "$pid" || healthy=
    done <"$DIR/pids"
    if [[ -n "$healthy" ]] && apiserver_ready; then
      log "cluster in $DIR is already running"
      if [[ -n "$watch_pid" && -f "$DIR/watchdog.pid" ]] && ours "$(cat "$DIR/watchdog.pid")"; then
        echo "$watch_pid" >>"$DIR/watch-pids" # the existing watchdog now also waits for it
      fi
      echo "$DIR/kubeconfig"
      return
    fi
    log "cleaning up a stale or broken cluster in $DIR"
    cmd_down
  fi

  local bin name
  bin=$("$HERE/build-control-plane.sh") || die "could not build the control plane binaries"
  echo "$bin" >"$DIR/bin"
  mkdir -p "$DIR/logs"
  for name in "${COMPONENTS[@]}"; do : >"$DIR/logs/$name.log"; done
  : >"$DIR/pids"
  # A watchdog first, so that even a failed `up` is cleaned up once the watched process exits.
  [[ -z "$watch_pid" ]] || start_watchdog "$watch_pid"

  make_pki
  local etcd_port peer_port api_port kcm_port
  read -r etcd_port peer_port api_port kcm_port < <(free_ports 4) || true
  [[ -n "$kcm_port" ]] || die "could not pick free ports (python3 is required)"
  echo "$api_port" >"$DIR/apiserver.port"
  echo "$etcd_port $peer_port $api_port $kcm_port" >"$DIR/ports"
  write_kubeconfig "$DIR/kubeconfig" "$api_port" admin
  write_kubeconfig "$DIR/controller-manager.kubeconfig" "$api_port" controller-manager

  # On failure from here on, stop whatever was started (the logs are kept).
  trap 'status=$?; if ((status)); then log "up failed, stopping what was started"; cmd_down; fi' EXIT

  rm -rf "$DIR/etcd"
  for name in "${COMPONENTS[@]}"; do start_component "$name"; done

  trap - EXIT
  log "cluster ready in ${SECONDS}s; export KUBECONFIG=$DIR/kubeconfig"
  echo "$DIR/kubeconfig"
}

# --- main --------------------------------------------------------------------------------------

(($# >= 2)) || usage
cmd=$1
if [[ "$cmd" == down && ! -d "$2" ]]; then exit 0; fi # nothing was ever started there
mkdir -p "$2"
DIR=$(cd "$2" && pwd)
shift 2
watch_pid=
component=
if [[ "$cmd" == kill || "$cmd" == start ]]; then
  (($# == 1)) || usage
  case "$1" in etcd | apiserver | controller-manager) component=$1 ;; *) usage ;; esac
  shift
fi
while (($#)); do
  case "$1" in
    --watch-pid)
      [[ "${2:-}" =~ ^[0-9]+$ ]] || usage
      watch_pid=$2
      shift 2
      ;;
    *) usage ;;
  esac
done

# Serialise up/down on the same DIR (e.g. parallel tests all calling `up`).
if command -v flock >/dev/null; then
  exec 9>"$DIR/lock"
  flock 9
fi

case "$cmd" in
  up) cmd_up "$watch_pid" ;;
  kill | start)
    [[ -z "$watch_pid" && -n "$component" ]] || usage
    "cmd_$cmd" "$component"
    ;;
  down)
    [[ -z "$watch_pid" ]] || usage
    cmd_down
    ;;
  *) usage ;;
esac
