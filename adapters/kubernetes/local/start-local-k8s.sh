#!/usr/bin/env bash
# start-local-k8s.sh STATE_DIR — a real, local Kubernetes v1.20 control plane for tests.
#
# Starts, all on 127.0.0.1 and all as background processes whose pids go to STATE_DIR/*.pid:
#   etcd                      client port $CP_K8S_ETCD_PORT (default 26379), peer port +1
#   kube-apiserver            https port  $CP_K8S_PORT      (default 26443), bearer-token auth
#   kube-controller-manager   job, garbage collector, namespace, ... (NOT node lifecycle)
#   kube-scheduler            only if CP_K8S_SCHEDULER=1 (our control plane binds pods itself
#                             with spec.nodeName, which needs no scheduler)
# There is no kubelet: nodes are plain API objects, and a test-side loop (kubelet.py)
# moves bound pods to Running and finishes deletions.
#
# Writes STATE_DIR/kubeconfig (CA-verified TLS, static admin token in system:masters) and
# prints `export KUBECONFIG=STATE_DIR/kubeconfig` as the last stdout line; timings go to
# stderr. Stop with stop-local-k8s.sh STATE_DIR. Logs: STATE_DIR/{etcd,apiserver,kcm,scheduler}.log
#
# etcd data in STATE_DIR/etcd survives a stop/start (restart tests); rm -rf STATE_DIR for a
# fresh cluster. Each test session should use its own STATE_DIR and, if run in parallel,
# its own ports.
#
# Env:
#   CP_K8S_BIN          folder with etcd + kube-* (default: run build-k8s.sh beside this
#                       script, which returns the cached build instantly or builds it once)
#   CP_K8S_PORT         apiserver port (26443)     CP_K8S_ETCD_PORT  etcd client port (26379)
#   CP_K8S_TOKEN        admin bearer token ("controlplane-test-token")
#   CP_K8S_SCHEDULER    1 = also run kube-scheduler (0)
#   CP_K8S_CONTROLLERS  kube-controller-manager --controllers value (see below)
#   CP_K8S_TIMEOUT      seconds to wait for each component (60)
#   CP_K8S_DISABLE_ADMISSION  --disable-admission-plugins value ("ServiceAccount"; "" = none)
#   CP_K8S_APISERVER_ARGS     extra kube-apiserver flags (word-split), e.g. "--v=2"
set -euo pipefail

STATE=${1:?usage: $0 STATE_DIR}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PORT=${CP_K8S_PORT:-26443}
EPORT=${CP_K8S_ETCD_PORT:-26379}
TOKEN=${CP_K8S_TOKEN:-controlplane-test-token}
TIMEOUT=${CP_K8S_TIMEOUT:-60}
DISABLE_ADMISSION=${CP_K8S_DISABLE_ADMISSION-ServiceAccount}
# '*' = every controller that is on by default, minus those that need a kubelet, a cloud
# or are noise here. nodelifecycle MUST stay off: with no kubelet heartbeats it would mark
# every fake node NotReady after 40 s and then evict its pods.
CONTROLLERS=${CP_K8S_CONTROLLERS:-'*,-nodelifecycle,-cloud-node-lifecycle,-nodeipam,-route,-service,-ttl,-bootstrapsigner,-tokencleaner'}

log() { echo "[start-local-k8s] $*" >&2; }
ms() { date +%s%3N; }
die() { log "$*"; exit 1; }

BIN=${CP_K8S_BIN:-$("$HERE/build-k8s.sh" | tail -n1)}
for b in etcd kube-apiserver kube-controller-manager; do
  [ -x "$BIN/$b" ] || die "no $BIN/$b (set CP_K8S_BIN or run build-k8s.sh)"
done

mkdir -p "$STATE"
STATE=$(cd "$STATE" && pwd)   # absolute: the pid files and kubeconfig must hold absolute paths
mkdir -p "$STATE/pki"

# Refuse to start twice on the same state dir, or on ports someone else holds.
for c in etcd apiserver kcm scheduler; do
  if [ -f "$STATE/$c.pid" ] && kill -0 "$(cat "$STATE/$c.pid")" 2>/dev/null; then
    die "$c already running (pid $(cat "$STATE/$c.pid")); run stop-local-k8s.sh $STATE first"
  fi
done
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in "$PORT" "$EPORT" "$((EPORT + 1))"; do
  port_busy "$p" && die "port $p on 127.0.0.1 is already in use (set CP_K8S_PORT / CP_K8S_ETCD_PORT)"
done

