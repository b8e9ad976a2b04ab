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
"""

import configparser
import json
import logging
import os
import re
import subprocess
import sys
import time

from . import metrics
from .owners import framework_code, importers, owner_text

__all__ = ["sglang", "vllm", "check", "NotInPlace", "NotInPlaceError"]

_BLANKS = " \t\n\r\v\f"
_HERE = os.path.dirname(os.path.abspath(__file__))
_VERIFY_TIMEOUT_S = 120


class NotInPlace(SystemExit):
    """OEA was requested and this process would run without it (strict on).
    A SystemExit: SGLang's load_plugins() catches every Exception a plugin
    raises and only logs it, and a refusal that is logged is not one."""


class NotInPlaceError(RuntimeError):
    """The same refusal where the framework lets a plugin's exception through
    (vLLM's load_general_plugins() calls plugins outside any try): an
    ordinary exception, which vLLM reports like any failed start."""


# What differs between the frameworks. Everything about the patch itself
# (targets, binding module, the settings' names) comes from the definition
# this wheel carries.
_FRAMEWORKS = {
    "sglang": {"definition": "sglang-oea", "logger": "sglang.srt.plugins.oeapatch",
               "metric": "sglang:oea_worker_verified", "refusal": NotInPlace},
    # own_metrics: a default server's /metrics shows only its API server
    # process's registry (metrics.py); SGLang's metrics always set up the
    # multiprocess folder (--enable-metrics), and without them there is no /metrics.
    "vllm": {"definition": "vllm-oea", "logger": "vllm.plugins.oeapatch",
             "metric": "vllm:oea_worker_verified", "refusal": NotInPlaceError,
             "own_metrics": True},
}

_done = set()  # frameworks checked in this process (loaders may run twice)
_state = {}  # framework -> the last verdict, for tests and a debugger: dict


def sglang():
    """The entry point of the group sglang.srt.plugins."""
    check("sglang")


def vllm():
    """The entry point of the group vllm.general_plugins."""
    check("vllm")


# ------------------------------------------------------------ the definition

class Definition:
    """What the check needs of a patch definition: patch.ini, and the two
    templates that say how the call site names the binding."""

    def __init__(self, directory):
        ini = configparser.ConfigParser(interpolation=None, comment_prefixes=(";", "#"),
                                        strict=False)
        with open(os.path.join(directory, "patch.ini"), encoding="utf-8") as f:
            ini.read_file(f)
        self.dir = directory
        self.name = ini.get("patch", "name")
        self.version = ini.get("patch", "version")
        self.targets = ini.get("patch", "installed_target").split()
        self.module = ini.get("binding", "module")
        self.prefix = ini.get("binding", "env_prefix")
        # The variable that turns OEA on: only its name is read here. What a
        # value means (on, off, refused) and what STRICT says are the
        # binding's rules, which `oeapatch verify --json` applies and reports
        # as settings.oea (see decision()): the plugin parses no value itself.
        self.switch = next((sec[len("setting:"):] for sec in ini.sections()
                            if sec.startswith("setting:")
                            and ini.get(sec, "switch", fallback="no").strip().lower() == "yes"),
                           None)
        imp = self._read(ini.get("region:import", "template"))
        call = self._read(ini.get("region:callsite", "template"))
        # `from . import {{module}} as ALIAS`, then `ALIAS.NAME`: the code of
        # the function that holds the call site names ALIAS and each NAME.
        alias = re.search(r"\bimport\s+\{\{module\}\}\s+as\s+(\w+)", imp)
        if alias is None:
            raise ValueError("%s: its import template binds no alias" % directory)
        self.alias = alias.group(1)
        self.names = {self.alias} | set(re.findall(r"\b%s\.(\w+)" % re.escape(self.alias), call))

    def _read(self, rel):
        with open(os.path.join(self.dir, rel), encoding="utf-8") as f:
            return f.read()

    @property
    def patch(self):
        return "%s/%s" % (self.name, self.version)


def definition(framework):
    """The definition the wheel carries for `framework` (sglang, vllm)."""
    return Definition(os.path.join(_HERE, "share", "oeapatch", "patches",
                                   _FRAMEWORKS[framework]["definition"]))


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


# ------------------------------------------- what this process will import

def _find_spec(name, path):
    """The spec the import system would take for `name`, from this process's
    sys.meta_path, given its parent's search path (None: top level). Finding
    runs no module's code."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        spec = find(name, None if path is None else list(path), None)
        if spec is not None:
            return spec
    return None


def find_module(fullname):
    """(spec, live module): the live module where this process imported it,
    else the spec its import would take, each parent's search path taken from
    the parent where it is imported already and from its spec where not (its
    __init__ is not run, so a package that rewrites its own __path__ while
    importing is seen as it is before). (None, None): not importable."""
    live = sys.modules.get(fullname)
    if live is not None:
        return getattr(live, "__spec__", None), live
    parts = fullname.split(".")
    path, spec = None, None
    for i in range(len(parts)):
        name = ".".join(parts[:i + 1])
        parent = sys.modules.get(name)
        if parent is not None:
            spec, path = getattr(parent, "__spec__", None), getattr(parent, "__path__", None)
        else:
            spec = _find_spec(name, path)
            if spec is None:
                return None, None
            path = spec.submodule_search_locations
        if i < len(parts) - 1 and path is None:
            return None, None
    return spec, None


def _folder_of(spec, leaf):
    """The folder the module `leaf` is looked up in, from its spec."""
    if spec.submodule_search_locations is not None and spec.origin in (None, "namespace"):
        return os.path.dirname(list(spec.submodule_search_locations)[0])
    if spec.submodule_search_locations is not None:
        return os.path.dirname(os.path.dirname(spec.origin))
    return os.path.dirname(spec.origin)


def _shadow(spec, expected):
    """Why the spec is not the source file `expected`: None when it is."""
    from importlib.machinery import ExtensionFileLoader, SourceFileLoader, SourcelessFileLoader

    if spec.submodule_search_locations is not None:
        where = list(spec.submodule_search_locations)[0]
        return "the package folder %s/ wins over %s" % (where, expected)
    if isinstance(spec.loader, ExtensionFileLoader):
        return "the extension module %s wins over %s" % (spec.origin, expected)
    if isinstance(spec.loader, SourcelessFileLoader):
        return "the bytecode %s (no source beside it) wins over %s" % (spec.origin, expected)
    if not isinstance(spec.loader, SourceFileLoader):
        return "%s is imported by %s.%s, not from %s" % (
            spec.name, type(spec.loader).__module__, type(spec.loader).__qualname__, expected)
    if os.path.realpath(spec.origin) != os.path.realpath(expected):
        return "%s is imported from %s, not from %s" % (spec.name, spec.origin, expected)
    return None


def call_sites(code, names, path=()):
    """The qualified names (tuples) of the functions in `code` whose own code
    names every one of `names`: the function that holds the call site."""
    found = []
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            sub = path + (const.co_name,)
            if names <= set(const.co_names):
                found.append(sub)
            found += call_sites(const, names, sub)
    return found


def _code_at(code, qualname):
    for part in qualname:
        code = next((c for c in code.co_consts if hasattr(c, "co_names") and c.co_name == part),
                    None)
        if code is None:
            return None
    return code


def _carries(fn, names):
    code = getattr(fn, "__code__", None)
    return code is not None and names <= set(code.co_names)


def _unwrap(obj):
    """The function behind a staticmethod/classmethod and any wrappers that
    say what they wrap (functools.wraps): (function, [wrappers])."""
    wrappers = []
    obj = getattr(obj, "__func__", obj)
    for _ in range(32):
        inner = getattr(obj, "__wrapped__", None)
        if inner is None:
            break
        wrappers.append(obj)
        obj = getattr(inner, "__func__", inner)
    return obj, wrappers


def _lookup(module, qualname):
    """The object at `qualname` in the live module, class attributes read from
    the class's own dict where they are (no descriptor protocol)."""
    obj = module
    for part in qualname:
        nxt = vars(obj).get(part) if isinstance(obj, type) else getattr(obj, part, None)
        if nxt is None and isinstance(obj, type):
            nxt = getattr(obj, part, None)
        if nxt is None:
            return None
        obj = nxt
    return obj


def examine(d, environ=None):
    """Steps 1 and 2 for definition `d` in this process: a dict with
    target (module name), file, root, problems (list), warnings (list),
    live (bool), function (the call site's qualified name), verify (its
    JSON document, or None)."""
    environ = os.environ if environ is None else environ
    out = {"target": None, "file": None, "root": None, "problems": [], "warnings": [],
           "live": False, "function": None, "verify": None}
    problems = out["problems"]
    for rel in d.targets:
        fullname = rel[:-len(".py")].replace("/", ".")
        spec, live = find_module(fullname)
        if spec is not None or live is not None:
            break
    else:
        problems.append("none of %s is importable in this process (sys.path: %s)"
                        % (", ".join(d.targets), os.pathsep.join(sys.path)))
        return out
    out["target"], out["live"] = fullname, live is not None
    if spec is None or spec.origin is None and spec.submodule_search_locations is None:
        problems.append("%s is imported, but not from a file (no __spec__.origin)" % fullname)
        return out
    folder = _folder_of(spec, fullname.rpartition(".")[2])
    expected = os.path.join(folder, os.path.basename(rel))
    out["file"] = expected
    rel_folder = os.path.dirname(rel)
    if os.path.normpath(folder).endswith(os.sep + os.path.normpath(rel_folder)):
        out["root"] = os.path.normpath(folder)[:-len(os.path.normpath(rel_folder)) - 1] or os.sep
    shadow = _shadow(spec, expected)
    if shadow:
        problems.append(shadow + ": this process would not run the patched file")
    else:
        _examine_code(d, fullname, spec, live, folder, expected, out)
    if out["root"] is None:
        problems.append("%s is not under a folder named like %s: verify cannot be run on it"
                        % (expected, rel_folder))
        return out
    # Also where the import takes another file: verify's settings verdict is
    # what says whether OEA is asked for at all (decision()).
    _run_verify(d, out, environ)
    return out


def _examine_code(d, fullname, spec, live, folder, expected, out):
    """Step 1 for the source file the import takes: its code has the call site."""
    problems = out["problems"]
    try:
        code = spec.loader.get_code(fullname)
    except (ImportError, SyntaxError, OSError, ValueError, EOFError) as exc:
        problems.append("%s cannot be loaded as the import would load it: %s" % (expected, exc))
        return
    sites = call_sites(code, d.names) if code is not None else []
    if not sites:
        problems.append(_no_call_site(d, spec, expected))
    else:
        out["function"] = ".".join(sites[0])
        out["sites"] = [".".join(q) for q in sites]
    if live is not None and sites:
        _examine_live(d, live, out)
    elif live is None and sites:
        _examine_binding_spec(d, fullname, spec, folder, out)


def _no_call_site(d, spec, expected):
    """Why the code the import takes has no call site: stale bytecode (the
    source has one), or an unpatched file."""
    from importlib.util import cache_from_source

    try:
        with open(expected, "rb") as f:
            source = f.read()
    except OSError as exc:
        return "%s cannot be read: %s" % (expected, exc.strerror)
    if d.alias.encode() in source:
        try:
            compiled = compile(source, expected, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            compiled = None
        if compiled is not None and call_sites(compiled, d.names):
            return ("the bytecode %s runs in place of the patched %s: it was compiled from "
                    "other bytes (a stale unchecked-hash pyc, or a timestamp pyc whose "
                    "recorded mtime and size match) and carries no OEA call site"
                    % (cache_from_source(expected), expected))
    return "%s has no OEA call site (no function of it calls the binding %s): not patched" % (
        expected, d.module)


def _framework_modules(cls, top):
    """The modules of the framework's own classes in cls's MRO: a method
    defined anywhere else (another plugin's module, a model's) is not the
    framework's."""
    return {k.__module__ for k in cls.__mro__ if k.__module__.split(".")[0] == top}


_callers_cache = {}


def protected(live, site):
    """What OEA depends on for the call site `site` (a qualified name in the
    live module): the function itself and, for a method, every method of its
    class's framework ancestors whose code, as their files have it, calls it
    by name (vLLM 0.33: FusedMoERouter.select_experts calls
    self._select_experts, which holds the call site): replacing one of them
    skips OEA as surely. Returns [(owner class or module, name)]."""
    if len(site) == 1:
        return [(live, site[0])]
    cls = _lookup(live, site[:-1])
    if not isinstance(cls, type):
        return []
    key = (cls, site[-1])
    if key not in _callers_cache:
        top = live.__name__.split(".")[0]
        names = [site[-1]]
        for klass in cls.__mro__:
            if klass.__module__.split(".")[0] != top:
                continue
            body = _class_code(klass)
            for const in (body.co_consts if body is not None else ()):
                if (hasattr(const, "co_names") and site[-1] in const.co_names
                        and const.co_name not in names):
                    names.append(const.co_name)
        _callers_cache[key] = names
    return [(cls, name) for name in _callers_cache[key]]


def _class_code(klass):
    """The code of klass's body as its module's file has it (None: unknown)."""
    module = sys.modules.get(klass.__module__)
    spec = getattr(module, "__spec__", None)
    try:
        code = spec.loader.get_code(spec.name)
    except Exception:  # noqa: BLE001 - a class we cannot read is not reported
        return None
    return _code_at(code, klass.__qualname__.split(".")) if code is not None else None


def _examine_live(d, live, out):
    """The module is imported already: what runs is its live functions."""
    problems = out["problems"]
    file_ = getattr(live, "__file__", None)
    if file_ and os.path.realpath(file_) != os.path.realpath(out["file"]):
        problems.append("this process imported %s from %s, not from %s"
                        % (out["target"], file_, out["file"]))
    top = out["target"].split(".")[0]
    for site in out.get("sites", ()):
        site = tuple(site.split("."))
        for owner, name in protected(live, site):
            text = "%s.%s" % (getattr(owner, "__qualname__", None) or owner.__name__, name)
            obj = getattr(owner, name, None)
            if obj is None:
                problems.append("%s is gone" % text)
                continue
            fn, wrappers = _unwrap(obj)
            problem = _not_original(d, top, owner, name == site[-1], fn)
            if problem:
                problems.append("%s, as this process runs it, %s" % (text, problem))
            for w in wrappers:
                out["warnings"].append("%s is wrapped by %s: it can undo or mis-order OEA's "
                                       "re-routing" % (text, owner_text(w)))
        if len(site) == 1:
            _examine_importers(d, live, site[0], out)
    binding = getattr(live, d.alias, None)
    want = os.path.join(os.path.dirname(out["file"]), d.module + ".py")
    if binding is None:
        problems.append("the imported %s has no binding (%s)" % (out["target"], d.alias))
    elif os.path.realpath(getattr(binding, "__file__", "") or "") != os.path.realpath(want):
        problems.append("the binding this process imported is %s, not %s (written by apply)"
                        % (getattr(binding, "__file__", None), want))


def _examine_importers(d, live, name, out):
    """A module-level call site is also reached through the modules that
    imported it by name: a replacement there skips OEA in their callers."""
    top = live.__name__.split(".")[0]
    current, _ = _unwrap(vars(live).get(name))
    for module, obj in importers(live, name):
        text = "%s.%s (imported from %s)" % (module.__name__, name, live.__name__)
        fn, wrappers = _unwrap(obj)
        if fn is not current:
            problem = _not_original(d, top, live, True, fn)
            if problem:
                out["problems"].append("%s, as this process runs it, %s" % (text, problem))
            continue
        for w in wrappers:
            out["warnings"].append("%s is wrapped by %s: it can undo or mis-order OEA's "
                                   "re-routing" % (text, owner_text(w)))


def _not_original(d, top, owner, is_site, fn):
    """Why `fn`, found on `owner` (a class, or the module) where OEA needs the
    framework's own function, is not it: None when it is."""
    allowed = (_framework_modules(owner, top) if isinstance(owner, type)
               else {owner.__name__})
    if not framework_code(fn, allowed):
        return "was replaced by %s" % owner_text(fn)
    if is_site and not _carries(fn, d.names):
        return ("does not call the binding: the module was imported before the patch was "
                "applied (or the file changed since)")
    return None


def _examine_binding_spec(d, fullname, spec, folder, out):
    """Not imported yet: the binding the call site's import will take."""
    package = fullname.rpartition(".")[0]
    parent = sys.modules.get(package)
    path = getattr(parent, "__path__", None) if parent is not None else [folder]
    bspec = _find_spec(package + "." + d.module, path)
    want = os.path.join(folder, d.module + ".py")
    if bspec is None:
        out["problems"].append("the binding %s is missing" % want)
        return
    shadow = _shadow(bspec, want)
    if shadow:
        out["problems"].append(shadow + ": the call site would import another binding")


def _executable():
    return os.path.join(_HERE, "bin", "oeapatch")


def _run_verify(d, out, environ):
    exe = _executable()
    cmd = [exe, "-C", out["root"], "--patch", d.dir, "--json", "verify"]
    try:
        proc = subprocess.run(cmd, env=dict(environ), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=_VERIFY_TIMEOUT_S, check=False)
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


# ------------------------------------------------------------- the report

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


def _line(d, out, elapsed_ms):
    doc = out["verify"] or {}
    eff = (doc.get("settings") or {}).get("effective") or {}
    stats = eff.get("stats")
    library = _check_detail(doc, "library")
    library = library.split("; ", 1)[0]  # path, ABI, version, CUDA or CPU
    return ("oeapatch: OEA in place in this process (pid {pid}): %s, k0=%s, batches of %s..%s "
            "valid rows, strict=%s, speculative=%s, stats=%s; liboea %s; decode detection: "
            "%s; %s.%s calls the binding (%s, %s); checked in %.0f ms" % (
                d.patch, eff.get("k0"), eff.get("min_batch"),
                eff.get("max_tokens"), eff.get("strict"), eff.get("speculative"),
                ("every %s s" % eff.get("stats_interval")) if stats else "off", library,
                _decode_detection(d, out, bool(eff.get("speculative"))), out["target"],
                out["function"], out["file"], "imported" if out["live"] else "not imported yet",
                elapsed_ms))


def _here(line):
    """The line with the pid of the process that writes it (a forked child
    writes the line its parent's check made: the same code, inherited)."""
    return line.replace("{pid}", str(os.getpid()), 1)


_GAUGE_HELP = ("1: oeapatch's plugin proved that this process runs the patched routing with "
               "OEA requested; 0: OEA is requested and this process runs without it")


def _export(framework, d, verified, environ, log):
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
                        _FRAMEWORKS[framework]["metric"], folder, exc)
            return False
        return True
    try:
        from prometheus_client import Gauge

        gauge = Gauge(_FRAMEWORKS[framework]["metric"], _GAUGE_HELP, ("patch",), registry=None,
                      multiprocess_mode="liveall")
        gauge.labels(d.patch).set(1 if verified else 0)
    except Exception as exc:  # noqa: BLE001 - the export must not be what stops a start
        log.warning("oeapatch: the gauge %s could not be exported: %s",
                    _FRAMEWORKS[framework]["metric"], exc)
        return False
    return True


def _refuse(framework, d, problems, environ, log, strict_on, fix=None):
    """Stop (strict) or log. `fix`: the command verify's JSON names for a
    target it finds not applied ("fix"), its own words, said as they are."""
    text = ("oeapatch: %sK0 asks for OEA, but this process (pid %d) would run without it: %s"
            % (d.prefix, os.getpid(), "; ".join(problems)))
    how = ("run `%s`, then start again; " % fix) if fix else ""
    if strict_on:
        log.error("%s. Stopping (%sSTRICT is on; false would start without OEA).%s", text,
                  d.prefix, (" To fix: %s." % how.rstrip("; ")) if fix else "")
        raise _FRAMEWORKS[framework]["refusal"](
            "%s. Stopped by the oeapatch plugin (%sSTRICT is on; %s`oeapatch verify` and "
            "docs/deployment.md of oeapatch, \"The per-process check\", say what to do)."
            % (text, d.prefix, how))
    log.error("%s. Starting without OEA (%sSTRICT=false).%s", text, d.prefix,
              (" To fix: %s." % how.rstrip("; ")) if fix else "")


def _refuse_start(framework, d, reason, log):
    """The binding refuses a value: its import raises SettingError, whatever
    STRICT says, so the process cannot start. Said now, with the binding's
    reason, rather than at the model's load."""
    text = ("oeapatch: this process (pid %d) cannot start with these settings: %s"
            % (os.getpid(), reason))
    log.error("%s. Stopping now rather than at the model's load.", text)
    raise _FRAMEWORKS[framework]["refusal"](
        "%s. Stopped by the oeapatch plugin (`oeapatch verify` names every bad value)." % text)


def check(framework, environ=None):
    """The plugin: the checks above in this process, once per framework."""
    environ = os.environ if environ is None else environ
    if framework in _done:
        return _state.get(framework)
    _done.add(framework)
    log = logging.getLogger(_FRAMEWORKS[framework]["logger"])
    start = time.perf_counter()
    try:
        d = definition(framework)
    except (OSError, ValueError, configparser.Error) as exc:
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
    if _FRAMEWORKS[framework].get("own_metrics"):
        try:
            metrics.setup(_FRAMEWORKS[framework]["metric"], _GAUGE_HELP, environ)
        except Exception as exc:  # noqa: BLE001 - metrics must not be what stops a start
            log.warning("oeapatch: OEA's series cannot be added to /metrics: %s", exc)
    if oea == "stops":
        out["verified"] = False
        _state[framework] = out
        _export(framework, d, False, environ, log)
        _refuse_start(framework, d, reason, log)
    out["verified"] = not out["problems"]
    _state[framework] = out
    for w in out["warnings"]:
        log.warning("oeapatch: %s", w)
    _export(framework, d, out["verified"], environ, log)
    if out["problems"]:
        _refuse(framework, d, out["problems"], environ, log, strict_on,
                fix=(out.get("verify") or {}).get("fix"))
        return out
    line = _line(d, out, elapsed_ms)
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
        _pending.append(line)
    else:
        log.info("%s", _here(line))
    _watch_conflicts(framework, d, out, environ, log, strict_on)
    while _pending:
        log.info("%s", _here(_pending.pop(0)))
    return out


_pending = []  # the line, until the process's logging has a handler


# ------------------------------------------------------------- conflicts

def _conflicts_after_hooks(framework, d, out, environ, log, strict_on):
    """SGLang: every hook the registry holds on the routing module or the
    binding, named with its plugin, and the live call site once the hooks
    are in place."""
    try:
        from sglang.srt.plugins.hook_registry import HookRegistry
    except ImportError:
        return
    package = out["target"].rpartition(".")[0]
    watched = (out["target"], package + "." + d.module)
    problems = []
    for target, hooks in list(getattr(HookRegistry, "_hooks", {}).items()):
        if not any(target == w or target.startswith(w + ".") for w in watched):
            continue
        for hook_type, hook, source in hooks:
            who = ("plugin %s%s" % (source.plugin_name, " (distribution %s)" % source.dist_name
                                    if source.dist_name else "")) if source else "no plugin"
            text = "%s registers a %s hook on %s (%s)" % (
                who, getattr(hook_type, "name", hook_type), target, owner_text(hook))
            deps = ["%s.%s" % (out["target"], q) for q in out.get("sites", ())]
            if getattr(hook_type, "name", "") == "REPLACE" and any(
                    target == dep or dep.startswith(target + ".") for dep in deps):
                problems.append(text + ": the call site never runs")
            else:
                log.warning("oeapatch: %s: it can undo or mis-order OEA's re-routing", text)
    again, warnings = _live_again(d, out)
    problems += [p for p in again if p not in problems]
    _conflict_verdict(framework, d, problems, warnings, environ, log, strict_on)


def _conflict_verdict(framework, d, problems, warnings, environ, log, strict_on):
    """A re-check's findings: each warning not logged before (a wrapper that
    another plugin installed after this one's first look), then the
    problems, a refusal."""
    state = _state[framework]
    for w in warnings:
        if w not in state["warnings"]:
            state["warnings"].append(w)
            log.warning("oeapatch: %s", w)
    if not problems:
        return
    state["verified"] = False
    state["problems"] += problems
    _export(framework, d, False, environ, log)
    _refuse(framework, d, problems, environ, log, strict_on)


def _watch_conflicts(framework, d, out, environ, log, strict_on):
    """Other plugins may run after this one: SGLang's are read after
    HookRegistry.apply_hooks() (load_plugins() calls it once every plugin has
    registered); in every framework the call site is looked at again at the
    model's first forward (a global pre-hook that removes itself), with
    every layer and router object of the model."""
    if framework == "sglang":
        try:
            from sglang.srt.plugins.hook_registry import HookRegistry
        except ImportError:
            HookRegistry = None
        if HookRegistry is not None:
            original = HookRegistry.__dict__.get("apply_hooks")
            func = getattr(original, "__func__", None)
            if func is not None and not getattr(func, "_oeapatch", False):
                def apply_hooks(cls):
                    func(cls)
                    _conflicts_after_hooks(framework, d, out, environ, log, strict_on)
                apply_hooks._oeapatch = True
                HookRegistry.apply_hooks = classmethod(apply_hooks)
    torch = sys.modules.get("torch")
    hooks = getattr(getattr(getattr(torch, "nn", None), "modules", None), "module", None)
    register = getattr(hooks, "register_module_forward_pre_hook", None)
    if register is None or not out.get("function"):
        return
    handle = []
    pending = list(_pending)
    del _pending[:]

    def first_forward(module, args):
        if not handle:
            return None
        handle.pop().remove()
        for line in pending:
            log.info("%s", _here(line))
        problems, warnings = _model_conflicts(d, out, module)
        _conflict_verdict(framework, d, problems, warnings, environ, log, strict_on)
        return None

    handle.append(register(first_forward))


def _live_again(d, out):
    """The call site and what calls it in the live module, looked at again:
    (problems, warnings)."""
    live = sys.modules.get(out["target"])
    if live is None or not out.get("sites"):
        return [], []
    again = dict(out, problems=[], warnings=[])
    _examine_live(d, live, again)
    return again["problems"], again["warnings"]


def _model_conflicts(d, out, model):
    """At the model's first forward: the call site in the live module, and
    each object of the model (a module, or an attribute of one) that is an
    instance of the class holding the call site but whose own class runs
    another method in its place or in a caller's place."""
    problems, warnings = _live_again(d, out)
    live = sys.modules.get(out["target"])
    if live is None:
        return problems, warnings
    top = out["target"].split(".")[0]
    for site in out.get("sites", ()):
        site = tuple(site.split("."))
        names = [(name, name == site[-1]) for owner, name in protected(live, site)]
        cls = _lookup(live, site[:-1]) if len(site) > 1 else None
        if not isinstance(cls, type):
            continue
        seen = set()
        for sub in model.modules():
            for obj in [sub] + [v for v in vars(sub).values() if isinstance(v, cls)]:
                kind = type(obj)
                if not isinstance(obj, cls) or kind in seen:
                    continue
                seen.add(kind)
                for name, is_site in names:
                    fn, _ = _unwrap(getattr(kind, name, None))
                    problem = _not_original(d, top, kind, is_site, fn)
                    if problem:
                        problems.append("the model's %s object is a %s, whose %s %s: it runs "
                                        "in place of %s.%s" % (
                                            cls.__name__, owner_text(kind), name, problem,
                                            cls.__qualname__, name))
    return problems, warnings
