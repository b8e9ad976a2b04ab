#!/usr/bin/python3
"""The real-SGLang suite: for each release in tests/sglang/releases.txt (or the
ones named on the command line), in its cached environment (make_env.sh):

  1. `oeapatch revert` (a run killed half-way leaves nothing behind), then the
     installed topk.py must match the sha256 in the wheel's RECORD;
  2. unpatched outputs of select_experts recorded (release_check.py unpatched);
  3. `oeapatch apply` on the installed package, `oeapatch verify`;
  4. release_check.py off (K0=0), on (K0=3, stats on) and metrics (stats and
     SGLang's Prometheus multiprocess folder on); on the last release named,
     ranks (two processes with torch.distributed) and bench;
  5. `oeapatch revert`: topk.py matches RECORD again, the binding module is gone.

Every phase that imports SGLang (the import-chain checks, then the phases of
release_check.py) is a forked child of one interpreter of the release's
environment that has imported torch and transformers once (tests/e2e/
phase_server.py): one interpreter start per release. After the import-chain
checks the server also imports ForwardBatch's chain, which the patch never
changes (refused, and the phases import it themselves, if it pulls in
topk.py or anything of ours); each phase still imports topk.py and the
binding anew from the files as they are at that moment.

Environment: OEAPATCH (the CLI), OEA_LIBRARY (liboea), both set by ctest.
Prints one line per check and `N passed, M failed`; exit 1 on any failure.
"""

import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))

from phase_server import PhaseServer  # noqa: E402
from release_suite import (cache_dir, file_hash, phase, record_hash,  # noqa: E402
                           releases, run, say, tally, use_inductor_cache)

TARGET = os.path.join("sglang", "srt", "layers", "moe", "topk.py")
TOPK_MODULE = "sglang.srt.layers.moe.topk"
FORWARD_BATCH = "sglang.srt.model_executor.forward_batch_info"
# Stubs of compiled GPU-only packages, on PYTHONPATH in every phase of a release
# whose import chain does not load without them (checked per release).
STUBS = os.path.join(HERE, "stubs")
STUB_REASONS = {
    "sgl_kernel": "SGLang's compiled CUDA kernels (needs libcuda); this release's "
                  "chain does not load without it (0.5.x: sgl_kernel.kvcacheio is "
                  "imported at module level on every platform)",
}

