#!/usr/bin/python3
"""An independent guard on the golden files (tests/golden/*.expected.py).

The expected files are the tool's own output (regen.sh writes them), so a
test that only compares apply with them blesses whatever the tool does. This
guard knows nothing of oeapatch's code; for every case in cases.txt it checks
with Python itself that the expected file
  1. compiles (compile(): the file a server would import);
  2. gives back the fixture byte for byte once our regions (begin marker
     line .. end marker line) are removed: nothing outside them changed;
  3. indents the inserted lines like the fixture: every body line is the
     marker's indentation plus whole units of the fixture's own indentation
     unit (found with tokenize: its first INDENT), nested lines exist, and
     the markers line up with the statement that follows the region.

Usage: /usr/bin/python3 tests/golden/check_golden.py
Prints one line per case; exit 1 when any check fails.
"""

import io
import re
import sys
import tokenize
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"
BEGIN = re.compile(rb"^([ \t]*)# >>> oeapatch [a-z0-9-]+/\d+ (\w+) sha256:[0-9a-f]{16} >>>\r?$")
END = re.compile(rb"^([ \t]*)# <<< oeapatch [a-z0-9-]+/\d+ (\w+) <<<\r?$")


def indent_unit(source: bytes) -> bytes:
    """What the first indented block adds to the indentation (tokenize's first INDENT)."""
    tokens = tokenize.tokenize(io.BytesIO(source).readline)
    for tok in tokens:
        if tok.type == tokenize.INDENT:
            return tok.string.encode()
    return b"    "


def regions(lines):
    """(begin index, end index, marker indentation, name) of each region."""
    out, open_ = [], None
    for i, line in enumerate(lines):
        body = line.rstrip(b"\n")
        m = BEGIN.match(body)
        if m:
            if open_ is not None:
                raise ValueError(f"line {i + 1}: region opened inside another")
            open_ = (i, m.group(1), m.group(2))
            continue
        m = END.match(body)
        if m:
            if open_ is None or open_[2] != m.group(2) or open_[1] != m.group(1):
                raise ValueError(f"line {i + 1}: end marker does not match its begin marker")
            out.append((open_[0], i, open_[1], open_[2].decode()))
            open_ = None
    if open_ is not None:
        raise ValueError("a region is never closed")
    return out


def leading(line: bytes) -> bytes:
    return line[: len(line) - len(line.lstrip(b" \t"))]


def check_case(name: str, fixture: str):
    problems = []
    want = (FIXTURES / fixture).read_bytes()
    got = (HERE / f"{name}.expected.py").read_bytes()
    try:
        compile(got, f"{name}.expected.py", "exec", dont_inherit=True)
    except SyntaxError as e:  # IndentationError and TabError are SyntaxErrors
        problems.append(f"does not compile: {e.__class__.__name__}: {e}")
    lines = got.splitlines(keepends=True)
    try:
        found = regions(lines)
    except ValueError as e:
        return [f"markers: {e}"]
    if len(found) != 2:
        problems.append(f"{len(found)} regions, expected 2 (import, callsite)")
    keep = set(range(len(lines)))
    for b, e, _, _ in found:
        keep -= set(range(b, e + 1))
    stripped = b"".join(lines[i] for i in sorted(keep))
    if stripped != want:
        problems.append("without its regions it is not the fixture byte for byte")
    unit = indent_unit(want)
    for b, e, marker, region in found:
        nested = 0
        for i in range(b + 1, e):
            if not lines[i].strip():
                continue
            ind = leading(lines[i])
            if not ind.startswith(marker):
                problems.append(f"{region}: line {i + 1} is indented less than its markers")
                continue
            extra = ind[len(marker):]
            if len(extra) % len(unit) or extra != unit * (len(extra) // len(unit)):
                problems.append(f"{region}: line {i + 1} is indented by {extra!r}, not whole units of {unit!r}")
            nested += bool(extra)
        if region == "callsite" and not nested:
            problems.append("callsite: no nested line, so the unit is not tested")
        follow = next((lines[i] for i in range(e + 1, len(lines))
                       if lines[i].strip() and not lines[i].lstrip().startswith(b"#")), None)
        if follow is not None and leading(follow) != marker:
            problems.append(f"{region}: markers indented {marker!r}, the statement after the region {leading(follow)!r}")
    return problems


def main() -> int:
    failed = total = 0
    for line in (HERE / "cases.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, fixture = line.split()[:2]  # a third column names the definition
        total += 1
        problems = check_case(name, fixture)
        print(f"{'ok  ' if not problems else 'FAIL'} {name}")
        for p in problems:
            print(f"     {p}")
        failed += bool(problems)
    print(f"{total - failed} passed, {failed} failed")
    return 1 if failed or total < 13 else 0


if __name__ == "__main__":
    sys.exit(main())
