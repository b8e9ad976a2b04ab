#!/usr/bin/env bash
# Bad and odd input, end to end through the `oeapatch` binary on files in
# temporary checkouts (issue "Hardening: ... bad input").
#
#  1. Input that cannot be patched safely is refused by `oeapatch apply` with
#     the exit code of README's table (1: a difference such as an edited
#     region or a lost anchor; 2: bad input or trouble), a message naming the
#     problem, and every byte, the mode and the mtime of the target unchanged
#     (sha256 and stat before/after), with no temporary, lock or binding file
#     left behind.
#  2. Odd but valid input (every era, and the BOM, CRLF, tab, comment,
#     decorated and large variants) lands: apply writes exactly the golden
#     output, verify and status hold, a second apply is a no-op, revert gives
#     the file back byte for byte (cmp) and removes the binding module.
#  3. A file patched by an older version of the definition is upgraded in place.
#  4. The size limit (OEAP_PYSOURCE_MAX_BYTES): a file one byte over it is refused
#     by apply, verify, status and revert (exit 2, the file, its size and the
#     limit named, nothing changed) and failed by check; one a little under
#     it lands, verifies and reverts byte-identically (time and peak RSS printed;
#     an eighth of the limit under the sanitizers).
#  4b. Pathological shapes: 100000 nested parentheses (valid, and around a
#     syntax error; 20000 under the sanitizers) and tens of thousands of
#     statements before the anchor land or are refused without a crash (the
#     times are printed, not asserted: the nesting's grow faster than linearly).
#  5. valgrind --error-exitcode=3 --leak-check=full on apply, verify, status
#     and revert of one fixture.
#
# `test_bad_input.sh PART` runs one part that needs what a machine may lack:
# "as-nobody" (the read-only cases as an unprivileged user: root, setpriv) and
# "valgrind" (a build valgrind can run). Each is a ctest entry of its own and
# is reported as skipped (exit 77) where it cannot run; no argument runs the rest.
#
# Environment (set by ctest): OEAPATCH (the CLI), OEA_LIBRARY (liboea),
# OEAPATCH_SOURCE_DIR (the repository). Prints what it checks; ends with
# "N passed, M failed".
set -uo pipefail
part=${1:-main}
case $part in
main | as-nobody | valgrind) ;;
*) echo "usage: $0 [as-nobody | valgrind]" >&2; exit 2 ;;
esac

: "${OEAPATCH:?set OEAPATCH to the oeapatch binary}"
: "${OEA_LIBRARY:?set OEA_LIBRARY to liboea.so}"
: "${OEAPATCH_SOURCE_DIR:?set OEAPATCH_SOURCE_DIR to the repository root}"
src=$OEAPATCH_SOURCE_DIR
fix=$src/tests/fixtures
golden=$src/tests/golden
target_rel=python/sglang/srt/layers/moe/topk.py
binding_name=_oeapatch_sglang_oea.py
sanitized=0
if grep -qa '__asan_init' "$OEAPATCH"; then
  # An AddressSanitizer build is several times slower: smaller shapes and
  # shallower nesting in 4b, a smaller round trip in 4 (b).
  sanitized=1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-bad-input.XXXXXX")
chmod 755 "$work" # the unprivileged runs below must reach it
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

. "$(dirname "$0")/testlib.sh"

# new_checkout FIXTURE_FILE: a fresh checkout holding FIXTURE as topk.py; prints its root.
# (It runs in $(...), a subshell: mktemp, not a counter, keeps the roots apart.)
new_checkout() {
  local root
  root=$(mktemp -d "$work/co.XXXXXX")
  chmod 755 "$root"
  mkdir -p "$root/$(dirname "$target_rel")"
  [ -n "${1:-}" ] && cp "$1" "$root/$target_rel"
  echo "$root"
}

