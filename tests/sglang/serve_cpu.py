#!/usr/bin/python3
"""A real SGLang offline Engine serving a tiny random-weight MoE model on the CPU,
unpatched, then patched by `oeapatch apply` with SGLANG_OEA_K0=0 and =3.

    tests/sglang/serve_cpu.py [VERSION [off|on|shadow]...]   (default 0.5.23, all; needs
                                                    serve-VERSION.txt)

Steps, in the cached environment of serve_env.sh (its own copy of the release, so
the release suite's installed package is never touched):
  1. `oeapatch revert`, then topk.py must match the sha256 in the wheel's RECORD;
  2. a tiny Qwen3-MoE checkpoint (2 layers, 16 experts, top-8, random weights),
     made once with transformers' save_pretrained and cached;
  3. unpatched: sglang.Engine(device="cpu", attention_backend="torch_native")
     with SGLANG_USE_CPU_ENGINE=1, greedy generation for 4 prompts started
     together (one decode batch of 4), with input and output logprobs;
  4. `oeapatch apply`, `oeapatch verify`;
  5. (off) K0=0: every output (ids and logprobs) equal to the unpatched run;
  6. (on) K0=3, stats on: prompt (prefill) logprobs equal to the unpatched run, the
     binding's stats line shows routed decode calls of >= 2 rows each and mean T
     after < before, and the decode logprobs differ (the re-routed ids reached
     the experts); with SGLANG_OEA_RECORD set in the same start, `oeapatch
     replay` of the scheduler's recording at k0 3 gives liboea's live sums
     exactly (issue 33), read from the counters the binding exports at the
     line (OEAPATCH_METRICS_DIR: exact sums, the line rounds its means);
  7. (shadow) K0=3, SGLANG_OEA_MODE=shadow: every output equal to the unpatched
     run, stats of routed decode calls with mean T after < before and a kept
     weight, the plugin's line saying the mode, and the K0=3 run's decisions
     (calls, rows, gated);
  8. `oeapatch revert`: topk.py matches RECORD again, the binding module is gone.

The only stub is tests/sglang/stubs/sgl_kernel (SGLang's CUDA kernels: PyPI's
wheel needs libcuda and has none of the CPU ops); this CPU has no AMX, so SGLang
takes its torch-native CPU paths and never calls sgl_kernel: a call would raise
"sgl_kernel stub", and the output is searched for it.

Environment: OEAPATCH (the CLI), OEA_LIBRARY (liboea), both set by ctest.
Exit 77 only when the environment is absent and cannot be made because the
package index is unreachable. Prints PASS/FAIL lines and `N passed, M failed`.

Run inside the environment, with a first argument `model DIR` or
`engine MODEL OUT`, this file is also the child that makes the model or runs
the Engine.
"""

import glob
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
from oea_testlib import recording_calls  # noqa: E402
from release_suite import cache_dir, file_hash, record_hash, use_inductor_cache  # noqa: E402
TARGET = os.path.join("sglang", "srt", "layers", "moe", "topk.py")
STUBS = os.path.join(HERE, "stubs")
# Different lengths, started together: one prefill batch, then decode batches of 4.
PROMPTS = [[1, 2, 3, 4, 5], [7, 8, 9], [100, 200, 300, 400], [11, 12, 13, 14, 15, 16]]
NEW_TOKENS = 8
# Messages of pip when the index cannot be reached (the only case for exit 77).
OFFLINE = ("NewConnectionError", "Network is unreachable", "Temporary failure in name "
           "resolution", "Name or service not known", "Failed to establish a new connection")
STATS = re.compile(r"oeapatch: OEA stats \(pid \d+, since start(?:, shadow[^)]*)?\): "
                   r"python calls=(\d+) rows=(\d+) \(to liboea \d+, skipped \d+\); "
                   r"(?:cpu: (\d+) routed calls, mean T ([\d.]+) -> ([\d.]+), "
                   r"(\d+) rows, (\d+) gated(?:, kept mean ([\d.]+), p5 ([\d.]+), ([\d.]+) "
                   r"slots changed per row)?|no routed call); rows skipped: (.*)")


