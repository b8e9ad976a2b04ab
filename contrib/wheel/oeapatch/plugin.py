"""The per-process check: oeapatch's plugin for SGLang and vLLM.

`oeapatch verify` judges the files on disk before a restart; what finally
counts is the code each serving process imports. Both frameworks run the
plugins that pip-installed packages register, early in every process, before
work: SGLang from 0.5.11 (entry point group `sglang.srt.plugins`, run by
`load_plugins()`), vLLM (group `vllm.general_plugins`, run by
`load_general_plugins()`). The wheel registers `sglang()` and `vllm()` below
in those groups (pyproject.toml). With OEA requested (the definition's K0
variable set and not 0), each process that loads the plugin proves that

  1. the routing module it imports, found the way its import system will
     find it (its sys.meta_path, its sys.path, the parents it already
     imported; no package's __init__ is run for it), is the patched file: no
     package folder, extension module or bytecode without source wins over
     it; the code the process runs (the live module's functions where it is
     imported already, else the code object the loader hands the import, an
     unchecked-hash pyc included) has a function that calls the binding; a
     live module's binding is the module `apply` wrote beside it;
  2. the file, the binding, the library, the settings, the bytecode and the
     trust rules pass `oeapatch verify`: the wheel's own executable, run on
     the folder this process imports the package from, in this process's
     environment. Every rule has one implementation, verify's; none is
     repeated here;
  3. no other plugin hooks or replaces what OEA depends on: SGLang's
     HookRegistry entries on the routing module or the binding (read once
     every plugin has registered, after HookRegistry.apply_hooks()), a
     replacement of the function that holds the call site, and, at the
     model's first forward, a router or layer class that overrides it.

Whether OEA is requested, and what STRICT says, are not read here: with the
switch variable (K0) set at all, verify's JSON says what the binding will do
with this process's settings (settings.oea: on, off, stops; decision()), so
the plugin's verdict and the binding's behaviour are one decision. "stops"
(a value the binding refuses) stops the process now, whatever STRICT says,
as the binding's import would at the model's load.

It writes one line through the framework's logger (definition, settings,
library, decode detection) and the gauge `<framework>:oea_worker_verified`:
1, or 0 for a process that runs without OEA although OEA is requested: where
the framework's Prometheus multiprocess export is on
(PROMETHEUS_MULTIPROC_DIR), and for vLLM on a default server too
(metrics.py). When the code this process would run is not
the patched code, the process stops with the definition's STRICT setting on
(the default). SGLang's loader catches every Exception a plugin raises and
only logs it, so there the refusal is a SystemExit (NotInPlace). With strict
off, the plugin logs an error and exports 0.

With OEA off it writes one debug line and does nothing else. docs/deployment.md
of oeapatch, "The per-process check", is the user's description.

This module is the entry points and the order of the check; each step has a
module of the package: definition.py (the definition, as `oeapatch
definition --json` reads it), imports.py (step 1), verify.py (step 2 and the
one decision), conflicts.py (step 3), report.py (the line, the gauge, the
refusal).
"""

import logging
import os
import subprocess
import time

from . import metrics
from .conflicts import watch_conflicts
from .definition import FRAMEWORKS, NotInPlace, NotInPlaceError, definition
from .imports import examine, find_module
from .report import GAUGE_HELP, export, here, pending, refuse, refuse_start, state
from .report import line as the_line
from .verify import decision, switch_set

__all__ = ["sglang", "vllm", "check", "NotInPlace", "NotInPlaceError", "definition", "examine",
           "find_module"]

_done = set()  # frameworks checked in this process (loaders may run twice)
_state = state  # framework -> the last verdict, for tests and a debugger: dict


def sglang():
    """The entry point of the group sglang.srt.plugins."""
    check("sglang")


def vllm():
    """The entry point of the group vllm.general_plugins."""
    check("vllm")


def check(framework, environ=None):
    """The plugin: the checks above in this process, once per framework."""
    environ = os.environ if environ is None else environ
    if framework in _done:
        return _state.get(framework)
    _done.add(framework)
    log = logging.getLogger(FRAMEWORKS[framework]["logger"])
    start = time.perf_counter()
    try:
        d = definition(framework)
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired) as exc:
        log.error("oeapatch: the plugin cannot read its patch definition: %s (a broken "
                  "install: pip install --force-reinstall oeapatch)", exc)
        return None
    if not switch_set(d, environ):
        log.debug("oeapatch: OEA is off in this process (%s unset): nothing to check", d.switch)
        _state[framework] = {"requested": False}
        return _state[framework]
    try:
        out = examine(d, environ)
    except Exception as exc:  # noqa: BLE001 - an error of the check is a check not passed
        out = {"problems": ["the check itself failed: %s: %s" % (type(exc).__name__, exc)],
               "warnings": [], "target": None, "live": False}
    # One decision: the binding's, on these settings, as verify applies its rules.
    oea, reason, strict_on = decision(out)
    out["oea"], out["reason"] = oea, reason
    if oea == "off":
        log.debug("oeapatch: OEA is off in this process (%s): nothing to check", reason)
        _state[framework] = {"requested": False, "oea": oea, "reason": reason}
        return _state[framework]
    elapsed_ms = (time.perf_counter() - start) * 1000.0
    out["requested"], out["elapsed_ms"] = True, elapsed_ms
    # After the check's time: in the first process this imports
    # prometheus_client, which vLLM's API server imports for its own /metrics anyway.
    if FRAMEWORKS[framework].get("own_metrics"):
        try:
            metrics.setup(FRAMEWORKS[framework]["metric"], GAUGE_HELP, environ)
        except Exception as exc:  # noqa: BLE001 - metrics must not be what stops a start
            log.warning("oeapatch: OEA's series cannot be added to /metrics: %s", exc)
    if oea == "stops":
        out["verified"] = False
        _state[framework] = out
        export(framework, d, False, environ, log)
        refuse_start(framework, d, reason, log)
    out["verified"] = not out["problems"]
    _state[framework] = out
    for w in out["warnings"]:
        log.warning("oeapatch: %s", w)
    export(framework, d, out["verified"], environ, log)
    if out["problems"]:
        refuse(framework, d, out["problems"], environ, log, strict_on,
               fix=(out.get("verify") or {}).get("fix"))
        return out
    line = the_line(d, out, elapsed_ms)
    if not log.hasHandlers() or not log.isEnabledFor(logging.INFO):
        # A process whose logging is set up after its plugins load (SGLang's
        # scheduler: load_plugins() is the first statement of a spawned
        # process, configure_logger() comes after it): an INFO record would
        # reach no handler, or be dropped by the level in force before the
        # framework sets its own (SGLang's engine process: load_plugins()
        # comes before configure_logger()). It is written at the model's
        # first forward (in a forked child too, which inherits it),
        # through the framework's format (with its TP/DP prefix), or now where
        # no forward can be watched.
        pending.append(line)
    else:
        log.info("%s", here(line))
    watch_conflicts(framework, d, out, environ, log, strict_on)
    while pending:
        log.info("%s", here(pending.pop(0)))
    return out

