"""The routing paths of SGLang's newest releases (0.5.23 on) that the older
cases of release_check.py never take (issue 24), run by its phases in the same
interpreter, for the releases that have them:

  shared    DeepSeek-V3 served with shared-expert fusion: TopKConfig carries the
            model's SharedExpertsConfig (num_shared_topk_slots = 1) and the
            router writes the shared expert (id E) in the last column
  padded    a decode batch with num_token_non_padded below its size (SGLang's
            CUDA-graph padding): the padding rows end as -1 ids
  dtypes    fp32, bf16 and fp16 router logits on the grouped (DeepSeek), biased
            (GLM-style) and plain (Qwen3) paths
  packed    the fused top-k + pack (StandardTopKOutputPacked: the LoRA
            SGLANG_OPT_LORA_FUSED_TOPK_PACK path on CUDA), the pack written as
            (id << 16) | bf16_bits(weight)
  simulator SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS (a benchmark mode)
  unreached a model with a TopK whose output is BYPASSED (routed inside the
            MoE kernel) beside one whose TopK reaches select_experts

GPU-only kernels replaced by CPU stand-ins (each only for its own case, each
first run on the unpatched release, where it must give the result its
documentation states; nothing else of SGLang is replaced):
  topk_softmax_pack   sglang.kernels.ops.lora.moe.trtllm_lora_temp.topk_softmax_pack
                      (a JIT CUDA kernel): StandIn.topk_softmax_pack
  _simulate_balanced_routing_kernel   topk.py's Triton kernel (round-robin):
                      StandIn.simulate_kernel
The packed path runs where topk.py's platform flag _is_cuda is set and
SGLANG_EXPERIMENTAL_LORA_OPTI=1 (topk.py reads both once, at import; the LoRA
flags, SGLANG_OPT_LORA_FUSED_TOPK_PACK on by default under it, per call): the
case sets the two module constants as such a server has them, and the variable.
"""

import contextlib
import dataclasses
import os
import sys

import torch

from oea_testlib import check

ROWS = 16
VALID = 12  # num_token_non_padded of the padded batches
K0 = 3
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def supported(topk):
    """0.5.23 on: TopKConfig.shared_experts (the model's SharedExpertsConfig)."""
    config = getattr(topk, "TopKConfig", None)
    return config is not None and "shared_experts" in {f.name for f in dataclasses.fields(config)}


_MAIN = {}  # release_check.py's MODELS and forward_batch (bind())


def bind(models, forward_batch):
    _MAIN.update(models=models, forward_batch=forward_batch)


def _models():
    return _MAIN["models"]


def inputs(name, dtype=torch.float32, seed_extra=0):
    spec = _models()[name]
    gen = torch.Generator().manual_seed(sum(map(ord, name)) + 24 + seed_extra)
    logits = (torch.randn(ROWS, spec["E"], generator=gen) * 2.0).to(dtype)
    bias = (torch.rand(spec["E"], generator=gen) * 0.5) if spec["bias"] else None
    return torch.zeros(ROWS, 64), logits, bias


def config(topk, name, bias, shared_slots=0, native=True):
    """The layer's TopKConfig as TopK.__init__ builds it: top_k counts the
    routed experts and the model's shared slots, shared_experts is the model's
    SharedExpertsConfig (resolve_shared_experts_config: num_fused_shared_experts
    from the checkpoint when fusion is on)."""
    from sglang.srt.configs.shared_experts import SharedExpertsConfig

    spec = _models()[name]
    shared = SharedExpertsConfig(num_fused_shared_experts=shared_slots)
    kw = dict(top_k=spec["top_k"] + shared.num_shared_topk_slots,
              use_grouped_topk=spec["grouped"], renormalize=spec["renormalize"],
              shared_experts=shared, correction_bias=bias,
              routed_scaling_factor=spec["scale"], scoring_func=spec["scoring"],
              torch_native=native)
    if spec["grouped"]:
        kw.update(topk_group=spec["topk_group"], num_expert_group=spec["groups"])
    return topk.TopKConfig(**kw)


