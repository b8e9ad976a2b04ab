#!/usr/bin/python3
"""The wheel's plugin and patch.ini cannot drift apart (issue 37): the
plugin (contrib/wheel/oeapatch/definition.py) takes the definition it checks
a process against from `oeapatch definition --json`, the CLI's one reader of
patch.ini (inih), not from a parser of its own.

For each bundled definition, a copy is changed the way a maintainer might:
the binding module renamed, with an inline comment (inih strips " ; ...",
a configparser without inline comment prefixes keeps it in the value), the
alias the templates bind renamed, and the switch moved to another int
setting. `oeapatch apply` with the copy patches a fixture; then the plugin's
reading of the copy must name the module apply wrote, find the call site in
the patched file by the names it expects (what the plugin looks for in the
code a process imports), and name the switch the written binding turns on.
The unchanged definition's reading must not find that call site (the test
can tell a stale reading from a right one).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "contrib", "wheel"))

from oea_testlib import case, check, library_args, summary  # noqa: E402
from oeapatch.definition import Definition  # noqa: E402
from oeapatch.imports import call_sites  # noqa: E402

CLI = os.environ.get("OEAPATCH") or os.path.join(ROOT, "build", "src", "oeapatch")
CASES = [
    ("sglang-oea", "tests/fixtures/eras/2026-02_post_process.py", "python/sglang/srt/layers/moe/topk.py"),
    ("vllm-oea", "tests/fixtures/vllm-0.15-router.py", "vllm/model_executor/layers/fused_moe/router/base_router.py"),
]


def drifted(src, work):
    """A copy of definition `src` with the module, alias and switch changed."""
    dst = os.path.join(work, "def-" + os.path.basename(src))
    shutil.copytree(src, dst)
    shutil.copytree(os.path.join(os.path.dirname(src), "binding-core"), os.path.join(work, "binding-core"))
    ini = os.path.join(dst, "patch.ini")
    with open(ini, encoding="utf-8") as f:
        text = f.read()
    text, n = re.subn(r"^module = \S+$", "module = _oeapatch_drifted ; renamed by the test", text, flags=re.M)
    check(n == 1, "no [binding] module line in %s" % ini)
    # The switch moves from K0 to MIN_BATCH (both int settings).
    text, n = re.subn(r"^switch = yes\n", "", text, flags=re.M)
    check(n == 1, "no switch line in %s" % ini)
    text, n = re.subn(r"^(\[setting:\w+_MIN_BATCH\]\n)", r"\1switch = yes\n", text, flags=re.M)
    check(n == 1, "no MIN_BATCH setting in %s" % ini)
    with open(ini, "w", encoding="utf-8") as f:
        f.write(text)
    for name in ("import.py", "callsite.py"):
        path = os.path.join(dst, "templates", name)
        with open(path, encoding="utf-8") as f:
            body = f.read()
        with open(path, "w", encoding="utf-8") as f:
            f.write(body.replace("_oeapatch_oea", "_oea_drifted"))
    return dst


def one(name, fixture, target, library):
    @case("%s: the plugin reads a changed definition as oeapatch applies it" % name)
    def run():
        work = tempfile.mkdtemp(prefix="plugin-def-")
        try:
            d_src = os.path.join(ROOT, "patches", name)
            d_dir = drifted(d_src, work)
            co = os.path.join(work, "co")
            path = os.path.join(co, target)
            os.makedirs(os.path.dirname(path))
            shutil.copyfile(os.path.join(ROOT, fixture), path)
            p = subprocess.run([CLI, "-C", co, "--patch", d_dir, "apply", "--library", library],
                               capture_output=True, text=True)
            check(p.returncode == 0, "apply with the changed definition: %s" % (p.stdout + p.stderr)[-800:])
            d = Definition(d_dir, exe=CLI)
            written = os.path.join(os.path.dirname(path), d.module + ".py")
            check(d.module == "_oeapatch_drifted" and os.path.isfile(written),
                  "the plugin's module %r, apply wrote %s" % (
                      d.module, os.listdir(os.path.dirname(path))))
            with open(path, encoding="utf-8") as f:
                code = compile(f.read(), path, "exec")
            sites = call_sites(code, d.names)
            check(d.alias == "_oea_drifted" and sites,
                  "the plugin's names %s find no call site in the patched file" % sorted(d.names))
            with open(written, encoding="utf-8") as f:
                module = f.read()
            table = re.search(r"^SETTINGS_TABLE = \(\n(.*?)^\)$", module, re.S | re.M)
            check(table, "no SETTINGS_TABLE in %s" % written)
            switch = [ln for ln in table.group(1).splitlines() if '"switch": True' in ln]
            check(d.switch and d.switch.endswith("_MIN_BATCH") and len(switch) == 1 and d.switch in switch[0],
                  "the plugin's switch %r, the binding's %r" % (d.switch, switch))
            doc = json.loads(subprocess.run([CLI, "--patch", d_dir, "--json", "definition"],
                                            capture_output=True, text=True).stdout)
            check(doc["installed_targets"] == d.targets and doc["binding"]["env_prefix"] == d.prefix,
                  "targets/prefix: %r %r" % (d.targets, d.prefix))
            stale = Definition(d_src, exe=CLI)
            check(not call_sites(code, stale.names),
                  "the unchanged definition's names %s find the changed call site too: the test "
                  "could not tell a stale reading" % sorted(stale.names))
            return "module %s, alias %s, switch %s" % (d.module, d.alias, d.switch)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    run()


def main():
    args = library_args(__doc__)
    for name, fixture, target in CASES:
        one(name, fixture, target, args.library)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
