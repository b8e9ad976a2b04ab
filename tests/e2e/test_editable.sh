#!/usr/bin/env bash
# Editable installs of a real SGLang release (issue 35, item 1): the files of
# the sglang==0.4.6.post5 wheel laid out as a checkout (python/sglang/...,
# with a setuptools pyproject.toml as upstream's python/ has), installed with
# `pip install -e python/` in each of setuptools' editable modes, then
# apply / verify / revert through --python, and the server's own import
# system asked whether it finds the binding module apply wrote:
#   lenient (the default): a meta-path finder maps sglang to the checkout;
#   compat: a .pth file puts python/ on sys.path;
#   strict: a link tree under python/build/__editable__.*/ whose files are
#     symlinks into the checkout. The binding module written beside the
#     checkout's topk.py is not in that tree: apply must refuse naming the
#     layout (nothing written), and verify must not pass on a checkout
#     patched with -C that this server cannot start with.
# And the interpreter that cannot answer the import question (a wrapper that
# fails that one query) makes import:target FAIL, never the C rules.
# Part `uv` (a ctest entry of its own: it is skipped where the pinned uv of
# scripts/test-tools.txt is neither cached nor reachable): the same checkout
# installed with `uv pip install -e`, in the default mode and in strict mode.
#
# The import check runs the real import system in the venv's interpreter:
# the top-level package from its spec (not executed: sglang/__init__.py
# imports the whole front end, whose requirements are not installed here),
# every level below as the import system resolves it.
#
# Needs Debian's python3-venv, python3-setuptools and python3-wheel (the
# build backend, used with --no-build-isolation: nothing is downloaded but
# the cached wheel). Environment (set by ctest): OEAPATCH, OEA_LIBRARY.
set -uo pipefail
part=${1:-main}
case $part in main | uv) ;; *) echo "usage: $0 [uv]" >&2; exit 2 ;; esac

: "${OEAPATCH:?set OEAPATCH to the oeapatch binary}"
: "${OEA_LIBRARY:?set OEA_LIBRARY to liboea.so}"
python=${OEAPATCH_SYSTEM_PYTHON:-/usr/bin/python3}
target=sglang/srt/layers/moe/topk.py
binding=sglang/srt/layers/moe/_oeapatch_sglang_oea.py
bmod=sglang.srt.layers.moe._oeapatch_sglang_oea

work=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-editable.XXXXXX")
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/testlib.sh"
version=$E2E_SGLANG_VERSION

e2e_sglang_wheel "$work"
echo "== the wheel ($E2E_WHEEL)"
if ! "$python" -c 'import setuptools, wheel' 2>/dev/null; then
	echo "SKIP  Debian's python3-setuptools and python3-wheel are needed for pip install -e"
	exit 77
fi

# The checkout: the wheel's sglang/ under python/, beside a pyproject.toml.
mkdir -p "$work/pristine/python"
"$python" - "$E2E_WHEEL" "$work/pristine/python" <<'EOF'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("sglang/")])
EOF
cat >"$work/pristine/python/pyproject.toml" <<EOF
[build-system]
requires = ["setuptools>=64", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "sglang"
version = "$version"

[tool.setuptools.packages.find]
include = ["sglang*"]
EOF

# setup MODE: a fresh checkout $co and venv $vpy with `pip install -e` in MODE.
setup() {
	co=$work/$1/checkout
	rm -rf "$work/$1"
	mkdir -p "$work/$1"
	cp -a "$work/pristine" "$co"
	"$python" -m venv --system-site-packages "$work/$1/venv" >"$work/venv.log" 2>&1 || return 1
	vpy=$work/$1/venv/bin/python
	site=$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
	if [ "$part" = uv ]; then
		# uv asks setuptools for the mode it is given (default: lenient).
		local cs=()
		[ "$1" = strict ] && cs=(--config-settings editable_mode=strict)
		(cd "$work" && "$uv" pip install --quiet --python "$vpy" --offline --no-build-isolation --no-deps \
			-e "$co/python" "${cs[@]}") >"$work/pip.log" 2>&1
	else
		(cd "$work" && "$vpy" -m pip install --quiet --disable-pip-version-check --no-index --no-deps \
			--no-build-isolation -e "$co/python" --config-settings "editable_mode=$1") >"$work/pip.log" 2>&1
	fi
}

# imports NAME: the venv's import system imports NAME (the top-level package
# from its spec, unexecuted); $out gets the file or the error.
imports() {
	out=$(cd / && "$vpy" - "$1" 2>&1 <<'EOF'
import importlib, importlib.util, sys
top = sys.argv[1].split(".")[0]
sys.modules[top] = importlib.util.module_from_spec(importlib.util.find_spec(top))
print(importlib.import_module(sys.argv[1]).__file__)
EOF
)
}

modes="lenient compat"
if [ "$part" = uv ]; then
	tools=${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/test-tools
	reqs=$(cd "$(dirname "$0")/../.." && pwd)/scripts/test-tools.txt
	mkdir -p "$tools"
	if ! "$python" -m pip download --quiet --disable-pip-version-check --no-index --find-links "$tools" \
		--require-hashes --no-deps -r "$reqs" -d "$work/check" >/dev/null 2>&1 &&
		! timeout 300 "$python" -m pip download --quiet --disable-pip-version-check --only-binary :all: \
			--require-hashes --no-deps -r "$reqs" -d "$tools" >"$work/download.log" 2>&1; then
		echo "SKIP  the pinned uv (scripts/test-tools.txt) is not cached in $tools and the index is not reachable"
		exit 77
	fi
	"$python" -m venv "$work/uv" >/dev/null 2>&1 &&
		"$work/uv/bin/pip" install --quiet --disable-pip-version-check --no-index --find-links "$tools" \
			--require-hashes --no-deps -r "$reqs" >"$work/uv.log" 2>&1
	uv=$work/uv/bin/uv
	check "the pinned uv runs" "$uv" --version
	modes=lenient
fi

for mode in $modes; do
	echo "== $part: install -e, editable_mode=$mode"
	check "pip install -e ($mode)" setup "$mode"
	case $mode in
	lenient) check "the finder maps sglang to the checkout" \
		grep -qF "$co/python/sglang" "$site/__editable___sglang_${version//./_}_finder.py" ;;
	compat) check "a .pth puts python/ on sys.path" grep -qxF "$co/python" "$site/__editable__.sglang-$version.pth" ;;
	esac
	expect "apply --python ($mode)" 0 "$OEAPATCH" --python "$vpy" apply --library "$OEA_LIBRARY"
	check "the binding module is beside the checkout's topk.py" test -f "$co/python/$binding"
	imports "$bmod"
	if [ "$out" = "$co/python/$binding" ]; then ok "the server's import finds it"; else bad "import $bmod" "$out"; fi
	expect "verify --python ($mode)" 0 "$OEAPATCH" --python "$vpy" verify
	has "the interpreter answered the import question" "import:target          sglang.srt.layers.moe.topk resolves to $co/python/$target (asked $vpy"
	expect "revert --python ($mode)" 0 "$OEAPATCH" --python "$vpy" revert
	check "the checkout is as it was" diff -r "$work/pristine/python/sglang" "$co/python/sglang"