# state PATH: content hash, mode, size and mtime (ns) of a file, or "absent".
state() {
  if [ -e "$1" ] || [ -L "$1" ]; then
    if [ -f "$1" ]; then
      printf '%s %s\n' "$(sha256sum <"$1" | cut -d' ' -f1)" "$(stat -c '%a %s %y' "$1")"
    else
      stat -c '%F %a %y' "$1"
    fi
  else
    echo absent
  fi
}

listing() { ls -A "$1" 2>/dev/null | sort | tr '\n' ' '; }

# refuse NAME ROOT CODE REGEX [RUNNER...]: `oeapatch apply` must exit CODE with a message
# matching REGEX, and leave the target and its directory exactly as they were.
refuse() {
  local name=$1 root=$2 code=$3 regex=$4; shift 4
  local t=$root/$target_rel dir
  dir=$(dirname "$t")
  local before_t before_l
  before_t=$(state "$t")
  before_l=$(listing "$dir")
  local errf
  errf=$(mktemp "$work/stderr.XXXXXX")
  "$@" "$OEAPATCH" apply -C "$root" --library "$OEA_LIBRARY" >/dev/null 2>"$errf"
  local rc=$?
  local msg
  msg=$(head -c 600 "$errf")
  if [ "$rc" -ne "$code" ]; then
    bad "refuse $name: exit $code" "got exit $rc: $msg"
  else
    ok "refuse $name: exit $code"
  fi
  if grep -Eqi -- "$regex" "$errf"; then
    ok "refuse $name: message names the problem: $(head -n 1 "$errf" | cut -c1-150)"
  else
    bad "refuse $name: message names the problem (/$regex/)" "got: $msg"
  fi
  if [ "$(state "$t")" = "$before_t" ]; then
    ok "refuse $name: target bytes, mode and mtime unchanged"
  else
    bad "refuse $name: target bytes, mode and mtime unchanged" "before: $before_t; after: $(state "$t")"
  fi
  local after_l
  after_l=$(listing "$dir")
  if [ "$after_l" = "$before_l" ]; then
    ok "refuse $name: no temporary, lock or binding file left"
  else
    bad "refuse $name: no temporary, lock or binding file left" "before: $before_l; after: $after_l"
  fi
}

# The parts that need something this machine may not have run as ctest
# entries of their own (tests/CMakeLists.txt, E2E_PARTS), so that one that
# cannot run is reported as skipped, not passed, and hides nothing else.
if [ "$part" = as-nobody ]; then
  echo "== the read-only cases as an unprivileged user (root passes access(), nobody does not)"
  why=
  if [ "$(id -u)" -ne 0 ]; then
    why="not running as root, so there is no switching to nobody (the main part ran them as $(id -un))"
  elif ! command -v setpriv >/dev/null; then
    why="setpriv (util-linux) is not installed"
  else
    as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
    # nobody must be able to run the binary and read the definition and the
    # library: a copy in $work, since the build may be where nobody cannot
    # enter (a clone in root's 0700 home); probe with a harmless --check.
    e2e_reachable "$work"
    OEAPATCH=$E2E_OEAPATCH OEA_LIBRARY=$E2E_LIBRARY
    probe=$(new_checkout "$fix/eras/2025-08_topk_config.py")
    chown -R 65534:65534 "$probe"
    "${as_nobody[@]}" "$OEAPATCH" apply --check -C "$probe" --library "$OEA_LIBRARY" >/dev/null 2>&1 ||
      why="nobody cannot run $OEAPATCH here (a temporary folder nobody cannot enter?)"
  fi
  if [ -n "$why" ]; then
    skip "read-only file (as nobody)" "$why"
    skip "read-only directory (as nobody)" "$why"
  else
    root=$(new_checkout "$fix/eras/2025-08_topk_config.py")
    chown -R 65534:65534 "$root"
    chmod 444 "$root/$target_rel"
    refuse "read-only file (as nobody)" "$root" 2 'read-only|not writable|permission' "${as_nobody[@]}"
    root=$(new_checkout "$fix/eras/2025-08_topk_config.py")
    chown -R 65534:65534 "$root"
    chmod 555 "$root/$(dirname "$target_rel")"
    refuse "read-only directory (as nobody)" "$root" 2 'read-only|not writable|permission' "${as_nobody[@]}"
  fi
  e2e_summary
  exit
