#!/usr/bin/python3
"""The binding and `oeapatch verify` give the same trust verdict on every tree.

Usage: /usr/bin/python3 tests/e2e/test_trust_crosscheck.py --library PATH/liboea.so [-v]

Two implementations apply the trust rule of docs/security.md: src/trust.c
(`verify`, `status`, `apply`, before a start) and the binding's
trust_problem() (at the server's import, on the library it is about to load,
so that a setting changed after verify cannot load an unchecked library).
The gate is worth something only when they agree, so this test:

- builds trees that hold a copy of liboea: owner-only and umask-022 modes, a
  file or a directory writable by group or others, a sticky file writable by
  group or others (the bit exempts directories only), sticky directories with a
  good or another user's entry, links from and into world-writable
  directories, links owned by another user, a setgid directory, a tree owned
  by another user; each is judged for a target owned by root and for one
  owned by that other user (uid 65534);
- requires, for each, that `oeapatch verify --json` with SGLANG_OEA_LIBRARY
  naming it (its trust:library check) and the written binding module's
  trust_problem() agree: both pass, or both fail naming the same path with
  the same message;
- checks the import: with SGLANG_OEA_K0 > 0 an untrusted library stops the
  import (strict), leaves OEA off with a warning (SGLANG_OEA_STRICT=false),
  or loads with a warning (SGLANG_OEA_ALLOW_UNTRUSTED=true); a trusted one
  loads; a bare name is judged by the file the loader resolved it to.

Needs root (chown to uid 65534). Prints one line per case, then
`N passed, M failed`; exit 1 on any failure.
"""

import argparse
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile

from oea_testlib import RESULTS, VERBOSE, case, check

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("OEAPATCH_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
OEAPATCH = os.environ.get("OEAPATCH") or os.path.join(ROOT, "build", "src", "oeapatch")
ERA = os.path.join(ROOT, "tests", "fixtures", "eras", "2025-08_topk_config.py")
TARGET = "python/sglang/srt/layers/moe/topk.py"
MODULE = "_oeapatch_sglang_oea"
PREFIX = "SGLANG_OEA_"
NOBODY = 65534


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(PREFIX)}
    env.update(extra or {})
    return env


def build_trees(top, library):
    """{name: path of a liboea copy} for every arrangement this test judges."""
    trees = {}

    def d(rel, mode, owner=None):
        path = os.path.join(top, rel)
        os.makedirs(path, exist_ok=True)
        os.chmod(path, mode)
        if owner is not None:
            os.chown(path, owner, owner)
        return path

    def lib(rel, mode=0o644, owner=None):
        path = os.path.join(top, rel)
        shutil.copyfile(library, path)
        os.chmod(path, mode)
        if owner is not None:
            os.chown(path, owner, owner)
        return path

    def link(rel, to, owner=None):
        path = os.path.join(top, rel)
        os.symlink(to, path)
        if owner is not None:
            os.lchown(path, owner, owner)
        return path

    d("plain", 0o755)
    trees["umask 022"] = lib("plain/liboea.so")
    d("private", 0o700)
    trees["owner-only"] = lib("private/liboea.so", 0o600)
    d("f666", 0o755)
    trees["file 0666"] = lib("f666/liboea.so", 0o666)
    d("f664", 0o755)
    trees["file 0664 (group)"] = lib("f664/liboea.so", 0o664)
    # The sticky bit exempts directories only: a sticky file anyone can write is refused by both.
    d("f1666", 0o755)
    trees["sticky file 1666"] = lib("f1666/liboea.so", 0o1666)
    trees["sticky file 1664 (group)"] = lib("f1666/group.so", 0o1664)
    d("d777", 0o777)
    d("d777/lib", 0o755)
    trees["directory 0777 above"] = lib("d777/lib/liboea.so")
    d("d775", 0o775)
    trees["directory 0775 (group)"] = lib("d775/liboea.so")
    d("setgid", 0o2775)
    trees["setgid directory 2775"] = lib("setgid/liboea.so")
    d("sticky", 0o1777)
    d("sticky/root", 0o755)
    trees["root's directory under a sticky one"] = lib("sticky/root/liboea.so")
    d("sticky/other", 0o755, NOBODY)
    trees["another user's directory under a sticky one"] = lib("sticky/other/liboea.so")
    trees["file 0666 in a sticky directory"] = lib("sticky/liboea.so", 0o666)
    d("sticky770", 0o1770)
    trees["sticky 1770 directory"] = lib("sticky770/liboea.so")
    d("stickynobody", 0o1777, NOBODY)
    d("stickynobody/root", 0o755)
    trees["sticky directory another user owns"] = lib("stickynobody/root/liboea.so")
    d("links", 0o755)
    trees["link to a file under a 0777 directory"] = link("links/to-open.so", "../d777/lib/liboea.so")
    trees["link in a 0777 directory"] = link("d777/to-plain.so", os.path.join(top, "plain", "liboea.so"))
    trees["relative link with .."] = link("links/rel.so", "../links/../plain/./liboea.so")
    trees["link to a link"] = link("links/twice.so", "rel.so")
    trees["directory link to a 0777 directory"] = os.path.join(link("links/dirlink", "../d777"), "lib", "liboea.so")
    trees["another user's link in a sticky directory"] = link(
        "sticky/nobody-link.so", os.path.join(top, "plain", "liboea.so"), NOBODY)
    d("theirs", 0o755, NOBODY)
    trees["another user's tree"] = lib("theirs/liboea.so", 0o644, NOBODY)
    d("theirs/open", 0o777, NOBODY)
    trees["another user's tree, 0777 inside"] = lib("theirs/open/liboea.so", 0o644, NOBODY)
    return trees


