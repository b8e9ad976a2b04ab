#!/usr/bin/env python3
"""Every Markdown file that the repository's own files cite exists in the repository.

Docs, code comments and the binding we write into users' trees once cited design
notes that lived outside the repository (a folder beside the checkout that users
never get). This test reads every tracked text file, collects each `NAME.md` or
`dir/NAME.md` it mentions, and fails on any that does not resolve to a tracked
file. A citation of the folder beside the checkout fails even when a file of the
same name exists here: the text must point at the repository's own copy.

Resolution: a path with a folder is looked up relative to the repository root, to
the citing file's folder, and under docs/; a bare name must be the name of some
tracked file. Names written after a shell variable ($OUT/x.md) are outputs of a
script, not citations, and so are the few generated report names listed below.
"""
import os
import re
import subprocess
import sys

ROOT = os.environ.get("OEAPATCH_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

REF = re.compile(r"(?<![\w$/.-])(\.{0,2}/?[A-Za-z0-9_][A-Za-z0-9_./-]*\.md)\b")
AFTER_VAR = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?/[A-Za-z0-9_./-]*\.md")


def tracked_files():
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], check=True,
                         capture_output=True).stdout
    return [p for p in out.decode().split("\0") if p]


def main():
    files = tracked_files()
    paths = set(files)
    names = {os.path.basename(p) for p in files}
    texts = {}
    for rel in files:
        try:
            with open(os.path.join(ROOT, rel), "rb") as f:
                data = f.read()
        except OSError:
            continue
        if b"\0" not in data:
            texts[rel] = data.decode("utf-8", "replace")
    # This file's own docstring shows the shapes it looks for.
    texts.pop("tests/e2e/test_doc_references.py", None)
    generated = {os.path.basename(m.group(0)) for t in texts.values()
                 for m in AFTER_VAR.finditer(t)}
    bad = []
    checked = 0
    for rel, text in texts.items():
        for lineno, line in enumerate(text.splitlines(), 1):
            spans = [m.span() for m in AFTER_VAR.finditer(line)]
            for m in REF.finditer(line):
                if any(a <= m.start() < b for a, b in spans):
                    continue
                ref = m.group(1)
                checked += 1
                where = "%s:%d: %s" % (rel, lineno, ref)
                if "shared/" in ref:
                    bad.append(where + " (a folder beside the checkout, not in the repository)")
                    continue
                if "/" not in ref.lstrip("./"):
                    base = ref.lstrip("./")
                    if base not in names and base not in generated:
                        bad.append(where + " (no tracked file has this name)")
                    continue
                norm = lambda p: os.path.normpath(p)
                cands = [norm(ref), norm(os.path.join(os.path.dirname(rel), ref)),
                         norm(os.path.join("docs", ref))]
                if not any(c in paths for c in cands):
                    bad.append(where + " (not a tracked file)")
    for b in bad:
        print("FAIL " + b)
    print("%d references checked, %d missing" % (checked, len(bad)))
    passed = 0 if bad else 1
    print("%d passed, %d failed" % (passed, 1 - passed))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