fi

if [ "$part" = valgrind ]; then
  echo "== valgrind"
  if [ $sanitized -eq 1 ]; then
    skip "valgrind" "this oeapatch is built with AddressSanitizer, which valgrind cannot run (the plain build's run does it)"
  elif ! command -v valgrind >/dev/null; then
    bad "valgrind installed" "valgrind not found: scripts/setup-deps.sh installs it (apt-get install valgrind)"
  else
    root=$(new_checkout "$fix/eras/2025-12_layer_id_capturer.py")
    for cmd in apply verify status revert; do
      args=(-C "$root")
      [ $cmd = apply ] && args+=(--library "$OEA_LIBRARY")
      vlog=$work/valgrind.$cmd
      valgrind --error-exitcode=3 --leak-check=full --errors-for-leak-kinds=definite,indirect \
        --log-file="$vlog" "$OEAPATCH" $cmd "${args[@]}" >/dev/null 2>&1
      rc=$?
      summary=$(grep -m1 'ERROR SUMMARY' "$vlog" | sed 's/^==[0-9]*== //')
      leaks=$(grep -m1 -E 'definitely lost|All heap blocks were freed' "$vlog" | sed 's/^==[0-9]*== *//')
      if [ $rc -eq 0 ]; then
        ok "valgrind $cmd: exit 0, ${summary:-?}${leaks:+; $leaks}"
      else
        bad "valgrind $cmd: exit $rc" "$(grep -E 'Invalid|uninitialised|lost' "$vlog" | head -n 5 | tr '\n' ' ')"
      fi
    done
    check "valgrind: round trip left the fixture byte-identical" \
      cmp -s "$root/$target_rel" "$fix/eras/2025-12_layer_id_capturer.py"
  fi
  e2e_summary
  exit
fi

echo "== 1. refused, nothing changed (oeapatch apply)"
root=$(new_checkout "$fix/refuse/invalid_utf8.py")
refuse "invalid UTF-8" "$root" 2 'invalid UTF-8'
root=$(new_checkout "$fix/refuse/mixed_eol.py")
refuse "mixed line endings" "$root" 2 'mixed line endings'
root=$(new_checkout "$fix/eras/2025-08_topk_config.py")
printf 'x = 1\r# a bare CR above\n' >>"$root/$target_rel"
refuse "bare CR line ending" "$root" 2 'line end|CR'
root=$(new_checkout "$fix/refuse/syntax_error.py")
refuse "syntax error" "$root" 2 'syntax error'
root=$(new_checkout "$fix/refuse/empty.py")
refuse "empty file" "$root" 2 'empty'
root=$(new_checkout "$fix/eras/2025-08_topk_config.py")
printf 'x = "a\0b"\n' >>"$root/$target_rel"
refuse "NUL byte" "$root" 2 'NUL'
root=$(new_checkout "$fix/refuse/two_select_experts.py")
refuse "two select_experts (ambiguous anchor)" "$root" 1 'select_experts.*(ambiguous|2 |twice|more than one)|(ambiguous|twice).*select_experts'
root=$(new_checkout "$fix/refuse/no_routing_chain.py")
refuse "no routing chain (anchor not found)" "$root" 1 'routing_chain|if/elif/else chain'

