#!/usr/bin/python3
"""The per-process check (issue 26) on real releases, through the frameworks'
own loaders: SGLang 0.5.23's load_plugins() and vLLM 0.34.0's (the newest:
FusedMoEFactory's runners, no FusedMoE class) and 0.15.0's
load_general_plugins().

For each release, in its cached environment (tests/sglang/make_env.sh,
tests/vllm/make_env.sh):
  - a private copy of the installed package: a tree of symbolic links to the
    cached files, with real folders and a real copy of the routing file, so
    that this test patches and shadows its own copy and never the cache's;
  - a fresh venv that sees the release's packages and that copy (a .pth
    file), into which pip installs the oeapatch wheel (built by the ctest
    fixture wheel.build, scripts/build-wheel.sh, into
    $OEAPATCH_BUILD_DIR/wheel-dist): its entry points are what the loaders
    find;
  - `oeapatch apply` by the wheel's own entry (its liboea recorded);
  - each case a process that calls the loader, then prints LOADED: a forked
    child of one interpreter of the venv that has imported torch and
    transformers, never the framework (tests/e2e/phase_server.py: 30 cases
    cost 166 s as 30 interpreter starts), with the case's own environment,
    sys.path and working folder, as the frameworks' own workers are forked
    from a process that has imported torch:
      OEA off: no line of the plugin but its debug line, the process goes on;
      patched, OEA on: the plugin's line (definition, k0, library, CUDA or CPU,
        decode detection), the gauge 1 where the Prometheus folder is set;
        three more starts give the time the plugin adds (median, printed);
      a package folder, an extension module and a stale unchecked-hash pyc
        shadowing the patched file: the process stops (strict, the default),
        naming the cause; with STRICT=false it logs the error, goes on, and
        the gauge is 0;
      K0 spelled +0, -0, " 00 ": off, as the binding reads it;
      not applied: the process stops naming the `oeapatch apply` command
        (verify's "fix"), and that command, run as said, makes the next
        start pass;
      the routing module imported with another binding module: stopped;
      another plugin (a distribution written here, registered like any
        other) hooking or replacing the call site's function: named; a
        replacement by a function, a callable object, a functools.wraps
        wrapper (a warning), and in SGLang where the function is defined and
        in a module that imported it, loaded before oeapatch's plugin and
        after it, is named with that distribution, never the framework's;
      vLLM: a router class of the model that overrides the call site's
        method, found at the model's first forward;
      `oeapatch status` names the plugin, and a restriction list
        (SGLANG_PLUGINS / VLLM_PLUGINS) that leaves it out.
SGLang's conflict case imports topk.py, whose chain needs
tests/sglang/stubs/sgl_kernel (SGLang's compiled CUDA kernels: PyPI's wheel
needs libcuda), the only stub, on PYTHONPATH there.

Exit 77 when the wheel fixture built nothing (wheel.build skipped) or an
environment cannot be made (the package index unreachable).
"""

import glob
import hashlib
import json
import os
import platform
import py_compile
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from phase_server import PhaseServer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("OEAPATCH_BUILD_DIR") or os.path.join(ROOT, "build")
STUBS = os.path.join(ROOT, "tests", "sglang", "stubs")
RESULTS = []

RELEASES = {
    "sglang": {"version": "0.5.23", "make_env": "tests/sglang/make_env.sh",
               "package": "sglang", "site_sub": "python", "prefix": "SGLANG_OEA_",
               "target": "sglang/srt/layers/moe/topk.py", "patch": "sglang-oea/2",
               "restrict": "SGLANG_PLUGINS",
               "load": "from sglang.srt.plugins import load_plugins; load_plugins()",
               "metric": "sglang:oea_worker_verified"},
    "vllm": {"version": "0.34.0", "make_env": "tests/vllm/make_env.sh",
             "package": "vllm", "site_sub": "", "prefix": "VLLM_OEA_",
             "target": "vllm/model_executor/layers/fused_moe/router/base_router.py",
             "patch": "vllm-oea/1", "restrict": "VLLM_PLUGINS",
             "load": "from vllm.plugins import load_general_plugins; load_general_plugins()",
             "metric": "vllm:oea_worker_verified"},
}
# vLLM 0.15.0, the first release of the router classes, in the default run
# again since a release's cases cost about 20 s rather than 90 (phase_server).
DEFAULT = ["sglang", "vllm", "vllm-0.15"]
RELEASES["vllm-0.15"] = dict(RELEASES["vllm"], version="0.15.0")
for _fw, _cfg in RELEASES.items():
    _cfg.setdefault("framework", _fw.split("-")[0])

DRIVER = r"""
import logging, sys
logging.basicConfig(level=logging.DEBUG, stream=sys.stdout,
                    format="LOG %(levelname)s %(name)s %(message)s")
{pre}
{load}
print("LOADED", flush=True)
{after}
"""

GAUGE = r"""
import sys
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
reg = CollectorRegistry()
MultiProcessCollector(reg, path=sys.argv[1])
for metric in reg.collect():
    for s in metric.samples:
        if s.name == sys.argv[2]:
            print("GAUGE", s.labels.get("patch"), s.value)
"""


def say(ok, text):
    RESULTS.append(bool(ok))
    print("%s %s" % ("PASS" if ok else "FAIL", text), flush=True)


