#!/usr/bin/env bash
# SGLang where pip puts it (issue 10, item 2), on our own fixture package laid
# out as site-packages in a real virtual environment (`python3 -m venv`):
#  1. `--python VENV/bin/python` finds the package that interpreter imports;
#     apply, verify, status and revert work on it as on a checkout, and the
#     patched module imports in that interpreter;
#  2. -C takes the site-packages folder or any folder inside it (searched
#     upward, as git does), and a checkout or any folder inside it; the
#     checkout's own python/ folder (which looks like site-packages) is
#     still the checkout;
#  3. a reinstall that replaces topk.py (what `pip install -U sglang` does)
#     is reported by verify and status as not applied, with the command that
#     re-applies it, and that command works;
#  4. revert gives the installed file back byte for byte; the not-found
#     message says what -C takes (site-packages, --python);
#  5. --python is the package that interpreter imports, from wherever it is
#     asked (issue 15, items 2 and 3): not the sglang of the current folder
#     (a checkout's python/), but the one the server's PYTHONPATH adds (this
#     environment's: issue 25, item 8), and never a checkout
#     that encloses the interpreter's site-packages when its package lacks
#     the target; the interpreter and the file it chose are printed.
# tests/e2e/test_installed_pip.sh does the same with a real wheel from PyPI.
#
# Environment (set by ctest): OEAPATCH, OEA_LIBRARY, OEAPATCH_SOURCE_DIR.
set -uo pipefail

: "${OEAPATCH:?set OEAPATCH to the oeapatch binary}"
: "${OEA_LIBRARY:?set OEA_LIBRARY to liboea.so}"
: "${OEAPATCH_SOURCE_DIR:?set OEAPATCH_SOURCE_DIR to the repository root}"
fix=$OEAPATCH_SOURCE_DIR/tests/fixtures
installed_rel=sglang/srt/layers/moe/topk.py
binding=sglang/srt/layers/moe/_oeapatch_sglang_oea.py
python=${OEAPATCH_SYSTEM_PYTHON:-/usr/bin/python3}

work=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-installed.XXXXXX")
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/testlib.sh"

echo "== a virtual environment with the fixture package installed in site-packages"
# --system-site-packages: Debian's torch, which the fixture package imports.
if ! "$python" -m venv --without-pip --system-site-packages "$work/venv" >"$work/venv.log" 2>&1; then
	bad "python3 -m venv failed (Debian: python3-venv)" "$(cat "$work/venv.log")"
	e2e_summary
	exit 1
fi
vpy=$work/venv/bin/python
site=$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cp -r "$fix/pkg/python/sglang" "$site/"
cp "$fix/eras/2025-08_topk_config.py" "$site/$installed_rel"
cp "$site/$installed_rel" "$work/pristine.py"
ok "venv at $work/venv, package in $site"