# A symlink out of the checkout: the file it points to must stay untouched too.
root=$(new_checkout)
outside=$work/outside-topk.py
cp "$fix/eras/2025-08_topk_config.py" "$outside"
ln -s "$outside" "$root/$target_rel"
before_out=$(state "$outside")
refuse "target is a symlink out of the checkout" "$root" 2 'outside the checkout'
check "refuse symlink out: the file outside is unchanged" test "$(state "$outside")" = "$before_out"
root=$(new_checkout)
mkdir -p "$work/outside-moe"
cp "$fix/eras/2025-08_topk_config.py" "$work/outside-moe/topk.py"
rmdir "$root/$(dirname "$target_rel")"
ln -s "$work/outside-moe" "$root/$(dirname "$target_rel")"
before_out=$(state "$work/outside-moe/topk.py")
refuse "target directory is a symlink out of the checkout" "$root" 2 'outside the checkout'
check "refuse directory symlink out: the file outside is unchanged" \
  test "$(state "$work/outside-moe/topk.py")" = "$before_out"
check "refuse directory symlink out: nothing written outside" \
  test "$(listing "$work/outside-moe")" = "topk.py "

root=$(new_checkout)
mkdir "$root/$target_rel"
refuse "target path is a directory" "$root" 2 'directory'

root=$(new_checkout "$fix/eras/2025-08_topk_config.py")
chmod 444 "$root/$target_rel"
refuse "read-only file (mode 444, as $(id -un))" "$root" 2 'read-only|not writable|permission'
root=$(new_checkout "$fix/eras/2025-08_topk_config.py")
chmod 555 "$root/$(dirname "$target_rel")"
refuse "read-only directory (mode 555, as $(id -un))" "$root" 2 'read-only|not writable|permission'
# (the same two as an unprivileged user: the as-nobody part)

# Region damage, made from the golden output of an era.
patched=$golden/era-2025-08.expected.py
root=$(new_checkout "$patched")
sed -i -E '0,/(# >>> oeapatch sglang-oea\/2 callsite sha256:)[0-9a-f]{16}/s//\10123456789abcdef/' "$root/$target_rel"
refuse "region marker with a wrong hash" "$root" 1 'edited by hand|sha256'
root=$(new_checkout "$patched")
sed -i -E '/# >>> oeapatch sglang-oea\/2 callsite/{n;s/$/  # tweak/}' "$root/$target_rel"
refuse "region body edited by hand" "$root" 1 'edited by hand'
root=$(new_checkout "$patched")
awk '/# >>> oeapatch sglang-oea\/2 import/ {r=1} r {buf = buf $0 "\n"} {print}
     /# <<< oeapatch sglang-oea\/2 import/ {r=0; printf "%s", buf}' "$patched" >"$root/$target_rel"
refuse "duplicated region markers" "$root" 1 'twice|duplicate'
root=$(new_checkout "$patched")
awk '/# >>> oeapatch sglang-oea\/2 import/ {print; print "# >>> oeapatch sglang-oea/2 callsite sha256:0123456789abcdef >>>"; next} {print}' \
  "$patched" >"$root/$target_rel"
refuse "nested region markers" "$root" 1 'nested'
root=$(new_checkout "$patched")
sed -i '/# <<< oeapatch sglang-oea\/2 callsite <<</d' "$root/$target_rel"
refuse "unterminated region" "$root" 1 'never closed|not closed'
root=$(new_checkout "$patched")
sed -i -E 's/(# >>> oeapatch sglang-oea\/2 import) sha256:/\1 sha:/' "$root/$target_rel"
refuse "malformed marker" "$root" 1 'malformed'
# A binding module of the same name that we did not write is not ours to overwrite.
root=$(new_checkout "$fix/eras/2025-08_topk_config.py")
echo 'print("somebody else")' >"$(dirname "$root/$target_rel")/$binding_name"
refuse "foreign module where the binding goes" "$root" 2 'not written by oeapatch'
# A library path that does not exist, deep in the tree: the message names it whole
# (oeap_error's `where` held 96 bytes once, and this message named no path).
root=$(new_checkout "$fix/eras/2025-08_topk_config.py")
deep=$work/$(printf 'a-rather-long-folder-name-for-paths-%s/' 1 2 3 4 5 6)liboea.so.3
before_t=$(state "$root/$target_rel")
"$OEAPATCH" apply -C "$root" --library "$deep" >/dev/null 2>"$work/deep.err"
rc=$?
if [ "$rc" -eq 2 ] && grep -qF -- "$deep: no such file" "$work/deep.err" &&
  [ "$(state "$root/$target_rel")" = "$before_t" ]; then
  ok "a missing --library of ${#deep} bytes: exit 2, named whole, nothing changed"
