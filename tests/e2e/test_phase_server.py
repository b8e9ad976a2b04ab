#!/usr/bin/python3
"""The phase server's extension (tests/e2e/phase_server.py, PhaseServer.extend),
which the real-release suites use to import the part of a framework's chain
that the patch never changes once per release instead of once per phase. What
makes that safe is checked here on a package written into a temporary folder
(no framework needed; this interpreter, nothing preloaded):
  - an extended module is inherited by every child (imported in the server,
    once), and the child's sys.path is what a new interpreter would have;
  - a module named in `never` is still imported by each child anew, from the
    file as it is at that moment (the suites patch it between phases);
  - an extension that pulls in a `never` module, or anything of ours
    ("_oeapatch" in its name), is refused naming it, and the server goes on
    with the extension it had before (children never see the refused one);
  - an import that prints on stdout during the extension does not break the
    request channel;
  - once extended, a request with another PYTHONPATH is refused (a stub the
    server imported would stay imported).
"""

import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from oea_testlib import case, check, library_args, summary  # noqa: E402
from phase_server import PhaseServer  # noqa: E402

PROBE = ("import sys, pkg.target as t; "
         "print('CHAIN', 'pkg.chain' in sys.modules and sys.modules['pkg.chain'].PID != __import__('os').getpid()); "
         "print('TARGET', t.VERSION); "
         "print('PULLS', 'pkg.pulls' in sys.modules); "
         "print('PATH', sys.path[:3])")


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def lines(out, key):
    return [ln[len(key) + 1:] for ln in out.splitlines() if ln.startswith(key + " ")]


def main():
    library_args(__doc__)
    root = tempfile.mkdtemp(prefix="oea-phase-server-")
    write(root, "pkg/__init__.py", "")
    # The chain: imported at most once per server (its PID says where).
    write(root, "pkg/chain.py", "import os\nPID = os.getpid()\nprint('chain says hello')\n")
    write(root, "pkg/target.py", "VERSION = 1\n")
    write(root, "pkg/pulls.py", "import pkg.target\n")
    write(root, "pkg/_oeapatch_binding.py", "")
    write(root, "pkg/ours.py", "import pkg._oeapatch_binding\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env_pp = dict(env, PYTHONPATH=root)
    server = PhaseServer(sys.executable, preload=(), env=env)
    try:
        @case("extend: the chain is imported into the server, refusing nothing")
        def _():
            error = server.extend(["pkg.chain"], root, never=["pkg.target"])
            check(error is None, "refused: %s" % error)
        _()

        @case("a child inherits the chain, imports the never-module from its file")
        def _():
            rc, out, err = server.run(["-c", PROBE], env_pp)
            check(rc == 0, "rc %d: %s" % (rc, err[-800:]))
            check(lines(out, "CHAIN") == ["True"], "chain not inherited: %s" % out)
            check(lines(out, "TARGET") == ["1"], out)
            path = eval(lines(out, "PATH")[0])
            check(path[0] == "" and path[1] == root and path[2] != root,
                  "sys.path as a new interpreter's: %r" % path)
            write(root, "pkg/target.py", "VERSION = 2  # changed between phases\n")
            rc, out, err = server.run(["-c", PROBE], env_pp)
            check(lines(out, "TARGET") == ["2"], "the next child saw %s" % out)
            return "the changed file's VERSION 2 seen by the next child"
        _()

        @case("an extension that pulls in a never-module is refused, naming it")
        def _():
            error = server.extend(["pkg.pulls"], root, never=["pkg.target"])
            check(error and "pkg.target" in error, "not refused: %r" % error)
            rc, out, err = server.run(["-c", PROBE], env_pp)
            check(rc == 0 and lines(out, "PULLS") == ["False"] and lines(out, "CHAIN") == ["True"],
                  "after the refusal: rc %d %s %s" % (rc, out, err[-500:]))
            return error
        _()

        @case("an extension that pulls in a module of ours is refused")
        def _():
            error = server.extend(["pkg.ours"], root, never=["pkg.target"])
            check(error and "_oeapatch_binding" in error, "not refused: %r" % error)
            return error
        _()

        @case("an extended server refuses a request with another PYTHONPATH")
        def _():
            rc, out, err = server.run(["-c", "print(1)"], env)
            check(rc == 2 and "PYTHONPATH" in err, "rc %d, %r" % (rc, err))
        _()
    finally:
        server.close()
    return summary()


if __name__ == "__main__":
    sys.exit(main())
