#!/usr/bin/python3
"""The real-vLLM suite: for each release in tests/vllm/releases.txt (or the ones
named on the command line), in its cached environment (make_env.sh):

  1. `oeapatch revert` (a run killed half-way leaves nothing behind), then the
     routing file (router/base_router.py from 0.15, else layer.py) must match
     the sha256 in the wheel's RECORD;
  2. unpatched outputs of the release's routing recorded (release_check.py
     unpatched);
  3. `oeapatch apply --python ENV --patch vllm-oea`, `oeapatch verify`,
     `oeapatch revert` (the interpreter's way in), then `oeapatch apply -C` on
     the env's checkout root (found without --patch), `oeapatch verify`;
  4. release_check.py off (K0=0) and on (K0=3, stats on); bad settings
     (VLLM_OEA_K0=abc, VLLM_OEA_MAX_TOKENS=0) stop the import of the routing
     module with a message naming the setting;
  5. `oeapatch revert`: the routing file matches RECORD again, the binding
     module is gone.

Environment: OEAPATCH (the CLI), OEA_LIBRARY (liboea), both set by ctest.
Prints one line per check and `N passed, M failed`; exit 1 on any failure.
No stub: every release's import chain loads without one (vLLM's compiled
modules are left out of the checkout and vLLM goes on without them).

Every phase that imports vLLM (release_check.py's phases, the imports with bad
settings) is a forked child of one interpreter of the release's environment
that has imported torch and transformers once (tests/e2e/phase_server.py):
one interpreter start per release. The server also imports vllm.config's
chain, which the patch never changes (refused, and the phases import it
themselves, if it pulls in the routing file or anything of ours); each phase
imports the routing file and the binding anew from the files as they are at
that moment. `oeapatch --python` still starts the
release's interpreter itself, as it does on a user's machine.
"""

import fcntl
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))

from phase_server import TORCH_IMPORTS, PhaseServer  # noqa: E402
from release_suite import (cache_dir, file_hash, phase, record_hash,  # noqa: E402
                           releases, run, say, tally)

TARGETS = [os.path.join("vllm", "model_executor", "layers", "fused_moe", "router",
                        "base_router.py"),
           os.path.join("vllm", "model_executor", "layers", "fused_moe", "layer.py")]
BINDING = "_oeapatch_vllm_oea.py"
CONFIG = "vllm.config"

