"""What the two real-release suites (tests/sglang/run_releases.py and
tests/vllm/run_releases.py) share: the list of releases, the wheel's RECORD
digests, the running tally of checks, and one phase of release_check.py run
through the release's phase server (phase_server.py) with its PASS/FAIL
lines counted.
"""

import base64
import hashlib
import os
import subprocess
import time

RESULTS = []


def say(ok, text):
    RESULTS.append(bool(ok))
    print("%s %s" % ("PASS" if ok else "FAIL", text), flush=True)


def tally(count, elapsed_s):
    """Prints the summary line; the suite's exit status."""
    passed = sum(RESULTS)
    print("%d passed, %d failed (%d releases, %.0f s)"
          % (passed, len(RESULTS) - passed, count, elapsed_s))
    return 0 if RESULTS and all(RESULTS) else 1


def releases(listing):
    """The release lines of a releases.txt (not its torch, deps and chain lines)."""
    out = []
    with open(listing) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line and not line.startswith(("torch ", "deps ", "chain ")):
                out.append(line.split()[0])
    return out


def cache_dir():
    """The cache of the test environments (OEAPATCH_CACHE, else
    ${XDG_CACHE_HOME:-~/.cache}/oeapatch, as the make_env.sh scripts use)."""
    return os.environ.get("OEAPATCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "oeapatch")


def use_inductor_cache():
    """Points torch inductor's on-disk cache (TORCHINDUCTOR_CACHE_DIR, unless
    set) at cache_dir()/inductor, for this process and every process it
    starts. SGLang's grouped top-k (0.4.4 and later) is torch.compile'd and
    compiled with inductor in every process that calls it; inductor's default
    cache is /tmp/torchinductor_$USER, which a machine may not keep between
    runs, and a phase that finds it empty compiles for 10-15 s (0.5.8: the
    first phase 16.3 s against 3.4 s, `ranks` 28.5 s against 19.7 s). Kept
    with the release environments, the test command's warm run is warm here
    too. Inductor keys each entry by the graph, its inputs, the torch version
    and its configuration, and writes entries atomically: the releases, their
    two torch versions and concurrent runs share the folder safely, and a hit
    gives the code a miss compiles."""
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(cache_dir(), "inductor"))


def record_hash(site, dist, rel):
    """sha256 of `rel` as the RECORD of distribution `dist`'s wheel in `site`
    lists it (urlsafe base64, no padding); None when it lists no such file."""
    for entry in os.listdir(site):
        if entry.startswith(dist + "-") and entry.endswith(".dist-info"):
            with open(os.path.join(site, entry, "RECORD")) as f:
                for line in f:
                    path, digest, _ = line.rstrip("\n").rsplit(",", 2)
                    if path == rel.replace(os.sep, "/"):
                        return digest
    return None


def file_hash(path):
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def run(cmd, env=None, timeout=900):
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def phase(server, script, version, name, work, env, args=(), show=()):
    """release_check.py's phase `name` as a child of the release's phase
    server: each of its PASS/FAIL lines is a check of `version`; lines that
    start with one of `show` are printed as they are. A phase that exits
    non-zero without a FAIL line of its own fails with its stderr."""
    started = time.monotonic()
    rc, out, err = server.run([script, name, work] + list(args), env)
    # Where a release's time goes (docs/performance.md, "Test suite time").
    print("TIME %s: phase %s %.1f s" % (version, name, time.monotonic() - started), flush=True)
    for line in out.splitlines():
        if show and line.startswith(tuple(show)):
            print(line, flush=True)
        if line.startswith(("PASS ", "FAIL ")):
            say(line.startswith("PASS "), "%s: %s" % (version, line[5:]))
    if rc != 0 and "FAIL" not in out:
        say(False, "%s: phase %s exited %d: %s" % (version, name, rc, err[-3000:]))
    elif rc != 0 and os.environ.get("OEAPATCH_VERBOSE"):
        print(err[-3000:])
