#!/usr/bin/env python3
"""What the tool and the code it installs tell a user to read, the user has.

A pip user gets the executable, the plugin, the binding module and the man
page (the wheel installs it where `man oeapatch` finds it), but not the
repository's docs/ folder. So a message a user sees (a string literal of the
C sources, of the plugin package, or of the binding and adapters that apply
writes into a server) must not send them to a Markdown file of docs/; it may cite the
man page, and each `man oeapatch`, "Section" (or `man oeapatch`, SECTION) it
cites must be a section or subsection of docs/oeapatch.1.

Comments and docstrings are for the next engineer and may cite docs/: only
string literals that are not docstrings are read.
"""
import ast
import os
import re
import sys

ROOT = os.environ.get("OEAPATCH_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DOCS_MD = re.compile(r"docs/[A-Za-z0-9_.-]+\.md")
# `man oeapatch`, "The per-process check"  /  `man oeapatch`, SECURITY
MAN_CITE = re.compile(r"man oeapatch`?,?\s*(?:\"([^\"]+)\"|([A-Z][A-Z ]+[A-Z]))")


def c_literals(text):
    """The string literals of a C file outside comments, adjacent ones joined
    as the compiler joins them; (line, text) pairs."""
    out, i, n = [], 0, len(text)
    pending, pending_line = None, 0
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if c == "'":
            j = i + 1
            while j < n and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c == '"':
            j, buf = i + 1, []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n:
                    buf.append(text[j + 1] if text[j + 1] in '"\\' else text[j:j + 2])
                    j += 2
                else:
                    buf.append(text[j])
                    j += 1
            lit = "".join(buf)
            if pending is None:
                pending, pending_line = lit, text.count("\n", 0, i) + 1
            else:
                pending += lit
            i = j + 1
            continue
        if not c.isspace() and pending is not None:
            out.append((pending_line, pending))
            pending = None
        i += 1
    if pending is not None:
        out.append((pending_line, pending))
    return out


def py_literals(text):
    """The str constants of a Python file that are not docstrings; (line, text)."""
    # Templates and binding sources hold {{placeholders}} that apply fills in.
    tree = ast.parse(re.sub(r"\{\{(\w+)\}\}", r"_\1_", text))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                docstrings.add(id(body[0].value))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


def man_sections():
    with open(os.path.join(ROOT, "docs", "oeapatch.1"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    names = set()
    for line in lines:
        m = re.match(r"\.S[HS]\s+(.*)$", line)
        if m:
            names.add(m.group(1).strip().strip('"').replace("\\-", "-").lower())
    return names


def sources():
    for top, exts in (("src", (".c", ".h")), ("native/src", (".c", ".cu", ".h")),
                      ("patches", (".py",)), ("contrib/wheel/oeapatch", (".py",))):
        base = os.path.join(ROOT, top)
        for dirpath, _, files in os.walk(base):
            for name in sorted(files):
                if name.endswith(exts):
                    yield os.path.join(dirpath, name)


def main():
    sections = man_sections()
    bad, cites, literals = [], 0, 0
    for path in sources():
        rel = os.path.relpath(path, ROOT)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        lits = py_literals(text) if path.endswith(".py") else c_literals(text)
        for line, lit in lits:
            literals += 1
            for m in DOCS_MD.finditer(lit):
                bad.append("%s:%d: a message cites %s, which a pip user does not have "
                           "(cite `man oeapatch`, \"Section\" instead)" % (rel, line, m.group(0)))
            for m in MAN_CITE.finditer(lit):
                cites += 1
                name = (m.group(1) or m.group(2)).strip()
                if name.lower() not in sections:
                    bad.append("%s:%d: cites man oeapatch section \"%s\", which docs/oeapatch.1 "
                               "does not have" % (rel, line, name))
    if sections and cites == 0:
        bad.append("no message cites the man page: the scanner found nothing to check")
    for b in bad:
        print("FAIL " + b)
    print("%d string literals read, %d man page citations, %d problems" % (literals, cites, len(bad)))
    print("%d passed, %d failed" % (0 if bad else 1, 1 if bad else 0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
