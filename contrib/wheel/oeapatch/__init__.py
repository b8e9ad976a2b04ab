"""The `oeapatch` console entry of the wheel.

pip writes bin/oeapatch into the environment it installs into, with that
environment's interpreter in its #! line; this runs the real executable
(bin/oeapatch inside this package, beside lib/liboea and share/oeapatch)
and names that interpreter in OEAPATCH_ENTRY_PYTHON, so that with no -C
and no --python oeapatch acts on the SGLang installed in this same
environment (`man oeapatch`, "the venv default"). The executable reads the
variable once and removes it from its environment.
"""

import os
import sys

__all__ = ["main", "executable"]


def executable():
    """The path of the oeapatch executable this package carries."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "oeapatch")


def main():
    exe = executable()
    os.environ["OEAPATCH_ENTRY_PYTHON"] = sys.executable
    try:
        os.execv(exe, [sys.argv[0]] + sys.argv[1:])
    except OSError as exc:
        sys.stderr.write("oeapatch: %s: cannot run it: %s (a broken install: pip install --force-reinstall oeapatch)\n"
                         % (exe, exc.strerror))
        return 2
