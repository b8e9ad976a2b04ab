#!/usr/bin/env bash
# test_check_incremental.sh - `oeapatch check` over a history parses each
# revision from the previous revision's tree (tree-sitter's edit and
# re-parse, the edits from a diff of the two blobs). Its verdicts must be
# those of a parse from scratch: each revision checked on its own
# (`check REV` reads one blob, so nothing precedes it to parse from), and,
# for the file as a checkout holds it, `apply --check`. The history is made
# to trip an incremental parse: edits at the start, in the middle and at the
# end; an indentation error; a string opened around the anchor; a syntax
# error; bytes that are not UTF-8; a blob over the size limit; a revert to an
# earlier blob; a deletion and a re-addition; a byte order mark coming and
# going; CRLF line ends; and a merge of two branches that edited both ends.
set -u

SRC=${OEAPATCH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
OEAPATCH=${OEAPATCH:-$SRC/build/src/oeapatch}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
ERAS=$SRC/tests/fixtures/eras
T=python/sglang/srt/layers/moe/topk.py

WORK=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-check-incr.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
. "$(dirname "$0")/testlib.sh"
e2e_git_env "$WORK"

R=$WORK/repo
git -c init.defaultBranch=main init -q "$R" && cd "$R" || exit 2
mkdir -p "$(dirname "$T")"
# edit PYTHON: runs PYTHON with `s`, the target's bytes, and writes back `s`.
edit() { "$PY" -c "import sys; p=sys.argv[1]; s=open(p,'rb').read(); $1; open(p,'wb').write(s)" "$T"; }
rev() { git add -A && git commit -q -m "$1"; }
# Python one-liners: the anchor's function and one binds pair inside it.
DEF='b"def select_experts("'

cp "$ERAS/2025-12_layer_id_capturer.py" "$T"
rev "base"
edit 's = b"# a header line\n" + s'
rev "an edit at the start"
cp "$T" "$WORK/clean.py"
edit 's = s.replace(b"topk_weights, topk_ids = ", b"w, i = ")'
rev "an edit in the middle breaks the routing chain's binds pair"
cp "$WORK/clean.py" "$T"
rev "revert to an earlier blob"
edit 's = s + b"\n\ndef tail():\n    return 1\n"'
rev "an edit at the end"
cp "$T" "$WORK/tail.py"
edit 's = s.replace(b"    if use_grouped_topk:\n", b"    if use_grouped_topk:\n      pass\n", 1)'
rev "an indentation error inside select_experts"
cp "$WORK/tail.py" "$T"
rev "indentation fixed"
edit "s = s.replace($DEF, b'def broken(:\n    pass\n\n' + $DEF, 1)"
rev "a syntax error in the middle"
cp "$WORK/tail.py" "$T"
rev "syntax fixed"
edit "s = s.replace($DEF, b'_doc = \"\"\"\n' + $DEF, 1); s = s + b'\"\"\"\n'"
rev "a string opened before select_experts swallows the rest"
cp "$WORK/tail.py" "$T"
rev "string closed again"
edit "s = s.replace($DEF, b'# caf\xe9\n' + $DEF, 1)"
rev "Latin-1 bytes in a comment"
cp "$WORK/tail.py" "$T"
rev "UTF-8 again"
edit 's = s + b"#" + b"x" * (8 << 20) + b"\n"'
rev "a blob over the size limit"
cp "$WORK/tail.py" "$T"
rev "back under the limit"
git rm -q "$T"
rev "delete the file"
mkdir -p "$(dirname "$T")"
cp "$WORK/tail.py" "$T"
edit 's = s.replace(b"return 1", b"return 2")'
rev "re-add it, changed"
edit 's = b"\xef\xbb\xbf" + s'
rev "a byte order mark"
edit 's = s[3:] + b"\n\ndef select_experts():\n    pass\n"'
rev "no byte order mark; a second select_experts at the end"
git checkout -q -b side
edit 's = b"# from the side branch\n" + s'
rev "side: an edit at the start"
git checkout -q main
edit 's = s[:s.rindex(b"\n\ndef select_experts():")] + b"\n"'
rev "main: the second select_experts goes"
git merge -q --no-edit side >/dev/null
edit 's = s.replace(b"\n", b"\r\n")'
rev "CRLF line ends"
edit 's = s.replace(b"return 2", b"return 3")'
rev "a one-byte edit in CRLF"
n=$(git rev-list --count HEAD)

expect "check over the whole history (some revisions fail)" 1 "$OEAPATCH" check --all --json
echo "$out" >"$WORK/all.json"
# Each revision on its own, a parse from scratch; and apply --check on the
# file written out of each blob.
mkdir -p "$WORK/one/$(dirname "$T")"
git -C "$WORK/one" -c init.defaultBranch=main init -q
for c in $(git rev-list HEAD); do
	"$OEAPATCH" check --json "$c" >"$WORK/rev-$c.json" 2>&1
	if git cat-file -e "$c:$T" 2>/dev/null; then
		git cat-file blob "$c:$T" >"$WORK/one/$T"
		"$OEAPATCH" apply --check --json -C "$WORK/one" >"$WORK/apply-$c.json" 2>/dev/null
		echo $? >"$WORK/apply-$c.rc"
	fi
done
"$PY" - "$WORK" "$n" <<'EOF' && ok "every revision's verdict equals the one from scratch (check REV and apply --check)" || bad "verdicts differ from a parse from scratch"
import glob, json, os, sys
work, n = sys.argv[1], int(sys.argv[2])
allj = json.load(open(work + "/all.json"))
revs = allj["revisions"]
seen = {r["status"] for r in revs}
bad = 0
# The history must hold what it was built for, or the test tests less.
for want in ("lands", "fails", "deleted"):
    if want not in seen:
        print("no revision %s" % want); bad = 1
if len(revs) < 20:
    print("only %d revisions checked" % len(revs)); bad = 1
keys = ("status", "detail", "ok", "blob", "path", "before", "error")
for r in revs:
    one = json.load(open("%s/rev-%s.json" % (work, r["commit"])))["revisions"][0]
    if r["status"] == "deleted":
        # named on its own, a commit without the file is "missing"
        if one["status"] != "missing":
            print("%s %s: deleted in the walk, %s on its own" % (r["short"], r["subject"], one["status"])); bad = 1
        continue
    for k in keys:
        if r.get(k) != one.get(k):
            print("%s %s: %s is %r in the walk, %r on its own" % (r["short"], r["subject"], k, r.get(k), one.get(k)))
            bad = 1
    a = "%s/apply-%s.json" % (work, r["commit"])
    if not os.path.exists(a):
        continue
    rc = int(open(a[:-5] + ".rc").read())
    ap = json.loads(open(a).read())
    if (rc == 0) != r["ok"]:
        print("%s %s: check says %s, apply --check exits %d" % (r["short"], r["subject"], r["status"], rc)); bad = 1
    if rc != 0:
        e, f = ap.get("error", {}), r.get("error", {})
        if (e.get("message"), e.get("line")) != (f.get("message"), f.get("line")):
            print("%s %s: check's error %r, apply --check's %r" % (r["short"], r["subject"], f, e)); bad = 1
sys.exit(bad)
EOF
"$PY" -c "
import json, sys
revs = json.load(open('$WORK/all.json'))['revisions']
want = {'an edit in the middle breaks the routing chain': 'routing_chain',
        'an indentation error inside select_experts': 'IndentationError',
        'a syntax error in the middle': 'syntax error',
        'a string opened before select_experts swallows the rest': 'select_experts',
        'Latin-1 bytes in a comment': 'invalid UTF-8',
        'a blob over the size limit': 'limit',
        'no byte order mark; a second select_experts at the end': 'ambiguous'}
bad = 0
for r in revs:
    for subject, word in want.items():
        if r['subject'].startswith(subject) and (r['status'] != 'fails' or word not in r['detail']):
            print(r['subject'], r['status'], r['detail']); bad = 1
sys.exit(bad)
" && ok "each broken revision fails for its own reason" || bad "a broken revision's verdict"

e2e_summary