echo "== 1. --python"
expect "status --python VENV/bin/python: not applied" 1 "$OEAPATCH" status --python "$vpy"
has "status names the installed target" "file:     $installed_rel"
has "status says it is an installed package" "$site (installed package)"
expect "apply --python" 0 "$OEAPATCH" --python "$vpy" apply --library "$OEA_LIBRARY"
has "apply names the installed file" "$installed_rel: sglang-oea/2 applied"
check "the binding module is written beside it in site-packages" test -f "$site/$binding"
expect "verify --python" 0 "$OEAPATCH" verify --python "$vpy"
expect "status --python --json" 0 "$OEAPATCH" status --python "$vpy" --json
has "the JSON says layout installed" '"layout": "installed"'
has "the JSON's root is site-packages" "\"root\": \"$site\""
out=$(cd "$work" && "$vpy" -c '
import sglang.srt.layers.moe.topk as t
print("binding", t._oeapatch_oea.__name__, "enabled", t._oeapatch_oea.ENABLED)' 2>&1)
has "the patched module imports in the venv's interpreter (OEA off by default)" "binding sglang.srt.layers.moe._oeapatch_sglang_oea enabled False"
expect "an interpreter without sglang is a usage error" 2 "$OEAPATCH" status --python "$python"
has "it says what is missing and what to do" "imports no framework oeapatch has a definition for"
has "it names what it looked for" "installed sglang/srt/layers/moe/topk.py"
expect "a --python that is not an interpreter" 2 "$OEAPATCH" status --python "$work/nothing-here"

echo "== 2. -C: site-packages, folders inside it, a checkout and folders inside it"
expect "-C site-packages" 0 "$OEAPATCH" -C "$site" verify
expect "-C site-packages/sglang/srt/layers (upward search)" 0 "$OEAPATCH" -C "$site/sglang/srt/layers" verify
expect "from inside site-packages/sglang, no -C" 0 bash -c "cd '$site/sglang' && '$OEAPATCH' status"
has "it found the installed package" "(installed package)"
co=$work/checkout
mkdir -p "$co/python/sglang/srt/layers/moe"
cp "$fix/eras/2025-12_layer_id_capturer.py" "$co/python/$installed_rel"
expect "-C checkout/python/sglang (inside a checkout)" 1 "$OEAPATCH" -C "$co/python/sglang" status --json
has "the checkout's python/ folder is still the checkout" '"layout": "checkout"'
has "and the file is named as in the checkout" '"file": "python/sglang/srt/layers/moe/topk.py"'
has "its root is the checkout" "\"root\": \"$co\""
expect "apply from inside the checkout" 0 "$OEAPATCH" -C "$co/python/sglang/srt" apply --library "$OEA_LIBRARY"
check "the checkout got its binding module" test -f "$co/python/$binding"
expect "-C a folder that holds neither" 2 "$OEAPATCH" -C "$work" verify
has "the message says nothing was found there or above" "$work: no framework oeapatch has a definition for was found here or in any folder above"
has "the message names the checkout target" "sglang-oea: python/sglang/srt/layers/moe/topk.py"
has "the message names the installed target" "installed $installed_rel"
has "the message says -C takes site-packages" "a site-packages folder"
has "the message offers --python" "--python PATH"

echo "== 3. a reinstall replaces topk.py (pip install -U)"
cp "$work/pristine.py" "$site/$installed_rel"
expect "verify after the reinstall: not applied" 1 "$OEAPATCH" verify --python "$vpy"
has "verify says it is not applied" "$installed_rel: sglang-oea/2 is NOT applied"
has "verify gives the command that re-applies it" "\`oeapatch apply --python $vpy\` applies it"
expect "status after the reinstall" 1 "$OEAPATCH" -C "$site" status
has "status gives the command too" "(run \`oeapatch apply -C $site\`)"
expect "verify --json after the reinstall" 1 "$OEAPATCH" -C "$site" verify --json
has "the JSON carries the fix" "\"fix\": \"oeapatch apply -C $site\""
hint=$("$OEAPATCH" verify --python "$vpy" | sed -n 's/.*`\(oeapatch apply [^`]*\)`.*/\1/p')
expect "the hinted command re-applies it" 0 bash -c "PATH='$(dirname "$OEAPATCH")':\$PATH; $hint"
expect "verify after the re-apply" 0 "$OEAPATCH" verify --python "$vpy"

echo "== 4. revert"
expect "revert --python" 0 "$OEAPATCH" revert --python "$vpy"
check "the installed topk.py is byte for byte as installed" cmp -s "$work/pristine.py" "$site/$installed_rel"
check "the binding module is gone" test ! -e "$site/$binding"

echo "== 5. --python: the interpreter's own package, from wherever it is asked"
# A checkout with another era of topk.py, to run the interpreter from.
ck=$work/other-checkout
mkdir -p "$ck/python/sglang/srt/layers/moe"
cp -r "$fix/pkg/python/sglang/." "$ck/python/sglang/"
cp "$fix/eras/2025-12_layer_id_capturer.py" "$ck/python/$installed_rel"
expect "status --python from inside a checkout's python/ folder" 1 \
	bash -c "cd '$ck/python' && '$OEAPATCH' status --python '$vpy' --json"
has "the venv's site-packages is the root, not the checkout" "\"root\": \"$site\""
has "the JSON names the interpreter that answered" "\"executable\": \"$vpy\""
# PYTHONPATH is the server's environment (a unit's Environment=, docker -e):
# the interpreter imports the sglang it names, so that is the one checked
# (issue 25, item 8; e2e.test_import has the rest).
expect "status --python with PYTHONPATH naming the checkout" 1 \
	env PYTHONPATH="$ck/python" "$OEAPATCH" status --python "$vpy" --json
has "PYTHONPATH (the server's environment) is asked: the checkout it names" "\"root\": \"$ck\""
has "the JSON says which PYTHONPATH" "\"pythonpath\": \"$ck/python\""
expect "and from inside the checkout's python/ folder without it: the venv's" 1 \
	bash -c "cd '$ck/python' && unset PYTHONPATH && '$OEAPATCH' status --python '$vpy' --json"
has "the current folder is not asked" "\"root\": \"$site\""
expect "verify --python prints the interpreter and the file it chose" 1 \
	bash -c "cd '$ck/python' && '$OEAPATCH' verify --python '$vpy'"
has "the line names the interpreter" "python:   $vpy (Python 3."
has "the line names the target file" "$site/$installed_rel"
# A venv inside a checkout whose sglang has no topk.py (another version, a
# partial install): the checkout around it is not what it imports.
co3=$work/enclosing
mkdir -p "$co3/python/sglang/srt/layers/moe"
cp "$fix/eras/2025-08_topk_config.py" "$co3/python/$installed_rel"
if "$python" -m venv --without-pip "$co3/.venv" >"$work/venv3.log" 2>&1; then
	vpy3=$co3/.venv/bin/python
	site3=$("$vpy3" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
	mkdir -p "$site3/sglang"
	touch "$site3/sglang/__init__.py"
	cp "$co3/python/$installed_rel" "$work/co3-before.py"
	expect "apply --python whose package has no target: an error" 2 \
		"$OEAPATCH" apply --python "$vpy3" --library "$OEA_LIBRARY"
	has "the message says where the interpreter imports from" "not found in $site3, where $vpy3 imports the package from"
	check "the enclosing checkout was not touched" cmp -s "$work/co3-before.py" "$co3/python/$installed_rel"
	check "no binding module in the enclosing checkout" test ! -e "$co3/python/$binding"
	expect "verify --python whose package has no target: an error, not the checkout's verdict" 2 \
		"$OEAPATCH" verify --python "$vpy3"
else
	bad "python3 -m venv failed" "$(cat "$work/venv3.log")"
fi

e2e_summary
