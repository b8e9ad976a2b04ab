"""What the check says: the plugin's one line, the gauge, and the refusal
that stops a process (strict) or is logged."""

import os

from . import metrics
from .definition import FRAMEWORKS

state = {}  # framework -> the last verdict, for tests and a debugger: dict
pending = []  # the line, until the process's logging has a handler


def _check_detail(doc, name):
    for c in (doc or {}).get("checks", []):
        if c.get("check") == name:
            return c.get("detail") or ""
    return ""


def _decode_detection(d, out, speculative):
    """DECODE_DETECTION of the binding that verify has just proved intact,
    evaluated for this process's speculative setting: the adapter's own
    words, not a copy of them."""
    import ast

    path = os.path.join(os.path.dirname(out["file"]), d.module + ".py")
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return "?"
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", None) == "DECODE_DETECTION"):
            try:
                value = eval(compile(ast.Expression(node.value), path, "eval"),  # noqa: S307
                             {"__builtins__": {}}, {"SPECULATIVE": speculative})
            except Exception:  # noqa: BLE001 - a description, not a verdict
                return "?"
            return str(value)
    return "?"


def line(d, out, elapsed_ms):
    doc = out["verify"] or {}
    eff = (doc.get("settings") or {}).get("effective") or {}
    # verify's effective stats are the binding's: true in shadow mode whatever
    # STATS says (patch.ini's forced_by, read by both)
    stats = eff.get("stats")
    library = _check_detail(doc, "library")
    library = library.split("; ", 1)[0]  # path, ABI, version, CUDA or CPU
    # mode: on, or shadow (decided and counted, the framework's routing kept);
    # record: the recorder's file stem (issue 33), where set
    return ("oeapatch: OEA in place in this process (pid {pid}): %s, k0=%s%s, batches of %s..%s "
            "valid rows, strict=%s, speculative=%s, stats=%s%s; liboea %s; decode detection: "
            "%s; %s.%s calls the binding (%s, %s); checked in %.0f ms" % (
                d.patch, eff.get("k0"),
                (", mode=%s" % eff["mode"]) if eff.get("mode") else "", eff.get("min_batch"),
                eff.get("max_tokens"), eff.get("strict"), eff.get("speculative"),
                ("every %s s" % eff.get("stats_interval")) if stats else "off",
                (", recording to %s-rank<R>-<pid>.safetensors" % eff["record"])
                if eff.get("record") else "", library,
                _decode_detection(d, out, bool(eff.get("speculative"))), out["target"],
                out["function"], out["file"], "imported" if out["live"] else "not imported yet",
                elapsed_ms))


def here(line):
    """The line with the pid of the process that writes it (a forked child
    writes the line its parent's check made: the same code, inherited)."""
    return line.replace("{pid}", str(os.getpid()), 1)


GAUGE_HELP = ("1: oeapatch's plugin proved that this process runs the patched routing with "
               "OEA requested; 0: OEA is requested and this process runs without it")


def export(framework, d, verified, environ, log):
    """The gauge, where the framework's multiprocess Prometheus export is on,
    else into the folder of a default vLLM server (metrics.py)."""
    if not environ.get("PROMETHEUS_MULTIPROC_DIR"):
        folder = environ.get(metrics.ENV)
        if not folder:
            return False
        try:
            metrics.write(folder, "verified-%d.json" % os.getpid(),
                          {"patch": d.patch, "pid": os.getpid(), "value": 1 if verified else 0})
        except OSError as exc:
            log.warning("oeapatch: the gauge %s could not be written to %s: %s",
                        FRAMEWORKS[framework]["metric"], folder, exc)
            return False
        return True
    try:
        from prometheus_client import Gauge

        gauge = Gauge(FRAMEWORKS[framework]["metric"], GAUGE_HELP, ("patch",), registry=None,
                      multiprocess_mode="liveall")
        gauge.labels(d.patch).set(1 if verified else 0)
    except Exception as exc:  # noqa: BLE001 - the export must not be what stops a start
        log.warning("oeapatch: the gauge %s could not be exported: %s",
                    FRAMEWORKS[framework]["metric"], exc)
        return False
    return True


def refuse(framework, d, problems, environ, log, strict_on, fix=None):
    """Stop (strict) or log. `fix`: the command verify's JSON names for a
    target it finds not applied ("fix"), its own words, said as they are."""
    text = ("oeapatch: %sK0 asks for OEA, but this process (pid %d) would run without it: %s"
            % (d.prefix, os.getpid(), "; ".join(problems)))
    how = ("run `%s`, then start again; " % fix) if fix else ""
    if strict_on:
        log.error("%s. Stopping (%sSTRICT is on; false would start without OEA).%s", text,
                  d.prefix, (" To fix: %s." % how.rstrip("; ")) if fix else "")
        raise FRAMEWORKS[framework]["refusal"](
            "%s. Stopped by the oeapatch plugin (%sSTRICT is on; %s`oeapatch verify` and "
            "`man oeapatch`, \"The per-process check\", say what to do)."
            % (text, d.prefix, how))
    log.error("%s. Starting without OEA (%sSTRICT=false).%s", text, d.prefix,
              (" To fix: %s." % how.rstrip("; ")) if fix else "")


def refuse_start(framework, d, reason, log):
    """The binding refuses a value: its import raises SettingError, whatever
    STRICT says, so the process cannot start. Said now, with the binding's
    reason, rather than at the model's load."""
    text = ("oeapatch: this process (pid %d) cannot start with these settings: %s"
            % (os.getpid(), reason))
    log.error("%s. Stopping now rather than at the model's load.", text)
    raise FRAMEWORKS[framework]["refusal"](
        "%s. Stopped by the oeapatch plugin (`oeapatch verify` names every bad value)." % text)