def select(topk, cfg, hidden, logits, num_token_non_padded=None, layer_id=None):
    out = topk.select_experts(hidden_states=hidden, router_logits=logits, topk_config=cfg,
                              num_token_non_padded=num_token_non_padded, layer_id=layer_id)
    return type(out)(*(t.clone() if isinstance(t, torch.Tensor) else t for t in out))


def in_batch(mode, fn):
    """fn() run where a model's forward holds a real ForwardBatch of `mode`."""
    return (lambda forward_batch: fn())(_MAIN["forward_batch"](mode))


def pack(ids, weights):
    """(id << 16) | bf16_bits(weight): the layout topk_softmax_pack.py,
    topk_pack.py and marlin.py's unpack document."""
    bits = weights.float().to(torch.bfloat16).view(torch.int16).to(torch.int32) & 0xFFFF
    return (ids.to(torch.int32) << 16) | bits


class StandIn:
    """CPU stand-ins for GPU-only kernels, computing what their sources state."""

    @staticmethod
    def topk_softmax_pack(topk_weights, topk_indices, packed, gating_output, renormalize,
                          num_token_non_padded=None):
        """topk_softmax_pack.py / topk_softmax_pack.cuh: softmax in fp32, top-k,
        renormalised; packed = (id << 16) | bf16_bits(final weight), rows from
        num_token_non_padded on packed with id -1 (ids and weights not masked)."""
        scores = gating_output.float().softmax(-1)
        w, i = scores.topk(topk_weights.shape[1], dim=-1)
        if renormalize:
            w = w / w.sum(-1, keepdim=True)
        topk_weights.copy_(w)
        topk_indices.copy_(i.to(topk_indices.dtype))
        ids = topk_indices.clone()
        if num_token_non_padded is not None:
            rows = torch.arange(ids.shape[0]).unsqueeze(1)
            ids = torch.where(rows < num_token_non_padded.reshape(-1)[:1], ids,
                              torch.full_like(ids, -1))
        packed.copy_(pack(ids, topk_weights))

    class simulate_kernel:
        """topk.py's _simulate_balanced_routing_kernel, RANDOM=False (round-robin):
        slot d = t * K + j + deal_offset gets expert (d % num_ranks) *
        experts_per_rank + (d // num_ranks) % experts_per_rank, weight inv_k;
        padded rows id -1, weight 0."""

        def __getitem__(self, grid):
            def launch(ids, weights, num_experts, step, num_ranks, experts_per_rank,
                       deal_offset, inv_k, seed, shard_rank, num_shards, s_im, s_ik, s_wm,
                       s_wk, non_padded, K, BLOCK_K, RANDOM, HAS_NON_PADDED=False):
                check(not RANDOM, "the stand-in computes the round-robin variant only")
                t = torch.arange(grid[0]).unsqueeze(1)
                deal = t * K + torch.arange(K).unsqueeze(0) + deal_offset
                gid = (deal % num_ranks) * experts_per_rank + (deal // num_ranks) % experts_per_rank
                w = torch.full(gid.shape, float(inv_k))
                if HAS_NON_PADDED:
                    pad = t >= non_padded.reshape(-1)[0]
                    gid = torch.where(pad, torch.full_like(gid, -1), gid)
                    w = torch.where(pad, torch.zeros_like(w), w)
                ids.copy_(gid.to(ids.dtype))
                weights.copy_(w.to(weights.dtype))
            return launch


@contextlib.contextmanager
def packed_path(topk):
    """topk.py as a CUDA server with SGLANG_EXPERIMENTAL_LORA_OPTI=1 and
    SGLANG_OPT_LORA_FUSED_TOPK_PACK=1 has it, with StandIn.topk_softmax_pack."""
    import importlib

    name = "sglang.kernels.ops.lora.moe.trtllm_lora_temp.topk_softmax_pack"
    try:
        kernel = importlib.import_module(name)
        saved_kernel = ("attr", kernel, kernel.topk_softmax_pack)
        kernel.topk_softmax_pack = StandIn.topk_softmax_pack
    except ImportError:  # the JIT kernel's own imports need CUDA: the module stands in
        import types

        module = types.ModuleType(name)
        module.topk_softmax_pack = StandIn.topk_softmax_pack
        saved_kernel = ("module", sys.modules.get(name), None)
        sys.modules[name] = module
    saved = (topk._is_cuda, topk._SGLANG_EXPERIMENTAL_LORA_OPTI)
    topk._is_cuda, topk._SGLANG_EXPERIMENTAL_LORA_OPTI = True, True
    os.environ["SGLANG_EXPERIMENTAL_LORA_OPTI"] = "1"  # the pack flag defaults to on then
    try:
        yield
    finally:
        topk._is_cuda, topk._SGLANG_EXPERIMENTAL_LORA_OPTI = saved
        os.environ.pop("SGLANG_EXPERIMENTAL_LORA_OPTI", None)
        if saved_kernel[0] == "attr":
            saved_kernel[1].topk_softmax_pack = saved_kernel[2]
        elif saved_kernel[1] is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = saved_kernel[1]


@contextlib.contextmanager
def simulation(topk):
    """SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS=1 as a benchmark server sets it, with
    StandIn.simulate_kernel for topk.py's Triton kernel."""
    from sglang.srt.runtime_context import get_parallel

    saved = topk._simulate_balanced_routing_kernel
    topk._simulate_balanced_routing_kernel = StandIn.simulate_kernel()
    os.environ["SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS"] = "1"
    try:
        # one GPU's server: no expert or DWDP parallelism (the simulation reads both)
        with get_parallel().override(dwdp_size=1, moe_ep_size=1):
            yield
    finally:
        os.environ.pop("SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS", None)
        topk._simulate_balanced_routing_kernel = saved


def nonpadded():
    return torch.tensor([VALID], dtype=torch.int32)


# ----------------------------------------------------------------- the runs
# Each returns what select_experts gave; the unpatched phase records them, the
# on phase runs them again under OEA. A config is made anew for every run, as
# a fresh layer (one plan each).


def run_shared(topk, mode):
    hidden, logits, bias = inputs("deepseek-v3")
    cfg = config(topk, "deepseek-v3", bias, shared_slots=1)
    return in_batch(mode, lambda: select(topk, cfg, hidden, logits))[:2]


def run_padded(topk, name):
    hidden, logits, bias = inputs(name, seed_extra=1)
    cfg = config(topk, name, bias)
    return in_batch("DECODE", lambda: select(topk, cfg, hidden, logits,
                                             num_token_non_padded=nonpadded()))[:2]


def run_dtype(topk, name, dtype):
    hidden, logits, bias = inputs(name, dtype, seed_extra=2)
    cfg = config(topk, name, bias)
    return in_batch("DECODE", lambda: select(topk, cfg, hidden, logits))[:2]


def run_packed(topk, mode):
    """Qwen3-30B-A3B's layer (softmax, 128 experts: a power of two) on the CUDA
    path (torch_native False), padded to 16 rows."""
    hidden, logits, _ = inputs("qwen3-30b-a3b", seed_extra=3)
    cfg = config(topk, "qwen3-30b-a3b", None, native=False)
    with packed_path(topk):
        out = in_batch(mode, lambda: select(topk, cfg, hidden, logits,
                                            num_token_non_padded=nonpadded()))
    return out


def run_simulated(topk, mode):
    hidden, logits, _ = inputs("qwen3-30b-a3b", seed_extra=4)
    cfg = config(topk, "qwen3-30b-a3b", None)
    with simulation(topk):
        return in_batch(mode, lambda: select(topk, cfg, hidden, logits, layer_id=5))[:2]


def record(topk):
    """The unpatched phase: each path's outputs, the stand-ins checked against
    their documented results. Returns (record, lines)."""
    rec, lines = {}, []
    E = _models()["deepseek-v3"]["E"]
    rec["shared"] = {mode: run_shared(topk, mode) for mode in ("DECODE", "EXTEND")}
    w, i = rec["shared"]["DECODE"]
    check(i.shape[1] == 9 and bool((i[:, -1] == E).all()) and bool((i[:, :-1] < E).all()),
          "shared: the release did not write the shared expert (id %d) in the last of 9 "
          "columns: %s" % (E, i[0].tolist()))
    lines.append("shared: 9 columns, shared expert %d last" % E)
    rec["padded"] = {name: run_padded(topk, name) for name in _models()}
    for name, (w, i) in rec["padded"].items():
        check(bool((i[VALID:] == -1).all()) and bool((i[:VALID] >= 0).all()),
              "padded: %s's rows from %d on are not -1: %s" % (name, VALID, i.tolist()))
    lines.append("padded: rows %d.. are -1" % VALID)
    rec["dtypes"] = {(name, str(dt)): run_dtype(topk, name, dt)
                     for name in _models() for dt in DTYPES}
    # packed: the stand-in on the unpatched release gives the pack its sources
    # document, of the ids and weights the release's torch routing gives.
    w, i, logits_out, packed = run_packed(topk, "DECODE")
    check(type(run_packed(topk, "EXTEND")).__name__ == "StandardTopKOutputPacked",
          "packed: not a StandardTopKOutputPacked")
    _, logits, _ = inputs("qwen3-30b-a3b", seed_extra=3)
    nw, ni = topk.fused_topk_native(hidden_states=torch.zeros(ROWS, 64), gating_output=logits,
                                    topk=8, renormalize=True)
    check(torch.equal(i[:VALID].long(), ni[:VALID].long()) and
          torch.allclose(w[:VALID], nw[:VALID].float(), atol=1e-6),
          "packed: the stand-in's routing differs from fused_topk_native's")
    check(torch.equal(packed[:VALID], pack(i[:VALID], w[:VALID])),
          "packed: the valid rows' pack is not (id << 16) | bf16_bits(weight)")
    check(bool(((packed[VALID:] >> 16) == -1).all()) and bool((i[VALID:] == -1).all()),
          "packed: padding rows are not id -1 in the pack and the ids")
    rec["packed"] = {"DECODE": (w, i, packed)}
    lines.append("packed (stand-in topk_softmax_pack): pack = (id << 16) | bf16(w), "
                 "padding id -1")
    # simulator: the stand-in gives the round-robin assignment, weights 1/8
    w, i = run_simulated(topk, "DECODE")
    deal = torch.arange(ROWS).unsqueeze(1) * 8 + torch.arange(8) + 5
    check(torch.equal(i.long(), deal % 128) and bool((w == 1.0 / 8).all()),
          "simulator: not the round-robin assignment: %s" % i[:2].tolist())
    rec["simulated"] = (w, i)
    lines.append("simulator (stand-in kernel): round-robin ids, weights 1/8")
    return rec, lines


# ----------------------------------------------------------------- on phase


def check_on(topk, binding, oracle, rec, run_case):
    """The on phase (K0=3, stats on): each path against the unpatched record."""
    models = _models()

    def same(a, b):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)

    def expected(name, ref, logits, bias, num_shared=0, num_valid=None):
        spec = models[name]
        w, i = ref
        return oracle.route(logits, i, w, k0=K0, num_shared=num_shared,
                            scoring=spec["scoring"], renormalize=spec["renormalize"],
                            groups=spec["groups"] if spec["groups"] > 1 else 0,
                            topk_group=spec["topk_group"] if spec["groups"] > 1 else 0,
                            bias=bias, num_valid=num_valid)

    def skipped(reason):
        return binding.host_counts()["skipped"].get(reason, 0)

    @run_case("issue 24.1, DeepSeek-V3 with shared-expert fusion (num_shared_topk_slots=1), "
              "EXTEND: bitwise the unpatched outputs")
    def _():
        w, i = run_shared(topk, "EXTEND")
        rw, ri = rec["shared"]["EXTEND"]
        check(same(w, rw) and same(i, ri), "re-routed (or changed) in EXTEND")

    @run_case("issue 24.1, DeepSeek-V3 with shared-expert fusion, DECODE: re-routed, shared "
              "column untouched, equal to liboea's reference with num_shared=1")
    def _():
        w, i = run_shared(topk, "DECODE")
        rw, ri = rec["shared"]["DECODE"]
        _, logits, bias = inputs("deepseek-v3")
        ew, ei, _ = expected("deepseek-v3", (rw, ri), logits, bias, num_shared=1)
        check(same(i.to(ei.dtype), ei) and torch.equal(w.float(), ew),
              "differs from the reference (ids equal: %s)" % torch.equal(i.to(ei.dtype), ei))
        check(torch.equal(i[:, -1], ri[:, -1]) and torch.equal(w[:, -1], rw[:, -1]),
              "the shared column changed")
        check(not torch.equal(i, ri), "nothing was re-routed")
        from oea_testlib import distinct
        return "T %d -> %d" % (distinct(ri, ROWS, 8), distinct(i, ROWS, 8))

    @run_case("issue 24, padded decode batch (num_token_non_padded=%d of %d, -1 ids on the "
              "padding rows): valid rows equal liboea's reference, padding rows untouched"
              % (VALID, ROWS))
    def _():
        for name in models:
            w, i = run_padded(topk, name)
            rw, ri = rec["padded"][name]
            _, logits, bias = inputs(name, seed_extra=1)
            ew, ei, _ = expected(name, (rw, ri), logits, bias, num_valid=VALID)
            check(same(i.to(ei.dtype), ei) and torch.equal(w.float(), ew),
                  "%s differs from the reference" % name)
            check(same(i[VALID:], ri[VALID:]) and same(w[VALID:], rw[VALID:]),
                  "%s: padding rows changed" % name)
            check(not torch.equal(i[:VALID], ri[:VALID]), "%s: nothing re-routed" % name)

    for dt in DTYPES:
        @run_case("issue 24.7, %s router logits: DeepSeek (grouped), GLM-style (biased) and "
                  "Qwen3 (plain) decode re-routed, equal to liboea's reference" % dt)
        def _(dt=dt):
            done, failed = [], []
            for name in models:
                weights_skips = skipped("weights")
                w, i = run_dtype(topk, name, dt)
                rw, ri = rec["dtypes"][(name, str(dt))]
                _, logits, bias = inputs(name, dt, seed_extra=2)
                ew, ei, _ = expected(name, (rw, ri), logits, bias)
                if torch.equal(i, ri):
                    failed.append("%s: not re-routed%s" % (name, " (skipped as weights)" if
                                                           skipped("weights") > weights_skips
                                                           else ""))
                elif not (same(i.to(ei.dtype), ei) and torch.equal(w.float(), ew)):
                    failed.append("%s: differs from the reference" % name)
                else:
                    done.append(name)
            check(not failed, "; ".join(failed) + " (re-routed right: %s)"
                  % (", ".join(done) or "none"))
            return ", ".join(done)

    @run_case("issue 24.2, StandardTopKOutputPacked (fused top-k + pack, stand-in kernel), "
              "DECODE: ids and weights re-routed as liboea's reference, the pack's valid rows "
              "packed from them, its padding rows untouched")
    def _():
        w, i, _, packed = run_packed(topk, "DECODE")
        rw, ri, rpacked = rec["packed"]["DECODE"]
        _, logits, _ = inputs("qwen3-30b-a3b", seed_extra=3)
        ew, ei, _ = expected("qwen3-30b-a3b", (rw, ri), logits, None, num_valid=VALID)
        check(same(i.to(ei.dtype), ei) and torch.equal(w.float(), ew),
              "ids/weights differ from the reference")
        check(not torch.equal(i, ri), "nothing was re-routed")
        check(torch.equal(packed[VALID:], rpacked[VALID:]), "padding rows of the pack changed")
        check(torch.equal(packed[:VALID], pack(i[:VALID], w[:VALID])),
              "the pack is stale: %d of %d valid rows decode to other ids or weights"
              % (int((packed[:VALID] != pack(i[:VALID], w[:VALID])).any(1).sum()), VALID))

    @run_case("issue 24.2, StandardTopKOutputPacked, EXTEND: ids, weights and pack bitwise "
              "the unpatched ones")
    def _():
        w, i, _, packed = run_packed(topk, "EXTEND")
        with_off = binding.ENABLED
        binding.ENABLED = False
        try:
            rw, ri, _, rpacked = run_packed(topk, "EXTEND")
        finally:
            binding.ENABLED = with_off
        check(same(w, rw) and same(i, ri) and same(packed, rpacked), "changed in EXTEND")

    @run_case("issue 24.3, SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS (stand-in kernel), DECODE: "
              "skipped as simulator, no liboea call, the simulation's output")
    def _():
        before, calls = skipped("simulator"), binding.stats("cpu")
        w, i = run_simulated(topk, "DECODE")
        rw, ri = rec["simulated"]
        check(same(w, rw) and same(i, ri), "not the simulation's output")
        check(skipped("simulator") == before + ROWS, "not counted as simulator: %s"
              % {k: v for k, v in binding.host_counts()["skipped"].items() if v})
        after = binding.stats("cpu")
        check(calls is None or after["calls"] == calls["calls"], "liboea was called")
        return "simulator=%d" % skipped("simulator")


