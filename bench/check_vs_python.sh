#!/usr/bin/env bash
# Benchmark: `oeapatch check` over a history of topk.py, side by side with
# one Python process that reads the same revisions' blobs with
# `git cat-file --batch` and runs `ast.parse` on each (issue 16).
#   bench/check_vs_python.sh [BUILD_DIR] [ROUNDS]
# Rounds alternate A B A B in one run; it prints min and median of each,
# revisions per second, and the ratio. Goal: check >= 5x the Python process.
# OLD_OEAPATCH=PATH adds another oeapatch binary (an older build) to each
# round, after the same check has shown it gives the same JSON (the times
# left out): a before/after on the same history, side by side.
#
# The history (built once, kept in $OEAPATCH_BENCH_CACHE, default
# ~/.cache/oeapatch/bench-check-history): the real topk.py of every SGLang
# release found in the local cache (~/.cache/oeapatch/sglang-*/checkout, made
# by tests/sglang/make_env.sh, and the wheels in ~/.cache/oeapatch/wheels), in
# version order, with the hunks between two releases committed a few at a time
# (a history is a sequence of small edits), and commits of other files between
# them (a real history touches other files in between: SGLang's had about
# 40 commits for each one that touched topk.py). No network; nothing
# third-party lands in this repository.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
rounds=${2:-7}
cli="$build/src/oeapatch"
cache=${OEAPATCH_BENCH_CACHE:-$HOME/.cache/oeapatch/bench-check-history}
target=python/sglang/srt/layers/moe/topk.py
[ -x "$cli" ] || { echo "bench: no $cli (build first)" >&2; exit 2; }

if [ ! -f "$cache/done" ]; then
  rm -rf "$cache"
  mkdir -p "$cache"
  git init -q --bare "$cache/repo.git"
  python3 - "$cache" "$target" <<'EOF' | git -C "$cache/repo.git" fast-import --quiet
import difflib, glob, os, re, sys, zipfile
cache, target = sys.argv[1], sys.argv[2]
home = os.path.expanduser("~/.cache/oeapatch")
found = {}
for f in glob.glob(home + "/sglang-*/checkout/" + target):
    found[f.split("/sglang-")[1].split("/")[0]] = open(f, "rb").read()
for w in glob.glob(home + "/wheels/sglang-*.whl"):
    v = os.path.basename(w).split("-")[1]
    with zipfile.ZipFile(w) as z:
        name = target.split("python/", 1)[1]
        if name in z.namelist():
            found.setdefault(v, z.read(name))
def key(v):
    return [int(x) if x.isdigit() else x for x in re.split(r"[.]|post", v) if x != ""]
versions = sorted(found, key=key)
if len(versions) < 2:
    sys.exit("bench: fewer than two SGLang releases in ~/.cache/oeapatch (run tests/sglang/make_env.sh)")
sys.stderr.write("bench: history from releases %s\n" % " ".join(versions))
out = sys.stdout.buffer
mark = [0]
t = [1700000000]
def commit(msg, path, data):
    mark[0] += 1
    t[0] += 3600
    m = msg.encode()
    out.write(b"commit refs/heads/main\nmark :%d\n" % mark[0])
    out.write(b"committer Bench <bench@example.invalid> %d +0000\n" % t[0])
    out.write(b"data %d\n%s\n" % (len(m), m))
    if mark[0] > 1:
        out.write(b"from :%d\n" % (mark[0] - 1))
    out.write(b"M 100644 inline %s\ndata %d\n%s\n" % (path.encode(), len(data), data))
others = 0
def other_commits(n):
    # Files elsewhere in a tree of some width, as a real repository has.
    global others
    for _ in range(n):
        others += 1
        d = others % 40
        path = "python/sglang/srt/mod%02d/file%d.py" % (d, others % 7)
        commit("other change %d" % others, path, b"# change %d\nx = %d\n" % (others, others))
