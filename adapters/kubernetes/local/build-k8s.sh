#!/usr/bin/env bash
# build-k8s.sh — build a real Kubernetes v1.20.2 control plane for integration tests.
#
# What it builds: kube-apiserver, kube-controller-manager and kube-scheduler from
# Debian bookworm's `kubernetes` source package (upstream v1.20.2 with vendor/), compiled
# offline with Debian's golang-1.19; plus etcd 3.4 taken from Debian's etcd-server .deb.
# Only Debian's package archive is used (no upstream downloads, no Go module proxy).
#
# Where the binaries go: a cache OUTSIDE any repository, keyed on this script's own hash,
#   ${CP_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/controlplane/k8s}/<sha256(this file)[:16]>/bin
# so that editing the recipe rebuilds, and an unchanged recipe builds once per machine.
#
# Usage:   build-k8s.sh          (no arguments)
# Output:  progress on stderr; the bin directory as the LAST line of stdout, e.g.
#            BIN=$(./build-k8s.sh | tail -n1)
# Cost:    cold 4-8 minutes on 2 cores (measured 4m15s), ~1.4 GB peak memory, ~2 GB of
#          temporary build output (deleted at the end); the kept bin/ is 263 MB. Warm: 5 ms.
#          Old keys are not pruned: rm -rf the other folders under the cache root by hand.
# Needs:   root (or sudo) only if rsync/openssl/curl are missing; apt must reach Debian.
# Env:     CP_K8S_KEEP_WORK=1 keeps the temporary work dir (for debugging a failed build).
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
KEY=$(sha256sum "$SELF" | cut -c1-16)
CACHE_ROOT=${CP_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/controlplane/k8s}
OUT=$CACHE_ROOT/$KEY
BIN=$OUT/bin
BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler)

# The exact Debian source package (bookworm; upstream 1.20.2 despite the "1.20.5" prefix).
K8S_DEB_VERSION=1.20.5+really1.20.2-1.1+deb12u1

log() { echo "[build-k8s] $*" >&2; }

# A bin dir is complete when every binary is there and runs, and the marker written
# as the very last build step exists (so a half-copied bin/ is never trusted).
complete() {
  [ -f "$BIN/.complete" ] || return 1
  for b in "${BINARIES[@]}"; do [ -x "$BIN/$b" ] || return 1; done
}

if complete; then echo "$BIN"; exit 0; fi

# Serialize concurrent builds of the same key (e.g. two test runs starting at once).
mkdir -p "$OUT"
exec 9>"$OUT/.lock"
flock 9
if complete; then echo "$BIN"; exit 0; fi   # another process finished it while we waited

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

# --- 0. host tools -------------------------------------------------------------------
# rsync: kubernetes' Makefile copies outputs with it. openssl/curl: used by start-local-k8s.sh.
# make/patch/xz/gcc are needed too (gcc only for a few cgo host tools of the code generators).
need=()
for t in rsync openssl curl make patch xz; do
  command -v "$t" >/dev/null 2>&1 || need+=("$([ "$t" = xz ] && echo xz-utils || echo "$t")")
done
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  $SUDO apt-get update -q >/dev/null
  $SUDO apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
# apt-get download/source need package lists; refresh them if they were never fetched.
ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1 || $SUDO apt-get update -q >/dev/null

# --- temporary work dir (deleted on exit unless CP_K8S_KEEP_WORK=1) ---------------------
W=$(mktemp -d "${TMPDIR:-/tmp}/cp-k8s-build.XXXXXX")
cleanup() {
  if [ "${CP_K8S_KEEP_WORK:-0}" = 1 ]; then log "work dir kept: $W"; else rm -rf "$W"; fi
  rm -rf "$BIN.tmp"
}
trap cleanup EXIT
mkdir -p "$W"/{debs,root,src,gocache,home}
T0=$(date +%s)

# --- 1. Debian binary packages, extracted (not installed) ------------------------------
#   golang-1.19-go/-src                     the Go toolchain
#   golang-github-modern-go-reflect2-dev    reflect2 1.0.2 source (replaces vendored 1.0.1)
#   etcd-server                             /usr/bin/etcd 3.4.23
log "downloading Debian packages"
(cd "$W/debs" && apt-get download -q golang-1.19-go golang-1.19-src \
  golang-github-modern-go-reflect2-dev etcd-server >/dev/null 2>&1)
