#!/usr/bin/python3
"""GPU readiness (issue 36 point 4): `oeapatch verify` and `status` check that
the liboea the server loads has code for this machine's NVIDIA GPUs.

Usage: /usr/bin/python3 tests/e2e/test_gpu_readiness.py --library PATH/liboea.so [-v]

No GPU here: the machine's NVIDIA devices are a simulated tree
(OEAPATCH_TEST_NVIDIA_ROOT: DIR/proc/driver/nvidia/gpus/<PCI address>/, or
DIR/dev/nvidia<N> alone, as a container may have them) and their compute
capabilities OEAPATCH_TEST_NVIDIA_CC, which replace the driver's NVML only
under that root (src/gpu.h). The libraries are real: the build's liboea
(CPU only unless built with CUDA) and, where nvcc is installed, a shared
library nvcc builds here with a sm_80 cubin and compute_90 PTX, whose
.nv_fatbin section the check reads.

  - no NVIDIA device: no "gpu" check at all;
  - a GPU and a CPU-only liboea: FAIL with K0=3 (exit 1, status says so
    too), WARN with K0=0 (exit 0), for the /proc tree and for /dev alone;
  - nvcc's library: sm_86 runs the sm_80 cubin, sm_90 and sm_100 the PTX,
    sm_75 nothing (FAIL), an unknown capability WARNs.
Prints one line per case, then `N passed, M failed`; exit 1 on failure.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

from oea_testlib import ROOT, case, check, library_args, summary

OEAPATCH = os.environ.get("OEAPATCH") or os.path.join(ROOT, "build", "src", "oeapatch")
DEFINITION = os.path.join(ROOT, "patches", "vllm-oea")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "vllm-0.15-router.py")
TARGET = "vllm/model_executor/layers/fused_moe/router/base_router.py"
KERNEL = "__global__ void k(int *x) { x[threadIdx.x] += 1; }\n" \
         "extern \"C\" void run(int *x) { k<<<1, 32>>>(x); }\n"


def clean_env(**kw):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VLLM_OEA_", "OEAPATCH_TEST_NVIDIA"))}
    env.update(kw)
    return env


def verify(checkout, command="verify", **env):
    """(exit code, JSON document, the "gpu" check or None)."""
    p = subprocess.run([OEAPATCH, "-C", checkout, "--patch", DEFINITION, "--json", command],
                       env=clean_env(**env), capture_output=True, text=True, timeout=120)
    doc = json.loads(p.stdout)
    checks = doc.get("checks") or []
    if command == "status":  # status lists failed checks as drift; warnings are in its text
        checks = [dict(c, ok=False) for c in doc.get("drift", [])]
    gpu = [c for c in checks if c.get("check") == "gpu"]
    return p.returncode, doc, gpu[0] if gpu else None


def main():
    args = library_args()
    tmp = tempfile.mkdtemp(prefix="oeapatch-gpu-")
    try:
        checkout = os.path.join(tmp, "checkout")
        os.makedirs(os.path.join(checkout, os.path.dirname(TARGET)))
        shutil.copyfile(FIXTURE, os.path.join(checkout, TARGET))
        p = subprocess.run([OEAPATCH, "-C", checkout, "--patch", DEFINITION, "apply", "--library",
                            args.library], env=clean_env(), capture_output=True, text=True)
        if p.returncode != 0:
            print("FAIL apply: %s" % p.stderr)
            return 1
        empty = os.path.join(tmp, "no-gpu")
        os.makedirs(os.path.join(empty, "dev"))
        proc_tree = os.path.join(tmp, "proc-gpu")
        os.makedirs(os.path.join(proc_tree, "proc", "driver", "nvidia", "gpus", "0000:00:04.0"))
        dev_tree = os.path.join(tmp, "dev-gpu")
        os.makedirs(os.path.join(dev_tree, "dev"))
        for name in ("nvidia0", "nvidiactl", "nvidia-uvm"):
            open(os.path.join(dev_tree, "dev", name), "w").close()

        with open(args.library, "rb") as f:
            cpu_only = b".nv_fatbin" not in f.read()  # a CUDA build's section

        @case("no NVIDIA device: verify has no gpu check")
        def no_device():
            rc, doc, gpu = verify(checkout, VLLM_OEA_K0="3", OEAPATCH_TEST_NVIDIA_ROOT=empty)
            check(gpu is None, "a gpu check: %r" % gpu)
            check(rc == 0, "verify exit %d: %r" % (rc, doc.get("checks")))
        no_device()

        for label, tree, name in (("/proc/driver/nvidia", proc_tree, "0000:00:04.0"),
                                  ("/dev/nvidia0 alone", dev_tree, "/dev/nvidia0")):
            @case("a GPU (%s) and a CPU-only liboea: FAIL with K0=3, in status too; WARN with "
                  "K0=0" % label)
            def cpu_library(tree=tree, name=name):
                if not cpu_only:
                    return "skipped: the build's liboea has CUDA"
                rc, doc, gpu = verify(checkout, VLLM_OEA_K0="3", OEAPATCH_TEST_NVIDIA_ROOT=tree)
                check(rc == 1 and gpu and not gpu["ok"] and "CPU only" in gpu["detail"]
                      and name in gpu["detail"], "verify exit %d, gpu %r" % (rc, gpu))
                rc, doc, sgpu = verify(checkout, "status", VLLM_OEA_K0="3",
                                       OEAPATCH_TEST_NVIDIA_ROOT=tree)
                check(rc == 1 and sgpu and doc["state"] == "drift",
                      "status exit %d, state %s, drift %r" % (rc, doc.get("state"), doc.get("drift")))
                rc, doc, gpu = verify(checkout, VLLM_OEA_K0="0", OEAPATCH_TEST_NVIDIA_ROOT=tree)
                check(rc == 0 and gpu and gpu["ok"] and gpu.get("warning")
                      and "VLLM_OEA_K0 is off" in gpu["detail"], "K0=0: exit %d, gpu %r" % (rc, gpu))
                return gpu["detail"][:90]
            cpu_library()

        nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                        if os.access("/usr/local/cuda/bin/nvcc", os.X_OK) else None)
        cuda_lib = os.path.join(tmp, "libk.so")
        if nvcc:
            with open(os.path.join(tmp, "k.cu"), "w") as f:
                f.write(KERNEL)
            p = subprocess.run([nvcc, "-shared", "-Xcompiler", "-fPIC",
                                "-gencode", "arch=compute_80,code=sm_80",
                                "-gencode", "arch=compute_90,code=compute_90",
                                os.path.join(tmp, "k.cu"), "-o", cuda_lib],
                               capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                nvcc = None
                print("SKIP nvcc could not build a CUDA library: %s" % p.stderr[-300:])
        else:
            print("SKIP no nvcc: the fat binary cases need a CUDA library built here")
        expectations = [("8.6", True, "sm_86"), ("9.0", True, "sm_90"), ("10.0", True, "sm_100"),
                        ("7.5", False, "sm_75"), ("", None, "unknown")]
        for cc, runs, word in expectations if nvcc else []:
            @case("nvcc's sm_80 + compute_90 library on a GPU of compute capability %s: %s"
                  % (cc or "unknown", {True: "ok", False: "FAIL", None: "WARN"}[runs]))
            def fatbin(cc=cc, runs=runs, word=word):
                rc, doc, gpu = verify(checkout, VLLM_OEA_K0="3", VLLM_OEA_LIBRARY=cuda_lib,
                                      OEAPATCH_TEST_NVIDIA_ROOT=proc_tree,
                                      OEAPATCH_TEST_NVIDIA_CC=cc)
                check(gpu is not None, "no gpu check: %r" % doc.get("checks"))
                check("sm_80" in gpu["detail"] and "compute_90" in gpu["detail"]
                      and word in gpu["detail"], "the detail: %s" % gpu["detail"])
                if runs is None:
                    check(gpu["ok"] and gpu.get("warning"), "not a warning: %r" % gpu)
                else:
                    check(gpu["ok"] == runs and not gpu.get("warning"), "%r" % gpu)
                return gpu["detail"][:100]
            fatbin()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