# ------------------------------------------------------- layers never reached


def unreached_model(topk):
    """A model of two MoE blocks with the release's real TopK: block 0's TopK is
    bound to the FlashInfer TRT-LLM runner with DeepSeek-V3 routing, which makes
    its output BYPASSED (the MoE kernel routes from the logits), block 1's is a
    Qwen3 layer whose TopK reaches select_experts. On a CUDA server TopK runs
    forward_cuda; here block 0 calls it too (it returns the lazy output without
    a kernel), block 1 (bound to the Triton runner: STANDARD) the CPU backend's
    forward_native."""
    from torch import nn

    from sglang.srt.layers.moe.hash_topk import HashTopK
    from sglang.srt.layers.moe.utils import MoeRunnerBackend, RoutingMethodType

    spec_d, spec_q = _models()["deepseek-v3"], _models()["qwen3-30b-a3b"]

    class Block(nn.Module):
        def __init__(self, layer_id, bypass):
            super().__init__()
            spec = spec_d if bypass else spec_q
            self.bypass = bypass
            self.bias = nn.Parameter(torch.rand(spec["E"]) * 0.5, requires_grad=False) \
                if bypass else None
            kw = dict(use_grouped_topk=True, num_expert_group=8, topk_group=4,
                      correction_bias=self.bias, routed_scaling_factor=2.5,
                      scoring_func="sigmoid") if bypass else {}
            self.topk = topk.TopK(spec["top_k"], layer_id=layer_id, is_draft=False,
                                  renormalize=True, **kw)
            if bypass:
                self.topk.bind_runner_backend(MoeRunnerBackend.FLASHINFER_TRTLLM,
                                              routing_method_type=RoutingMethodType.DeepSeekV3)
            else:
                self.topk.bind_runner_backend(MoeRunnerBackend.TRITON)
            self.E = spec["E"]

        def forward(self, hidden, forward_batch):
            logits = torch.randn(hidden.shape[0], self.E,
                                 generator=torch.Generator().manual_seed(11))
            if self.bypass:
                return self.topk.forward_cuda(hidden, logits)
            return self.topk.forward_native(hidden, logits)

    class HashBlock(nn.Module):
        """DeepSeek-V4's hash-routed layers (hash_topk.py): experts from a table
        indexed by token id, on its torch path."""

        def __init__(self, layer_id):
            super().__init__()
            self.topk = HashTopK(spec_q["top_k"], spec_q["E"], vocab_size=64,
                                 layer_id=layer_id, is_draft=False)

        def forward(self, hidden, input_ids, forward_batch):
            logits = torch.randn(hidden.shape[0], spec_q["E"],
                                 generator=torch.Generator().manual_seed(12))
            return self.topk(hidden, logits, input_ids)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Block(0, True), Block(1, False)])
            self.hashed = HashBlock(2)

        def forward(self, input_ids, positions, forward_batch):
            hidden = torch.zeros(input_ids.shape[0], 64)
            return [layer(hidden, forward_batch) for layer in self.layers] + [
                self.hashed(hidden, input_ids, forward_batch)]

    return Model()