else
  bad "a missing --library of ${#deep} bytes: exit 2, named whole, nothing changed" \
    "exit $rc: $(head -c 600 "$work/deep.err")"
fi

echo "== 2. odd but valid input lands and round-trips byte-identically"
roundtrip() { # roundtrip NAME FIXTURE [GOLDEN]
  local name=$1 fixture=$2 want=${3:-}
  local root t b
  root=$(new_checkout "$fixture")
  t=$root/$target_rel
  b=$(dirname "$t")/$binding_name
  local out
  out=$(mktemp "$work/out.XXXXXX")
  local problems=()
  "$OEAPATCH" apply -C "$root" --library "$OEA_LIBRARY" >"$out" 2>&1 || problems+=("apply exit $?: $(head -c 300 "$out")")
  [ -z "$want" ] || cmp -s "$t" "$want" || problems+=("apply's result differs from $(basename "$want")")
  [ -f "$b" ] || problems+=("no binding module")
  "$OEAPATCH" verify -C "$root" >"$out" 2>&1 || problems+=("verify exit $?: $(grep -m1 -E '^FAIL|oeapatch:' "$out")")
  "$OEAPATCH" status -C "$root" >"$out" 2>&1 || problems+=("status exit $?")
  local once
  once=$(state "$t")
  "$OEAPATCH" apply -C "$root" --library "$OEA_LIBRARY" >"$out" 2>&1 || problems+=("second apply exit $?")
  grep -q 'already applied' "$out" || problems+=("second apply did not say 'already applied'")
  [ "$(state "$t")" = "$once" ] || problems+=("second apply changed the file")
  "$OEAPATCH" revert -C "$root" >"$out" 2>&1 || problems+=("revert exit $?: $(head -c 300 "$out")")
  cmp -s "$t" "$fixture" || problems+=("revert is not byte-identical to the input")
  [ ! -e "$b" ] || problems+=("revert left the binding module")
  local left
  left=$(ls -A "$(dirname "$t")" | grep -vxF "$(basename "$t")" | tr '\n' ' ')
  [ -z "$left" ] || problems+=("files left: $left")
  if [ ${#problems[@]} -eq 0 ]; then
    ok "round trip $name: apply = golden, verify, status, apply again (no-op), revert = input"
  else
    bad "round trip $name" "$(printf '%s; ' "${problems[@]}")"
  fi
}
while read -r name fixture def target; do
  case $name in ''|'#'*) continue ;; esac
  if [ -n "$def" ]; then # another definition's case (vLLM's eras): its target path and binding module
    saved_target=$target_rel saved_binding=$binding_name
    target_rel=$target binding_name=_oeapatch_${def//-/_}.py
    roundtrip "$name" "$fix/$fixture" "$golden/$name.expected.py"
    target_rel=$saved_target binding_name=$saved_binding
  else
    roundtrip "$name" "$fix/$fixture" "$golden/$name.expected.py"
  fi
done <"$golden/cases.txt"

# What we write follows the file's own line ends and indentation.
root=$(new_checkout "$fix/variants/crlf.py")
"$OEAPATCH" apply -C "$root" --library "$OEA_LIBRARY" >/dev/null 2>&1
check "CRLF file: every line of the result ends in CRLF" \
  test "$(grep -c $'[^\r]$' "$root/$target_rel")" = 0
root=$(new_checkout "$fix/variants/tabs.py")
"$OEAPATCH" apply -C "$root" --library "$OEA_LIBRARY" >/dev/null 2>&1
check "tab file: the inserted call site is indented with tabs only" \
  test "$(sed -n '/# >>> oeapatch sglang-oea\/2 callsite/,/# <<< oeapatch sglang-oea\/2 callsite/p' "$root/$target_rel" |
          grep -c '^ ')" = 0
root=$(new_checkout "$fix/variants/bom.py")
"$OEAPATCH" apply -C "$root" --library "$OEA_LIBRARY" >/dev/null 2>&1
check "BOM file: the BOM is kept, once, at the start" \
  test "$(head -c 3 "$root/$target_rel" | od -An -tx1 | tr -d ' ')" = efbbbf -a \
       "$(grep -c $'\xef\xbb\xbf' "$root/$target_rel")" = 1

echo "== 3. a file patched by an older version of the definition"
newdef=$work/sglang-oea-v3
cp -r "$src/patches/sglang-oea" "$newdef"
cp -r "$src/patches/binding-core" "$work/"  # the shared core its [binding] source names
sed -i -E 's/^version *= *2$/version = 3/' "$newdef/patch.ini"
root=$(new_checkout "$patched")
orig=$fix/eras/2025-08_topk_config.py
out=$work/older.out
if "$OEAPATCH" apply -C "$root" --patch "$newdef" --library "$OEA_LIBRARY" >"$out" 2>&1; then
  ok "older version: apply with version 3 succeeds ($(head -n 1 "$out" | cut -c1-100))"
  check "older version: upgraded in place (markers now sglang-oea/3, none of /2)" \
    test "$(grep -c 'oeapatch sglang-oea/3' "$root/$target_rel")" = 4 -a \
         "$(grep -c 'oeapatch sglang-oea/2' "$root/$target_rel")" = 0
  check "older version: verify with version 3 holds" \
    "$OEAPATCH" verify -C "$root" --patch "$newdef" >/dev/null 2>&1
  "$OEAPATCH" revert -C "$root" --patch "$newdef" >/dev/null 2>&1
  check "older version: revert gives the unpatched file back" cmp -s "$root/$target_rel" "$orig"
else
  grep -Eqi 'upgrade|older|version' "$out" && ok "older version: refused with a hint: $(head -n 1 "$out")" ||
    bad "older version: upgraded in place or refused with a hint" "$(cat "$out")"
fi
root=$(new_checkout "$patched")
sed -i -E '/# >>> oeapatch sglang-oea\/2 callsite/{n;s/$/  # tweak/}' "$root/$target_rel"
refuse "older version with an edited region (upgrade)" "$root" 1 'edited by hand.*(revert|restore)'

# The limit is src/pysource.h's OEAP_PYSOURCE_MAX_BYTES, read from the source so
# the test follows the constant.
limit=$(/usr/bin/python3 - "$src/src/pysource.h" <<'EOF'
import re, sys
m = re.search(r"#define OEAP_PYSOURCE_MAX_BYTES \(\(size_t\)(\d+) << (\d+)\)", open(sys.argv[1]).read())
print(int(m.group(1)) << int(m.group(2)) if m else "")
EOF
)
[ -n "$limit" ] || { bad "size limit: OEAP_PYSOURCE_MAX_BYTES found in src/pysource.h"; limit=0; }
echo "== 4. the size limit ($limit bytes): one byte over is refused, a little under lands"
# sized ROOT BYTES: the 2025-08 era plus generated functions, padded with a
# comment to exactly BYTES bytes, as topk.py of a fresh checkout.
sized() {
  /usr/bin/python3 - "$fix/eras/2025-08_topk_config.py" "$1/$target_rel" "$2" <<'EOF'
import sys
base, path, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(base, "rb").read()
parts, size, i = [text], len(text), 0
while True:
    f = (f"\n\ndef _routing_helper_{i}(router_logits, top_k={i % 8 + 1}, renormalize=True):\n"
         f"    \"\"\"Helper {i}: scores of the first top_k experts.\"\"\"\n"
         f"    scores = router_logits.softmax(dim=-1)  # shape [tokens, experts]\n"
         f"    weights, ids = scores.topk(top_k, dim=-1)\n"
         f"    if renormalize:\n"
         f"        weights = weights / weights.sum(dim=-1, keepdim=True)\n"
         f"    return weights, ids + {i % 64}\n").encode()
    if size + len(f) + 3 > want:
        break
    parts.append(f)
    size += len(f)
    i += 1
pad = want - size  # a comment line "#...#\n" of exactly that many bytes (>= 2)
parts.append(b"#" * (pad - 1) + b"\n")
out = b"".join(parts)
assert len(out) == want, (len(out), want)
open(path, "wb").write(out)
EOF
}
# (a) one byte over: every command refuses it (exit 2) naming the file, its
# size and the limit; apply leaves it byte-identical and writes nothing.
root=$(new_checkout)
sized "$root" $((limit + 1))
refuse "one byte over the size limit" "$root" 2 "topk\.py: $((limit + 1)) bytes .*limit of $limit bytes"
for cmd in verify status revert; do
  out=$work/over.$cmd
  before=$(state "$root/$target_rel")
  "$OEAPATCH" $cmd -C "$root" >"$out" 2>&1
  rc=$?
  if [ $rc -eq 2 ] && grep -Eq "topk\.py: $((limit + 1)) bytes .*limit of $limit bytes" "$out"; then
    ok "over the limit: $cmd refuses it (exit 2, file, size and limit named)"
  else
    bad "over the limit: $cmd refuses it (exit 2, file, size and limit named)" "exit $rc: $(head -c 300 "$out")"
  fi
  [ "$(state "$root/$target_rel")" = "$before" ] && ok "over the limit: $cmd leaves it unchanged" ||
    bad "over the limit: $cmd leaves it unchanged"
done
# A file of exactly the limit is read, but what apply would write is larger:
# refused too, so that everything apply writes can be read back.
root2=$(new_checkout)
sized "$root2" "$limit"
refuse "patched result over the size limit" "$root2" 2 "topk\.py: the patched result would be [0-9]+ bytes \(the input is $limit\), over .*limit of $limit bytes"
# check reports such a revision as a failure of that revision, not a crash.
if command -v git >/dev/null; then
  (cd "$root" && git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm big) >/dev/null 2>&1
  out=$work/over.check
  "$OEAPATCH" check -C "$root" --skip-binding HEAD >"$out" 2>&1
  rc=$?
  if [ $rc -eq 1 ] && grep -Eq "$((limit + 1)) bytes .*limit of $limit bytes" "$out"; then
    ok "over the limit: check fails that revision, naming size and limit (exit 1)"
  else
    bad "over the limit: check fails that revision, naming size and limit (exit 1)" "exit $rc: $(head -c 400 "$out")"
  fi
fi
# (b) a little under (room left for the regions apply adds): lands, verifies,
# reverts byte-identically. Time and peak RSS are printed, not asserted.
# Under the sanitizers the round trip is of an eighth of the limit (1 MiB):
# the same code (read, parse, patch, write, verify, revert; the buffers grow
# the same way) at an eighth of the cost (apply, verify and revert of the
# full size took about 70 s of the sanitizer pass's 181 s here); the plain
# build's run takes it to 64 KiB under the limit, and the sanitizers still
# read a file of the limit exactly in (a) and in the patched-result refusal.
under=$((sanitized ? limit / 8 : limit - 65536))
root=$(new_checkout)
big=$root/$target_rel
sized "$root" "$under"
cp "$big" "$work/big.orig"
size=$(stat -c %s "$big")
timing=$work/big.time
if [ -x /usr/bin/time ]; then
  /usr/bin/time -v -o "$timing" "$OEAPATCH" apply -C "$root" --library "$OEA_LIBRARY" >"$work/big.out" 2>&1
  rc=$?
else
  "$OEAPATCH" apply -C "$root" --library "$OEA_LIBRARY" >"$work/big.out" 2>&1
  rc=$?
  : >"$timing"
fi
wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): *//p' "$timing")
rss=$(sed -n 's/.*Maximum resident set size (kbytes): *//p' "$timing")
echo "      $size bytes: apply exit $rc, wall ${wall:-?}, peak RSS ${rss:-?} kB"
if [ $rc -eq 0 ]; then
  ok "under the limit: apply lands"
  if "$OEAPATCH" verify -C "$root" >"$work/big.verify" 2>&1; then
    ok "under the limit: verify holds"
  else
    bad "under the limit: verify holds" "$(grep -m3 -E '^FAIL|oeapatch:' "$work/big.verify")"
  fi
  "$OEAPATCH" revert -C "$root" >/dev/null 2>&1
  check "under the limit: revert is byte-identical" cmp -s "$big" "$work/big.orig"