def one_release(version, cli, library, bench=False):
    started = time.monotonic()
    # The installed package is patched in place: one run per release at a time on
    # this machine (other checkouts share the cache).
    import fcntl

    cache = cache_dir()
    os.makedirs(cache, exist_ok=True)
    lock = open(os.path.join(cache, ".lock-run-%s" % version), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    rc, out, err = run([os.path.join(HERE, "make_env.sh"), version], timeout=3600)
    if rc != 0:
        say(False, "%s: environment: %s" % (version, err[-2000:]))
        return
    python = out.strip().splitlines()[-1]
    env_dir = os.path.dirname(os.path.dirname(python))
    checkout = os.path.join(env_dir, "checkout")
    site = os.path.join(checkout, "python")
    topk = os.path.join(site, TARGET)
    base_env = {k: v for k, v in os.environ.items()
                if not k.startswith("SGLANG_OEA_")
                and k not in ("PROMETHEUS_MULTIPROC_DIR", "PYTHONPATH")}

    # One interpreter start for the release: every phase below that imports
    # SGLang is a forked child of it (tests/e2e/phase_server.py).
    server = PhaseServer(python, env=base_env)
    try:
        def chain_stubs(env):
            """The stubs the import chain loads with `env` (None: it does not load)."""
            rc, out, err = server.run(["-c", "import sys, %s, %s; "
                                       "print('STUBS', *sorted(m for m in sys.modules if m in %r))"
                                       % (TOPK_MODULE, FORWARD_BATCH, tuple(STUB_REASONS))], env)
            # The chain may log on stdout (vLLM's INFO lines): only the marked line counts.
            marked = [line.split()[1:] for line in out.splitlines() if line.startswith("STUBS")]
            return (marked[-1] if rc == 0 and marked else None), out + err

        # A stub goes on the path only where the real chain cannot load without it
        # (0.4.9 tries `import sgl_kernel` and carries on without it: no stub there).
        stubs, log = chain_stubs(dict(base_env, PYTHONPATH=STUBS))
        if stubs is None:
            say(False, "%s: the import chain does not load: %s" % (version, log[-2000:]))
            return
        if stubs and chain_stubs(base_env)[0] is not None:
            stubs = []
        if stubs:
            base_env["PYTHONPATH"] = STUBS
        for name in stubs:
            print("STUB %s: %s: %s" % (version, name, STUB_REASONS[name]), flush=True)

        # ForwardBatch's chain (not topk.py, which the patch changes, nor anything
        # of ours) imported once into the server: every phase inherits it.
        error = server.extend([FORWARD_BATCH], base_env.get("PYTHONPATH", ""),
                              never=[TOPK_MODULE])
        print("PRELOAD %s: %s" % (version, "%s in the phase server" % FORWARD_BATCH
                                  if error is None else "none: " + error), flush=True)

        rc, out, err = run([cli, "revert", "-C", checkout], env=base_env)
        expected = record_hash(site, "sglang", TARGET)
        say(rc == 0 and expected is not None and file_hash(topk) == expected,
            "%s: installed topk.py is the wheel's (RECORD %s)" % (version, expected))

        work = tempfile.mkdtemp(prefix="oea-sglang-%s-" % version)

        def run_phase(name, extra, *args):
            phase(server, os.path.join(HERE, "release_check.py"), version, name, work,
                  dict(base_env, **extra), args, show=("BENCH ", "ranks phase:"))

        run_phase("unpatched", {})
        rc, out, err = run([cli, "apply", "-C", checkout, "--library", library], env=base_env)
        say(rc == 0, "%s: oeapatch apply on the installed package%s"
            % (version, "" if rc == 0 else ": " + (out + err)[-1500:]))
        if rc == 0:
            rc, out, err = run([cli, "verify", "-C", checkout], env=base_env)
            say(rc == 0, "%s: oeapatch verify%s" % (version, "" if rc == 0 else ": " + err[-800:]))
            run_phase("off", {"SGLANG_OEA_K0": "0"})
            run_phase("on", {"SGLANG_OEA_K0": "3", "SGLANG_OEA_STATS": "true"}, library)
            run_phase("shadow", {"SGLANG_OEA_K0": "3", "SGLANG_OEA_MODE": "shadow"})
            # SGLang's --enable-metrics sets PROMETHEUS_MULTIPROC_DIR to a fresh folder
            # before it starts its workers; the phase scrapes it as /metrics does.
            metrics_dir = os.path.join(work, "prometheus")
            os.makedirs(metrics_dir)
            run_phase("metrics", {"SGLANG_OEA_K0": "3", "SGLANG_OEA_STATS": "true",
                              "SGLANG_OEA_STATS_INTERVAL": "1",
                              "PROMETHEUS_MULTIPROC_DIR": metrics_dir})
            if bench:
                # Two processes with torch.distributed: the rank agreement check.
                run_phase("ranks", {})
                # MIN_BATCH=1: a batch of one token takes the whole path too.
                run_phase("bench", {"SGLANG_OEA_K0": "3", "SGLANG_OEA_MIN_BATCH": "1"}, library)
        rc, out, err = run([cli, "revert", "-C", checkout], env=base_env)
        binding = os.path.join(os.path.dirname(topk), "_oeapatch_sglang_oea.py")
        say(rc == 0 and file_hash(topk) == expected and not os.path.exists(binding),
            "%s: oeapatch revert gives back the wheel's topk.py (%.0f s)"
            % (version, time.monotonic() - started))
    finally:
        server.close()


def main():
    cli = os.environ.get("OEAPATCH")
    library = os.environ.get("OEA_LIBRARY")
    if not cli or not library:
        print("FAIL setup: OEAPATCH and OEA_LIBRARY must be set (ctest sets them)")
        return 1
    wanted = sys.argv[1:] or releases(os.path.join(HERE, "releases.txt"))
    use_inductor_cache()
    started = time.monotonic()
    # Environments are made first, four at a time (the shared torch once, under
    # its own lock); one_release then finds them ready.
    pending = list(wanted)
    running = []
    while pending or running:
        while pending and len(running) < 4:
            v = pending.pop(0)
            running.append(subprocess.Popen([os.path.join(HERE, "make_env.sh"), v],
                                            stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))
        running[0].wait(timeout=3600)
        running = [p for p in running if p.poll() is None]
    print("environments ready in %.0f s" % (time.monotonic() - started), flush=True)
    for version in wanted:
        # The host-overhead benchmark runs on the newest release of the list.
        one_release(version, cli, library, bench=version == wanted[-1])
    return tally(len(wanted), time.monotonic() - started)

if __name__ == "__main__":
    sys.exit(main())