# --- credentials (made once per STATE_DIR) ----------------------------------------------
# A CA and a serving cert for 127.0.0.1/localhost, so clients verify TLS for real (no
# insecure-skip-tls-verify, hence no InsecureRequestWarning from urllib3).
P=$STATE/pki
if [ ! -f "$P/apiserver.crt" ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=controlplane-test-ca" \
    -keyout "$P/ca.key" -out "$P/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
    -keyout "$P/apiserver.key" -out "$P/apiserver.csr" 2>/dev/null
  printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "basicConstraints=CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" \
    "subjectKeyIdentifier=hash" "authorityKeyIdentifier=keyid,issuer" > "$P/apiserver.ext"
  openssl x509 -req -in "$P/apiserver.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial \
    -days 3650 -extfile "$P/apiserver.ext" -out "$P/apiserver.crt" 2>/dev/null
fi
# Key pair the apiserver uses to sign/verify service-account tokens (the controller
# manager's serviceaccount-token controller signs with the private half).
if [ ! -f "$P/sa.key" ]; then
  openssl genrsa -out "$P/sa.key" 2048 2>/dev/null
  openssl rsa -in "$P/sa.key" -pubout -out "$P/sa.pub" 2>/dev/null
fi
# Static token file: token,user,uid,"group1,group2". system:masters bypasses RBAC.
echo "$TOKEN,admin,admin-uid,system:masters" > "$P/tokens.csv"

cat > "$STATE/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$PORT
    certificate-authority-data: $(base64 -w0 < "$P/ca.crt")
users:
- name: admin
  user:
    token: $TOKEN
contexts:
- name: local
  context: {cluster: local, user: admin, namespace: default}
current-context: local
EOF

# wait_for NAME PIDFILE CMD... : poll CMD every 0.1 s until it succeeds; fail early if
# the process died, and after TIMEOUT seconds.
wait_for() {
  local name=$1 pidfile=$2; shift 2
  local deadline=$(( $(date +%s) + TIMEOUT ))
  until "$@" >/dev/null 2>&1; do
    if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
      tail -n 30 "$STATE/$name.log" >&2; die "$name exited; see $STATE/$name.log"
    fi
    [ "$(date +%s)" -lt "$deadline" ] || { tail -n 30 "$STATE/$name.log" >&2; die "$name not ready after ${TIMEOUT}s"; }
    sleep 0.1
  done
}
api() { curl -sf --cacert "$P/ca.crt" -H "Authorization: Bearer $TOKEN" "https://127.0.0.1:$PORT$1"; }

# --- etcd ----------------------------------------------------------------------------------
t0=$(ms)
"$BIN/etcd" --name local --data-dir "$STATE/etcd" \
  --listen-client-urls "http://127.0.0.1:$EPORT" --advertise-client-urls "http://127.0.0.1:$EPORT" \
  --listen-peer-urls "http://127.0.0.1:$((EPORT + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((EPORT + 1))" \
  --initial-cluster "local=http://127.0.0.1:$((EPORT + 1))" --logger=zap --log-level=warn \
  </dev/null >"$STATE/etcd.log" 2>&1 &
echo $! > "$STATE/etcd.pid"
wait_for etcd "$STATE/etcd.pid" curl -sf "http://127.0.0.1:$EPORT/health"
t1=$(ms)

# --- kube-apiserver --------------------------------------------------------------------------
# --disable-admission-plugins=ServiceAccount: otherwise every pod create in a namespace
#   fails with 403 'serviceaccount "default" not found' until the controller manager has
#   made that namespace's default service account (a race right after namespace create),
#   and pods get a token volume mounted that nothing here uses.
# --enable-priority-and-fairness=false: no APF queuing/429s during bulk tests.
# --endpoint-reconciler-type=none: no master-lease/endpoint writes for the 'kubernetes' svc.
"$BIN/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$EPORT" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$PORT" \
  --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
  --token-auth-file="$P/tokens.csv" --authorization-mode=RBAC \
  --service-account-issuer=https://kubernetes.default.svc \
  --service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
  --service-cluster-ip-range=10.96.0.0/16 \
  ${DISABLE_ADMISSION:+--disable-admission-plugins="$DISABLE_ADMISSION"} \
  --enable-priority-and-fairness=false --endpoint-reconciler-type=none \
  --profiling=false -v=0 ${CP_K8S_APISERVER_ARGS:-} \
  </dev/null >"$STATE/apiserver.log" 2>&1 &
echo $! > "$STATE/apiserver.pid"
wait_for apiserver "$STATE/apiserver.pid" api /readyz
t2=$(ms)

# --- kube-controller-manager -----------------------------------------------------------------
# --kube-api-qps/burst: the defaults (20/30) throttle the job controller and the garbage
#   collector badly once a test makes hundreds of pods.
# --use-service-account-credentials=false: every controller uses the admin kubeconfig.
"$BIN/kube-controller-manager" \
  --kubeconfig="$STATE/kubeconfig" --bind-address=127.0.0.1 --secure-port=0 --port=0 \
  --leader-elect=false --controllers="$CONTROLLERS" \
  --service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" \
  --use-service-account-credentials=false \
  --kube-api-qps=200 --kube-api-burst=400 \
  </dev/null >"$STATE/kcm.log" 2>&1 &
echo $! > "$STATE/kcm.pid"
# Ready when its serviceaccount controller has created default/default.
wait_for kcm "$STATE/kcm.pid" api /api/v1/namespaces/default/serviceaccounts/default
t3=$(ms)

# --- kube-scheduler (optional) ---------------------------------------------------------------
if [ "${CP_K8S_SCHEDULER:-0}" = 1 ]; then
  [ -x "$BIN/kube-scheduler" ] || die "no $BIN/kube-scheduler"
  "$BIN/kube-scheduler" --kubeconfig="$STATE/kubeconfig" --bind-address=127.0.0.1 \
    --secure-port=0 --port=0 --leader-elect=false --kube-api-qps=200 --kube-api-burst=400 \
    </dev/null >"$STATE/scheduler.log" 2>&1 &
  echo $! > "$STATE/scheduler.pid"
fi

log "ready: etcd $((t1 - t0)) ms, apiserver $((t2 - t1)) ms, controller-manager $((t3 - t2)) ms (total $((t3 - t0)) ms)"
echo "export KUBECONFIG=$STATE/kubeconfig"