@contextlib.contextmanager
def published_model():
    """What a model runner publishes before it builds and runs the model, as far
    as TopK reads it: the model's shared-expert layout (get_model().shared_experts,
    fusion off here) and no expert-location dispatch
    (get_exec().moe.ep_dispatch_algorithm None: EPLB off). Published for the
    block only where nothing is published yet."""
    from sglang.srt import runtime_context as rc
    from sglang.srt.configs.shared_experts import SharedExpertsConfig

    ctx = rc.get_context()
    saved = ctx._config_bags
    if saved:
        yield
        return

    def bag(path, leaves):
        out = rc._ConfigBag(path)
        for key, value in leaves.items():
            if isinstance(value, dict):
                out._set_sub(key, bag(path + "." + key, value))
            else:
                out._set(key, value)
        return out

    ctx._config_bags = {"model": bag("model", {"shared_experts": SharedExpertsConfig()}),
                        "exec": bag("exec", {"moe": {"ep_dispatch_algorithm": None}})}
    try:
        yield
    finally:
        ctx._config_bags = saved


def run_unreached(topk):
    """unreached_model's forwards: an extend step, then three decode steps (the
    binding's hook reports at the second one's start)."""
    forward_batch = _MAIN["forward_batch"]
    # HashTopK's torch path (SGLANG_OPT_USE_FUSED_HASH_TOPK=0: its fused kernel is a
    # JIT CUDA build): the same table lookup
    os.environ["SGLANG_OPT_USE_FUSED_HASH_TOPK"] = "0"
    with published_model():
        model = unreached_model(topk)
        first = model.layers[0].topk.topk_config.output_format
        check(first is not None and first.name == "BYPASSED", "block 0's output is %s" % first)
        ids = torch.arange(ROWS, dtype=torch.long) * 3 % 64
        table = model.hashed.topk.tid2eid[ids]
        for mode in ("EXTEND", "DECODE", "DECODE", "DECODE"):
            out = model(ids, ids, forward_batch(mode))
            check(type(out[0]).__name__ == "BypassedTopKOutput", "block 0 routed: %s"
                  % type(out[0]).__name__)
            check(torch.equal(out[2].topk_ids.long(), table.long()),
                  "the hash layer's ids are not its table's in %s" % mode)
    os.environ.pop("SGLANG_OPT_USE_FUSED_HASH_TOPK", None)
    return model


