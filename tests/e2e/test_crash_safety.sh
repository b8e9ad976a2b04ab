#!/usr/bin/env bash
# Crash safety and concurrency, end to end through the `oeapatch` binary.
#
#  1. Fault injection: OEAPATCH_FAULT_STEP=<step> makes the process _exit(99)
#     at a named step (src/fsio.c; "<step>@N" = the N-th time the step is
#     reached). For every step of apply and of revert:
#       - the exit status is 99;
#       - the target is byte-identical to the old or to the new version (sha256);
#       - the binding module is consistent with the documented order: apply
#         writes it before the target, revert removes it after the target, so
#         a patched target never exists without its complete binding module;
#       - temporary files left behind (*.oeapatch-tmp.*) cannot be imported
#         (no .py name) and do not disturb the next run;
#       - the same command run again without a fault reaches the right final
#         state, which verify confirms.
#  2. kill -9 at random moments of apply and revert: the same invariants.
#  3. The lock: an apply waits for a held lock; two applies at once, and an
#     apply and a revert at once (20 rounds each), always end in one of the
#     two valid states, with verify agreeing.
#
# Environment (set by ctest): OEAPATCH, OEA_LIBRARY, OEAPATCH_SOURCE_DIR.
# Prints what it checks; ends with "N passed, M failed".
set -uo pipefail

: "${OEAPATCH:?set OEAPATCH to the oeapatch binary}"
: "${OEA_LIBRARY:?set OEA_LIBRARY to liboea.so}"
: "${OEAPATCH_SOURCE_DIR:?set OEAPATCH_SOURCE_DIR to the repository root}"
src=$OEAPATCH_SOURCE_DIR
target_rel=python/sglang/srt/layers/moe/topk.py
binding_name=_oeapatch_sglang_oea.py
old=$src/tests/fixtures/eras/2025-08_topk_config.py
new=$src/tests/golden/era-2025-08.expected.py
rounds=${OEAPATCH_RACE_ROUNDS:-20}

work=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-crash.XXXXXX")
trap 'rm -rf "$work"' EXIT

. "$(dirname "$0")/testlib.sh"

sha() { if [ -f "$1" ]; then sha256sum <"$1" | cut -d' ' -f1; else echo absent; fi; }
old_sha=$(sha "$old")
new_sha=$(sha "$new")

new_checkout() { # new_checkout FILE: prints the root of a fresh checkout holding FILE as topk.py
  local root
  root=$(mktemp -d "$work/co.XXXXXX")
  mkdir -p "$root/$(dirname "$target_rel")"
  cp "$1" "$root/$target_rel"
  echo "$root"
}
apply() { "$OEAPATCH" apply -C "$1" --library "$OEA_LIBRARY" "${@:2}"; }
revert() { "$OEAPATCH" revert -C "$1" "${@:2}"; }

# The binding module a complete apply writes (same library path everywhere).
ref=$(new_checkout "$old")
apply "$ref" >/dev/null 2>&1 || { echo "FAIL  reference apply failed"; echo "0 passed, 1 failed"; exit 1; }
bind_sha=$(sha "$(dirname "$ref/$target_rel")/$binding_name")
[ "$(sha "$ref/$target_rel")" = "$new_sha" ] || { echo "FAIL  reference apply differs from the golden file"; exit 1; }

# describe ROOT: "target=old|new|MIX binding=absent|complete|PARTIAL temps=N"
describe() {
  local t=$1/$target_rel d
  d=$(dirname "$t")
  local ts bs
  ts=$(sha "$t")
  bs=$(sha "$d/$binding_name")
  local tn=MIX bn=PARTIAL
  [ "$ts" = "$old_sha" ] && tn=old
  [ "$ts" = "$new_sha" ] && tn=new
  [ "$bs" = absent ] && bn=absent
  [ "$bs" = "$bind_sha" ] && bn=complete
  echo "target=$tn binding=$bn temps=$(ls -A "$d" | grep -c '\.oeapatch-tmp\.')"
}

# consistent STATE: a target is old or new, a binding absent or complete, and a
# patched target never without its binding.
consistent() {
  case $1 in
    *target=MIX* | *binding=PARTIAL* | *target=new\ binding=absent*) return 1 ;;
  esac
  return 0
}

