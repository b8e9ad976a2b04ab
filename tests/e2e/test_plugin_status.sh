#!/usr/bin/env bash
# test_plugin_status.sh - `oeapatch status` says whether the framework will
# load oeapatch's plugin (issue 26): the wheel's entry point `oeapatch` in
# group sglang.srt.plugins (SGLang 0.5.11 on: sglang/srt/plugins/__init__.py
# with load_plugins; SGLANG_PLUGINS restricts, names stripped, empty = all)
# or vllm.general_plugins (VLLM_PLUGINS: unset = all, split at commas as
# given).
#
# A real venv, the fixture sglang (tests/fixtures/pkg) with and without its
# plugins package, and a distribution that is only its metadata: a
# dist-info with METADATA and an entry_points.txt registering `oeapatch`
# (importlib.metadata reads no more). Asked through the venv's interpreter
# (--python) and by reading the site-packages folder (-C); the restriction
# from the environment and from --env-file; the --json "plugin" object; and
# status's exit code, which the plugin line never changes.
set -uo pipefail

SRC=${OEAPATCH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
OEAPATCH=${OEAPATCH:-$SRC/build/src/oeapatch}
PY=${OEAPATCH_SYSTEM_PYTHON:-/usr/bin/python3}
FIX=$SRC/tests/fixtures
I=sglang/srt/layers/moe/topk.py
WORK=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-plugin.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
. "$(dirname "$0")/testlib.sh"
unset SGLANG_PLUGINS VLLM_PLUGINS OEAPATCH_PATCH_DIR

# venv DIR: a venv without pip (nothing here installs with it); prints its site-packages.
venv() {
	"$PY" -m venv --without-pip "$1" >"$WORK/venv.log" 2>&1 || return 1
	"$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'
}

# fake_dist SITE NAME VERSION GROUP: a distribution that registers `oeapatch` in GROUP.
fake_dist() {
	local d=$1/$2-$3.dist-info
	mkdir -p "$d"
	printf 'Metadata-Version: 2.1\nName: %s\nVersion: %s\n\n' "$2" "$3" >"$d/METADATA"
	printf '[console_scripts]\noeapatch = oeapatch:main\n\n[%s]\noeapatch = oeapatch.plugin:x\n' "$4" >"$d/entry_points.txt"
	printf 'oeapatch/__init__.py,,\n' >"$d/RECORD"
}

# js FIELD: the "plugin" object's FIELD in $out (a --json document), as JSON.
js() { "$PY" -c 'import json, sys; print(json.dumps(json.loads(sys.stdin.read())["plugin"][sys.argv[1]]))' "$1" <<<"$out"; }
# jhas DESC FIELD WANT: the JSON field is WANT.
jhas() {
	local got
	got=$(js "$2" 2>&1)
	if [ "$got" = "$3" ]; then ok "$1"; else bad "$1: plugin.$2 is $got, wanted $3" "$out"; fi
}

echo "== SGLang: a venv with the fixture sglang"
SITE=$(venv "$WORK/sg") || { bad "python3 -m venv (Debian: python3-venv)" "$(cat "$WORK/venv.log")"; e2e_summary; exit 1; }
VPY=$WORK/sg/bin/python
cp -a "$FIX/pkg/python/sglang" "$SITE/"
cp "$FIX/eras/2026-02_post_process.py" "$SITE/$I"
st() { env -u SGLANG_PLUGINS "$OEAPATCH" --python "$VPY" status "$@"; }

expect "no plugins package (before 0.5.11): status, not applied" 1 st
has "this release has no plugin system" "plugin:   this SGLang release has no plugin system (before 0.5.11): the binding's import checks only"
expect "--json" 1 st --json
jhas "supported: false" supported false
jhas "enabled: false" enabled false

mkdir -p "$SITE/sglang/srt/plugins"
printf 'def load_plugins():\n    pass\n' >"$SITE/sglang/srt/plugins/__init__.py"
expect "with load_plugins, nothing registered: status" 1 st
has "not installed" "plugin:   not installed in this environment (pip install oeapatch into it for the per-process check)"
expect "--json" 1 st --json
jhas "supported: true" supported true
jhas "installed: false" installed false
fake_dist "$SITE" other 1.0 vllm.general_plugins
expect "a distribution registering oeapatch in vLLM's group only" 1 st
has "is not SGLang's plugin" "plugin:   not installed in this environment"

fake_dist "$SITE" oeapatch 0.1.0 sglang.srt.plugins
expect "registered: status" 1 st
has "installed, enabled" "plugin:   oeapatch 0.1.0 installed, enabled"
expect "--json" 1 st --json
jhas "installed: true" installed true
jhas "enabled: true" enabled true
jhas "version" version '"0.1.0"'
jhas "excluded_by: null" excluded_by null
expect "-C on the site-packages folder (its dist-info read)" 1 env -u SGLANG_PLUGINS "$OEAPATCH" -C "$SITE" status
has "installed, enabled" "plugin:   oeapatch 0.1.0 installed, enabled"

expect "SGLANG_PLUGINS=foo,bar" 1 env SGLANG_PLUGINS=foo,bar "$OEAPATCH" --python "$VPY" status
has "excluded, naming the variable" "plugin:   oeapatch 0.1.0 installed but excluded by SGLANG_PLUGINS=foo,bar"
expect "SGLANG_PLUGINS=foo,bar --json" 1 env SGLANG_PLUGINS=foo,bar "$OEAPATCH" --python "$VPY" status --json
jhas "enabled: false" enabled false
jhas "excluded_by" excluded_by '"SGLANG_PLUGINS=foo,bar"'
expect "-C: SGLANG_PLUGINS=foo" 1 env SGLANG_PLUGINS=foo "$OEAPATCH" -C "$SITE" status
has "excluded" "installed but excluded by SGLANG_PLUGINS=foo"
expect "SGLANG_PLUGINS=' foo , oeapatch ' (names are stripped)" 1 env SGLANG_PLUGINS=" foo , oeapatch " "$OEAPATCH" --python "$VPY" status
has "enabled" "plugin:   oeapatch 0.1.0 installed, enabled"
expect "SGLANG_PLUGINS= (empty: all)" 1 env SGLANG_PLUGINS= "$OEAPATCH" --python "$VPY" status
has "enabled" "plugin:   oeapatch 0.1.0 installed, enabled"
expect "SGLANG_PLUGINS=' , ' (no name: none)" 1 env SGLANG_PLUGINS=" , " "$OEAPATCH" --python "$VPY" status
has "excluded" "installed but excluded by SGLANG_PLUGINS= , "

printf '# the unit environment\nSGLANG_OEA_K0=0\nSGLANG_PLUGINS=foo,bar\n' >"$WORK/server.env"
expect "--env-file with SGLANG_PLUGINS=foo,bar" 1 st --env-file "$WORK/server.env"
has "excluded, naming the file and line" "installed but excluded by SGLANG_PLUGINS=foo,bar ($WORK/server.env:3)"
expect "--env-file --json" 1 st --env-file "$WORK/server.env" --json
jhas "excluded_by_origin" excluded_by_origin "\"$WORK/server.env:3\""
printf 'SGLANG_OEA_K0=0\n' >"$WORK/plain.env"
expect "--env-file without it, SGLANG_PLUGINS=foo in ours (the file is the server's environment)" 1 \
	env SGLANG_PLUGINS=foo "$OEAPATCH" --python "$VPY" status --env-file "$WORK/plain.env"
has "enabled" "plugin:   oeapatch 0.1.0 installed, enabled"

echo "== status's exit code is the patch's, whatever the plugin line says"
expect "apply" 0 "$OEAPATCH" --python "$VPY" apply
expect "status: applied, plugin enabled" 0 st
expect "status: applied, plugin excluded" 0 env SGLANG_PLUGINS=foo "$OEAPATCH" --python "$VPY" status
has "the line says so" "excluded by SGLANG_PLUGINS=foo"
rm -rf "$SITE/oeapatch-0.1.0.dist-info"
expect "status: applied, plugin not installed" 0 st
has "the line says so" "plugin:   not installed"
expect "status --json: applied, plugin not installed" 0 st --json
jhas "installed: false" installed false
expect "revert" 0 "$OEAPATCH" --python "$VPY" revert

echo "== vLLM: a venv with a vllm package"
VS=$(venv "$WORK/vl") || { bad "python3 -m venv" "$(cat "$WORK/venv.log")"; e2e_summary; exit 1; }
VV=$WORK/vl/bin/python
R=vllm/model_executor/layers/fused_moe/router/base_router.py
mkdir -p "$VS/$(dirname "$R")"
for d in vllm vllm/model_executor vllm/model_executor/layers vllm/model_executor/layers/fused_moe \
	vllm/model_executor/layers/fused_moe/router; do touch "$VS/$d/__init__.py"; done
cp "$FIX/vllm-0.15-router.py" "$VS/$R"
vst() { env -u VLLM_PLUGINS "$OEAPATCH" --python "$VV" --patch vllm-oea status "$@"; }
expect "no vllm/plugins: status" 1 vst
has "no plugin system" "plugin:   this vLLM release has no plugin system: the binding's import checks only"
mkdir -p "$VS/vllm/plugins"
printf 'def load_general_plugins():\n    pass\n' >"$VS/vllm/plugins/__init__.py"
expect "with load_general_plugins, nothing registered" 1 vst
has "not installed" "plugin:   not installed in this environment"
fake_dist "$VS" oeapatch 0.1.0 sglang.srt.plugins
expect "registered in SGLang's group only" 1 vst
has "not installed" "plugin:   not installed in this environment"
rm -rf "$VS/oeapatch-0.1.0.dist-info"
fake_dist "$VS" oeapatch 0.1.0 vllm.general_plugins
expect "registered: VLLM_PLUGINS unset" 1 vst
has "enabled" "plugin:   oeapatch 0.1.0 installed, enabled"
expect "--json" 1 vst --json
jhas "group" group '"vllm.general_plugins"'
jhas "enabled: true" enabled true
expect "VLLM_PLUGINS=oeapatch" 1 env VLLM_PLUGINS=oeapatch "$OEAPATCH" --python "$VV" --patch vllm-oea status
has "enabled" "plugin:   oeapatch 0.1.0 installed, enabled"
expect "VLLM_PLUGINS=foo,bar" 1 env VLLM_PLUGINS=foo,bar "$OEAPATCH" --python "$VV" --patch vllm-oea status
has "excluded" "installed but excluded by VLLM_PLUGINS=foo,bar"
expect "VLLM_PLUGINS= (set and empty: none loads)" 1 env VLLM_PLUGINS= "$OEAPATCH" --python "$VV" --patch vllm-oea status
has "excluded" "installed but excluded by VLLM_PLUGINS="
expect "VLLM_PLUGINS='foo, oeapatch' (vLLM strips nothing)" 1 env VLLM_PLUGINS="foo, oeapatch" "$OEAPATCH" --python "$VV" --patch vllm-oea status
has "excluded" "installed but excluded by VLLM_PLUGINS=foo, oeapatch"
printf 'VLLM_PLUGINS=foo\n' >"$WORK/vllm.env"
expect "--env-file with VLLM_PLUGINS=foo" 1 vst --env-file "$WORK/vllm.env"
has "excluded, naming the file" "installed but excluded by VLLM_PLUGINS=foo ($WORK/vllm.env:1)"
expect "-C on the site-packages folder" 1 env -u VLLM_PLUGINS "$OEAPATCH" -C "$VS" --patch vllm-oea status
has "enabled" "plugin:   oeapatch 0.1.0 installed, enabled"

echo "== a checkout names no environment"
C=$WORK/checkout
mkdir -p "$C" && cp -a "$FIX/pkg/python" "$C/" && cp "$FIX/eras/2026-02_post_process.py" "$C/python/$I"
mkdir -p "$C/python/sglang/srt/plugins" && cp "$SITE/sglang/srt/plugins/__init__.py" "$C/python/sglang/srt/plugins/"
expect "status -C checkout" 1 "$OEAPATCH" -C "$C" status
has "unknown, and what says it" "plugin:   unknown: a checkout names no Python environment: --python PATH says"
expect "--json" 1 "$OEAPATCH" -C "$C" status --json
jhas "installed: null" installed null

e2e_summary