def one_release(version, cli, library):
    started = time.monotonic()
    cache = cache_dir()
    os.makedirs(cache, exist_ok=True)
    # The checkout is patched in place: one run per release at a time on this
    # machine (other worktrees share the cache).
    lock = open(os.path.join(cache, ".lock-run-vllm-%s" % version), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    rc, out, err = run([os.path.join(HERE, "make_env.sh"), version], timeout=3600)
    if rc != 0:
        say(False, "%s: environment: %s" % (version, err[-2000:]))
        return
    python = out.strip().splitlines()[-1]
    env_dir = os.path.dirname(os.path.dirname(python))
    checkout = os.path.join(env_dir, "checkout")
    with open(os.path.join(env_dir, "deps.txt")) as f:
        print("ENV %s: %s" % (version, " ".join(f.read().split())), flush=True)
    rel = next(t for t in TARGETS if os.path.exists(os.path.join(checkout, t)))
    target = os.path.join(checkout, rel)
    binding = os.path.join(os.path.dirname(target), BINDING)
    base_env = {k: v for k, v in os.environ.items()
                if not k.startswith("VLLM_OEA_") and k != "PYTHONPATH"}

    # One interpreter start for the release: every phase below that imports
    # vLLM is a forked child of it (tests/e2e/phase_server.py).
    # release_check.py runs with TORCHDYNAMO_DISABLE (eager): no phase compiles
    # with inductor, so the server does not ask inductor's vector-ISA question.
    server = PhaseServer(python, preload=TORCH_IMPORTS, env=base_env)
    module = rel[:-3].replace(os.sep, ".")
    try:
        # vLLM's config chain (not the routing file, which the patch changes, nor
        # anything of ours) imported once into the server: every phase inherits it.
        error = server.extend([CONFIG], never=[module])
        print("PRELOAD %s: %s" % (version, "%s in the phase server" % CONFIG
                                  if error is None else "none: " + error), flush=True)
        rc, out, err = run([cli, "revert", "-C", checkout], env=base_env)
        expected = record_hash(checkout, "vllm", rel)
        say(rc == 0 and expected is not None and file_hash(target) == expected,
            "%s: installed %s is the wheel's (RECORD %s)" % (version, rel, expected))

        work = tempfile.mkdtemp(prefix="oea-vllm-%s-" % version)

        def run_phase(name, extra, *args):
            phase(server, os.path.join(HERE, "release_check.py"), version, name, work,
                  dict(base_env, **extra), args)

        run_phase("unpatched", {})

        # The interpreter's way in: the vllm that ENV's python imports (the checkout,
        # through a .pth file), the definition named.
        rc, out, err = run([cli, "apply", "--python", python, "--patch", "vllm-oea",
                            "--library", library], env=base_env)
        ok = rc == 0
        if ok:
            rc, out, err = run([cli, "verify", "--python", python], env=base_env)
            ok = rc == 0
        if ok:
            rc, out, err = run([cli, "revert", "--python", python], env=base_env)
            ok = rc == 0 and file_hash(target) == expected and not os.path.exists(binding)
        say(ok, "%s: apply, verify, revert through --python --patch vllm-oea%s"
            % (version, "" if ok else ": " + (out + err)[-1500:]))

        # The checkout's root: the definition found by what the folder holds.
        rc, out, err = run([cli, "apply", "-C", checkout, "--library", library], env=base_env)
        say(rc == 0 and "vllm-oea" in out + err, "%s: oeapatch apply -C the checkout%s"
            % (version, "" if rc == 0 else ": " + (out + err)[-1500:]))
        if rc == 0:
            rc, out, err = run([cli, "verify", "-C", checkout], env=base_env)
            say(rc == 0, "%s: oeapatch verify%s" % (version, "" if rc == 0 else ": " + err[-800:]))
            run_phase("off", {"VLLM_OEA_K0": "0"})
            # on also records (issue 33): its replay must give its live sums
            run_phase("on", {"VLLM_OEA_K0": "3", "VLLM_OEA_STATS": "true",
                             "VLLM_OEA_RECORD": os.path.join(work, "routing")}, library)
            run_phase("shadow", {"VLLM_OEA_K0": "3", "VLLM_OEA_MODE": "shadow"})
            for bad, name in (({"VLLM_OEA_K0": "abc"}, "VLLM_OEA_K0"),
                              ({"VLLM_OEA_K0": "3", "VLLM_OEA_MAX_TOKENS": "0"},
                               "VLLM_OEA_MAX_TOKENS")):
                rc, out, err = server.run(["-c", "import " + module], dict(base_env, **bad))
                last = (err.strip().splitlines() or [""])[-1]
                say(rc != 0 and name in last, "%s: %s refused at import: %s"
                    % (version, " ".join("%s=%s" % kv for kv in bad.items()), last[-300:]))
        rc, out, err = run([cli, "revert", "-C", checkout], env=base_env)
        say(rc == 0 and file_hash(target) == expected and not os.path.exists(binding),
            "%s: oeapatch revert gives back the wheel's %s (%.0f s)"
            % (version, os.path.basename(rel), time.monotonic() - started))
    finally:
        server.close()


def main():
    cli = os.environ.get("OEAPATCH")
    library = os.environ.get("OEA_LIBRARY")
    if not cli or not library:
        print("FAIL setup: OEAPATCH and OEA_LIBRARY must be set (ctest sets them)")
        return 1
    wanted = sys.argv[1:] or releases(os.path.join(HERE, "releases.txt"))
    started = time.monotonic()
    # Environments are made first, three at a time (each shared torch once,
    # under its own lock); one_release then finds them ready.
    pending = list(wanted)
    running = []
    while pending or running:
        while pending and len(running) < 3:
            running.append(subprocess.Popen([os.path.join(HERE, "make_env.sh"),
                                             pending.pop(0)],
                                            stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))
        running[0].wait(timeout=3600)
        running = [p for p in running if p.poll() is None]
    print("environments ready in %.0f s" % (time.monotonic() - started), flush=True)
    for version in wanted:
        one_release(version, cli, library)
    return tally(len(wanted), time.monotonic() - started)

if __name__ == "__main__":
    sys.exit(main())