def checkout(top, name, owner):
    root = os.path.join(top, name)
    os.makedirs(os.path.join(root, os.path.dirname(TARGET)))
    shutil.copyfile(ERA, os.path.join(root, TARGET))
    os.chown(os.path.join(root, TARGET), owner, owner)
    return root


def c_verdict(root, library):
    """None (passes) or the message of verify's trust:library check."""
    proc = subprocess.run([OEAPATCH, "verify", "-C", root, "--json"], capture_output=True,
                          env=clean_env({"SGLANG_OEA_LIBRARY": library}), timeout=60)
    doc = json.loads(proc.stdout.decode("utf-8"))
    checks = [c for c in doc["checks"] if c["check"] == "trust:library"]
    check(len(checks) == 1, "verify has no trust:library check (exit %d): %r" % (proc.returncode, doc["checks"]))
    if checks[0]["ok"]:
        check(not checks[0].get("warning"), "a warning without the escape: %r" % checks[0])
        return None
    return checks[0]["detail"].split("; whoever can change it")[0]


def load_module(directory, env):
    saved = dict(os.environ)
    try:
        for k in list(os.environ):
            if k.upper().startswith(PREFIX):
                del os.environ[k]
        os.environ.update(env)
        spec = importlib.util.spec_from_file_location(MODULE, os.path.join(directory, MODULE + ".py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        os.environ.clear()
        os.environ.update(saved)


class Capture(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--library", required=True)
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    VERBOSE[0] = args.v
    if os.geteuid() != 0:
        print("SKIP needs root (chown to uid %d)" % NOBODY)
        return 77
    library = os.path.realpath(args.library)

    with tempfile.TemporaryDirectory(prefix="oeapatch-trust-") as tmp:
        os.chmod(tmp, 0o755)
        os.makedirs(os.path.join(tmp, "t"))
        trees = build_trees(os.path.join(tmp, "t"), library)
        roots = {0: checkout(tmp, "root-target", 0), NOBODY: checkout(tmp, "nobody-target", NOBODY)}
        for owner, root in roots.items():
            proc = subprocess.run([OEAPATCH, "apply", "-C", root, "--library", library], env=clean_env(),
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                print("FAIL apply (target owner %d): exit %d: %s" % (owner, proc.returncode, proc.stderr))
                return 1
        moe = os.path.join(roots[0], os.path.dirname(TARGET))
        module = load_module(moe, {})

        verdicts = {0: [0, 0], NOBODY: [0, 0]}
        for name, path in sorted(trees.items()):
            for owner, root in roots.items():
                @case("%s, target owned by uid %d" % (name, owner))
                def same():
                    c = c_verdict(root, path)
                    py = module.trust_problem(path, owner)
                    check((c is None) == (py is None),
                          "verify says %s, the binding %s" % (c or "passes", py[1] if py else "passes"))
                    if c is not None:
                        check(c == py[1], "different messages:\n  verify:  %s\n  binding: %s" % (c, py[1]))
                    verdicts[owner][c is None] += 1
                    return "both pass" if c is None else "both refuse " + py[0][len(tmp):]
                same()

        @case("the trees hold both verdicts for each owner")
        def both_verdicts():
            check(all(v[0] and v[1] for v in verdicts.values()), repr(verdicts))
        both_verdicts()

        bad = trees["directory 0777 above"]
        good = trees["umask 022"]

        @case("import, K0=3, untrusted library, strict: the import stops, naming the path and the fix")
        def strict():
            try:
                load_module(moe, {"SGLANG_OEA_K0": "3", "SGLANG_OEA_LIBRARY": bad})
            except ImportError as exc:
                text = str(exc)
                check("refused" in text and os.path.join(tmp, "t", "d777") in text and "chmod go-w" in text, text)
                return
            raise AssertionError("the import went on")
        strict()

        @case("import, K0=3, untrusted library, not strict: a warning and OEA off")
        def lenient():
            cap = Capture()
            logging.getLogger(MODULE).addHandler(cap)
            try:
                m = load_module(moe, {"SGLANG_OEA_K0": "3", "SGLANG_OEA_LIBRARY": bad, "SGLANG_OEA_STRICT": "false"})
            finally:
                logging.getLogger(MODULE).removeHandler(cap)
            check(m._lib is None, "the library was loaded")
            check(m.DISABLED_REASON and "refused" in m.DISABLED_REASON, repr(m.DISABLED_REASON))
            check(any("refused" in line and "OFF" in line for line in cap.lines), repr(cap.lines))
        lenient()

        @case("import, K0=3, untrusted library, SGLANG_OEA_ALLOW_UNTRUSTED=true: loaded, with a warning")
        def allowed():
            cap = Capture()
            logging.getLogger(MODULE).addHandler(cap)
            try:
                m = load_module(moe, {"SGLANG_OEA_K0": "3", "SGLANG_OEA_LIBRARY": bad,
                                      "SGLANG_OEA_ALLOW_UNTRUSTED": "true"})
            finally:
                logging.getLogger(MODULE).removeHandler(cap)
            check(m._lib is not None, "not loaded: %r" % m.DISABLED_REASON)
            check(any("loaded anyway" in line for line in cap.lines), repr(cap.lines))
        allowed()

        @case("import, K0=3, trusted library: loaded, no warning about trust")
        def trusted():
            m = load_module(moe, {"SGLANG_OEA_K0": "3", "SGLANG_OEA_LIBRARY": good})
            check(m._lib is not None, "not loaded: %r" % m.DISABLED_REASON)
        trusted()

        @case("import, K0=3, a bare name the loader finds in a 0777 directory: refused")
        def bare():
            open_dir = os.path.join(tmp, "t", "d777", "lib")
            shutil.copyfile(library, os.path.join(open_dir, "liboea-bare.so"))
            code = ("import importlib.util, sys\n"
                    "spec = importlib.util.spec_from_file_location(%r, %r)\n"
                    "m = importlib.util.module_from_spec(spec)\n"
                    "try:\n"
                    "    spec.loader.exec_module(m)\n"
                    "except ImportError as exc:\n"
                    "    print('REFUSED', exc)\n"
                    "else:\n"
                    "    print('LOADED')\n" % (MODULE, os.path.join(moe, MODULE + ".py")))
            for where, want in ((open_dir, "REFUSED"), (os.path.dirname(good), "LOADED")):
                if where != open_dir:
                    shutil.copyfile(library, os.path.join(where, "liboea-bare.so"))
                proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                                      env=clean_env({"SGLANG_OEA_K0": "3", "SGLANG_OEA_LIBRARY": "liboea-bare.so",
                                                     "LD_LIBRARY_PATH": where}))
                check(proc.stdout.startswith(want), "LD_LIBRARY_PATH=%s: %r %r" % (where, proc.stdout, proc.stderr[-500:]))
                if want == "REFUSED":
                    check(os.path.join(open_dir) in proc.stdout or os.path.join(tmp, "t", "d777") in proc.stdout,
                          proc.stdout)
        bare()

    passed = sum(RESULTS)
    print("%d passed, %d failed" % (passed, len(RESULTS) - passed))
    return 0 if passed == len(RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