def check_unreached(topk, binding, run_case):
    """The report of routers never reaching OEA: the stats line, one warning after
    the first decode steps (the hook sees the second decode batch)."""
    import logging

    warnings = []

    class Keep(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.WARNING:
                warnings.append(record.getMessage())

    logging.getLogger(binding.__name__).addHandler(Keep())

    @run_case("issue 24.6 and 24.4, a TopK whose output is BYPASSED and a HashTopK beside a "
              "TopK reaching select_experts: the report (stats line, one warning after the "
              "first decode steps) names the first two, not the third; the hash layer routes "
              "by its table")
    def _():
        check(hasattr(binding, "never_routed"), "the binding has no never_routed report")
        model = run_unreached(topk)  # kept: the report holds weak references
        missing = binding.never_routed()
        check(missing == ["layers.0.topk [BYPASSED]", "hashed.topk [HashTopK]"],
              "never_routed() = %r" % missing)
        hits = [w for w in warnings if "never reached" in w]
        check(len(hits) == 1 and "layers.0.topk" in hits[0] and "hashed.topk" in hits[0] and
              "layers.1" not in hits[0], "warnings: %r" % warnings)
        line = binding.stats_line()
        del model
        check("layers never reaching OEA: 2 (layers.0.topk [BYPASSED], hashed.topk [HashTopK])"
              in line, line)
        return hits[0]
