"""The definition the plugin checks against, and what differs between the
frameworks: as the wheel's oeapatch reads the definition it carries
(`oeapatch definition --json`), never a reader of patch.ini of its own."""

import json
import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
VERIFY_TIMEOUT_S = 120


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
FRAMEWORKS = {
    "sglang": {"definition": "sglang-oea", "logger": "sglang.srt.plugins.oeapatch",
               "metric": "sglang:oea_worker_verified", "refusal": NotInPlace},
    # own_metrics: a default server's /metrics shows only its API server
    # process's registry (metrics.py); SGLang's metrics always set up the
    # multiprocess folder (--enable-metrics), and without them there is no /metrics.
    "vllm": {"definition": "vllm-oea", "logger": "vllm.plugins.oeapatch",
             "metric": "vllm:oea_worker_verified", "refusal": NotInPlaceError,
             "own_metrics": True},
}


def executable():
    return os.path.join(HERE, "bin", "oeapatch")


class Definition:
    """What the check needs of a patch definition, as the wheel's oeapatch
    reads it (`oeapatch definition --json`: inih, patchdef.c): the plugin
    parses no patch.ini of its own, so what it checks and what apply wrote
    cannot drift apart. The call site's names come from the two region
    templates in that document."""

    def __init__(self, directory, exe=None):
        exe = exe or executable()
        proc = subprocess.run([exe, "--patch", directory, "--json", "definition"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=VERIFY_TIMEOUT_S, check=False)
        try:
            doc = json.loads(proc.stdout.decode("utf-8", "replace"))
        except ValueError:
            doc = None
        if proc.returncode != 0 or not isinstance(doc, dict) or not doc.get("ok"):
            raise ValueError("`%s --patch %s definition` exited %d: %s" % (
                exe, directory, proc.returncode,
                proc.stderr.decode("utf-8", "replace").strip() or "no document"))
        self.doc = doc
        self.dir = doc["definition"]["dir"]
        self.name = doc["definition"]["name"]
        self.version = str(doc["definition"]["version"])
        self.targets = doc["installed_targets"]
        self.module = doc["binding"]["module"]
        self.prefix = doc["binding"]["env_prefix"]
        # The variable that turns OEA on: only its name is read here. What a
        # value means (on, off, refused) and what STRICT says are the
        # binding's rules, which `oeapatch verify --json` applies and reports
        # as settings.oea (see decision()): the plugin parses no value itself.
        self.switch = doc.get("switch")
        templates = {r["name"]: r["template"] for r in doc.get("regions", [])}
        imp, call = templates.get("import", ""), templates.get("callsite", "")
        # `from . import {{module}} as ALIAS`, then `ALIAS.NAME`: the code of
        # the function that holds the call site names ALIAS and each NAME.
        alias = re.search(r"\bimport\s+\{\{module\}\}\s+as\s+(\w+)", imp)
        if alias is None:
            raise ValueError("%s: its import template binds no alias" % directory)
        self.alias = alias.group(1)
        self.names = {self.alias} | set(re.findall(r"\b%s\.(\w+)" % re.escape(self.alias), call))

    @property
    def patch(self):
        return "%s/%s" % (self.name, self.version)


def definition(framework):
    """The definition the wheel carries for `framework` (sglang, vllm)."""
    return Definition(os.path.join(HERE, "share", "oeapatch", "patches",
                                   FRAMEWORKS[framework]["definition"]))