else
  bad "under the limit: apply lands" "exit $rc: $(head -c 300 "$work/big.out")"
fi

echo "== 4b. pathological shapes: deep nesting, long bodies (no crash, no quadratic work)"
shapes=$((sanitized ? 10000 : 50000))
# Nesting: 100000 levels, 20000 under the sanitizers. The cost grows faster
# than the depth (20000 -> 100000 levels: apply 0.37 -> 4.7 s in the plain
# build, 2.2 -> 45 s and verify 2.1 -> 58 s under the sanitizers, which made it
# the largest part of their pass); the shallower tree goes through the same
# code, and the plain build's run keeps the full depth (a recursion that
# overflows the stack crashes there too).
depth=$((sanitized ? 20000 : 100000))
base=$fix/eras/2024-12_positional.py
make_shape() { # make_shape KIND N OUT: the 2024-12 era with something inserted before the routing chain
  /usr/bin/python3 - "$base" "$1" "$2" "$3" <<'PY'
import sys
base, kind, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
lines = open(base).read().split("\n")
i = lines.index("    # DeepSeek V2 uses grouped top-k")
if kind == "nest":      # valid: n nested parentheses
    lines.insert(i, "    _deep = " + "(" * n + "1" + ")" * n)
elif kind == "nesterr":  # a syntax error at the innermost level
    lines.insert(i, "    _deep = " + "(" * n + "1 + " + ")" * n)
else:                    # n assignments before the chain: n names bound at the anchor
    lines[i:i] = ["    _v%d = %d" % (k, k) for k in range(n)]
open(out, "w").write("\n".join(lines))
PY
}
shape() { # shape NAME KIND N CODE
  local name=$1 root
  root=$(new_checkout)
  make_shape "$2" "$3" "$root/$target_rel"
  cp "$root/$target_rel" "$work/shape.orig"
  local start rc
  start=$(date +%s.%N)
  "$OEAPATCH" apply -C "$root" --library "$OEA_LIBRARY" >"$work/shape.out" 2>&1
  rc=$?
  local secs
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}')
  if [ $rc -ne "$4" ]; then
    bad "$name: apply exit $4" "exit $rc after ${secs} s: $(head -c 300 "$work/shape.out")"
    return
  fi
  if [ "$4" -eq 0 ]; then
    "$OEAPATCH" verify -C "$root" >/dev/null 2>&1 && "$OEAPATCH" revert -C "$root" >/dev/null 2>&1 &&
      cmp -s "$root/$target_rel" "$work/shape.orig" &&
      ok "$name: lands in ${secs} s, verifies, reverts byte-identically" ||
      bad "$name: verify and revert" "after apply in ${secs} s"
  else
    cmp -s "$root/$target_rel" "$work/shape.orig" && grep -q 'syntax error' "$work/shape.out" &&
      ok "$name: refused in ${secs} s: $(head -n 1 "$work/shape.out" | cut -c1-110)" ||
      bad "$name: refused cleanly" "$(head -c 300 "$work/shape.out")"
  fi
}
shape "$depth nested parentheses in select_experts" nest "$depth" 0
shape "$depth nested parentheses around a syntax error" nesterr "$depth" 2
shape "$shapes assignments before the routing chain" stmts "$shapes" 0

# 5. valgrind: the valgrind part

e2e_summary
