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
      patched, OEA on: the plugin's line (definition, k0, library, CPU,
        decode detection), the gauge 1 where the Prometheus folder is set;
        three more starts give the time the plugin adds (median, printed);
      a package folder, an extension module and a stale unchecked-hash pyc
        shadowing the patched file: the process stops (strict, the default),
        naming the cause; with STRICT=false it logs the error, goes on, and
        the gauge is 0;
      another plugin (a distribution written here, registered like any
        other) hooking or replacing the call site's function: named;
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
import os
import py_compile
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

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
        run([release_py, "-m", "venv", self.venv], timeout=300)
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
        rc, out = run([self.py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
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

    def start(self, after="", **env):
        """A process that runs the framework's loader (rc, stdout and stderr)."""
        code = DRIVER.format(load=self.cfg["load"], after=after)
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


def check_release(r):
    n = r.name
    rc, out = r.oeapatch("revert")
    rc, out = r.oeapatch("apply")
    say(rc == 0, "%s: the wheel's oeapatch applies to the private copy (%s)" % (n, out.strip()[-200:]))
    rc, out = r.oeapatch("verify", **r.k0())
    say(rc == 0, "%s: verify passes with K0=3%s" % (n, "" if rc == 0 else ": " + out[-800:]))

    # OEA off: silent but for the debug line.
    rc, out = r.start()
    lines = plugin_lines(out)
    say(rc == 0 and "LOADED" in out and len(lines) == 1 and level(lines[0]) == "DEBUG"
        and "OEA is off" in lines[0],
        "%s: OEA off: the loader runs the plugin, one debug line and nothing else%s"
        % (n, "" if rc == 0 and len(lines) == 1 else ": rc %d, %r" % (rc, lines or out[-800:])))

    # Patched, on: the line, and the gauge 1.
    prom = tempfile.mkdtemp(dir=r.work, prefix="prom-")
    rc, out = r.start(**r.k0(PROMETHEUS_MULTIPROC_DIR=prom))
    line = [ln for ln in plugin_lines(out) if "OEA in place" in ln]
    want = [r.cfg["patch"], "k0=3", "liboea %s" % os.path.join(r.venv, "lib"), "CPU only",
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

OTHER_VLLM = r'''
def register():
    from vllm.model_executor.layers.fused_moe.router import base_router

    def select_experts(self, *args, **kwargs):
        raise RuntimeError("otherplug's router")
    base_router.BaseRouter.select_experts = select_experts
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
        other = write_other(r, OTHER_VLLM, "vllm.general_plugins")
        rc, out = r.start(**r.k0(PYTHONPATH=other))
        ok = rc != 0 and "replaced by otherplug" in out and "distribution otherplug" in out
        say(ok, "%s: another plugin replacing BaseRouter.select_experts is named and stops "
            "the process%s" % (n, "" if ok else ": rc %d: %s" % (rc, out[-1500:])))
        rc, out = r.start(after=VLLM_MODEL, **r.k0())
        ok = (rc == 0 and "FORWARD STOPPED NotInPlaceError" in out and "OtherRouter" in out)
        say(ok, "%s: a model router class overriding select_experts is found at the first "
            "forward%s" % (n, "" if ok else ": rc %d: %s" % (rc, out[-1500:])))


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


def main():
    wheels = sorted(glob.glob(os.path.join(BUILD, "wheel-dist", "oeapatch-*.whl")))
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
                r = Release(fw, wheels[-1], work)
            except EnvironmentError as exc:
                if "Network is unreachable" in str(exc) or "resolution" in str(exc):
                    print("SKIP %s: no environment and no network: %s" % (fw, exc))
                    continue
                say(False, "%s: environment: %s" % (fw, exc))
                continue
            try:
                check_release(r)
                check_conflicts(r)
                check_status(r)
            finally:
                r.server.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    failed = RESULTS.count(False)
    print("%d passed, %d failed" % (RESULTS.count(True), failed))
    return 1 if failed or not RESULTS else 0


if __name__ == "__main__":
    sys.exit(main())
