#!/usr/bin/env bash
# Benchmark (not a test): oeapatch against ast-grep, the peer that parses the
# same file the same way (a tree-sitter structural search and rewrite tool with
# a Python grammar), side by side in ONE run, the commands alternating round by
# round (A B C D E A B C D E ...) so that the machine's load falls on all of
# them alike: the ratios, not the absolute times, are what a shared machine
# can report.
#   bench/vs_ast_grep.sh [BUILD_DIR] [ROUNDS]
#
# ast-grep-cli 0.51.1 is installed from PyPI, pinned by its wheel's sha256,
# into a virtual environment of its own under ${OEAPATCH_CACHE:-~/.cache/oeapatch}
# (x86-64 only: the one wheel whose digest is pinned here).
#
# The file: the newest real topk.py in the cache of the release tests
# (~/.cache/oeapatch/sglang-<version>/checkout/..., written by tests/sglang),
# else the largest fixture; the first line printed says which. Timed, per
# round, each one process, start-up included, its CPU time (user + system,
# from the kernel's rusage of the child):
#   sg rewrite     ast-grep scan -U with a rule for the same anchored rewrite
#                  (an if_statement in select_experts that binds
#                  topk_weights, topk_ids, the call site appended) on a fresh
#                  copy of the clean file
#   sg search      ast-grep scan for the binding's call statement on the
#                  applied file
#   apply --check  oeapatch apply --check on the clean checkout
#   verify         oeapatch verify on the applied checkout
#   status         oeapatch status on the applied checkout
# Printed: min and median per command, and the ratios (of the medians and of
# the mins) of apply --check to sg rewrite and of verify and status to sg
# search; issue 27's goal is <= 1.0x for each. oeapatch does more than either
# ast-grep command (the placement proofs, the library contract, bytecode and
# the trust rule), so the goal is to be ahead anyway.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
rounds=${2:-40}
cli="$build/src/oeapatch"
lib=$(ls "$build"/native/liboea.so | head -1)
cache=${OEAPATCH_CACHE:-$HOME/.cache/oeapatch}
target=python/sglang/srt/layers/moe/topk.py
# The settings verify checks are the environment's: none here.
for v in $(env | sed -n 's/^\(SGLANG_OEA_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done

version=0.51.1
wheel_sha256=f924a19765482f2ec8ce5450b053510b8fb609da4b57d19e332ad7b02584587b
venv=$cache/bench-ast-grep-$version
if [ "$(uname -m)" != x86_64 ]; then
  echo "SKIP: ast-grep-cli $version is pinned by its x86-64 wheel's digest; this machine is $(uname -m)"
  exit 0
fi
if [ ! -x "$venv/bin/ast-grep" ]; then
  mkdir -p "$cache"
  rm -rf "$venv.tmp"
  python3 -m venv "$venv.tmp"
  printf 'ast-grep-cli==%s --hash=sha256:%s\n' "$version" "$wheel_sha256" >"$venv.tmp/requirements.txt"
  "$venv.tmp/bin/pip" install -q --no-deps --only-binary=:all: --require-hashes \
    -r "$venv.tmp/requirements.txt"
  rm -rf "$venv" && mv "$venv.tmp" "$venv"
  # the venv's scripts name their interpreter by the path they were made at
  sed -i "1s|$venv.tmp|$venv|" "$venv/bin/ast-grep" "$venv/bin/sg" 2>/dev/null || true
fi
sg=$venv/bin/ast-grep
"$sg" --version >/dev/null

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
newest=$(ls -d "$cache"/sglang-[0-9]*/checkout/"$target" 2>/dev/null | sort -V | tail -1 || true)
if [ -n "$newest" ]; then
  source_file=$newest
  source_what="the real topk.py of $(basename "${newest%/checkout/*}")"
else
  source_file=$root/tests/fixtures/variants/large.py
  source_what="the fixture tests/fixtures/variants/large.py (no release in $cache)"
fi
for d in c a; do
  mkdir -p "$tmp/$d/$(dirname $target)"
  cp "$source_file" "$tmp/$d/$target"
done
cp "$source_file" "$tmp/clean.py"
"$cli" apply -q -C "$tmp/a" --library "$lib"
"$cli" verify -q -C "$tmp/a"

# The rewrite: the chain of select_experts that binds the pair (the same
# anchor as patches/sglang-oea's routing_chain), the call site appended.
cat >"$tmp/rewrite.yml" <<'EOF'
id: oea-callsite
language: python
rule:
  all:
    - pattern: $CHAIN
    - kind: if_statement
    - inside:
        kind: block
        inside:
          kind: function_definition
          has:
            field: name
            regex: ^select_experts$
    - has:
        stopBy: end
        kind: assignment
        regex: ^topk_weights, topk_ids =
fix: |-
  $CHAIN
  if _oeapatch_oea.ENABLED:
      topk_weights, topk_ids = _oeapatch_oea.route(
          router_logits=router_logits, topk_weights=topk_weights, topk_ids=topk_ids,
      )
EOF
# The search: the binding's call statement in the applied file.
cat >"$tmp/search.yml" <<'EOF'
id: oea-binding
language: python
rule:
  kind: if_statement
  regex: '^if _oeapatch_oea\.ENABLED:'
  inside:
    stopBy: end
    kind: function_definition
    has:
      field: name
      regex: ^select_experts$
EOF
cp "$tmp/clean.py" "$tmp/sg.py"
"$sg" scan --rule "$tmp/rewrite.yml" -U "$tmp/sg.py" >/dev/null
grep -q "_oeapatch_oea.route(" "$tmp/sg.py" || { echo "FAIL: the ast-grep rewrite did not land"; exit 1; }
[ "$("$sg" scan --rule "$tmp/search.yml" --json=compact "$tmp/a/$target" | grep -o '"ruleId"' | wc -l)" -eq 1 ] ||
  { echo "FAIL: the ast-grep search does not find the call site once"; exit 1; }

echo "file: $source_what ($(wc -l <"$source_file") lines); ast-grep $version; $rounds rounds"
# CPU time of each command (the child's rusage), the commands alternating.
python3 - "$rounds" "$tmp" "$sg" "$cli" "$lib" "$target" <<'EOF'
import os, shutil, statistics, subprocess, sys

rounds, tmp, sg, cli, lib, target = int(sys.argv[1]), *sys.argv[2:]
null = open(os.devnull, "w")
cmds = {
    "sg rewrite": ([sg, "scan", "--rule", tmp + "/rewrite.yml", "-U", tmp + "/sg.py"],
                   lambda: shutil.copyfile(tmp + "/clean.py", tmp + "/sg.py")),
    "sg search": ([sg, "scan", "--rule", tmp + "/search.yml", tmp + "/a/" + target], None),
    "apply --check": ([cli, "apply", "--check", "-C", tmp + "/c", "--library", lib], None),
    "verify": ([cli, "verify", "-C", tmp + "/a"], None),
    "status": ([cli, "status", "-C", tmp + "/a"], None),
}
times = {name: [] for name in cmds}
for _ in range(rounds):
    for name, (argv, before) in cmds.items():
        if before:
            before()
        p = subprocess.Popen(argv, stdout=null, stderr=null)
        _, status, ru = os.wait4(p.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit("FAIL: %s exited %d" % (name, os.waitstatus_to_exitcode(status)))
        times[name].append((ru.ru_utime + ru.ru_stime) * 1000)
print("%-14s %9s %9s   (CPU ms per process, start-up included)" % ("command", "min", "median"))
for name, t in times.items():
    print("%-14s %9.2f %9.2f" % (name, min(t), statistics.median(t)))
def ratio(a, b):
    return (statistics.median(times[a]) / statistics.median(times[b]),
            min(times[a]) / min(times[b]))
for a, b in (("apply --check", "sg rewrite"), ("verify", "sg search"), ("status", "sg search")):
    med, mn = ratio(a, b)
    print("%-14s %5.2fx %s (median), %5.2fx (min); goal <= 1.0x: %s"
          % (a, med, b, mn, "MET" if med <= 1.0 else "MISSED"))
EOF
