#!/usr/bin/python3
"""Machine-readable output that does not lie (issue 15, items 9-12).

Usage: /usr/bin/python3 tests/e2e/test_json_output.py --library PATH/liboea.so [-v]

The rule (docs/oeapatch.1, --json): every --json invocation prints exactly one
JSON document on stdout whose "ok" equals (exit status == 0), and bytes that
are not UTF-8 are shown in the quoted form (src/quote.h), never dropped. Each
output here is read with a real parser (json, xml.etree) and held to it:

- a checkout whose path has a byte that is not UTF-8: status, verify, apply
  (--check, --diff, write) and revert keep "root", and it decodes to the path;
- a git repository whose commit subjects are Latin-1 or carry control
  characters, and whose target once lived at a path that is not UTF-8:
  check --json lists every revision (as many as summary.revisions), each
  subject and path decodes to the committed bytes, and check --junit writes
  XML that parses, with one test case per revision;
- a table of invocations, every command and every error path reachable from
  the command line (usage errors, unknown options, a missing -C folder, help,
  version, no command, an unknown one), each with --json before or after the
  command: exactly one document, ok == (exit status == 0).

Prints one line per case, then `N passed, M failed`; exit 1 on any failure.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

from oea_testlib import VERBOSE, case, check, summary

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("OEAPATCH_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
OEAPATCH = os.environ.get("OEAPATCH") or os.path.join(ROOT, "build", "src", "oeapatch")
ERAS = os.path.join(ROOT, "tests", "fixtures", "eras")
TARGET = b"python/sglang/srt/layers/moe/topk.py"
OLD_TARGET = b"python/sglang/srt/layers/moe/t\xf6pk.py"  # Latin-1: not UTF-8


def unquote(shown):
    """The bytes a shown string stands for (the reading docs/oeapatch.1 gives)."""
    if not (len(shown) >= 1 and shown[0] == "'" and shown[-1] == "'"):
        return shown.encode("utf-8")
    body, out, i = shown[1:-1], bytearray(), 0
    check(len(shown) >= 2, "a lone quote is no quoted form: %r" % shown)
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            check(ch != "'", "an unescaped quote inside %r" % shown)
            out += ch.encode("utf-8")
            i += 1
        elif body[i + 1] == "x":
            out.append(int(body[i + 2:i + 4], 16))
            i += 4
        else:
            check(body[i + 1] in "\\'", "unknown escape in %r" % shown)
            out += body[i + 1].encode("ascii")
            i += 2
    return bytes(out)


def run(args, cwd=None, env=None):
    """(exit status, the one document on stdout, stderr): fails unless stdout is
    exactly one JSON document (strict UTF-8) whose ok is (exit status == 0)."""
    proc = subprocess.run([os.fsencode(OEAPATCH)] + [a if isinstance(a, bytes) else a.encode() for a in args],
                          cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    text = proc.stdout.decode("utf-8")  # raises on bytes that are not UTF-8
    try:
        doc = json.loads(text)  # raises on nothing, on two documents, on text around one
    except ValueError as exc:
        raise AssertionError("%r (exit %d): stdout is not one JSON document (%s): %r; stderr %r"
                             % (args, proc.returncode, exc, text[:400], proc.stderr[:400]))
    check(isinstance(doc, dict) and "command" in doc and "ok" in doc,
          "%r: no command/ok in %r" % (args, doc))
    check(doc["ok"] is (proc.returncode == 0),
          "%r: ok is %r, exit status %d" % (args, doc["ok"], proc.returncode))
    return proc.returncode, doc, proc.stderr


def git(repo, *args, data=None):
    return subprocess.run(["git", "-C", repo] + list(args), input=data, check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout


def git_env(work):
    home = os.path.join(work, "home")
    os.makedirs(home, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
    env.update(HOME=home, GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="Test", GIT_AUTHOR_EMAIL="test@example.org",
               GIT_COMMITTER_NAME="Test", GIT_COMMITTER_EMAIL="test@example.org", NO_COLOR="1")
    os.environ.update(env)


def put(root, rel, era):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    shutil.copyfile(os.path.join(ERAS, era), path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--library", required=True)
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    VERBOSE[0] = args.v
    lib = args.library
    work = os.fsencode(tempfile.mkdtemp(prefix="oeapatch-json."))
    try:
        git_env(os.fsdecode(work))
        checkout_cases(work, lib)
        git_cases(work)
        sweep(work, lib)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return summary()


def checkout_cases(work, lib):
    co = os.path.join(work, b"co-caf\xe9")  # Latin-1: the checkout path is not UTF-8
    put(co, TARGET, "2025-08_topk_config.py")
    real = os.path.realpath(co)

    def target_doc(args, want_rc):
        rc, doc, err = run(args)
        check(rc == want_rc, "%r: exit %d, wanted %d: %r" % (args, rc, want_rc, err[:300]))
        check("root" in doc, "%r: no root in %r" % (args, doc))
        check(unquote(doc["root"]) == real, "%r: root %r is not %r" % (args, doc["root"], real))
        check(doc["file"] == TARGET.decode(), "%r: file %r" % (args, doc["file"]))
        return doc

    @case("status, verify, apply, revert keep root when the checkout path is not UTF-8")
    def roots():
        target_doc(["status", "--json", "-C", co], 1)
        doc = target_doc(["verify", "--json", "-C", co], 1)
        check(real in unquote(doc["fix"]), "fix %r does not name %r" % (doc["fix"], real))
        target_doc(["apply", "--json", "--check", "-C", co, "--library", lib], 0)
        doc = target_doc(["apply", "--json", "--diff", "-C", co, "--library", lib], 0)
        check("+++ b/" + TARGET.decode() in doc["diff"], "the diff: %r" % doc["diff"][:200])
        doc = target_doc(["--json", "apply", "-C", co, "--library", lib], 0)
        check(doc["changed"] and doc["insertions"], "apply changed nothing: %r" % doc)
        target_doc(["status", "-C", co, "--json"], 0)
        target_doc(["verify", "-C", co, "--json"], 0)
        target_doc(["revert", "-C", co, "--json"], 0)
        return "6 commands, root %r" % real
    roots()

    @case("an error naming a path that is not UTF-8 keeps where and message")
    def error_path():
        missing = os.path.join(work, b"gone-\xff")
        rc, doc, _ = run(["status", "--json", "-C", missing])
        check(rc == 2, "exit %d" % rc)
        error = doc.get("error") or {}
        check(unquote(error.get("where", "")) == missing, "where %r" % error.get("where"))
        check(error.get("message"), "no message: %r" % error)
    error_path()

    @case("--python at a path that is not UTF-8: the python object is kept, quoted")
    def python_path():
        # A real venv (its sys.executable is the path it is run by), reached
        # through a link whose name is not UTF-8, with the target installed.
        venv = os.path.join(work, b"venv")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        link = os.path.join(work, b"py-caf\xe9")
        os.symlink(venv, link)
        py = os.path.join(link, b"bin", b"python")
        site = subprocess.run([py, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, stdout=subprocess.PIPE).stdout.strip()
        put(site, b"sglang/srt/layers/moe/topk.py", "2025-08_topk_config.py")
        open(os.path.join(site, b"sglang", b"__init__.py"), "wb").close()
        rc, doc, err = run(["status", "--json", "--python", py])
        check(rc == 1, "exit %d: %r" % (rc, err[:300]))
        python = doc.get("python")
        check(isinstance(python, dict), "no python object: %r" % doc)
        check(unquote(python["given"]) == py, "given %r is not %r" % (python["given"], py))
        check(unquote(python["package"]).startswith(link), "package %r" % python["package"])
        return "given %r" % python["given"]
    python_path()

    @case("hook status: an untrusted hook at a path that is not UTF-8 keeps its reason")
    def hook_untrusted():
        repo = os.path.join(work, b"hooks-caf\xe9")
        git(work, "init", "-q", repo)
        put(repo, TARGET, "2025-08_topk_config.py")
        rc, doc, err = run(["hook", "install", "--only", "post-merge", "--json", "-C", repo])
        check(rc == 0, "hook install: exit %d: %r" % (rc, err[:300]))
        hook = os.path.join(repo, b".git", b"hooks", b"post-merge")
        os.chmod(hook, 0o775)  # writable by its group: the trust rule fails it
        rc, doc, err = run(["hook", "status", "--json", "-C", repo])
        check(rc == 1, "exit %d: %r" % (rc, err[:300]))
        row = [h for h in doc["hooks"] if h["hook"] == "post-merge"][0]
        why = row.get("untrusted")
        check(why is not None, "post-merge's untrusted is %r (missing or null reads as trusted): %r" % (why, row))
        check(hook in unquote(why) and b"writable by its group" in unquote(why), "untrusted %r" % why)
        return "untrusted %r" % why[:60]
    hook_untrusted()


def commit(repo, message, date, encoding=None):
    """A commit of everything with `message` as its bytes: git re-encodes a message
    that is not UTF-8 from Latin-1 unless the commit declares another encoding."""
    git(repo, "add", "-A")
    env_date = "%sT12:00:00Z" % date
    os.environ["GIT_AUTHOR_DATE"] = os.environ["GIT_COMMITTER_DATE"] = env_date
    extra = ["-c", "i18n.commitEncoding=" + encoding] if encoding else []
    subprocess.run(["git"] + extra + ["-C", repo, "commit", "-q", "--cleanup=verbatim", "-F", "-"],
                   input=message, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return git(repo, "rev-parse", "HEAD").decode().strip()


def git_cases(work):
    repo = os.path.join(work, b"repo")
    git(work, "-c", "init.defaultBranch=main", "init", "-q", repo)
    # The target first lives at a path that is not UTF-8, then moves.
    subjects = {}
    put(repo, OLD_TARGET, "2025-05_dispatch_info.py")
    subjects[commit(repo, b"caf\xe9: topk at a Latin-1 path", "2025-05-01", "latin1")] = \
        b"caf\xe9: topk at a Latin-1 path"
    git(repo, "mv", OLD_TARGET, TARGET)
    subjects[commit(repo, b"move it \x01 with a control character", "2025-06-01")] = \
        b"move it \x01 with a control character"
    put(repo, TARGET, "2025-08_topk_config.py")
    subjects[commit(repo, b"\x1b[31mred\x1b[0m & <tags> \"q\" 'a'", "2025-08-01")] = \
        b"\x1b[31mred\x1b[0m & <tags> \"q\" 'a'"
    put(repo, TARGET, "2025-12_layer_id_capturer.py")
    subjects[commit(repo, b"'quoted' \xff\xfe", "2025-12-01", "latin1")] = b"'quoted' \xff\xfe"
    put(repo, TARGET, "2025-12_layer_id_capturer.py")
    with open(os.path.join(repo, b"README"), "wb") as f:
        f.write(b"readme\n")
    subjects[commit(repo, b"\xc3\xa9t\xc3\xa9: UTF-8, left as it is", "2026-01-01")] = \
        b"\xc3\xa9t\xc3\xa9: UTF-8, left as it is"
    junit = os.path.join(work, b"report.xml")

    @case("check --json lists every revision, subjects and paths decode to the committed bytes")
    def check_json():
        rc, doc, err = run(["check", "--json", "--all", "-C", repo, "--junit", junit, "--skip-binding"])
        revs = doc["revisions"]
        check(len(revs) == doc["summary"]["revisions"],
              "revisions has %d entries, summary.revisions says %d" % (len(revs), doc["summary"]["revisions"]))
        touched = {c: s for c, s in subjects.items() if s != b"\xc3\xa9t\xc3\xa9: UTF-8, left as it is"}
        check(len(revs) == len(touched), "%d revisions, %d commits touched the file: %r"
              % (len(revs), len(touched), [r["subject"] for r in revs]))
        for r in revs:
            check(unquote(r["subject"]) == subjects[r["commit"]],
                  "%s: subject %r is not %r" % (r["short"], r["subject"], subjects[r["commit"]]))
            check(unquote(r["path"]) in (TARGET, OLD_TARGET), "path %r" % r["path"])
        paths = {unquote(r["path"]) for r in revs}
        check(OLD_TARGET in paths, "no revision at the Latin-1 path: %r" % [r["path"] for r in revs])
        moved = [r for r in revs if r["renamed_from"] is not None]
        check(moved and unquote(moved[0]["renamed_from"]) == OLD_TARGET,
              "renamed_from: %r" % [r["renamed_from"] for r in revs])
        utf8 = [r for r in revs if r["subject"] == "'quoted' \\xff\\xfe"]
        check(not utf8, "a subject between quotes must be quoted itself")
        return "%d revisions, exit %d" % (len(revs), rc)
    check_json()

    @case("check --junit writes XML that parses, one test case per revision, names decode")
    def check_junit():
        tree = ET.parse(junit)  # raises on XML that does not parse
        suite = tree.getroot()
        cases = suite.findall("testcase")
        check(len(cases) == int(suite.get("tests")), "%d test cases, tests=%s" % (len(cases), suite.get("tests")))
        check(len(cases) == len(subjects) - 1, "%d test cases for %d revisions" % (len(cases), len(subjects) - 1))
        got = set()
        for tc in cases:
            # "SHORT DATE SUBJECT"
            short, _date, subject = tc.get("name").split(" ", 2)
            got.add(unquote(subject))
        want = {s for s in subjects.values() if s != b"\xc3\xa9t\xc3\xa9: UTF-8, left as it is"}
        check(got == want, "subjects in the report %r, committed %r" % (got, want))
        return "%d test cases" % len(cases)
    check_junit()


def sweep(work, lib):
    co = os.path.join(work, b"sweep")
    put(co, TARGET, "2025-08_topk_config.py")
    repo = os.path.join(work, b"repo")
    afile = os.path.join(co, TARGET)
    missing = os.path.join(work, b"no-such-dir")
    d = ["-C", co]
    r = ["-C", repo]
    table = [
        # (arguments, wanted exit status[, "before": an option at the end would take a
        # trailing --json as its value, so --json goes only before])
        (["status"] + d, 1),
        (["verify"] + d, 1),
        (["apply", "--check", "--library", lib] + d, 0),
        (["revert", "--check"] + d, 0),
        (["check", "--skip-binding", "HEAD"] + r, 0),
        (["hook", "status"] + r, 1),  # no hooks installed
        (["version"], 0),
        (["help"], 0),
        (["help", "status"], 0),
        (["help", "version"], 0),
        (["status", "--help"], 0),
        (["check", "-h"], 0),
        (["hook", "--help"], 0),
        (["replay", "--help"], 0),
        (["-V"], 0),
        (["--version"], 0),
        (["--help"], 0),
        # usage errors
        ([], 2),
        (["frobnicate"], 2),
        (["help", "frobnicate"], 2),
        (["help", "status", "extra"], 2),
        (["version", "extra"], 2),
        (["version", "--frob"], 2),
        (["--frob", "status"], 2),
        (["--color=purple", "status"], 2),
        (["-C"], 2, "before"),
        (["status", "--frob"] + d, 2),
        (["status", "extra"] + d, 2),
        (["verify", "--frob"] + d, 2),
        (["verify", "--skip-binding"] + d, 2),
        (["verify", "--ref"], 2, "before"),
        (["apply", "--frob"] + d, 2),
        (["apply", "--library"], 2, "before"),
        (["revert", "--frob"] + d, 2),
        (["check", "--frob"] + r, 2),
        (["check", "-n", "x"] + r, 2),
        (["check", "-n", "0"] + r, 2),
        (["check", "no-such-revision"] + r, 2),
        (["hook"] + r, 2),
        (["hook", "frob"] + r, 2),
        (["hook", "status", "--frob"] + r, 2),
        (["hook", "status", "--reapply"] + r, 2),
        (["replay"], 2),
        (["replay", afile], 2),  # a Python file, not a recording
        (["replay", missing], 2),
        (["replay", "--k0", "x", afile], 2),
        (["replay", "--batch", "0", afile], 2),
        (["replay", "--min-kept", "0.5", afile], 2),
        (["replay", "--bands", "2-:3", afile], 2),
        (["replay", "--ep"], 2, "before"),
        (["status", "--python", "/bin/true"] + d, 2),
        (["status", "--patch", "no-such-patch"] + d, 2),
        (["status", "--color=purple"] + d, 2),
        # where the target is not
        (["status", "-C", missing], 2),
        (["verify", "-C", missing], 2),
        (["apply", "-C", missing], 2),
        (["revert", "-C", missing], 2),
        (["check", "-C", missing], 2),
        (["hook", "status", "-C", missing], 2),
        (["status", "-C", afile], 2),
        (["status", "-C", work], 2),
        (["status", "--python", os.path.join(work, b"no-python")], 2),
        # arguments that are not UTF-8 themselves
        ([b"fr\xf6b"], 2),
        (["status", b"--fr\xf6b"] + d, 2),
        (["check", b"r\xe9v"] + r, 2),
    ]

    @case("every invocation in the table prints one JSON document, ok == (exit status == 0)")
    def table_cases():
        runs = 0
        for entry in table:
            args, want = entry[0], entry[1]
            before_only = len(entry) > 2
            for placed in (["--json"] + args, args + ["--json"]):
                if placed[-1] == "--json" and before_only:
                    continue
                rc, doc, err = run(placed)
                check(rc == want, "%r: exit %d, wanted %d: %r" % (placed, rc, want, err[:300]))
                if rc == 2:
                    error = doc.get("error")
                    check(isinstance(error, dict) and all(isinstance(error.get(k), str)
                                                          for k in ("kind", "where", "message")),
                          "%r: no error with kind, where and message in %r" % (placed, doc))
                runs += 1
            rc, doc, _ = run(["--json", "--quiet"] + args)
            check(rc == want, "%r with --quiet: exit %d" % (args, rc))
            runs += 1
        return "%d invocations" % runs
    table_cases()


if __name__ == "__main__":
    sys.exit(main())
