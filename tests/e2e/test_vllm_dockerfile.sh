#!/usr/bin/env bash
# test_vllm_dockerfile.sh - docs/deploy/Dockerfile.vllm's serving stage, as
# written, without Docker: its image (vllm/vllm-openai) cannot be made here
# (tests/e2e/dockerfile_in_chroot.sh builds only debian:bookworm stages), so
# the stage's oeapatch commands and its ENTRYPOINT are read from the file and
# run against a stand-in for the image's system Python: a venv whose
# site-packages holds a vLLM-shaped package (tests/fixtures/vllm-0.15-router.py
# as router/base_router.py, with its package's __init__.py files), first on
# PATH as `python3` as in the image, and a `vllm` on PATH that records how it
# was started instead of serving. What this covers: the commands name the
# image's interpreter (--python python3) and detection picks vllm-oea there;
# the entrypoint gate passes on the patched files and hands over to `vllm
# serve` with the container's arguments; it refuses (exit 1, the server not
# started) once the patch is gone. Not covered: pip and the image itself.
set -u

SRC=${OEAPATCH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
OEAPATCH=${OEAPATCH:-$SRC/build/src/oeapatch}
: "${OEA_LIBRARY:?set OEA_LIBRARY to liboea.so}"
DOCKERFILE=$SRC/docs/deploy/Dockerfile.vllm
unset OEAPATCH_PATCH_DIR
for v in $(env | sed -n 's/^\(VLLM_OEA_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-vllm-docker.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
. "$(dirname "$0")/testlib.sh"

# The final stage: from its FROM vllm/vllm-openai line on.
stage=$(sed -n '/^FROM vllm\/vllm-openai/,$p' "$DOCKERFILE")
[ -n "$stage" ] && ok "the serving stage starts FROM vllm/vllm-openai" || bad "no FROM vllm/vllm-openai in $DOCKERFILE"
# Its RUN, continuation lines joined; the oeapatch commands of it, in order.
run_line=$(awk '/^RUN /{on=1} on{line=$0; cont=sub(/\\[ \t]*$/, "", line); printf "%s ", line; if (!cont) exit}' <<<"$stage")
mapfile -t cmds < <(sed 's/^RUN //; s/&&/\n/g' <<<"$run_line" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//' | grep '^oeapatch ')
[ "${#cmds[@]}" -eq 2 ] && ok "the RUN applies and verifies: ${cmds[*]}" || bad "the RUN's oeapatch commands" "${cmds[*]:-none}"
entry=$(sed -n 's/^ENTRYPOINT //p' <<<"$stage")
envpy=$(sed -n 's/^ENV OEAPATCH_PYTHON=//p' <<<"$stage")

# The image's system Python, stood in for by a venv first on PATH as python3.
"${OEAPATCH_SYSTEM_PYTHON:-/usr/bin/python3}" -m venv --without-pip "$WORK/py" || { bad "venv"; e2e_summary; }
site=$("$WORK/py/bin/python3" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
R=vllm/model_executor/layers/fused_moe/router
mkdir -p "$site/$R"
for d in vllm vllm/model_executor vllm/model_executor/layers vllm/model_executor/layers/fused_moe "$R"; do
	touch "$site/$d/__init__.py"
done
cp "$SRC/tests/fixtures/vllm-0.15-router.py" "$site/$R/base_router.py"
cp "$site/$R/base_router.py" "$WORK/original.py"
mkdir -p "$WORK/bin"
ln -s "$(readlink -f "$OEAPATCH")" "$WORK/bin/oeapatch"
printf '#!/bin/sh\necho "vllm started: $*"\n' >"$WORK/bin/vllm" && chmod 0755 "$WORK/bin/vllm"
cp "$SRC/docs/deploy/oeapatch-entrypoint.sh" "$WORK/bin/oeapatch-entrypoint" && chmod 0755 "$WORK/bin/oeapatch-entrypoint"
IMG_PATH=$WORK/bin:$WORK/py/bin:/usr/bin:/bin

for c in "${cmds[@]}"; do
	expect "image build: $c" 0 env PATH="$IMG_PATH" OEAPATCH_LIBRARY="$OEA_LIBRARY" bash -c "$c"
done
expect "status: the image's vllm, by vllm-oea, detected" 0 env PATH="$IMG_PATH" oeapatch status --python python3 --json
"${OEAPATCH_SYSTEM_PYTHON:-/usr/bin/python3}" -c "
import json, sys
d = json.loads(sys.argv[1])
assert d['definition']['name'] == 'vllm-oea' and d['definition']['detected'], d['definition']
assert d['file'].endswith('router/base_router.py'), d['file']
" "$out" && ok "... vllm-oea on router/base_router.py" || bad "the image's definition" "$out"

# The ENTRYPOINT, as the container starts it, with the model as the command.
mapfile -t argv < <("${OEAPATCH_SYSTEM_PYTHON:-/usr/bin/python3}" -c 'import json, sys; print("\n".join(json.loads(sys.argv[1])))' "$entry")
[ "${argv[0]:-}" = /usr/local/bin/oeapatch-entrypoint ] && [ "${argv[*]:1}" = "vllm serve" ] &&
	ok "ENTRYPOINT: the gate, then vllm serve" || bad "ENTRYPOINT" "$entry"
start() { env -i PATH="$IMG_PATH" HOME="$WORK" OEAPATCH_PYTHON="$envpy" "$@" "$WORK/bin/oeapatch-entrypoint" \
	"${argv[@]:1}" /models/m --port 8000; }
expect "the container starts on the patched image" 0 start
has "... the gate hands over to vllm serve with the container's arguments" "vllm started: serve /models/m --port 8000"
expect "... with VLLM_OEA_K0=4" 0 start env VLLM_OEA_K0=4
expect "... a typo of a setting stops it" 1 start env VLLM_OEA_KO=4
has "... the server never started" "not starting"
cp "$WORK/original.py" "$site/$R/base_router.py" # a derived image's pip install -U vllm
expect "the patch gone: the container exits" 1 start
grep -qF "vllm started" <<<"$out" && bad "the server started without the patch" "$out" || ok "... before vllm serve"
expect "OEAPATCH_REAPPLY=1 repairs it" 0 start env OEAPATCH_REAPPLY=1 OEAPATCH_LIBRARY="$OEA_LIBRARY"
has "... and starts" "vllm started: serve /models/m"

e2e_summary