done

if [ "$part" = main ]; then
echo "== an interpreter that cannot answer the import question"
# The last venv (compat), behind a wrapper that fails only the probe of what
# it imports (the script that reads pycs with marshal): as a Python whose
# site-packages breaks that query would.
cat >"$work/pywrap" <<EOF
#!/bin/sh
case "\$2" in *marshal*) exit 1 ;; esac
exec "$vpy" "\$@"
EOF
chmod +x "$work/pywrap"
expect "apply --python (wrapper) is refused" 2 "$OEAPATCH" --python "$work/pywrap" apply --library "$OEA_LIBRARY"
has "naming the interpreter" "the server's interpreter $work/pywrap"
check "nothing written" diff -r "$work/pristine/python/sglang" "$co/python/sglang"
expect "apply --python (the venv's own)" 0 "$OEAPATCH" --python "$vpy" apply --library "$OEA_LIBRARY"
expect "verify --python (wrapper) fails" 1 "$OEAPATCH" --python "$work/pywrap" verify
has "import:target fails saying why" "FAIL import:target"
has "it names the interpreter" "the server's interpreter $work/pywrap"
has "and its exit status" "it exited 1"
expect "revert" 0 "$OEAPATCH" --python "$vpy" revert
fi

echo "== $part: install -e, editable_mode=strict (a link tree)"
check "pip install -e (strict)" setup strict
tree=$(ls -d "$co/python/build/__editable__.sglang-$version"*/ 2>/dev/null | head -1)
check "the link tree holds topk.py as a symlink" test -L "$tree$target"
expect "apply --python is refused" 2 "$OEAPATCH" --python "$vpy" apply --library "$OEA_LIBRARY"
has "it names the link tree" "is a symbolic link to $co/python/$target"
has "and the layout" "setuptools' strict editable mode"
has "and what to do" "pip install -e DIR, default or compat mode"
check "nothing written in the checkout" diff -r "$work/pristine/python/sglang" "$co/python/sglang"
check "nothing written in the link tree" test ! -e "$tree$binding"
expect "status --python is refused too" 2 "$OEAPATCH" --python "$vpy" status
# The checkout patched through -C: its files are what the link tree leads
# to, but the binding module is not in the tree, so this server cannot start.
expect "apply -C the checkout" 0 "$OEAPATCH" -C "$co" apply --library "$OEA_LIBRARY"
imports "$bmod"
has "the server's import does not find the binding" "No module named '$bmod'"
expect "verify --python does not pass" 2 "$OEAPATCH" --python "$vpy" verify
has "it names the layout" "setuptools' strict editable mode"
expect "revert -C the checkout" 0 "$OEAPATCH" -C "$co" revert
check "the checkout is as it was" diff -r "$work/pristine/python/sglang" "$co/python/sglang"

e2e_summary
