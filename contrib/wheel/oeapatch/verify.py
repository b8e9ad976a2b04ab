"""Step 2 of the check: `oeapatch verify --json` on the folder this process
imports the package from, in this process's environment; and what the
binding does with these settings, as verify reports it (one decision)."""

import json
import subprocess

from .definition import VERIFY_TIMEOUT_S, executable


def switch_set(d, environ):
    """Whether the switch variable (K0) is in the environment at all. Unset,
    the binding runs on its default, off (a switch's default turns the
    binding off: docs/patch-definitions.md), and the plugin has nothing to
    ask; set to any value, verify says what the binding makes of it."""
    return d.switch is not None and environ.get(d.switch) is not None


def decision(out):
    """What the binding does with this process's settings, as verify reports
    it (settings.oea: "on", "off" or "stops", and settings.reason), and
    settings.effective's strict: (oea, reason, strict). (None, None, True)
    when verify gave no settings: the binding's rules could not be asked, and
    STRICT's own default (on) is taken."""
    settings = (out.get("verify") or {}).get("settings") or {}
    oea = settings.get("oea")
    if oea not in ("on", "off", "stops"):
        return None, None, True
    strict_on = (settings.get("effective") or {}).get("strict")
    return oea, settings.get("reason"), strict_on is not False


def run_verify(d, out, environ):
    exe = executable()
    cmd = [exe, "-C", out["root"], "--patch", d.dir, "--json", "verify"]
    try:
        proc = subprocess.run(cmd, env=dict(environ), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=VERIFY_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        out["problems"].append("`oeapatch verify` could not run (%s): %s (a broken install: "
                               "pip install --force-reinstall oeapatch)" % (exe, exc))
        return
    try:
        doc = json.loads(proc.stdout.decode("utf-8", "replace"))
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        out["problems"].append("`oeapatch verify -C %s` exited %d: %s" % (
            out["root"], proc.returncode,
            proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or "no output"))
        return
    out["verify"] = doc
    # A settings check that fails on a name the binding ignores (a typo of a
    # setting's name) fails verify, rightly, before a start; it does not
    # change whether this process runs OEA, so here it is a warning.
    refused = [p.get("variable") or "" for p in (doc.get("settings") or {}).get("problems", [])
               if p.get("refused") and p.get("severity") == "error"]
    for c in doc.get("checks", []):
        detail = c.get("detail") or ""
        if not c.get("ok", True) and c.get("check") == "settings" and not any(
                detail.startswith(v + "=") or detail.startswith(v + " (") for v in refused):
            out["warnings"].append("verify: settings: %s (the binding ignores it: it does not "
                                   "change whether this process runs OEA)" % detail)
        elif not c.get("ok", True):
            out["problems"].append("verify: %s: %s" % (c.get("check"), c.get("detail")))
        elif c.get("warning"):
            out["warnings"].append("verify: %s: %s" % (c.get("check"), c.get("detail")))
    if not doc.get("ok") and not any(p.startswith("verify: ") for p in out["problems"] + out["warnings"]):
        out["problems"].append("`oeapatch verify -C %s` failed: %s" % (
            out["root"], doc.get("error") or proc.stderr.decode("utf-8", "replace").strip()))

