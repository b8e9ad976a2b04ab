"""Who put a function where OEA needs the framework's own (issue 35).

The plugin names every replacement of what OEA depends on with the module
and the distribution that did it. A function's __module__ and __qualname__
say who did it only when nobody rewrote them: functools.wraps copies both
from the function it wraps, so a wrapper that another plugin installs reads
as the framework's own function ("wrapped by sglang....select_experts
(distribution sglang)"). What wraps cannot rewrite decides here: a
function's code object (the file its code was compiled from, its
co_qualname) and a callable object's class. The file is mapped to its module
through sys.path, and the module to the distribution that installs it
through the installed distributions' metadata.
"""

import dis
import os
import sys

_dists = {}  # top-level import name -> the distributions' text (or None)


def definer(obj):
    """(module, qualified name) of the code behind `obj`: for a function the
    file of its code object and co_qualname, for any other callable its
    class; a class names itself."""
    obj = getattr(obj, "__func__", obj)
    code = getattr(obj, "__code__", None)
    if code is not None and not isinstance(obj, type):
        module = module_of_file(code.co_filename) or getattr(obj, "__module__", None) or "?"
        return module, getattr(code, "co_qualname", None) or code.co_name
    kind = obj if isinstance(obj, type) else type(obj)
    return kind.__module__, kind.__qualname__


def owner_text(obj):
    """Who defined `obj`: its module and name, and the distribution that
    installs that module."""
    module, name = definer(obj)
    dist = distribution_of(module)
    return "%s.%s%s" % (module, name, " (distribution %s)" % dist if dist else "")


def module_of_file(path):
    """The dotted module name that `path` is imported as: the module in
    sys.modules loaded from it, else its place under the longest sys.path
    entry that holds it. None: neither."""
    if not path or path.startswith("<"):
        return None
    for name, module in list(sys.modules.items()):
        if getattr(module, "__file__", None) == path:
            return name
    real = os.path.realpath(path)
    best = None
    for entry in sys.path:
        base = os.path.realpath(entry or os.getcwd())
        if real.startswith(base + os.sep) and (best is None or len(base) > len(best)):
            best = base
    if best is None:
        return None
    parts = os.path.relpath(real, best).split(os.sep)
    parts[-1] = parts[-1].split(".", 1)[0]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) or None


def distribution_of(module):
    """The distributions that install the top-level package of `module`."""
    top = module.split(".")[0]
    if top not in _dists:
        _dists[top] = None
        try:
            from importlib.metadata import packages_distributions

            found = packages_distributions().get(top)
        except Exception:  # noqa: BLE001 - metadata of other packages: a name is a courtesy
            found = None
        if found:
            _dists[top] = ", ".join(sorted(set(found)))
    return _dists[top]


def framework_code(fn, modules):
    """Whether `fn` is code of one of `modules` (names): its __module__ says
    so and its code object was compiled from that module's file. A callable
    object, or a function compiled elsewhere that claims the module, is not."""
    code = getattr(fn, "__code__", None)
    if code is None or isinstance(fn, type) or getattr(fn, "__module__", None) not in modules:
        return False
    files = set()
    for name in modules:
        path = getattr(sys.modules.get(name), "__file__", None)
        if path:
            files.add(path)
            files.add(os.path.realpath(path))
    return code.co_filename in files or os.path.realpath(code.co_filename) in files


def importers(live, name):
    """The framework modules in sys.modules (of live's top-level package) that
    took `name` from the live module with `from ... import name` (at their
    top level or in a function), where their global `name` is not the live
    module's object: [(module, their object)]. A plugin that replaces a
    function where it is defined and where it was imported leaves both."""
    top = live.__name__.split(".")[0]
    current = vars(live).get(name)
    found = []
    for modname, module in list(sys.modules.items()):
        if module is live or module is None or modname.split(".")[0] != top:
            continue
        obj = getattr(module, "__dict__", {}).get(name)
        if obj is None or obj is current or not _imports_from(module, live.__name__, name):
            continue
        found.append((module, obj))
    return found


def _imports_from(module, target, name):
    """Whether the code of `module` (as its loader reads it) has
    `from TARGET import NAME`, absolute or relative (resolved against the
    module's package, as the import system resolves it)."""
    spec = getattr(module, "__spec__", None)
    try:
        code = spec.loader.get_code(spec.name)
    except Exception:  # noqa: BLE001 - a module we cannot read imports nothing we know of
        return False
    package = getattr(module, "__package__", None) or ""
    stack = [code] if code is not None else []
    while stack:
        code = stack.pop()
        consts, source = [], None
        for ins in dis.get_instructions(code):
            if ins.opname == "LOAD_CONST":
                consts = (consts + [ins.argval])[-2:]
            elif ins.opname == "IMPORT_NAME":
                level = consts[0] if len(consts) == 2 and isinstance(consts[0], int) else 0
                source = _absolute(ins.argval, package, level)
            elif ins.opname == "IMPORT_FROM" and ins.argval == name and source == target:
                return True
        stack += [c for c in code.co_consts if hasattr(c, "co_code")]
    return False


def _absolute(name, package, level):
    """The absolute module name of `from <level dots>name import ...` in
    `package` (importlib's _resolve_name); None where it climbs too high."""
    if not level:
        return name
    bits = package.rsplit(".", level - 1)
    if len(bits) < level:
        return None
    base = bits[0]
    return "%s.%s" % (base, name) if name else base