def shadow_phase(version, engine, base):
    """K0=3 in shadow mode: the unpatched run's outputs bit for bit (ids and
    logprobs, as json holds them: exact floats), statistics of routed decode
    calls with T after < T before and a kept weight, the plugin's line saying
    the mode. (Its sums are not compared with the K0=3 run's here: from the
    second MoE layer on, that run's inputs are what OEA changed, and its last
    line is written at an interval; test_binding.py and the release suites
    compare both modes on the same batches.)"""
    shadow, log = engine("K0=3-shadow", {"SGLANG_OEA_K0": "3", "SGLANG_OEA_MODE": "shadow",
                                         "SGLANG_OEA_STATS_INTERVAL": "1"})
    if shadow is None:
        return
    say(shadow == base, "%s: shadow: output ids and logprobs equal the unpatched run" % version)
    lines = STATS.findall(log)
    print("STATS %s" % (re.findall(r"oeapatch: OEA stats.*", log) or ["none"])[-1])
    routed = [l for l in lines if l[2] and int(l[2])]
    if not routed:
        say(False, "%s: shadow: no stats line of routed calls in the Engine's log" % version)
        return
    _, _, calls, t_before, t_after, rows, _, kept, p5, changed, _ = routed[-1]
    say(float(t_after) < float(t_before) and kept and 0 < float(p5) <= float(kept) <= 1,
        "%s: shadow: %s decode calls counted (%s rows), mean T %s -> %s, kept mean %s, "
        "p5 %s, %s slots changed per row" % (version, calls, rows, t_before, t_after, kept,
                                              p5, changed))
    plugin = [l for l in log.splitlines() if "OEA in place in this process" in l]
    say(plugin and all("k0=3, mode=shadow" in l and "stats=every 1 s" in l for l in plugin),
        "%s: shadow: the plugin's line says the mode: %s" % (version, (plugin or ["none"])[0][:200]))


def child_model(out):
    """The tiny checkpoint: Qwen3-MoE, every layer sparse, top-8 of 16 (k0=3 < 8)."""
    import torch
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
    torch.manual_seed(0)
    cfg = Qwen3MoeConfig(
        vocab_size=512, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        num_experts=16, num_experts_per_tok=8, decoder_sparse_step=1, mlp_only_layers=[],
        norm_topk_prob=True, max_position_embeddings=512, tie_word_embeddings=False)
    model = Qwen3MoeForCausalLM(cfg)
    # transformers' init (std 0.02) gives a router whose logits are all near 0;
    # a wider router makes the top-8 choice (and so OEA's change of it) matter.
    with torch.no_grad():
        for layer in model.model.layers:
            layer.mlp.gate.weight.normal_(0.0, 0.5)
    model.save_pretrained(out, safe_serialization=True)


def child_engine(model, out):
    import sglang
    engine = sglang.Engine(
        model_path=model, device="cpu", skip_tokenizer_init=True,
        attention_backend="torch_native", dtype="float32", random_seed=0,
        max_total_tokens=4096, mem_fraction_static=0.05, disable_cuda_graph=True,
        log_level="info")
    try:
        res = engine.generate(input_ids=PROMPTS,
                              sampling_params={"temperature": 0, "max_new_tokens": NEW_TOKENS},
                              return_logprob=True, logprob_start_len=0)
        # The stats line is written when a call reaches Python after the interval:
        # one more request, a second later, makes it cover the batch above.
        time.sleep(1.5)
        engine.generate(input_ids=[[5]], sampling_params={"temperature": 0, "max_new_tokens": 1})
        if os.environ.get("SGLANG_OEA_RECORD"):
            wait_for_recording(os.environ["SGLANG_OEA_RECORD"], os.environ["OEAPATCH_METRICS_DIR"])
    finally:
        engine.shutdown()
    doc = [{"output_ids": r["output_ids"],
            "input_logprobs": [t[0] for t in r["meta_info"]["input_token_logprobs"]],
            "output_logprobs": [t[0] for t in r["meta_info"]["output_token_logprobs"]]}
           for r in res]
    with open(out, "w") as f:
        json.dump(doc, f)


def recorded_calls(stem):
    """(file, calls in its complete chunks) of the one recording named by
    `stem`, or (None, 0) before the scheduler's first chunk."""
    files = glob.glob(stem + "-rank*-*.safetensors")
    if len(files) != 1:
        return None, 0
    return files[0], len(recording_calls(files[0]))


