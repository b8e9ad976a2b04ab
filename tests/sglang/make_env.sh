#!/usr/bin/env bash
# Creates (once) the cached Python environment of one real SGLang release and
# prints its interpreter's path on stdout.
#   tests/sglang/make_env.sh VERSION
#
# Layout under $OEAPATCH_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch):
#   torch-$TORCH/        one venv holding torch (PyPI's x86_64 build, CUDA libraries
#                        included: several GB, downloaded once per machine) and numpy
#   sglang-$VERSION/     one venv per release. It sees torch-$TORCH through a .pth
#                        file, so all releases share one torch. It holds the packages
#                        of releases.txt's `deps` line that this release requires
#                        (at the release's own pins), installed with pip's resolver
#                        under a constraint that keeps torch at $TORCH and pulls no
#                        other torch, GPU kernel or model-serving package; then the
#                        packages of its release line with --no-deps, and what those
#                        require of releases.txt's `chain` line (vLLM's own needs)
#     checkout/python/   sglang itself, installed with --no-deps --target here so that
#                        checkout/ has upstream's layout (python/sglang/...) and
#                        `oeapatch -C checkout` patches the installed files in place
# A finished environment has a file `ok`; an interrupted one is rebuilt.
# Everything comes from PyPI through pip, so this needs the network the first time only.
set -euo pipefail
version=${1:?usage: make_env.sh SGLANG_VERSION}
cache=${OEAPATCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch}
python=${OEAPATCH_VENV_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
list="$here/releases.txt"

# A release line: VERSION TORCH [requirements installed with --no-deps]. Releases
# whose pins allow it share one torch; a `torch X REQS` line says what must match
# torch X (torchvision) and is installed with it.
line=$(awk -v v="$version" '$1 == v' "$list")
[ -n "$line" ] || { echo "make_env: sglang $version is not listed in $list" >&2; exit 2; }
torch_version=$(echo "$line" | awk '{print $2}')
nodeps=$(echo "$line" | cut -d' ' -f3-)
[ "$nodeps" != "$line" ] || nodeps=""
with_torch=$(awk -v t="$torch_version" '$1 == "torch" && $2 == t { $1 = ""; $2 = ""; print }' "$list")
allow=$(sed -n 's/^deps *= *//p' "$list")
chain_allow=$(sed -n 's/^chain *= *//p' "$list")

mkdir -p "$cache"
exec 9>"$cache/.lock-torch-$torch_version"
flock 9

pipq() { "$@" --disable-pip-version-check --quiet; }

base="$cache/torch-$torch_version"
if [ ! -f "$base/ok" ]; then
  echo "make_env: creating $base (torch $torch_version: a download of several GB)" >&2
  rm -rf "$base"
  "$python" -m venv "$base"
  # shellcheck disable=SC2086
  pipq "$base/bin/pip" install "torch==$torch_version" $with_torch >&2
  "$base/bin/python" -c 'import torch; torch.zeros(1)' >&2
  touch "$base/ok"
fi
base_site=$("$base/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

flock -u 9
exec 8>"$cache/.lock-sglang-$version"
flock 8
env="$cache/sglang-$version"
if [ ! -f "$env/ok" ]; then
  echo "make_env: creating $env" >&2
  rm -rf "$env"
  "$python" -m venv "$env"
  site=$("$env/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$base_site" > "$site/oeapatch_torch_base.pth"
  pipq "$env/bin/pip" install --no-deps --target "$env/checkout/python" "sglang==$version" >&2
  echo "$env/checkout/python" > "$site/oeapatch_sglang.pth"
  # The release's own requirements (its runtime extras in older releases), kept to
  # the allowed names, each with the release's pin.
  reqs=$("$env/bin/python" - "$env/checkout/python" "$allow" <<'EOF'
import glob, re, sys
from email.parser import Parser
meta = glob.glob(sys.argv[1] + "/sglang-*.dist-info/METADATA")[0]
allowed = {a.lower().replace("_", "-") for a in sys.argv[2].split()}
seen = {}
for req in Parser().parse(open(meta)).get_all("Requires-Dist") or []:
    spec, _, marker = req.partition(";")
    if marker and not re.search(r'extra == "(srt|runtime[-_]common)"', marker):
        continue
    name = re.match(r"[A-Za-z0-9_.-]+", spec.strip()).group(0)
    key = name.lower().replace("_", "-")
    if key in allowed and key not in seen:
        seen[key] = spec.replace(" ", "")
print(" ".join(seen.values()))
EOF
)
  "$base/bin/pip" freeze --disable-pip-version-check | grep -iE '^(torch|torchvision|triton|numpy)==' \
    > "$env/constraints.txt"
  # shellcheck disable=SC2086
  pipq "$env/bin/pip" install -c "$env/constraints.txt" $reqs >&2
  chain=""
  if [ -n "$nodeps" ]; then
    # shellcheck disable=SC2086
    pipq "$env/bin/pip" install --no-deps $nodeps >&2
    # What those packages require in turn (vLLM, for the releases whose chain
    # imports it): only names of releases.txt's `chain` line that are still missing, each at that
    # package's own pin, with the resolver held to the shared torch as above.
    # shellcheck disable=SC2086
    chain=$("$env/bin/python" - "$chain_allow" $nodeps <<'PY'
import importlib.metadata as md, sys
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name
allowed = {canonicalize_name(a) for a in sys.argv[1].split()}
installed = {canonicalize_name(d.metadata["Name"]) for d in md.distributions()}
seen = {}
for pkg in sys.argv[2:]:
    for text in md.requires(Requirement(pkg).name) or []:
        req = Requirement(text)
        key = canonicalize_name(req.name)
        if req.marker and not req.marker.evaluate({"extra": ""}):
            continue
        if key in allowed and key not in installed and key not in seen:
            seen[key] = str(req).split(";")[0].replace(" ", "")
print(" ".join(seen.values()))
PY
)
    if [ -n "$chain" ]; then
      # shellcheck disable=SC2086
      pipq "$env/bin/pip" install -c "$env/constraints.txt" $chain >&2
    fi
  fi
  echo "$reqs --no-deps: $nodeps --their requirements: $chain" > "$env/deps.txt"
  PYTHONPATH="$here/stubs" "$env/bin/python" -c \
    'import sglang.srt.layers.moe.topk, sglang.srt.model_executor.forward_batch_info' >&2
  touch "$env/ok"
fi
echo "$env/bin/python"
