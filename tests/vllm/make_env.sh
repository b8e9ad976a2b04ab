#!/usr/bin/env bash
# Creates (once) the cached Python environment of one real vLLM release and
# prints its interpreter's path on stdout.
#   tests/vllm/make_env.sh VERSION
#
# Layout under $OEAPATCH_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch):
#   torch-$TORCH/        the venv holding torch that tests/sglang/make_env.sh creates
#                        (the same folder, lock and `ok` marker: both suites share it)
#   vllm-$VERSION/       one venv per release. It sees torch-$TORCH through a .pth
#                        file. It holds the packages of releases.txt's `deps` line
#                        that this release requires (at the release's own pins),
#                        installed with pip's resolver under a constraint that keeps
#                        torch at $TORCH and pulls no other torch or GPU kernel
#                        package; then the packages of its release line.
#     checkout/vllm/     vLLM's Python files only: the wheel is downloaded with pip
#                        and unzipped without its compiled libraries (`-x '*.so'`:
#                        vllm/_C.abi3.so, _moe_C, the flash-attention builds, some
#                        hundreds of MB that need CUDA anyway). vLLM's checkout
#                        layout is its installed layout, so `oeapatch -C checkout`
#                        patches these files in place. vLLM logs a warning that
#                        vllm._C is missing and goes on: nothing the routing or the
#                        forward context imports needs it.
# A finished environment has a file `ok`; an interrupted one is rebuilt.
# Everything comes from PyPI through pip, so this needs the network the first time only.
set -euo pipefail
version=${1:?usage: make_env.sh VLLM_VERSION}
cache=${OEAPATCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch}
python=${OEAPATCH_VENV_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
list="$here/releases.txt"

# A release line: VERSION TORCH [requirements added to the release's own]. A
# `torch X REQS` line says what must match torch X and is installed with it.
line=$(awk -v v="$version" '$1 == v' "$list")
[ -n "$line" ] || { echo "make_env: vllm $version is not listed in $list" >&2; exit 2; }
torch_version=$(echo "$line" | awk '{print $2}')
extra=$(echo "$line" | cut -d' ' -f3-)
[ "$extra" != "$line" ] || extra=""
with_torch=$(awk -v t="$torch_version" '$1 == "torch" && $2 == t { $1 = ""; $2 = ""; print }' "$list")
allow=$(sed -n 's/^deps *= *//p' "$list")

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
exec 8>"$cache/.lock-vllm-$version"
flock 8
env="$cache/vllm-$version"
if [ ! -f "$env/ok" ]; then
  echo "make_env: creating $env" >&2
  rm -rf "$env"
  "$python" -m venv "$env"
  site=$("$env/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$base_site" > "$site/oeapatch_torch_base.pth"
  wheel_dir=$(mktemp -d "$cache/.vllm-wheel-XXXXXX")
  trap 'rm -rf "$wheel_dir"' EXIT
  # The wheel for this machine (x86_64 manylinux, any Python 3: vLLM ships abi3).
  pipq "$env/bin/pip" download --no-deps --only-binary :all: -d "$wheel_dir" "vllm==$version" >&2
  mkdir -p "$env/checkout"
  unzip -q "$wheel_dir"/vllm-*.whl -x '*.so' -d "$env/checkout"
  rm -rf "$wheel_dir"
  trap - EXIT
  echo "$env/checkout" > "$site/oeapatch_vllm.pth"
  # The release's own requirements, kept to the allowed names, each with the
  # release's pin (extras stripped: none of them is on the import chain).
  reqs=$("$env/bin/python" - "$env/checkout" "$allow" <<'PY'
import glob, re, sys
from email.parser import Parser
meta = glob.glob(sys.argv[1] + "/vllm-*.dist-info/METADATA")[0]
allowed = {a.lower().replace("_", "-") for a in sys.argv[2].split()}
seen = {}
for req in Parser().parse(open(meta)).get_all("Requires-Dist") or []:
    spec, _, marker = req.partition(";")
    if "extra ==" in marker:
        continue
    name = re.match(r"[A-Za-z0-9_.-]+", spec.strip()).group(0)
    key = name.lower().replace("_", "-")
    if key in allowed and key not in seen:
        seen[key] = re.sub(r"\[[^]]*\]", "", spec).replace(" ", "")
print(" ".join(seen.values()))
PY
)
  "$base/bin/pip" freeze --disable-pip-version-check | grep -iE '^(torch|torchvision|triton|numpy)==' \
    > "$env/constraints.txt"
  # shellcheck disable=SC2086
  # --no-compile: byte-compiling transformers and the rest on a small machine
  # takes longer than installing them; the few modules the chain imports are
  # compiled on first import.
  pipq "$env/bin/pip" install --no-compile -c "$env/constraints.txt" $reqs $extra >&2
  echo "$reqs $extra" > "$env/deps.txt"
  # What the tests import, with a VllmConfig built as they build it: a machine
  # without a GPU has no platform vLLM can infer, hence device="cpu".
  "$env/bin/python" -c '
import vllm.forward_context
from vllm.config import VllmConfig, DeviceConfig
VllmConfig(device_config=DeviceConfig(device="cpu"))
try:
    import vllm.model_executor.layers.fused_moe.router.base_router
except ModuleNotFoundError:
    import vllm.model_executor.layers.fused_moe.layer
' >&2
  touch "$env/ok"
fi
echo "$env/bin/python"