steps = 10  # revisions of topk.py from one release to the next
prev = found[versions[0]].decode("utf-8", "surrogateescape").splitlines(True)
commit("topk.py as in %s" % versions[0], target, found[versions[0]])
for v in versions[1:]:
    new = found[v].decode("utf-8", "surrogateescape").splitlines(True)
    ops = [o for o in difflib.SequenceMatcher(None, prev, new, autojunk=False).get_opcodes() if o[0] != "equal"]
    per = max(1, -(-len(ops) // steps))
    for k in range(per, len(ops) + per, per):
        # prev with the first k hunks of the diff made, the rest left as before
        cur, at = [], 0
        for tag, i1, i2, j1, j2 in ops[:k]:
            cur += prev[at:i1] + new[j1:j2]
            at = i2
        cur += prev[at:]
        other_commits(40)
        commit("topk: towards %s (%d of %d hunks)" % (v, min(k, len(ops)), len(ops)), target,
               "".join(cur).encode("utf-8", "surrogateescape"))
    prev = new
other_commits(10)
EOF
  git -C "$cache/repo.git" symbolic-ref HEAD refs/heads/main
  git -C "$cache/repo.git" gc -q
  touch "$cache/done"
fi
repo="$cache/repo.git"

# The baseline: one process, the revisions that touched the file, each blob
# read through one `git cat-file --batch`, each parsed with ast.parse.
cat > "$cache/baseline.py" <<'EOF'
import ast, subprocess, sys
repo, path = sys.argv[1], sys.argv[2]
revs = subprocess.run(["git", "-C", repo, "rev-list", "HEAD", "--", path], check=True,
                      capture_output=True, text=True).stdout.split()
p = subprocess.Popen(["git", "-C", repo, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
p.stdin.write("".join("%s:%s\n" % (r, path) for r in revs).encode())
p.stdin.close()
ok = 0
for r in revs:
    head = p.stdout.readline().split()
    data = p.stdout.read(int(head[2]))
    p.stdout.read(1)
    try:
        ast.parse(data)
        ok += 1
    except SyntaxError:
        pass
p.wait()
print(len(revs), ok)
EOF

python3 - "$cli" "$repo" "$target" "$rounds" "$cache/baseline.py" "${OLD_OEAPATCH:-}" <<'EOF'
import json, statistics, subprocess, sys, time
cli, repo, target, rounds, baseline, old = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]
check = [cli, "check", "-C", repo, "--all", "--json"]
py = [sys.executable, baseline, repo, target]
first = json.loads(subprocess.run(check, capture_output=True, text=True).stdout)
if old:
    oldcheck = [old] + check[1:]
    before = json.loads(subprocess.run(oldcheck, capture_output=True, text=True).stdout)
    for j in (first, before):
        j["summary"].pop("seconds")
    if first != before:
        sys.exit("bench: %s and %s disagree on the history's verdicts" % (old, cli))
s = first["summary"]
nrev = s["revisions"]
pyrevs = subprocess.run(py, capture_output=True, text=True, check=True).stdout.split()
commits = subprocess.run(["git", "-C", repo, "rev-list", "--count", "HEAD"], capture_output=True, text=True).stdout.strip()
print("history: %s commits, %d revisions of %s (%s lands, %s fail); Python parses %s of %s"
      % (commits, nrev, target, s["lands"], s["fails"], pyrevs[1], pyrevs[0]))
ta, tb, tc = [], [], []
def timed(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0
for _ in range(rounds):
    ta.append(timed(check))
    tb.append(timed(py))
    if old:
        tc.append(timed(oldcheck))
def row(name, ts):
    print("%-36s min %7.1f ms  median %7.1f ms  %6.0f rev/s (median)"
          % (name, min(ts) * 1e3, statistics.median(ts) * 1e3, nrev / statistics.median(ts)))
print("%d rounds, A B A B; wall time per run, process start included" % rounds)
row("oeapatch check --all", ta)
row("python: cat-file --batch + ast.parse", tb)
print("speed-up over the Python process: min %.2fx, median %.2fx   (goal: >= 5x)"
      % (min(tb) / min(ta), statistics.median(tb) / statistics.median(ta)))
if old:
    row("OLD_OEAPATCH check --all", tc)
    print("OLD_OEAPATCH against the Python process: min %.2fx, median %.2fx; this build is %.2fx (median) faster than it"
          % (min(tb) / min(tc), statistics.median(tb) / statistics.median(tc), statistics.median(tc) / statistics.median(ta)))
EOF