def run(cmd, env=None, timeout=600, cwd=None):
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return p.returncode, p.stdout


class Release:
    def __init__(self, fw, wheel, work):
        self.fw, self.cfg = fw, RELEASES[fw]
        self.name = "%s %s" % (self.cfg["framework"], self.cfg["version"])
        rc, out = run([os.path.join(ROOT, self.cfg["make_env"]), self.cfg["version"]],
                      timeout=3600)
        if rc != 0:
            raise EnvironmentError(out[-1500:])
        release_py = out.strip().splitlines()[-1]
        env_dir = os.path.dirname(os.path.dirname(release_py))
        cached = os.path.join(env_dir, "checkout", self.cfg["site_sub"])
        self.work = os.path.join(work, fw)
        os.makedirs(self.work)
        # The private copy: links to every cached file, real folders, the
        # routing file a real copy; nothing of a run that patched the cache.
        self.site = os.path.join(self.work, "site")
        os.makedirs(self.site)
        for entry in os.listdir(cached):
            if entry == self.cfg["package"] or entry.startswith(self.cfg["package"] + "-"):
                subprocess.check_call(["cp", "-rs", os.path.join(cached, entry), self.site])
        self.target = os.path.join(self.site, self.cfg["target"])
        moe = os.path.dirname(self.target)
        for stale in glob.glob(os.path.join(moe, "_oeapatch_*")) + [os.path.join(moe, "__pycache__")]:
            if os.path.islink(stale) or os.path.isfile(stale):
                os.unlink(stale)
            elif os.path.isdir(stale):
                shutil.rmtree(stale)
        real = os.path.realpath(self.target)
        os.unlink(self.target)
        shutil.copyfile(real, self.target)
        # The venv: the release's site-packages and its torch, then the copy.
        self.venv = os.path.join(self.work, "venv")
        # Without pip of its own (ensurepip: 5.5 CPU s a venv): the release's pip
        # installs the wheel into it (pip --python, pip 22.3 on).
        run([release_py, "-m", "venv", "--without-pip", self.venv], timeout=300)
        self.py = os.path.join(self.venv, "bin", "python")
        rc, purelib = run([self.py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
        purelib = purelib.strip()
        rc, release_site = run([release_py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
        release_site = release_site.strip()
        lines = [self.site]
        for pth in sorted(glob.glob(os.path.join(release_site, "oeapatch_*.pth"))):
            with open(pth) as f:
                lines += [ln.strip() for ln in f if ln.strip() and
                          os.path.realpath(ln.strip()) != os.path.realpath(cached)]
        lines.append(release_site)
        with open(os.path.join(purelib, "oeapatch_plugin_test.pth"), "w") as f:
            f.write("\n".join(lines) + "\n")
        rc, out = run([release_py, "-m", "pip", "--python", self.py, "install", "--quiet",
                       "--disable-pip-version-check",
                       "--no-deps", "--no-index", wheel], timeout=300)
        if rc != 0:
            raise EnvironmentError("pip install of the wheel: " + out[-1500:])
        self.cli = os.path.join(self.venv, "bin", "oeapatch")
        self.base_env = {k: v for k, v in os.environ.items()
                         if not k.startswith(("SGLANG_", "VLLM_", "PROMETHEUS_"))
                         and k not in ("PYTHONPATH",)}
        self.base_env["VLLM_LOGGING_LEVEL"] = "DEBUG"  # the debug line of the off case too
        self.server = PhaseServer(self.py, env=self.base_env)

    def env(self, **kw):
        env = dict(self.base_env)
        for k, v in kw.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def oeapatch(self, *args, **env):
        return run([self.cli, "-C", self.site] + list(args), env=self.env(**env))

    def start(self, after="", pre="", **env):
        """A process that runs the framework's loader (rc, stdout and stderr):
        `pre` runs before it, `after` once it has run."""
        code = DRIVER.format(load=self.cfg["load"], after=after, pre=pre)
        rc, out, _ = self.server.run(["-c", code], self.env(**env), timeout=600, cwd="/",
                                     merge=True)
        return rc, out

    def k0(self, **kw):
        kw.setdefault(self.cfg["prefix"] + "K0", "3")
        return kw

    def gauge(self, folder):
        rc, out = run([self.py, "-c", GAUGE, folder, self.cfg["metric"]])
        return re.findall(r"^GAUGE (\S+) (\S+)$", out, re.M)


def plugin_lines(out):
    """The plugin's lines: each message starts "oeapatch: " (the loaders' own
    lines name the plugin without it)."""
    return [ln for ln in out.splitlines() if "oeapatch: " in ln]


def level(line):
    """The level of a logged line: SGLang's go through this driver's format
    (LOG LEVEL name message), vLLM's through its own handler (LEVEL date ...)."""
    words = line.split()
    return words[1] if words[:1] == ["LOG"] else (words[0] if words else "")


def check_words(r):
    """Issue 36.5: what the wheel's oeapatch says about this environment
    before it is patched: -C's default in its help, the layout of a
    site-packages folder, and apply --diff's target first with the binding
    module summarised (returned: JSON's module_change, checked against the
    module apply then writes)."""
    n = r.name
    rc, out = run([r.cli, "help", "apply"], env=r.env())
    line = [ln for ln in out.splitlines() if "--directory" in ln]
    say(rc == 0 and line and "(default: the package %s imports" % r.py in line[0] and "(default: .)" not in out,
        "%s: the wheel's `oeapatch help apply` gives -C's default as this venv's interpreter: %r"
        % (n, line or out[-400:]))
    rc, out = run([r.cli, "help", "check"], env=r.env())
    say(rc == 0 and "(default: .)" in out, "%s: ... and check's as the current folder" % n)
    rc, out = run([r.cli, "--json", "status"], env=r.env(), cwd=r.work)
    doc = json.loads(out) if out.startswith("{") else {}
    say(doc.get("layout") == "installed" and doc.get("root") == r.site,
        "%s: status --json (the venv default) names the site-packages layout: %s %s"
        % (n, doc.get("layout"), doc.get("root")))
    rc, out = r.oeapatch("apply", "--diff")
    lines = out.splitlines()
    summary = [ln for ln in lines if ln.startswith("binding module ")]
    say(rc == 0 and lines and lines[0].startswith("diff --git a/") and r.cfg["target"] in lines[0]
        and len(summary) == 1 and summary[0] == lines[-1] and ": new, " in summary[0]
        and "--full-diff" in summary[0] and len(lines) < 120,
        "%s: apply --diff shows the target's change first and the module in one line (%d lines): %r"
        % (n, len(lines), summary or out[-600:]))
    rc, out = r.oeapatch("--json", "apply", "--diff")
    doc = json.loads(out) if out.startswith("{") else {}
    mc = doc.get("module_change") or {}
    rc, full = r.oeapatch("apply", "--full-diff")
    say(rc == 0 and mc.get("change") == "new"
        and "+++ b/" + mc.get("path", "?") not in doc.get("diff", "+++ b/" + mc.get("path", "?"))
        and "+++ b/" + mc.get("path", "?") in full and full.count("\n") > mc.get("lines", 0),
        "%s: --json's module_change (%s, %s lines) and --full-diff's whole module (%d lines)"
        % (n, mc.get("change"), mc.get("lines"), full.count("\n")))
    return mc


def check_release(r):
    n = r.name
    rc, out = r.oeapatch("revert")
    mc = check_words(r)
    rc, out = r.oeapatch("apply")
    say(rc == 0, "%s: the wheel's oeapatch applies to the private copy (%s)" % (n, out.strip()[-200:]))
    written = glob.glob(os.path.join(os.path.dirname(r.target), "_oeapatch_*.py"))
    data = open(written[0], "rb").read() if len(written) == 1 else b""
    say(hashlib.sha256(data).hexdigest() == mc.get("sha256") and len(data) == mc.get("bytes"),
        "%s: the module apply wrote is the one apply --diff summarised (%d bytes)" % (n, len(data)))
    rc, out = r.oeapatch("verify", **r.k0())
    say(rc == 0, "%s: verify passes with K0=3%s" % (n, "" if rc == 0 else ": " + out[-800:]))

    # OEA off: silent but for the debug line.
    rc, out = r.start()
    lines = plugin_lines(out)
    say(rc == 0 and "LOADED" in out and len(lines) == 1 and level(lines[0]) == "DEBUG"
        and "OEA is off" in lines[0],
        "%s: OEA off: the loader runs the plugin, one debug line and nothing else%s"
        % (n, "" if rc == 0 and len(lines) == 1 else ": rc %d, %r" % (rc, lines or out[-800:])))

    # K0 spelled as a 0 the binding reads as off: off for the plugin too.
    moe = os.path.dirname(r.target)
    binding = glob.glob(os.path.join(moe, "_oeapatch_*.py"))
    for spelled in ("+0", "-0", " 00 "):
        var = r.cfg["prefix"] + "K0"
        rc, k0 = run([r.py, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                      "m = __import__(sys.argv[2]); print(m.parse_settings({sys.argv[3]: sys.argv[4]})"
                      "['k0'])", moe, os.path.basename(binding[0])[:-3], var, spelled],
                     env=r.env())
        rc, out = r.start(**{var: spelled})
        lines = plugin_lines(out)
        say(k0.strip() == "0" and rc == 0 and "LOADED" in out and len(lines) == 1
            and "OEA is off" in lines[0],
            "%s: %s=%r, which the binding reads as %s: off for the plugin too%s"
            % (n, var, spelled, k0.strip()[-200:], "" if rc == 0 and len(lines) == 1
               else ": rc %d, %r" % (rc, lines or out[-800:])))

    # Patched, on: the line, and the gauge 1.
    prom = tempfile.mkdtemp(dir=r.work, prefix="prom-")
    rc, out = r.start(**r.k0(PROMETHEUS_MULTIPROC_DIR=prom))
    line = [ln for ln in plugin_lines(out) if "OEA in place" in ln]
    # The released wheel's liboea has the CUDA kernel; one built where nvcc
    # is missing is CPU-only (e2e.test_wheel): the line says which.
    wheel_cuda = wheel_has_cuda(r)
    want = [r.cfg["patch"], "k0=3, mode=on", "liboea %s" % os.path.join(r.venv, "lib"),
            "with CUDA" if wheel_cuda else "CPU only",
            "decode detection: ", "strict=True"]
    missing = [w for w in want if not line or w not in line[0]]
    say(rc == 0 and "LOADED" in out and line and not missing and level(line[0]) == "INFO",
        "%s: patched, OEA on: the plugin's line through the framework's logger%s"
        % (n, ": " + line[0][4:] if line and not missing else ": rc %d, missing %s: %s"
           % (rc, missing, out[-1500:])))
    say(r.gauge(prom) == [(r.cfg["patch"], "1.0")],
        "%s: the gauge %s is 1 (%s)" % (n, r.cfg["metric"], r.gauge(prom)))
    times = []
    for _ in range(3):
        rc, out = r.start(**r.k0())
        m = re.search(r"checked in (\d+) ms", out)
        if m:
            times.append(int(m.group(1)))
    say(len(times) == 3, "%s: three more starts, each checked" % n)
    if times:
        print("TIME %s: the plugin adds %d ms to a process start (median of %d: %s)"
              % (n, statistics.median(times), len(times), times), flush=True)

    moe = os.path.dirname(r.target)
    leaf = os.path.basename(r.target)[:-3]
    rc, soabi = run([r.py, "-c", "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"])
    shadows = [
        ("a package folder", os.path.join(moe, leaf, "__init__.py"), "the package folder"),
        ("an extension module", os.path.join(moe, leaf + soabi.strip()), "the extension module"),
    ]
    for what, path, words in shadows:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("")
        shadow_case(r, what, words, prom)
        if path.endswith("__init__.py"):
            shutil.rmtree(os.path.dirname(path))
        else:
            os.unlink(path)

    # Stale bytecode: the original file's code in an unchecked-hash pyc,
    # which the loader takes without looking at the (patched) source.
    rc, _ = r.oeapatch("revert")
    original = os.path.join(r.work, "original.py")
    shutil.copyfile(r.target, original)
    rc, _ = r.oeapatch("apply")
    rc, tag = run([r.py, "-c", "import sys; print(sys.implementation.cache_tag)"])
    pyc = os.path.join(moe, "__pycache__", "%s.%s.pyc" % (leaf, tag.strip()))
    py_compile.compile(original, cfile=pyc, dfile=r.target, doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    shadow_case(r, "stale unchecked-hash bytecode", "runs in place of the patched", prom)
    os.unlink(pyc)

    rc, out = r.start(**r.k0())
    say(rc == 0 and "OEA in place" in out, "%s: with the shadows gone, the check passes again" % n)

    # Not applied: the refusal says the command that fixes it (verify's
    # "fix", the same words), and that command, run as said, does.
    rc, _ = r.oeapatch("revert")
    rc, out = r.start(**r.k0())
    said = re.search(r"run `(oeapatch apply [^`]*)`, then start again", out)
    want = "oeapatch apply -C %s%s" % (shlex.quote(r.site), "" if r.cfg["framework"] == "sglang"
                                       else " --patch vllm-oea")
    say(rc != 0 and "not patched" in out and said and said.group(1) == want,
        "%s: not applied, OEA on: the refusal names the command that fixes it (%s)%s"
        % (n, want, "" if said and said.group(1) == want else ": rc %d: %s" % (rc, out[-1500:])))
    rc, out = run([r.cli] + shlex.split(said.group(1))[1:] if said else [r.cli, "-C", r.site, "apply"],
                  env=r.env())
    rc, out = r.start(**r.k0())
    say(said and rc == 0 and "OEA in place" in out,
        "%s: that command, run as said, makes the next start pass%s"
        % (n, "" if rc == 0 else ": rc %d: %s" % (rc, out[-1500:])))


# The routing module imported before the plugin runs, calling a binding
# module that is not the file apply wrote: a copy of it elsewhere, imported
# as a module of its own and put in the live module's place (its alias).
PRE_OTHER_BINDING = r'''
import importlib, importlib.util
target = importlib.import_module(%(target)r)
spec = importlib.util.spec_from_file_location("elsewhere_" + %(module)r, %(copy)r)
binding = importlib.util.module_from_spec(spec)
spec.loader.exec_module(binding)
setattr(target, %(alias)r, binding)
'''


def check_live_binding(r):
    """A live routing module whose binding is not the file apply wrote: the
    process stops, naming both files."""
    n = r.name
    moe = os.path.dirname(r.target)
    written = glob.glob(os.path.join(moe, "_oeapatch_*.py"))[0]
    module = os.path.basename(written)[:-3]
    copy = os.path.join(r.work, "elsewhere", module + ".py")
    os.makedirs(os.path.dirname(copy), exist_ok=True)
    shutil.copyfile(written, copy)
    target = r.cfg["target"][:-3].replace("/", ".")
    with open(os.path.join(ROOT, "patches", r.cfg["patch"].split("/")[0], "templates",
                           "import.py")) as f:
        alias = re.search(r"\bas\s+(\w+)", f.read()).group(1)
    pre = PRE_OTHER_BINDING % {"module": module, "copy": copy, "target": target, "alias": alias}
    stubs = {"PYTHONPATH": STUBS} if r.cfg["framework"] == "sglang" else {}
    rc, out = r.start(pre=pre, **r.k0(**stubs))
    words = "the binding this process imported is %s, not %s (written by apply)" % (copy, written)
    ok = rc != 0 and words in out and "Stopped by the oeapatch plugin" in out
    rc, out2 = r.start(pre=pre.replace("setattr(", "(lambda *a: None)("), **r.k0(**stubs))
    ok = ok and rc == 0 and "OEA in place" in out2
    say(ok, "%s: the routing module imported with another binding module: named, stopped%s"
        % (n, "" if ok else ": rc %d: %s" % (rc, out[-1500:])))


def shadow_case(r, what, words, prom):
    n, p = r.name, r.cfg["prefix"]
    rc, out = r.start(**r.k0())
    refused = [ln for ln in out.splitlines() if words in ln]
    say(rc != 0 and "LOADED" not in out and refused and "Stopped by the oeapatch plugin" in out,
        "%s: %s shadowing the patched file stops the process (strict on)%s"
        % (n, what, "" if rc != 0 and refused else ": rc %d: %s" % (rc, out[-1500:])))
    folder = tempfile.mkdtemp(dir=r.work, prefix="prom-")
    rc, out = r.start(**r.k0(**{p + "STRICT": "false", "PROMETHEUS_MULTIPROC_DIR": folder}))
    errors = [ln for ln in plugin_lines(out) if level(ln) == "ERROR" and words in ln]
    gauge = r.gauge(folder)
    say(rc == 0 and "LOADED" in out and errors and gauge == [(r.cfg["patch"], "0.0")],
        "%s: %s with STRICT=false: logged as an error, the process goes on, gauge 0%s"
        % (n, what, "" if rc == 0 and errors and gauge else ": rc %d, gauge %s: %s"
           % (rc, gauge, out[-1500:])))


OTHER_SGLANG = r'''
from sglang.srt.plugins.hook_registry import HookRegistry, HookType

def register():
    def around(original, *args, **kwargs):
        return original(*args, **kwargs)
    HookRegistry.register("sglang.srt.layers.moe.topk.select_experts", around,
                          HookType.%s)
'''

# Another plugin replacing what OEA depends on, each way a plugin can: a
# plain function, a functools.wraps wrapper that calls the original (and
# could change the ids it returns), a callable object, and (SGLang, where the
# call site is a module function) the name both where it is defined and in a
# module that imported it, or only there. Each is named with its
# distribution, whether the plugin runs before oeapatch's or after it.
OTHER_REPLACE = r'''
import functools
import importlib

KIND, OWNER, NAME, IMPORTER = %(kind)r, %(owner)r, %(name)r, %(importer)r


class Router:
    """A callable object in the function's place."""
    def __init__(self, original):
        self.original = original

    def __call__(self, *args, **kwargs):
        return self.original(*args, **kwargs)


def register():
    module, _, cls = OWNER.partition(":")
    owner = importlib.import_module(module)
    owner = getattr(owner, cls) if cls else owner
    original = getattr(owner, NAME)

    def replacement(*args, **kwargs):
        return original(*args, **kwargs)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        out = original(*args, **kwargs)
        return out  # where such a plugin changes the ids

    new = {"plain": replacement, "wraps": wrapper, "object": Router(original),
           "importer": replacement, "importer-only": replacement}[KIND]
    if KIND != "importer-only":
        setattr(owner, NAME, new)
    if KIND.startswith("importer"):
        setattr(importlib.import_module(IMPORTER), NAME, new)
'''

# What each kind is named as ("wraps": a warning, the process goes on).
REPLACED = {
    "plain": "was replaced by otherplug.register.<locals>.replacement (distribution otherplug)",
    "wraps": "is wrapped by otherplug.register.<locals>.wrapper (distribution otherplug)",
    "object": "was replaced by otherplug.Router (distribution otherplug)",
    "importer": "was replaced by otherplug.register.<locals>.replacement (distribution otherplug)",
    "importer-only": "was replaced by otherplug.register.<locals>.replacement (distribution otherplug)",
}
# The framework's own: where the function is, a module that imports it.
REPLACE_AT = {
    "sglang": ("sglang.srt.layers.moe.topk", "select_experts",
               "sglang.srt.hardware_backend.npu.moe.topk"),
    "vllm": ("vllm.model_executor.layers.fused_moe.router.base_router:BaseRouter",
             "select_experts", None),
}
FORWARD = r'''
import torch
torch.nn.Linear(1, 1)(torch.zeros(1))
print("FORWARD RAN", flush=True)
'''

VLLM_MODEL = r'''
import torch
from vllm.model_executor.layers.fused_moe.router.base_router import BaseRouter

class OtherRouter(BaseRouter):
    """A router class another plugin could hand the model."""
    def select_experts(self, *args, **kwargs):
        return None

# Made without its constructor's arguments: only its class matters here.
OtherRouter.__abstractmethods__ = frozenset()

class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.router = object.__new__(OtherRouter)
    def forward(self, x):
        return x

try:
    Layer()(torch.zeros(1))
    print("FORWARD RAN", flush=True)
except Exception as exc:
    print("FORWARD STOPPED", type(exc).__name__, exc, flush=True)
'''


def write_other(r, source, group):
    """A distribution of another plugin: a module and its entry point."""
    folder = tempfile.mkdtemp(dir=r.work, prefix="other-")
    with open(os.path.join(folder, "otherplug.py"), "w") as f:
        f.write(source)
    info = os.path.join(folder, "otherplug-1.0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: otherplug\nVersion: 1.0\n")
    with open(os.path.join(info, "entry_points.txt"), "w") as f:
        f.write("[%s]\nother = otherplug:register\n" % group)
    with open(os.path.join(info, "top_level.txt"), "w") as f:
        f.write("otherplug\n")
    return folder


def check_conflicts(r):
    n = r.name
    if r.cfg["framework"] == "sglang":
        for kind, stops in (("AROUND", False), ("REPLACE", True)):
            other = write_other(r, OTHER_SGLANG % kind, "sglang.srt.plugins")
            rc, out = r.start(**r.k0(PYTHONPATH=os.pathsep.join([other, STUBS])))
            named = [ln for ln in plugin_lines(out) if "plugin other (distribution otherplug)"
                     in ln and kind in ln]
            ok = named and ((rc != 0 and "Stopped by the oeapatch plugin" in out) if stops
                            else (rc == 0 and level(named[0]) == "WARNING"))
            say(ok, "%s: another plugin's %s hook on select_experts is named%s%s"
                % (n, kind, " and stops the process" if stops else " (a warning)",
                   "" if ok else ": rc %d: %s" % (rc, out[-1500:])))
    else:
        rc, out = r.start(after=VLLM_MODEL, **r.k0())
        ok = (rc == 0 and "FORWARD STOPPED NotInPlaceError" in out and "OtherRouter" in out)
        say(ok, "%s: a model router class overriding select_experts is found at the first "
            "forward%s" % (n, "" if ok else ": rc %d: %s" % (rc, out[-1500:])))
    check_replacements(r)


def check_replacements(r):
    """Another plugin, a real distribution with an entry point, replaces the
    call site's function each way (OTHER_REPLACE), loaded before oeapatch's
    plugin (on PYTHONPATH) and after it (a sys.path entry behind the venv's
    site-packages): the loader's own list of plugins says the order."""
    n, fw = r.name, r.cfg["framework"]
    owner, name, importer = REPLACE_AT[fw]
    group = "sglang.srt.plugins" if fw == "sglang" else "vllm.general_plugins"
    kinds = ["plain", "wraps", "object"] + (["importer", "importer-only"] if importer else [])
    stubs = [STUBS] if fw == "sglang" else []
    for kind in kinds:
        other = write_other(r, OTHER_REPLACE % {"kind": kind, "owner": owner, "name": name,
                                                "importer": importer}, group)
        for order in ("before", "after"):
            if order == "before":
                path, pre = [other] + stubs, ""
            else:
                path, pre = stubs, "sys.path.append(%r)" % other
            # vLLM looks again at the model's first forward only: one forward.
            rc, out = r.start(pre=pre, after=FORWARD if fw == "vllm" else "",
                              **r.k0(PYTHONPATH=os.pathsep.join(path) or None))
            listed = re.findall(r"- (other|oeapatch) -> ", out)
            first = "other" if order == "before" else "oeapatch"
            named = [ln for ln in plugin_lines(out) if REPLACED[kind] in ln]
            credited_to_framework = [ln for ln in plugin_lines(out)
                                     if "(distribution %s)" % fw in ln]
            if kind == "wraps":
                ran = rc == 0 and ("FORWARD RAN" in out if fw == "vllm" else "LOADED" in out)
                ok = ran and named and level(named[0]) == "WARNING"
            else:
                ok = rc != 0 and named and "Stopped by the oeapatch plugin" in out
            if kind == "importer":  # one replacement, named where it is defined
                ok = ok and "%s.%s, as this process runs it" % (owner, name) in out
            elif kind == "importer-only":
                ok = ok and "%s.%s (imported from" % (importer, name) in out
            ok = ok and listed[:1] == [first] and not credited_to_framework
            say(ok, "%s: another plugin (%s oeapatch's) replacing %s.%s, %s: named with its "
                "distribution%s%s" % (n, order, owner.replace(":", "."), name, kind,
                                      ", a warning" if kind == "wraps" else ", stopped",
                                      "" if ok else ": rc %d, order %s: %s"
                                      % (rc, listed, out[-2500:])))


# The binding module `apply` wrote, imported by its path (no package
# __init__ runs) after the loader: what the binding itself makes of the
# same environment, beside what the plugin said.
BINDING_PROBE = r"""
import importlib.util
spec = importlib.util.spec_from_file_location("oea_binding_probe", {path!r})
m = importlib.util.module_from_spec(spec)
try:
    spec.loader.exec_module(m)
except Exception as exc:
    print("BINDING RAISES", type(exc).__name__, exc, flush=True)
else:
    print("BINDING K0=%d ENABLED=%s" % (m.K0, bool(m.ENABLED)), flush=True)
"""


def wheel_has_cuda(r):
    """Whether the installed wheel's liboea has a CUDA fat binary."""
    libs = glob.glob(os.path.join(r.venv, "lib", "python3*", "site-packages", "oeapatch", "lib", "liboea.so.*"))
    with open(libs[0], "rb") as f:
        return b".nv_fatbin" in f.read()


def check_settings(r):
    """Issue 36 point 1: the plugin's verdict, its gauge and the binding's
    behaviour are one decision, for values the plugin once read otherwise
    than the binding: a typo of a setting's name beside K0=3, K0=abc with
    STRICT off, K0=+0."""
    n, p = r.name, r.cfg["prefix"]
    binding = glob.glob(os.path.join(os.path.dirname(r.target), "_oeapatch_*.py"))
    after = BINDING_PROBE.format(path=binding[0] if binding else "missing")
    prom = tempfile.mkdtemp(dir=r.work, prefix="prom-")
    rc, out = r.start(after=after, **r.k0(**{p + "STAT": "1", "PROMETHEUS_MULTIPROC_DIR": prom}))
    lines = plugin_lines(out)
    errors = [ln for ln in lines if level(ln) == "ERROR"]
    warned = [ln for ln in lines if level(ln).startswith("WARN") and p + "STAT" in ln]
    say(rc == 0 and "OEA in place" in out and "k0=3" in out and not errors and warned
        and "BINDING K0=3 ENABLED=True" in out and r.gauge(prom) == [(r.cfg["patch"], "1.0")],
        "%s: K0=3 with the typo %sSTAT=1: the plugin warns, says OEA in place, gauge 1, and the "
        "binding runs k0=3%s" % (n, p, "" if rc == 0 and not errors and warned else ": rc %d: %s"
                                 % (rc, out[-1500:])))
    rc, out = r.start(after=after, **{p + "K0": "abc", p + "STRICT": "false"})
    stop = [ln for ln in plugin_lines(out) if "cannot start with these settings" in ln]
    say(rc != 0 and "LOADED" not in out and stop and p + "K0='abc'" in stop[0]
        and "Starting without OEA" not in out,
        "%s: K0=abc, STRICT=false: the plugin stops the process, naming the value the binding "
        "refuses%s" % (n, ": " + stop[0][:160] if stop else ": rc %d: %s" % (rc, out[-1500:])))
    # the binding, without the plugin (the restriction leaves it out): the same value stops it
    rc, out = r.start(after=after, **{p + "K0": "abc", p + "STRICT": "false",
                                      r.cfg["restrict"]: "otherplug"})
    say("BINDING RAISES SettingError" in out and p + "K0" in out,
        "%s: K0=abc: the binding's import raises SettingError too%s"
        % (n, "" if "BINDING RAISES SettingError" in out else ": " + out[-800:]))
    # point 5: a setting of the other framework, and a misspelt prefix, are said
    other = "VLLM_OEA_K0" if p.startswith("SGLANG") else "SGLANG_OEA_K0"
    typo = p.replace("_OEA_", "_OAE_") + "STATS"
    rc, out = r.oeapatch("verify", **{other: "3", typo: "1"})
    warned = [ln for ln in out.splitlines() if ln.startswith("WARN settings")]
    say(rc == 0 and any(other in ln and "not of " + r.cfg["patch"] in ln for ln in warned)
        and any(typo in ln and "a typo of " + p + "STATS" in ln for ln in warned),
        "%s: verify warns about %s (another definition's) and %s (a typo)%s"
        % (n, other, typo, "" if len(warned) == 2 else ": rc %d: %s" % (rc, out[-1200:])))
    # point 2: status says what the server will run, and why not
    rc, out = r.oeapatch("--json", "status", **{p + "K0": "abc"})
    try:
        doc = json.loads(out)
    except ValueError:
        doc = {}
    settings = doc.get("settings") or {}
    say(rc == 1 and settings.get("oea") == "stops" and p + "K0='abc'" in (settings.get("reason") or "")
        and settings.get("source") == ["environment"],
        "%s: status --json with K0=abc: settings.oea stops, the reason and the source%s"
        % (n, "" if settings.get("oea") == "stops" else ": rc %d: %s" % (rc, out[-800:])))
    rc, out = r.oeapatch("status", **{p + "K0": "3"})
    say(rc == 0 and re.search(r"^settings: k0=3 ", out, re.M) and re.search(r"^oea: +on ", out, re.M),
        "%s: status with K0=3 shows the settings and 'oea: on'%s"
        % (n, "" if rc == 0 else ": rc %d: %s" % (rc, out[-800:])))
    # point 4: a (simulated) NVIDIA GPU the wheel's liboea has no code for
    # (a Turing, sm_75, for the CUDA one; any GPU for a CPU-only one): the
    # plugin stops the process, as the binding's first CUDA call would
    tree = tempfile.mkdtemp(dir=r.work, prefix="nvidia-")
    os.makedirs(os.path.join(tree, "proc", "driver", "nvidia", "gpus", "0000:00:04.0"))
    rc, out = r.start(**r.k0(OEAPATCH_TEST_NVIDIA_ROOT=tree, OEAPATCH_TEST_NVIDIA_CC="7.5"))
    why = "no code for sm_75" if wheel_has_cuda(r) else "CPU only"
    gpu = [ln for ln in plugin_lines(out) if "verify: gpu: " in ln and why in ln]
    say(rc != 0 and "LOADED" not in out and gpu,
        "%s: a GPU and a liboea without code for it (%s), K0=3: the plugin stops the process naming "
        "the gpu check%s" % (n, why, "" if gpu else ": rc %d: %s" % (rc, out[-1200:])))
    rc, out = r.start(after=after, **{p + "K0": "+0"})
    lines = plugin_lines(out)
    say(rc == 0 and "BINDING K0=0 ENABLED=False" in out
        and all(level(ln) == "DEBUG" and "OEA is off" in ln for ln in lines) and lines,
        "%s: K0=+0: the plugin says off (debug) and the binding runs off%s"
        % (n, "" if rc == 0 and lines else ": rc %d: %s" % (rc, out[-1500:])))


# After the loader: a child process, as vLLM's engine core is one, imports
# the binding (K0 on) and exports its counters as at a stats interval (the
# totals of its real, still empty, statistics); then this process prints
# what its /metrics would serve: vLLM's own get_prometheus_registry(), as
# attach_router() mounts it, rendered by prometheus_client as
# make_asgi_app() renders it.
METRICS_PROBE = r"""
import os, subprocess, sys
child = ("import importlib.util\n"
         "spec = importlib.util.spec_from_file_location('oea_binding_probe', %r)\n"
         "m = importlib.util.module_from_spec(spec)\n"
         "spec.loader.exec_module(m)\n"
         "print('EXPORTED', m.export_metrics(), flush=True)\n")
out = subprocess.run([sys.executable, "-c", child % {path!r}], capture_output=True, text=True)
print(out.stdout, out.stderr[-2000:], flush=True)
from prometheus_client import generate_latest
from vllm.v1.metrics.prometheus import get_prometheus_registry
print("PMD", os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
print(generate_latest(get_prometheus_registry()).decode(), flush=True)
print("PID", os.getpid())
"""


def check_metrics(r):
    """Issue 36 point 3: on a default server (no PROMETHEUS_MULTIPROC_DIR),
    the plugin's gauge and the binding's counters reach the /metrics of the
    API server process."""
    n = r.name
    binding = glob.glob(os.path.join(os.path.dirname(r.target), "_oeapatch_*.py"))
    rc, out = r.start(after=METRICS_PROBE.format(path=binding[0] if binding else "missing"),
                      **r.k0(**{r.cfg["prefix"] + "STATS": "1"}))
    pid = re.findall(r"^PID (\d+)$", out, re.M)
    gauge = re.findall(r'^vllm:oea_worker_verified\{patch="%s",pid="%s"\} 1\.0$'
                       % (re.escape(r.cfg["patch"]), pid[0] if pid else "-"), out, re.M)
    calls = re.findall(r'^vllm:oea_python_calls_total\{rank=""\} 0\.0$', out, re.M)
    say(rc == 0 and "PMD None" in out and "EXPORTED True" in out and gauge and calls,
        "%s: default server (no PROMETHEUS_MULTIPROC_DIR): /metrics of the process that loaded "
        "the plugin serves %s 1 and a worker's vllm:oea_python_calls_total%s"
        % (n, r.cfg["metric"], "" if gauge and calls else ": rc %d: %s" % (rc, out[-2500:])))


def check_status(r):
    n, var = r.name, r.cfg["restrict"]
    rc, out = run([r.cli, "status"], env=r.env(**r.k0()), cwd=r.work)
    say("plugin" in out and "enabled" in out,
        "%s: status (the venv default) says the plugin is installed and enabled: %s"
        % (n, [ln.strip() for ln in out.splitlines() if "plugin" in ln]))
    rc, out = run([r.cli, "status"], env=r.env(**r.k0(**{var: "otherplug"})), cwd=r.work)
    say(var in out and "exclude" in out,
        "%s: status names %s=otherplug leaving the plugin out: %s"
        % (n, var, [ln.strip() for ln in out.splitlines() if "plugin" in ln]))
    rc, out = r.start(**r.k0(**{var: "otherplug"}))
    say(rc == 0 and "LOADED" in out and not [ln for ln in plugin_lines(out) if "OEA" in ln],
        "%s: with %s leaving it out, the loader does not run the plugin" % (n, var))


def timed(what, since=None):
    """Where the test's time goes: each step's wall and CPU seconds (its own
    and its children's: the interpreters, oeapatch, pip), printed as TIME
    lines. timed(None) starts a measure."""
    now = (time.monotonic(), sum(os.times()[:4]))
    if what is not None and since is not None:
        print("TIME %-60s %6.1f s wall %6.1f s cpu" % (what, now[0] - since[0], now[1] - since[1]),
              flush=True)
    return now


def main():
    # build-wheel.sh writes a wheel per architecture: this machine's.
    wheels = sorted(glob.glob(os.path.join(BUILD, "wheel-dist", "oeapatch-*_%s.whl" % platform.machine())))
    if not wheels:
        print("SKIP no wheel in %s (the fixture wheel.build built none)"
              % os.path.join(BUILD, "wheel-dist"))
        return 77
    # ctest passes --library PATH to every Python test: the wheel carries its own.
    names = [a for a in sys.argv[1:] if a in RELEASES] or DEFAULT
    work = tempfile.mkdtemp(prefix="plugin-", dir=BUILD)
    try:
        for fw in names:
            try:
                t0 = timed(None)
                r = Release(fw, wheels[-1], work)
                timed("%s: the environment (make_env, venv, the wheel installed)" % fw, t0)
            except EnvironmentError as exc:
                if "Network is unreachable" in str(exc) or "resolution" in str(exc):
                    print("SKIP %s: no environment and no network: %s" % (fw, exc))
                    continue
                say(False, "%s: environment: %s" % (fw, exc))
                continue
            try:
                steps = [check_release, check_live_binding, check_conflicts, check_settings]
                steps += [check_metrics] if fw == "vllm" else []
                for step in steps + [check_status]:
                    t0 = timed(None)
                    step(r)
                    timed("%s: %s" % (fw, step.__name__), t0)
            finally:
                r.server.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    failed = RESULTS.count(False)
    print("%d passed, %d failed" % (RESULTS.count(True), failed))
    return 1 if failed or not RESULTS else 0


if __name__ == "__main__":
    sys.exit(main())
