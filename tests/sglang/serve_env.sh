#!/usr/bin/env bash
# Creates (once) the cached Python environment in which serve_cpu.py starts a real
# SGLang offline Engine on the CPU, and prints its interpreter's path on stdout.
#   tests/sglang/serve_env.sh VERSION
#
# Layout under $OEAPATCH_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch):
#   torch-$TORCH/        the shared torch venv of make_env.sh (made by it if missing)
#   serve-$VERSION/      this environment, separate from make_env.sh's sglang-$VERSION
#                        (whose import-chain dependencies stay as the release suite
#                        expects, and whose installed topk.py that suite patches):
#     checkout/python/   sglang itself (--no-deps --target), patched by serve_cpu.py
#     site-packages      every distribution of serve-$VERSION.txt, each pinned,
#                        installed with --no-deps (no resolver, no torch pulled)
# A finished environment has a file `ok` holding the sha256 of the pin list it was
# made from; an interrupted one, or one made from another list, is rebuilt.
set -euo pipefail
version=${1:?usage: serve_env.sh SGLANG_VERSION}
cache=${OEAPATCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch}
python=${OEAPATCH_VENV_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
pins="$here/serve-$version.txt"
[ -f "$pins" ] || { echo "serve_env: no pin list $pins for sglang $version" >&2; exit 2; }

# The shared torch (and make_env.sh's own environment of this release, cheap once made).
"$here/make_env.sh" "$version" >/dev/null
torch_version=$(awk -v v="$version" '$1 == v { print $2 }' "$here/releases.txt")
base="$cache/torch-$torch_version"
base_site=$("$base/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

exec 8>"$cache/.lock-serve-$version"
flock 8
env="$cache/serve-$version"
want=$(sha256sum "$pins" | cut -d' ' -f1)
if [ "$(cat "$env/ok" 2>/dev/null)" != "$want" ]; then
  echo "serve_env: creating $env" >&2
  rm -rf "$env"
  "$python" -m venv "$env"
  site=$("$env/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$base_site" > "$site/oeapatch_torch_base.pth"
  pipq() { "$@" --disable-pip-version-check --quiet; }
  pipq "$env/bin/pip" install --no-deps --target "$env/checkout/python" "sglang==$version" >&2
  echo "$env/checkout/python" > "$site/oeapatch_sglang.pth"
  pipq "$env/bin/pip" install --no-deps -r "$pins" >&2
  # The Engine's own module, with the one stub of the suite (sgl_kernel: see stubs/).
  PYTHONPATH="$here/stubs" SGLANG_USE_CPU_ENGINE=1 "$env/bin/python" -c \
    'import sglang.srt.entrypoints.engine, sglang.srt.managers.scheduler' >&2
  echo "$want" > "$env/ok"
fi
echo "$env/bin/python"
