"""Step 1 of the check: what this process will import for the routing
module (found as its import system would, running no module's code), and
whether the code it runs carries the call site and its binding."""

import os
import sys

from .owners import framework_code, importers, owner_text
from .verify import run_verify


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
    run_verify(d, out, environ)
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