def live_counters(folder):
    """The routing process's exported totals {counter: value} (the binding's
    file in OEAPATCH_METRICS_DIR with liboea's sums), or None."""
    for path in glob.glob(os.path.join(folder, "counters-*.json")):
        with open(path) as f:
            doc = json.load(f)
        out = {name.split(":oea_", 1)[1]: sum(v for _, v in m["samples"])
               for name, m in doc.items() if m["labels"] == ["rank", "device"]}
        if out.get("routed_calls"):
            return out
    return None


def wait_for_recording(stem, folder, limit=120):
    """Before the Engine's shutdown kills the scheduler: until its recorder's
    writer has put every call liboea counted on disk (the writer flushes a
    quiet queue within a second; a condition, not a sleep, decides)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        live = live_counters(folder)
        if live and recorded_calls(stem)[1] == live["routed_calls"] + live["gated_calls"]:
            return
        time.sleep(0.2)


def replay_as_live(version, cli, stem, folder):
    """Issue 33 on the real engine: the replay of the scheduler's recording at
    k0 3 gives the live run's liboea sums, field for field."""
    path, calls = recorded_calls(stem)
    live = live_counters(folder)
    if path is None or live is None:
        say(False, "%s: K0=3: recording %s, live counters %s" % (version, path, live))
        return
    rc, out, err = run([cli, "replay", "--json", "--k0", "3", path])
    doc = json.loads(out) if rc == 0 else None
    got = [r["totals"] for r in (doc or {}).get("results", ())
           if r["batch"] == "recorded" and r["k0"] == 3]
    if not got:
        say(False, "%s: K0=3: replay of %s: rc %d %s" % (version, path, rc, err[-800:]))
        return
    t = got[0]
    pairs = [("routed_calls", t["calls"] - t["gated"]), ("gated_calls", t["gated"]),
             ("experts_before", t["t_before"]), ("experts_after", t["t_after"]),
             ("routed_rows", t["valid_rows"]), ("rerouted_rows", t["rerouted_rows"]),
             ("changed_slots", t["changed_slots"]), ("kept_weight", t["kept_fx"] / float(1 << 24)),
             ("kept_rows", t["rerouted_rows"] - t["kept_undefined"])]
    differ = ["%s live %r, replay %r" % (k, live.get(k), v) for k, v in pairs if live.get(k) != v]
    say(not differ and calls == doc["calls"],
        "%s: K0=3: `oeapatch replay --k0 3` of the scheduler's recording (%d calls) = the live "
        "sums: T %d -> %d, %d rows, kept weight %.6f%s" % (
            version, doc["calls"], t["t_before"], t["t_after"], t["valid_rows"],
            t["kept_fx"] / float(1 << 24), "" if not differ else "; DIFFER: " + "; ".join(differ)))


results = []


def say(ok, text):
    results.append(bool(ok))
    print("%s %s" % ("PASS" if ok else "FAIL", text), flush=True)


