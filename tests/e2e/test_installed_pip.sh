#!/usr/bin/env bash
# A real `pip install --no-deps sglang==0.4.6.post5` into a real virtual
# environment (issue 10, item 2): apply, verify, status and revert through
# --python and -C on the wheel's own topk.py; a forced reinstall (what
# `pip install -U sglang` does to the file) is reported by verify as not
# applied with the command that re-applies it.
#
# The wheel is cached under ${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/wheels
# (OEAPATCH_WHEEL_CACHE overrides) and installed from there with
# --no-index, so the test runs offline once the wheel is cached. With
# neither the cache nor the package index reachable it exits 77, which
# ctest reports as skipped (SKIP_RETURN_CODE), never as passed.
#
# Environment (set by ctest): OEAPATCH, OEA_LIBRARY.
set -uo pipefail

: "${OEAPATCH:?set OEAPATCH to the oeapatch binary}"
: "${OEA_LIBRARY:?set OEA_LIBRARY to liboea.so}"
installed_rel=sglang/srt/layers/moe/topk.py
binding=sglang/srt/layers/moe/_oeapatch_sglang_oea.py
python=${OEAPATCH_SYSTEM_PYTHON:-/usr/bin/python3}

work=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-pip.XXXXXX")
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/testlib.sh"
version=$E2E_SGLANG_VERSION

e2e_sglang_wheel "$work"
echo "== the wheel ($E2E_WHEEL)"
wheel=$E2E_WHEEL

echo "== pip install --no-deps into a fresh venv"
if ! "$python" -m venv "$work/venv" >"$work/venv.log" 2>&1; then
	bad "python3 -m venv failed (Debian: python3-venv)" "$(cat "$work/venv.log")"
	e2e_summary
	exit 1
fi
vpy=$work/venv/bin/python
# install WHEEL: pip from the cached file only (no index), as a user's pip would lay it out.
install() {
	"$vpy" -m pip install --quiet --disable-pip-version-check --no-index --no-deps "$@" "$wheel" \
		>"$work/pip.log" 2>&1
}
check "pip install --no-deps sglang==$version" install
site=$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
check "the wheel's topk.py is in site-packages" test -f "$site/$installed_rel"
cp "$site/$installed_rel" "$work/pristine.py"
"$python" - "$wheel" "$work/from-wheel.py" <<'EOF'
import sys, zipfile
open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("sglang/srt/layers/moe/topk.py"))
EOF
check "it is the wheel's file" cmp -s "$work/pristine.py" "$work/from-wheel.py"

echo "== apply, verify, status through --python and -C"
expect "status --python: not applied" 1 "$OEAPATCH" --python "$vpy" status
has "it found the installed package" "root:     $site (installed package)"
expect "apply --python" 0 "$OEAPATCH" --python "$vpy" apply --library "$OEA_LIBRARY"
has "apply names the installed file" "$installed_rel: sglang-oea/2 applied"
check "the binding module sits beside topk.py" test -f "$site/$binding"
expect "verify --python" 0 "$OEAPATCH" --python "$vpy" verify
expect "verify -C site-packages/sglang (a folder inside it)" 0 "$OEAPATCH" -C "$site/sglang" verify
expect "status -C site-packages" 0 "$OEAPATCH" -C "$site" status

echo "== pip reinstalls sglang: the patch is gone"
check "pip install --force-reinstall --no-deps" install --force-reinstall
check "pip replaced topk.py with the wheel's" cmp -s "$work/pristine.py" "$site/$installed_rel"
expect "verify after the reinstall" 1 "$OEAPATCH" --python "$vpy" verify
has "verify says not applied" "$installed_rel: sglang-oea/2 is NOT applied"
has "and gives the command that re-applies it" "\`oeapatch apply --python $vpy\` applies it"
expect "status after the reinstall" 1 "$OEAPATCH" -C "$site" status
has "status says not applied" "state:    not applied (run \`oeapatch apply -C $site\`)"
expect "apply again" 0 "$OEAPATCH" --python "$vpy" apply --library "$OEA_LIBRARY"
expect "verify after the re-apply" 0 "$OEAPATCH" --python "$vpy" verify

echo "== revert"
expect "revert --python" 0 "$OEAPATCH" --python "$vpy" revert
check "topk.py is byte for byte the wheel's" cmp -s "$work/pristine.py" "$site/$installed_rel"
check "the binding module is gone" test ! -e "$site/$binding"

e2e_summary
