"""Step 3 of the check: other plugins that hook or replace what OEA depends
on, looked at once every plugin has registered (SGLang's HookRegistry) and
at the model's first forward."""

import sys

from .imports import _examine_live, _lookup, _not_original, _unwrap, protected
from .owners import owner_text
from . import report
from .report import export, here, refuse


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
    state = report.state[framework]
    for w in warnings:
        if w not in state["warnings"]:
            state["warnings"].append(w)
            log.warning("oeapatch: %s", w)
    if not problems:
        return
    state["verified"] = False
    state["problems"] += problems
    export(framework, d, False, environ, log)
    refuse(framework, d, problems, environ, log, strict_on)


def watch_conflicts(framework, d, out, environ, log, strict_on):
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
    pending = list(report.pending)
    del report.pending[:]

    def first_forward(module, args):
        if not handle:
            return None
        handle.pop().remove()
        for line in pending:
            log.info("%s", here(line))
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