def run(cmd, env=None, timeout=600):
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def main(version, phases):
    cli = os.environ.get("OEAPATCH")
    library = os.environ.get("OEA_LIBRARY")
    if not cli or not library:
        print("FAIL setup: OEAPATCH and OEA_LIBRARY must be set (ctest sets them)")
        return 1
    if not phases or set(phases) - {"off", "on", "shadow"}:
        print("FAIL setup: phases are `off`, `on` and `shadow`, not %s" % " ".join(phases))
        return 1
    started = time.monotonic()
    cache = cache_dir()
    os.makedirs(cache, exist_ok=True)
    use_inductor_cache()
    rc, out, err = run([os.path.join(HERE, "serve_env.sh"), version], timeout=3600)
    if rc != 0:
        if any(s in err for s in OFFLINE):
            print("SKIP the serving environment of sglang %s cannot be made: the package "
                  "index is unreachable:\n%s" % (version, err[-1500:]))
            return 77
        print("FAIL environment: %s" % err[-3000:])
        return 1
    python = out.strip().splitlines()[-1]
    env_dir = os.path.dirname(os.path.dirname(python))
    checkout = os.path.join(env_dir, "checkout")
    site = os.path.join(checkout, "python")
    topk = os.path.join(site, TARGET)

    # The installed copy is patched in place: one run at a time on this machine.
    import fcntl
    lock = open(os.path.join(cache, ".lock-serve-run-%s" % version), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)

    base_env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_")}
    base_env.update(PYTHONPATH=STUBS, SGLANG_USE_CPU_ENGINE="1")
    print("STUB sgl_kernel: SGLang's compiled CUDA kernels (PyPI's wheel needs libcuda "
          "and holds no CPU op); imported at module level by the serving path", flush=True)

    model = os.path.join(env_dir, "tiny-qwen3-moe")
    if not os.path.exists(os.path.join(model, "ok")):
        rc, out, err = run([python, __file__, "model", model], env=base_env)
        if rc != 0:
            say(False, "%s: tiny model: %s" % (version, err[-2000:]))
            return 1
        open(os.path.join(model, "ok"), "w").close()

    rc, out, err = run([cli, "revert", "-C", checkout], env=base_env)
    expected = record_hash(site, "sglang", TARGET)
    say(rc == 0 and expected is not None and file_hash(topk) == expected,
        "%s: installed topk.py is the wheel's (RECORD %s)" % (version, expected))
    work = tempfile.mkdtemp(prefix="oea-serve-%s-" % version)
    # The wheel's plugin (issue 26) in every process of the served starts: pip
    # installs the wheel that the fixture wheel.build made into a folder on
    # PYTHONPATH (the cached environment stays as it is); SGLang's loader finds
    # its entry point there like any installed distribution's.
    build = os.environ.get("OEAPATCH_BUILD_DIR") or ""
    # build-wheel.sh writes a wheel per architecture: this machine's.
    wheels = sorted(glob.glob(os.path.join(build, "wheel-dist", "oeapatch-*_%s.whl" % platform.machine())))
    plugin_dir = os.path.join(work, "plugin")
    rc, out, err = (run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                         "--no-deps", "--no-index", "--target", plugin_dir, wheels[-1]])
                    if wheels else (1, "", "no wheel in %s/wheel-dist" % build))
    say(rc == 0, "%s: the oeapatch wheel (its plugin) installed for the served starts%s"
        % (version, "" if rc == 0 else ": " + err[-800:]))
    base_env["PYTHONPATH"] = os.pathsep.join([STUBS, plugin_dir])

    def engine(name, extra):
        env = dict(base_env, **extra)
        path = os.path.join(work, name + ".json")
        t0 = time.monotonic()
        rc, out, err = run([python, __file__, "engine", model, path], env=env, timeout=600)
        logpath = os.path.join(work, name + ".log")
        with open(logpath, "w") as f:
            f.write(out + err)
        log = out + err
        ok = rc == 0 and os.path.exists(path) and "sgl_kernel stub" not in log
        say(ok, "%s: %s: Engine on the CPU served %d prompts (%.0f s)%s"
            % (version, name, len(PROMPTS), time.monotonic() - t0,
               "" if ok else ": rc %d, log %s:\n%s" % (rc, logpath, log[-3000:])))
        if not ok:
            return None, log
        with open(path) as f:
            doc = json.load(f)
        # Every request generated its tokens (so equal documents compare real outputs).
        say(len(doc) == len(PROMPTS) and all(len(r["output_ids"]) == NEW_TOKENS
                                             and len(r["output_logprobs"]) == NEW_TOKENS
                                             for r in doc),
            "%s: %s: %d tokens per request, with logprobs" % (version, name, NEW_TOKENS))
        return doc, log

    base, _ = engine("unpatched", {})
    rc, out, err = run([cli, "apply", "-C", checkout, "--library", library], env=base_env)
    say(rc == 0, "%s: oeapatch apply%s" % (version, "" if rc == 0 else ": " + (out + err)[-1500:]))
    if rc == 0 and base is not None:
        rc, out, err = run([cli, "verify", "-C", checkout], env=base_env)
        say(rc == 0, "%s: oeapatch verify%s" % (version, "" if rc == 0 else ": " + err[-800:]))

        off = engine("K0=0", {"SGLANG_OEA_K0": "0"})[0] if "off" in phases else None
        if off is not None:
            say(off == base, "%s: K0=0: output ids and logprobs equal the unpatched run"
                % version)
            off_log = open(os.path.join(work, "K0=0.log")).read()
            say("OEA in place" not in off_log and "would run without it" not in off_log,
                "%s: K0=0: the plugin writes nothing (OEA off)" % version)

        record, counters = os.path.join(work, "rec", "routing"), os.path.join(work, "counters")
        os.makedirs(os.path.dirname(record))
        os.makedirs(counters)
        on, log = (engine("K0=3", {"SGLANG_OEA_K0": "3", "SGLANG_OEA_STATS": "true",
                                   "SGLANG_OEA_STATS_INTERVAL": "1",
                                   "SGLANG_OEA_RECORD": record,
                                   "OEAPATCH_METRICS_DIR": counters})
                   if "on" in phases else (None, ""))
        if on is not None:
            replay_as_live(version, cli, record, counters)
            say([r["input_logprobs"] for r in on] == [r["input_logprobs"] for r in base],
                "%s: K0=3: prompt (prefill) logprobs equal the unpatched run" % version)
            lines = STATS.findall(log)
            print("STATS %s" % (re.findall(r"oeapatch: OEA stats.*", log) or ["none"])[-1])
            if lines:
                calls, rows, routed, t_before, t_after, routed_rows, gated = lines[-1][:7]
                skipped = lines[-1][-1]
                routed = int(routed or 0)
                routed_rows = int(routed_rows or 0)
                say(routed > 0 and routed_rows >= 2 * routed
                    and float(t_after) < float(t_before) and "extend=" in skipped,
                    "%s: K0=3: %d decode calls re-routed (%d rows), mean T %s -> %s; "
                    "prefill rows skipped as %s" % (version, routed, routed_rows,
                                                    t_before, t_after, skipped))
            else:
                say(False, "%s: K0=3: no stats line in the Engine's log" % version)
            # Processes without a model (the tokenizer's, the detokenizer's)
            # import the binding too: no idle statistics line from them, only
            # from a process that also wrote lines of routed calls.
            pids = re.findall(r"OEA stats \(pid (\d+), since start\): python calls=(\d+)", log)
            idle_only = {p for p, c in pids if c == "0"} - {p for p, c in pids if c != "0"}
            errors = [l for l in log.splitlines() if "an error inside the binding" in l]
            say(not errors and not any("error=" in line[-1] for line in lines) and not idle_only,
                "%s: K0=3: no call fell back on an error inside the binding (%d), no idle "
                "statistics line from a process without a model (pids %s)"
                % (version, len(errors), sorted(idle_only) or "none"))
            # The plugin's line from the scheduler process: the process whose
            # binding writes the statistics of routed calls (the one running
            # the model). It is written once that process's logging is set up.
            model_pids = {p for p, c in pids if c != "0"}
            mine = [l for l in log.splitlines() if "OEA in place in this process" in l]
            sched = [l for l in mine
                     if re.search(r"in this process \(pid (\d+)\)", l).group(1) in model_pids]
            say(sched and "sglang-oea/2, k0=3" in sched[0] and "select_experts calls the binding"
                in sched[0] and not [l for l in log.splitlines() if "would run without it" in l]
                and ", recording to %s-rank<R>-<pid>.safetensors" % record in sched[0],
                "%s: K0=3: the plugin's line from the scheduler process (%d processes checked): %s"
                % (version, len(mine), (sched or mine or ["none"])[0][:300]))
            times = [int(t) for t in re.findall(r"oeapatch: OEA in place.*checked in (\d+) ms", log)]
            if times:
                print("TIME the plugin's check per process of the served start: %s ms" % times)
            changed = sum(a["output_logprobs"] != b["output_logprobs"] for a, b in zip(on, base))
            same_ids = sum(a["output_ids"] == b["output_ids"] for a, b in zip(on, base))
            say(changed > 0, "%s: K0=3: decode logprobs changed in %d of %d requests "
                "(greedy ids unchanged in %d)" % (version, changed, len(base), same_ids))

        if "shadow" in phases and base is not None:
            shadow_phase(version, engine, base)

    rc, out, err = run([cli, "revert", "-C", checkout], env=base_env)
    binding = os.path.join(os.path.dirname(topk), "_oeapatch_sglang_oea.py")
    say(rc == 0 and file_hash(topk) == expected and not os.path.exists(binding),
        "%s: oeapatch revert gives back the wheel's topk.py" % version)
    passed = sum(results)
    print("%d passed, %d failed (%.0f s)" % (passed, len(results) - passed,
                                            time.monotonic() - started))
    return 0 if results and all(results) else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["model"]:
        child_model(sys.argv[2])
    elif sys.argv[1:2] == ["engine"]:
        child_engine(sys.argv[2], sys.argv[3])
    else:
        sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "0.5.23",
                      sys.argv[2:] or ["off", "on", "shadow"]))