for d in "$W"/debs/*.deb; do dpkg-deb -x "$d" "$W/root"; done

# --- 2. the kubernetes source package ----------------------------------------------------
# The system's apt sources have no deb-src lines, so use a private apt configuration
# with one deb-src line for the same Debian mirror the system uses (found from
# `apt-cache policy`); apt still checks the archive signatures with the system keys.
MIRROR=$(apt-cache policy | awk '$3 == "bookworm/main" {print $2; exit}')
MIRROR=${MIRROR:-http://deb.debian.org/debian}
mkdir -p "$W/apt/lists/partial" "$W/apt/parts"
echo "deb-src $MIRROR bookworm main" > "$W/apt/sources.list"
# APT::Sandbox::User=root: the private dirs live in a 0700 temp dir that apt's unprivileged
# _apt download user can't enter (apt would warn "Download is performed unsandboxed").
APT_PRIVATE=(-o "Dir::Etc::sourcelist=$W/apt/sources.list" -o "Dir::Etc::sourceparts=$W/apt/parts"
             -o "Dir::State::Lists=$W/apt/lists" -o "APT::Sandbox::User=root")
log "fetching source package kubernetes=$K8S_DEB_VERSION from $MIRROR"
apt-get "${APT_PRIVATE[@]}" update -q >/dev/null
(cd "$W/src" && apt-get "${APT_PRIVATE[@]}" source -q --download-only "kubernetes=$K8S_DEB_VERSION" >/dev/null 2>&1)
tar xzf "$W"/src/kubernetes_*.orig.tar.gz -C "$W/src"
K=$W/src/kubernetes-1.20.2
mkdir -p "$W/src/deb" && tar xJf "$W"/src/kubernetes_*.debian.tar.xz -C "$W/src/deb"
# Debian's own patches (security fixes of the +deb12u1 upload among them).
while read -r p; do
  case "$p" in ''|'#'*) continue ;; esac
  patch -d "$K" -p1 -s < "$W/src/deb/debian/patches/$p"
done < "$W/src/deb/debian/patches/series"
T1=$(date +%s)

# --- 3. patches for building 1.20 with Go 1.19 ------------------------------------------
# (a) vendored modern-go/reflect2 v1.0.1 breaks with Go >= 1.18: the apiserver segfaults on
#     the first custom-resource create. Swap in Debian's reflect2 1.0.2.
R=$K/vendor/github.com/modern-go/reflect2
rm -rf "$R"; mkdir -p "$R"
cp "$W"/root/usr/share/gocode/src/github.com/modern-go/reflect2/*.go \
   "$W"/root/usr/share/gocode/src/github.com/modern-go/reflect2/*.s "$R/"
# (b) vendored go-openapi / kube-openapi validators treat a zero value ("" or 0) like a
#     missing value, so a custom resource with "" in a required string field is rejected.
#     Upstream fix kube-openapi#230: test only `data == nil`.
sed -i 's/if data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data)) {/if data == nil {/' \
  "$K/vendor/k8s.io/kube-openapi/pkg/validation/validate/type.go" \
  "$K/vendor/github.com/go-openapi/validate/type.go"

# --- 4. build ----------------------------------------------------------------------------
# Offline (GOPROXY=off, everything is in vendor/), with the extracted toolchain only.
log "compiling (about 7 minutes on 2 cores; log in $W/make.log)"
export GOROOT=$W/root/usr/lib/go-1.19 PATH=$W/root/usr/lib/go-1.19/bin:$PATH
export GOCACHE=$W/gocache GOPROXY=off GOFLAGS= HOME=$W/home
unset GOPATH GO111MODULE
if ! (cd "$K" && make WHAT="cmd/kube-apiserver cmd/kube-controller-manager cmd/kube-scheduler" \
        GOLDFLAGS="-s -w" >"$W/make.log" 2>&1); then
  tail -n 40 "$W/make.log" >&2
  CP_K8S_KEEP_WORK=1
  log "make failed"; exit 1
fi
T2=$(date +%s)

# --- 5. keep only the binaries -------------------------------------------------------------
rm -rf "$BIN.tmp" "$BIN"; mkdir -p "$BIN.tmp"
cp "$K"/_output/bin/kube-apiserver "$K"/_output/bin/kube-controller-manager \
   "$K"/_output/bin/kube-scheduler "$W/root/usr/bin/etcd" "$BIN.tmp/"
{ echo "kubernetes source: $K8S_DEB_VERSION"
  echo "go: $("$GOROOT/bin/go" version)"
  echo "etcd: $("$BIN.tmp/etcd" --version | head -n1)"
  echo "built: $(date -u +%FT%TZ) fetch_s=$((T1-T0)) build_s=$((T2-T1)) total_s=$((T2-T0))"
} > "$BIN.tmp/VERSIONS"
touch "$BIN.tmp/.complete"
mv "$BIN.tmp" "$BIN"
log "fetch+unpack $((T1-T0))s, build $((T2-T1))s, total $((T2-T0))s"
du -sh "$BIN" >&2
echo "$BIN"