# Temporary files must not be importable (.py) nor be the target.
temps_harmless() {
  local d=$1/$(dirname "$target_rel") f
  for f in "$d"/*.oeapatch-tmp.*; do
    [ -e "$f" ] || continue
    case $f in *.py) return 1 ;; esac
  done
  return 0
}

echo "== 1. fault injection at every step"
apply_steps="lock:acquired write:before-temp write:half-written write:before-rename write:after-rename
  apply:between-files write:before-temp@2 write:half-written@2 write:before-rename@2 write:after-rename@2"
revert_steps="lock:acquired write:before-temp write:half-written write:before-rename write:after-rename
  revert:between-files"
for step in $apply_steps; do
  root=$(new_checkout "$old")
  OEAPATCH_FAULT_STEP=$step apply "$root" >/dev/null 2>&1
  rc=$?
  st=$(describe "$root")
  what="apply stopped at $step"
  [ $rc -eq 99 ] && ok "$what: exit 99" || bad "$what: exit 99" "got $rc (a step that is never reached?)"
  consistent "$st" && ok "$what: consistent ($st)" || bad "$what: consistent" "$st"
  temps_harmless "$root" && ok "$what: temporary files not importable" || bad "$what: temporary files not importable"
  apply "$root" >/dev/null 2>&1
  rc=$?
  st=$(describe "$root")
  "$OEAPATCH" verify -C "$root" >/dev/null 2>&1
  vr=$?
  if [ $rc -eq 0 ] && [ $vr -eq 0 ] && [[ $st == "target=new binding=complete"* ]]; then
    ok "$what: apply again -> applied, verify holds ($st)"
  else
    bad "$what: apply again -> applied, verify holds" "apply $rc, verify $vr, $st"
  fi
done
for step in $revert_steps; do
  root=$(new_checkout "$old")
  apply "$root" >/dev/null 2>&1
  OEAPATCH_FAULT_STEP=$step revert "$root" >/dev/null 2>&1
  rc=$?
  st=$(describe "$root")
  what="revert stopped at $step"
  [ $rc -eq 99 ] && ok "$what: exit 99" || bad "$what: exit 99" "got $rc"
  consistent "$st" && ok "$what: consistent ($st)" || bad "$what: consistent" "$st"
  temps_harmless "$root" && ok "$what: temporary files not importable" || bad "$what: temporary files not importable"
  revert "$root" >/dev/null 2>&1
  rc=$?
  st=$(describe "$root")
  "$OEAPATCH" verify -C "$root" >/dev/null 2>&1
  vr=$?
  if [ $rc -eq 0 ] && [ $vr -eq 1 ] && [[ $st == "target=old binding=absent"* ]] && cmp -s "$root/$target_rel" "$old"; then
    ok "$what: revert again -> byte-identical original, verify says not applied ($st)"
  else
    bad "$what: revert again -> original" "revert $rc, verify $vr, $st"
  fi
done
# An unknown step name must not fire (a typo in a test would otherwise pass silently).
root=$(new_checkout "$old")
OEAPATCH_FAULT_STEP=no-such-step apply "$root" >/dev/null 2>&1
[ $? -eq 0 ] && ok "an unknown fault step does not fire" || bad "an unknown fault step does not fire"

echo "== 2. kill -9 at random moments"
mixed=0
seen=""
for i in $(seq 1 30); do
  root=$(new_checkout "$old")
  if [ $((i % 2)) -eq 0 ]; then
    apply "$root" >/dev/null 2>&1
    cmd=revert
  else
    cmd=apply
  fi
  args=("$cmd" -C "$root")
  [ $cmd = apply ] && args+=(--library "$OEA_LIBRARY")
  # The binary itself in the background (a function would run in a subshell
  # and kill -9 would hit the subshell, not oeapatch).
  "$OEAPATCH" "${args[@]}" >/dev/null 2>&1 &
  pid=$!
  sleep "$(printf '0.%03d' $((RANDOM % 45)))"
  kill -9 $pid 2>/dev/null
  wait $pid 2>/dev/null
  st=$(describe "$root")
  consistent "$st" || { mixed=$((mixed + 1)); echo "      $cmd killed: $st"; }
  seen="$seen${st%% temps=*};"
  # and the next run finishes the job
  if [ $cmd = apply ]; then apply "$root" >/dev/null 2>&1; else revert "$root" >/dev/null 2>&1; fi
  st2=$(describe "$root")
  want="target=new binding=complete"
  [ $cmd = revert ] && want="target=old binding=absent"
  [[ $st2 == "$want"* ]] || { mixed=$((mixed + 1)); echo "      $cmd after kill, then again: $st2"; }
done
states=$(echo "$seen" | tr ';' '\n' | sed '/^$/d' | sort | uniq -c | awk '{printf "%s%s x%s", sep, $2" "$3, $1; sep=", "}')
[ $mixed -eq 0 ] && ok "30 kills: always a consistent state, and the next run completes ($states)" ||
  bad "30 kills: always a consistent state" "$mixed inconsistent"

echo "== 3. the lock"
root=$(new_checkout "$old")
# The lock is flock on the target's directory (no lock file to leave behind).
lockdir=$(dirname "$root/$target_rel")
if command -v flock >/dev/null; then
  # No timing: the holder says when it holds the lock and keeps it until told
  # to let go (30 s at most, never a hang); apply, started while it is held,
  # must still be waiting with the file untouched when we look, and must
  # apply once the lock is free (apply waits up to 10 s for it).
  rm -f "$work/held" "$work/release"
  flock "$lockdir" sh -c 'touch "$1/held"; i=0; while [ ! -e "$1/release" ] && [ $i -lt 600 ]; do
    sleep 0.05; i=$((i + 1)); done' sh "$work" &
  holder=$!
  for _ in $(seq 600); do [ -e "$work/held" ] && break; sleep 0.05; done
  before=$(sha "$root/$target_rel")
  "$OEAPATCH" apply -C "$root" --library "$OEA_LIBRARY" >/dev/null 2>&1 &
  applier=$!
  sleep 0.5
  waiting=0
  kill -0 $applier 2>/dev/null && [ "$(sha "$root/$target_rel")" = "$before" ] && waiting=1
  touch "$work/release"
  wait $applier
  rc=$?
  wait $holder
  [ -e "$work/held" ] && [ $waiting -eq 1 ] && [ $rc -eq 0 ] &&
    [[ $(describe "$root") == "target=new binding=complete"* ]] &&
    ok "apply waits for a held lock, the file untouched, and applies once it is free" ||
    bad "apply waits for a held lock" "held=$([ -e "$work/held" ] && echo yes || echo no) waiting=$waiting exit $rc: $(describe "$root")"
fi

race() { # race MODE START: MODE apply-apply | apply-revert
  local mode=$1 startfile=$2 bad_rounds=0 ends="" i
  for i in $(seq 1 "$rounds"); do
    local root
    root=$(new_checkout "$old")
    [ "$startfile" = patched ] && apply "$root" >/dev/null 2>&1
    local second=apply
    [ "$mode" = apply-revert ] && second=revert
    apply "$root" >"$work/a.out" 2>&1 &
    local p1=$!
    $second "$root" >"$work/b.out" 2>&1 &
    local p2=$!
    wait $p1
    local r1=$?
    wait $p2
    local r2=$?
    local st
    st=$(describe "$root")
    "$OEAPATCH" verify -C "$root" >/dev/null 2>&1
    local vr=$?
    local good=1
    [ $r1 -eq 0 ] && [ $r2 -eq 0 ] || good=0
    case $st in
      "target=new binding=complete temps=0") [ $vr -eq 0 ] || good=0 ;;
      "target=old binding=absent temps=0") [ $vr -eq 1 ] && [ "$mode" = apply-revert ] || good=0 ;;
      *) good=0 ;;
    esac
    [ -e "$root/$target_rel.oeapatch.lock" ] && good=0
    if [ $good -eq 0 ]; then
      bad_rounds=$((bad_rounds + 1))
      echo "      round $i: exits $r1/$r2, verify $vr, $st; $(head -n 1 "$work/a.out") | $(head -n 1 "$work/b.out")"
    fi
    ends="$ends${st%% binding=*};"
  done
  local tally
  tally=$(echo "$ends" | tr ';' '\n' | sed '/^$/d' | sort | uniq -c | awk '{printf "%s%s x%s", sep, $2, $1; sep=", "}')
  if [ $bad_rounds -eq 0 ]; then
    ok "$mode from $startfile, $rounds rounds: both succeed, one valid end state, verify agrees, no lock file left ($tally)"
  else
    bad "$mode from $startfile, $rounds rounds" "$bad_rounds bad rounds"
  fi
}
race apply-apply clean
race apply-revert clean
race apply-revert patched

e2e_summary
