"""One GPU record for issue 26: correctness, speed, per-call cost, syncs, graphs, compile.

Run on a GPU machine from the repository root, with the wheels of ``../shared/gpu`` carried
in ``.gpu/.whl`` (liger-kernel for the Liger row; nothing else here needs them):

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/.whl/*.whl
    export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
    timeout 280 python3 scripts/gpu_check.py --out $OUT/gpu_check.json

About 3–4 minutes on an H100 (``--quick``: about two; ``--budget SECONDS`` caps the timed
sections, default 190: correctness stops starting new cases at 45 % of it, speed and
compile at 100 %, and what was skipped says so in its row). A dry run without a GPU, on
tiny shapes through Triton's interpreter, checks that the script runs end to end:

    DEV=cpu TRITON_INTERPRET=1 python scripts/gpu_check.py --quick --out /tmp/gpu_check.json

It never stops at a failed case: each case's exception is recorded in its row, and the JSON
is rewritten after every row, so a run cut short keeps what it measured. Sections:

- ``environment``: device, versions (torch, CUDA, Triton, transformers, liger-kernel), the
  package's source hash and git commit when there is one, Triton's self-check.
- ``correct``: every backend against a float64 reference computed here from the formula
  (θ_i = base^(−2i/d) rounded to float32 unless an input is float64, positions exact), with
  and without position ids, per-batch ids, both layouts, partial rotary, transposed views,
  bfloat16/float16/float32/float64, positions near and past 2^24, in place; ``grad``:
  gradients against the rotation by −m·θ_i.
- ``speed``: µs per tensor at the issue's four shapes (bfloat16 and float32) for clone,
  apply_rope (default, with ids, in place), the CUDA path without Triton, Hugging Face's
  eager (LlamaRotaryEmbedding + apply_rotary_pos_emb, per tensor: half of q and k) and its
  apply_rotary_pos_emb alone, torch.compile of HF's step, and Liger when installed
  (``triton.testing.do_bench``, GPU time).
- ``per_call``: host µs per call and CUDA kernel launches per call (torch.profiler).
- ``syncs``: calls under ``torch.cuda.set_sync_debug_mode("error")``.
- ``graphs``: CUDA-graph capture and replay with new ids against the eager result.
- ``compile``: ``torch.compile(fullgraph=True)`` against eager.
- ``bf16_rounding``: the evidence for issue 26 item 6 (see :func:`bf16_rounding`).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import rope_lab as rl  # noqa: E402
from rope_lab import _atomic, fast, rope  # noqa: E402

DEVICE = torch.device(os.environ.get("DEV", "cuda" if torch.cuda.is_available() else "cpu"))
CUDA = DEVICE.type == "cuda"
# The four shapes (batch, heads, seq, head dim); tiny ones for a dry run on a CPU.
SHAPES = {"train (8, 32, 4096, 128)": (8, 32, 4096, 128),
          "prefill (1, 32, 8192, 128)": (1, 32, 8192, 128),
          "decode (64, 32, 1, 128)": (64, 32, 1, 128),
          "small (1, 8, 512, 64)": (1, 8, 512, 64)}
DRY_SHAPES = {"tiny (2, 2, 8, 16)": (2, 2, 8, 16), "decode (4, 2, 1, 16)": (4, 2, 1, 16)}


class Record:
    """The JSON, rewritten (atomically) after every row."""

    def __init__(self, path: str):
        self.path = Path(path)
        self.data = {"environment": {}, "correct": [], "grad": [], "speed": [], "per_call": [],
                     "syncs": [], "graphs": [], "compile": [], "bf16_rounding": {},
                     "errors": [], "seconds": {}}
        self.started = time.perf_counter()

    def add(self, section: str, row: dict) -> dict:
        self.data[section].append(row)
        self.save()
        return row

    def save(self):
        self.data["elapsed_s"] = round(time.perf_counter() - self.started, 1)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _atomic.write_text(self.path, json.dumps(self.data, indent=1, default=str))


def failure(error: BaseException) -> str:
    last = traceback.extract_tb(error.__traceback__)[-1:]
    where = f" at {Path(last[0].filename).name}:{last[0].lineno}" if last else ""
    return f"{type(error).__name__}: {str(error)[:400]}{where}"


def sync():
    if CUDA:
        torch.cuda.synchronize()


# --- environment -----------------------------------------------------------------------------

def environment(record: Record):
    env = record.data["environment"]
    env.update(device=str(DEVICE), torch=torch.__version__, cuda=torch.version.cuda,
               python=platform.python_version(), platform=platform.platform(),
               measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               command=" ".join([Path(sys.executable).name, *sys.argv]),
               rope_lab=rl.__version__, rope_lab_source_sha256=source_hash())
    with contextlib.suppress(Exception):
        env["git_commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                                           capture_output=True, text=True,
                                           timeout=10).stdout.strip() or None
    if CUDA:
        properties = torch.cuda.get_device_properties(DEVICE)
        env.update(gpu=properties.name, sms=properties.multi_processor_count,
                   memory_gib=round(properties.total_memory / 2**30, 1),
                   capability=f"{properties.major}.{properties.minor}")
    for name in ("triton", "transformers", "liger_kernel"):
        try:
            module = __import__(name)
            env[name] = getattr(module, "__version__", "installed")
        except Exception as error:  # noqa: BLE001 - recorded, not fatal
            env[name] = f"not importable: {failure(error)}"
    with contextlib.suppress(Exception):
        from rope_lab import _triton_rope
        env["positions_kernel"] = {name: getattr(_triton_rope, name) for name in (
            "ANGLES_PER_PROGRAM", "PAIRS_PER_STEP", "MAX_STEPS", "TARGET_PROGRAMS",
            "POSITION_WARPS", "FAST_LAUNCH")}
    try:
        env["status"] = fast.status()
        env["auto_backend_half_bf16"] = fast.auto_backend(
            torch.empty(1, 2, 8, 16, device=DEVICE, dtype=torch.bfloat16), "half")
    except Exception as error:  # noqa: BLE001
        env["status"] = failure(error)
    record.save()


def source_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted((ROOT / "rope_lab").rglob("*")):
        if path.suffix in (".py", ".c") and "benchmarks" not in path.parts:
            digest.update(path.relative_to(ROOT).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


# --- correctness -----------------------------------------------------------------------------

def reference(x, positions, base, layout, rotary_dim, wide):
    """The rotation in float64 from the formula, computed here: θ_i = base^(−2i/r) in float64,
    rounded to float32 unless ``wide`` (an input was float64); positions exact."""
    r = rotary_dim or x.shape[-1]
    theta = base ** -(torch.arange(0, r, 2, dtype=torch.float64, device=x.device) / r)
    if not wide:
        theta = theta.float().double()
    if positions is None:
        positions = torch.arange(x.shape[-2], device=x.device)
    angles = positions.to(torch.float64)[..., None] * theta
    cos, sin = angles.cos(), angles.sin()
    rotated, tail = x[..., :r].double(), x[..., r:].double()
    if layout == "half":
        a, b = rotated[..., :r // 2], rotated[..., r // 2:]
        out = torch.cat([a * cos - b * sin, a * sin + b * cos], -1)
    else:
        a, b = rotated[..., 0::2], rotated[..., 1::2]
        out = torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)
    return torch.cat([out, tail], -1)


EPS = {torch.float64: 2**-52, torch.float32: 2**-23, torch.bfloat16: 2**-7,
       torch.float16: 2**-10}


def tolerance(x, positions, wide):
    """Rounding of the output (one ulp of its dtype) plus the float32 angle's rounding: the
    float32 product m·θ_i is off by up to 2^-24 of itself below 2^24 (transformers'
    arithmetic); at and past 2^24 the angle is exact to a few 1e-7."""
    if wide:
        angle = 1e-12
    else:
        m = (torch.arange(x.shape[-2], device=x.device) if positions is None
             else positions.double().abs())
        small = m[m < 2**24]
        angle = 4e-7 + (float(small.max()) * 2**-24 if small.numel() else 0.0)
    return 2 * EPS[x.dtype] + 2 * angle


def correctness(record: Record, dry: bool, deadline: float = math.inf):
    seq = 40 if dry else 300
    dim = 16 if dry else 128
    generator = torch.Generator().manual_seed(11)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=generator).to(dtype).to(DEVICE)

    near = torch.tensor([2**24 - 3, 2**24 - 1, 2**24, 2**24 + 1, 2**24 + 5, 2**25 + 3,
                         2**28 - 7, 2**31 - 1, -(2**24 + 5), 123_456_789])
    ids = torch.arange(seq)
    cases = []
    for layout in ("half", "interleaved"):
        for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
            name = str(dtype).removeprefix("torch.")
            cases.append((f"{layout} {name} no ids", randn(2, 4, seq, dim, dtype=dtype), None,
                          1e4, layout, None))
            cases.append((f"{layout} {name} ids", randn(2, 4, seq, dim, dtype=dtype),
                          (ids + 1000).to(DEVICE), 1e4, layout, None))
            cases.append((f"{layout} {name} per-batch ids", randn(3, 4, 1, dim, dtype=dtype),
                          torch.tensor([[[5]], [[70_000]], [[2**20 + 1]]]).to(DEVICE), 5e5,
                          layout, None))
            cases.append((f"{layout} {name} near and past 2^24",
                          randn(2, near.numel(), dim, dtype=dtype), near.to(DEVICE), 1e4,
                          layout, None))
        cases.append((f"{layout} float32 int32 ids", randn(2, 4, seq, dim), ids.int().to(DEVICE),
                      1e4, layout, None))
        cases.append((f"{layout} float32 float ids (interpolated)", randn(2, 4, seq, dim),
                      (ids.float() / 4).to(DEVICE), 1e4, layout, None))
        cases.append((f"{layout} float32 float64 ids at 2^24 + 1 (θ float64)",
                      randn(1, 3, dim), torch.tensor([2.0**24 + 1, 3.0, 2.0**25 + 7],
                                                     dtype=torch.float64).to(DEVICE),
                      1e4, layout, None))
        cases.append((f"{layout} partial rotary 32/{dim}", randn(2, 4, 33, dim),
                      ids[:33].to(DEVICE), 1e4, layout, 32 if dim > 32 else 8))
        cases.append((f"{layout} head dim 80", randn(2, 4, 33, 80), None, 1e4, layout, None))
        cases.append((f"{layout} transposed (b, s, h, d) view",
                      randn(2, 37, 8, dim).transpose(1, 2), ids[:37].to(DEVICE), 1e4, layout,
                      None))
        cases.append((f"{layout} bfloat16 long, base 5e5",
                      randn(1, 2, 512 if dry else 32768, dim, dtype=torch.bfloat16), None, 5e5,
                      layout, None))
    backends = ["auto", "triton", "eager", "reference", "complex", "auto without Triton"]
    for backend in backends:
        for name, x, positions, base, layout, rotary_dim in cases:
            if backend == "complex" and layout == "half":
                continue
            for in_place in (False, True):
                if in_place and not name.endswith(("no ids", " ids")):
                    continue
                row = {"backend": backend, "case": ("in place " if in_place else "") + name}
                if time.perf_counter() > deadline:
                    record.add("correct", {**row, "skipped": "time budget"})
                    continue
                try:
                    wide = x.dtype == torch.float64 or (
                        positions is not None and positions.dtype == torch.float64)
                    kwargs = dict(base=base, layout=layout, rotary_dim=rotary_dim,
                                  backend="auto" if backend.startswith("auto") else backend)
                    with triton_off(backend == "auto without Triton"):
                        if backend.startswith("auto"):
                            row["path"] = fast.auto_backend(x, layout)
                        if in_place:
                            got = x.clone()
                            assert rope.apply_rope_(got, positions, **kwargs) is got
                        else:
                            got = rl.apply_rope(x, positions, **kwargs)
                    want = reference(x, positions, base, layout, rotary_dim, wide)
                    scale = max(1.0, float(want.abs().max()))
                    error = float((got.double() - want).abs().max()) / scale
                    limit = tolerance(x, positions, wide)
                    row.update(error=error, tolerance=limit, ok=bool(
                        error <= limit and got.dtype == x.dtype and got.shape == x.shape
                        and got.device == x.device))
                except Exception as caught:  # noqa: BLE001 - every case is recorded
                    refused = isinstance(caught, rl.BackendUnavailable)
                    row.update(ok=refused, refused=refused, exc=failure(caught))
                record.add("correct", row)
    pair_cases(record, randn, seq, dim, deadline)
    for backend in ("auto", "triton", "eager", "reference", "auto without Triton"):
        for layout in ("half", "interleaved"):
            for ids_given in (False, True):
                row = {"backend": backend, "layout": layout, "ids": ids_given}
                try:
                    positions = (torch.tensor([[3, 70, 2**24 + 1, 9]])[:, None, :].to(DEVICE)
                                 if ids_given else None)
                    backward = -(torch.arange(4, device=DEVICE) if positions is None
                                 else positions)  # the gradient: the rotation by −m·θ_i
                    weights = randn(2, 4, 4, dim, dtype=torch.float64)
                    errors = {}
                    for dtype in (torch.float64, torch.float32):
                        want = reference(weights, backward, 1e4, layout, None,
                                         dtype == torch.float64)
                        x = randn(2, 4, 4, dim, dtype=dtype).requires_grad_()
                        with triton_off(backend == "auto without Triton"):
                            out = rl.apply_rope(x, positions, layout=layout,
                                                backend="auto" if backend.startswith("auto")
                                                else backend)
                        (out * weights.to(dtype)).sum().backward()
                        errors[str(dtype).removeprefix("torch.")] = float(
                            (x.grad.double() - want).abs().max())
                    row.update(errors, ok=errors["float64"] < 1e-10 and errors["float32"] < 2e-5)
                except Exception as caught:  # noqa: BLE001
                    row.update(ok=False, exc=failure(caught))
                record.add("grad", row)


def pair_cases(record: Record, randn, seq: int, dim: int, deadline: float):
    """RotaryEmbedding(q, k, positions): q and k in one launch on CUDA (grouped-query k),
    each against the float64 reference; rows "RotaryEmbedding (q, k)" in ``correct``."""
    from rope_lab import cost

    per_batch = torch.tensor([[5], [70_000], [2**24 + 1]])[:, None, :].to(DEVICE)
    for layout in ("half", "interleaved"):
        for dtype in (torch.bfloat16, torch.float32, torch.float16):
            name = str(dtype).removeprefix("torch.")
            ids = (torch.arange(seq) + 1000).to(DEVICE)
            cases = {
                f"{layout} {name} ids, 8 q heads, 2 k heads": (
                    randn(2, 8, seq, dim, dtype=dtype), randn(2, 2, seq, dim, dtype=dtype),
                    ids, dim),
                f"{layout} {name} decode, per-batch ids": (
                    randn(3, 8, 1, dim, dtype=dtype), randn(3, 2, 1, dim, dtype=dtype),
                    per_batch, dim),
                f"{layout} {name} no ids, HF (b, s, h, d) memory": (
                    randn(2, seq, 8, dim, dtype=dtype).transpose(1, 2),
                    randn(2, seq, 2, dim, dtype=dtype).transpose(1, 2), None, dim),
                f"{layout} {name} partial rotary 32/{dim}": (
                    randn(2, 8, 33, dim, dtype=dtype), randn(2, 2, 33, dim, dtype=dtype),
                    ids[:33], 32 if dim > 32 else 8),
            }
            for case, (q, k, positions, rotary_dim) in cases.items():
                row = {"backend": "RotaryEmbedding (q, k)", "case": case}
                if time.perf_counter() > deadline:
                    record.add("correct", {**row, "skipped": "time budget"})
                    continue
                try:
                    module = rl.RotaryEmbedding(rotary_dim, layout=layout).to(DEVICE)
                    counted = cost.count_kernels(module, q, k, positions)
                    row["rope_lab_launches"] = counted["names"].count("rope_lab Triton kernel")
                    got_q, got_k = module(q, k, positions)
                    errors, limits = [], []
                    for x, got in ((q, got_q), (k, got_k)):
                        want = reference(x, positions, 1e4, layout, rotary_dim, False)
                        scale = max(1.0, float(want.abs().max()))
                        errors.append(float((got.double() - want).abs().max()) / scale)
                        limits.append(tolerance(x, positions, False))
                    row.update(error=max(errors), tolerance=min(limits), ok=bool(
                        all(e <= limit for e, limit in zip(errors, limits, strict=True))
                        and got_q.dtype == dtype and got_k.shape == k.shape))
                except Exception as caught:  # noqa: BLE001
                    row.update(ok=False, exc=failure(caught))
                record.add("correct", row)


@contextlib.contextmanager
def triton_off(off: bool):
    """The auto path as on a GPU without Triton (fast._triton_by_device says "failed")."""
    if not off or not CUDA:
        yield
        return
    device = torch.device("cuda", torch.cuda.current_device())
    saved = fast._triton_by_device.get(device, None)
    fast._triton_by_device[device] = False
    try:
        yield
    finally:
        if saved is None:
            fast._triton_by_device.pop(device, None)
        else:
            fast._triton_by_device[device] = saved


# --- speed -----------------------------------------------------------------------------------

def hf_parts(q, base=1e4):
    """transformers' LlamaRotaryEmbedding for q's head dim, and apply_rotary_pos_emb."""
    import transformers
    from transformers.models.llama import modeling_llama

    from rope_lab.hf import tiny

    heads, dim = q.shape[1], q.shape[-1]
    config = transformers.LlamaConfig(hidden_size=heads * dim, num_attention_heads=heads,
                                      num_key_value_heads=heads, head_dim=dim,
                                      **tiny.rope_config_kwargs(base))
    rotary = modeling_llama.LlamaRotaryEmbedding(config=config).to(q.device)
    return rotary, modeling_llama.apply_rotary_pos_emb


def timer(function, dry):
    """ms per call: do_bench on a GPU (GPU time, warm-up included), a plain loop otherwise."""
    if CUDA:
        from triton.testing import do_bench

        return do_bench(function, warmup=10, rep=40)
    start = time.perf_counter()
    for _ in range(3):
        function()
    return (time.perf_counter() - start) / 3 * 1e3


def speed(record: Record, dry: bool, deadline: float):
    try:
        from liger_kernel.transformers.rope import liger_rotary_pos_emb
    except Exception as error:  # noqa: BLE001
        liger_rotary_pos_emb = None
        record.data["errors"].append(f"liger: {failure(error)}")
    shapes = DRY_SHAPES if dry else SHAPES
    for dtype in (torch.bfloat16, torch.float32):
        for name, shape in shapes.items():
            row = {"case": name, "shape": list(shape), "dtype": str(dtype).removeprefix("torch.")}
            if time.perf_counter() > deadline:
                record.add("speed", {**row, "skipped": "time budget"})
                continue
            try:
                speed_row(row, shape, dtype, dry, deadline, liger_rotary_pos_emb, record)
            except Exception as caught:  # noqa: BLE001
                row["exc"] = failure(caught)
            record.add("speed", row)
            if CUDA:
                torch.cuda.empty_cache()


def speed_row(row, shape, dtype, dry, deadline, liger_rotary_pos_emb, record):
    """µs per tensor of every implementation at one shape, into row["us_per_tensor"]."""
    us = row["us_per_tensor"] = {}
    batch, _, seq, _ = shape
    q = torch.randn(shape, device=DEVICE, dtype=dtype)
    k = torch.randn(shape, device=DEVICE, dtype=dtype)
    start = 4096 if seq == 1 else 0
    hf_ids = start + torch.arange(seq, device=DEVICE).expand(batch, seq)
    ids = hf_ids[:, None, :]
    scratch = q.clone()
    rows = {
        "clone": lambda: q.clone(),
        "apply_rope (default)": lambda: rl.apply_rope(q),
        "apply_rope + position ids": lambda: rl.apply_rope(q, ids),
        "apply_rope_ in place + ids": lambda: rope.apply_rope_(scratch, ids),
    }
    for label, function in rows.items():
        us[label] = timer(function, dry) * 1e3
        record.save()
    with triton_off(True):
        us["without Triton (default)"] = timer(lambda: rl.apply_rope(q), dry) * 1e3
        us["without Triton + ids"] = timer(lambda: rl.apply_rope(q, ids), dry) * 1e3
    try:
        rotary, apply_rotary = hf_parts(q)
        cos, sin = rotary(q, hf_ids)

        def hf_step():
            c, s = rotary(q, hf_ids)
            return apply_rotary(q, k, c, s)

        module = rl.RotaryEmbedding(shape[-1]).to(DEVICE)
        us["RotaryEmbedding q and k + ids / 2"] = timer(
            lambda: module(q, k, ids), dry) * 1e3 / 2
        us["HF eager (rotary + apply) / 2"] = timer(hf_step, dry) * 1e3 / 2
        us["HF apply_rotary_pos_emb only / 2"] = timer(
            lambda: apply_rotary(q, k, cos, sin), dry) * 1e3 / 2
        if CUDA and dtype == torch.bfloat16 and time.perf_counter() < deadline:
            compiled = torch.compile(hf_step, dynamic=False)  # bfloat16 only: compiles cost
            compiled()
            us["torch.compile(HF step) / 2"] = timer(compiled, dry) * 1e3 / 2
        if liger_rotary_pos_emb is not None and CUDA:
            us["Liger (tables given) / 2"] = timer(
                lambda: liger_rotary_pos_emb(q, k, cos, sin), dry) * 1e3 / 2
    except Exception as caught:  # noqa: BLE001
        row["hf_exc"] = failure(caught)
    clone = us["clone"]
    row["times_clone"] = {label: value / clone for label, value in us.items()}
    moved = 2 * q.numel() * q.element_size()
    row["gb_per_s"] = {label: moved / (value * 1e-6) / 1e9 for label, value in us.items()}


def per_call(record: Record, dry: bool):
    """Host µs per call (no sync inside the loop) and CUDA kernels per call."""
    shapes = {"decode (1, 8, 1, 64)": (1, 8, 1, 64),
              "decode (64, 32, 1, 128)": (64, 32, 1, 128) if not dry else (4, 2, 1, 16)}
    for name, shape in shapes.items():
        for dtype in (torch.bfloat16, torch.float32):
            try:
                functions = per_call_functions(shape, dtype)
            except Exception as caught:  # noqa: BLE001
                record.data["errors"].append(f"per_call {name}: {failure(caught)}")
                continue
            for label, (off, function) in functions.items():
                row = {"case": name, "dtype": str(dtype).removeprefix("torch."), "call": label}
                try:
                    with triton_off(off):
                        for _ in range(20):
                            function()
                        sync()
                        calls = 20 if dry else 300
                        start = time.perf_counter()
                        for _ in range(calls):
                            function()
                        row["host_us_per_call"] = (time.perf_counter() - start) / calls * 1e6
                        sync()
                        if CUDA:
                            row.update(kernels_per_call(function))
                except Exception as caught:  # noqa: BLE001
                    row["exc"] = failure(caught)
                record.add("per_call", row)


def per_call_functions(shape, dtype) -> dict:
    """label → (Triton turned off?, the call)."""
    q = torch.randn(shape, device=DEVICE, dtype=dtype)
    k = torch.randn(shape, device=DEVICE, dtype=dtype)
    batch, _, seq, _ = shape
    hf_ids = 4096 + torch.arange(seq, device=DEVICE).expand(batch, seq)
    ids = hf_ids[:, None, :]
    scratch = q.clone()
    module = rl.RotaryEmbedding(shape[-1]).to(DEVICE)
    functions = {
        "apply_rope(q)": (False, lambda: rl.apply_rope(q)),
        "apply_rope(q, ids)": (False, lambda: rl.apply_rope(q, ids)),
        "apply_rope(q, ids), Triton's own launch": (False, lambda: own_launch(
            lambda: rl.apply_rope(q, ids))),
        "apply_rope_(q, ids)": (False, lambda: rope.apply_rope_(scratch, ids)),
        "apply_rope(q, ids), no Triton": (True, lambda: rl.apply_rope(q, ids)),
        "RotaryEmbedding(q, k, ids) (q and k)": (False, lambda: module(q, k, ids)),
    }
    rotary, apply_rotary = hf_parts(q)

    def hf_step():
        c, s = rotary(q, hf_ids)
        return apply_rotary(q, k, c, s)

    functions["HF step (q and k)"] = (False, hf_step)
    try:
        from liger_kernel.transformers.rope import liger_rotary_pos_emb
    except Exception:  # noqa: BLE001 - recorded in speed's errors
        return functions
    cos, sin = rotary(q, hf_ids)
    functions["Liger (q and k, tables given)"] = (
        False, lambda: liger_rotary_pos_emb(q, k, cos, sin))
    return functions


def own_launch(function):
    """Run function with every Triton launch going through Triton's own run (rope_lab's
    direct launch off), to measure what the direct launch saves."""
    from rope_lab import _triton_rope

    saved, _triton_rope.FAST_LAUNCH = _triton_rope.FAST_LAUNCH, False
    try:
        return function()
    finally:
        _triton_rope.FAST_LAUNCH = saved


def kernels_per_call(function) -> dict:
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as profile:
        function()
        torch.cuda.synchronize()
    names = [event.name for event in profile.events()
             if event.device_type == torch.autograd.DeviceType.CUDA]
    copies = [event.name for event in profile.events() if "Memcpy" in event.name
              or "cudaStreamSynchronize" in event.name or "DtoH" in event.name]
    return {"cuda_kernels_per_call": len(names), "kernels": names[:16],
            "copies_or_syncs": sorted(set(copies))[:8]}


# --- syncs, graphs, compile ------------------------------------------------------------------

def syncs(record: Record):
    if not CUDA:
        record.add("syncs", {"skipped": "needs CUDA"})
        return
    q = torch.randn(4, 8, 16, 64, device=DEVICE, dtype=torch.bfloat16)
    ids = torch.arange(16, device=DEVICE)
    per_batch = (torch.arange(4, device=DEVICE)[:, None, None] * 100 + ids)
    rotary = rl.RotaryEmbedding(64).to(DEVICE)
    calls = {
        "apply_rope(q)": lambda: rl.apply_rope(q),
        "apply_rope(q, int64 ids)": lambda: rl.apply_rope(q, ids),
        "apply_rope(q, per-batch ids)": lambda: rl.apply_rope(q, per_batch),
        "apply_rope(q, int32 ids, interleaved, rotary_dim=32)":
            lambda: rl.apply_rope(q, ids.int(), layout="interleaved", rotary_dim=32),
        "apply_rope_(q, ids)": lambda: rope.apply_rope_(q.clone(), ids),
        "RotaryEmbedding(q, k, per-batch ids), one launch":
            lambda: rotary(q, q[:, :2], per_batch),
        "apply_rope(q, ids) without Triton": ("off", lambda: rl.apply_rope(q, ids)),
        "apply_rope(q float32 requires grad, ids) + backward":
            lambda: rl.apply_rope(q.float().requires_grad_(), ids).sum().backward(),
        # float positions are checked for NaN and size: one read, documented; must raise
        "apply_rope(q, float ids) (documented: one sync, expected to raise)":
            lambda: rl.apply_rope(q, ids / 2),
    }
    for label, function in calls.items():
        off = isinstance(function, tuple)
        function = function[1] if off else function
        expect_sync = "expected to raise" in label
        row = {"call": label, "expect_sync": expect_sync}
        try:
            with triton_off(off):
                function()  # warm up (Triton self-check, compiles) outside the check
                sync()
                torch.cuda.set_sync_debug_mode("error")
                try:
                    function()
                finally:
                    torch.cuda.set_sync_debug_mode(0)
            row.update(synced=False, ok=not expect_sync)
        except Exception as caught:  # noqa: BLE001
            row.update(synced=True, ok=expect_sync, exc=failure(caught))
        record.add("syncs", row)


def graphs(record: Record):
    if not CUDA:
        record.add("graphs", {"skipped": "needs CUDA"})
        return
    rotary = rl.RotaryEmbedding(128).to(DEVICE)
    cases = {
        "apply_rope(q, ids)": (lambda q, p: rl.apply_rope(q, p), (2, 8, 16, 64), (16,)),
        "apply_rope(q, per-batch ids)": (lambda q, p: rl.apply_rope(q, p), (4, 8, 1, 128),
                                         (4, 1, 1)),
        "apply_rope(q, ids), interleaved, rotary_dim=32":
            (lambda q, p: rl.apply_rope(q, p, layout="interleaved", rotary_dim=32),
             (2, 8, 16, 64), (16,)),
        "apply_rope(q) (no ids)": (lambda q, p: rl.apply_rope(q), (2, 8, 16, 64), (16,)),
        "apply_rope_(q, ids)": (lambda q, p: rope.apply_rope_(q, p), (2, 8, 16, 64), (16,)),
        "RotaryEmbedding(q, k, per-batch ids), q and k in one launch": (
            lambda q, p: torch.cat(rotary(q, q[:, :2], p), dim=1), (4, 8, 1, 128), (4, 1, 1)),
        "apply_rope(q, ids) without Triton": ("off", lambda q, p: rl.apply_rope(q, p),
                                              (2, 8, 16, 64), (16,)),
    }
    for label, case in cases.items():
        off = case[0] == "off"
        function, shape, id_shape = case[1:] if off else case
        row = {"call": label}
        try:
            with triton_off(off):
                q = torch.randn(shape, device=DEVICE, dtype=torch.bfloat16)
                q_static = q.clone()
                ids = torch.randint(0, 5000, id_shape, device=DEVICE)
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    for _ in range(3):  # warm-up, as CUDA graphs require
                        function(q.clone(), ids)
                torch.cuda.current_stream().wait_stream(stream)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    out = function(q_static, ids)
                errors = []
                for _ in range(3):
                    new_ids = torch.randint(0, 2**25, id_shape, device=DEVICE)
                    ids.copy_(new_ids)
                    q_static.copy_(q)
                    graph.replay()
                    torch.cuda.synchronize()
                    expected = function(q.clone(), new_ids)
                    errors.append(float((out.float() - expected.float()).abs().max()))
                row.update(max_difference=max(errors), ok=max(errors) == 0.0)
        except Exception as caught:  # noqa: BLE001
            row.update(ok=False, exc=failure(caught))
        record.add("graphs", row)


def compiled(record: Record, dry: bool, deadline: float):
    seq, dim = (8, 16) if dry else (64, 128)
    x = torch.randn(2, 4, seq, dim, device=DEVICE)
    ids = torch.arange(seq, device=DEVICE) + 5
    per_batch = torch.stack([ids, ids + 2**24])[:, None, :]
    cases = {
        "no ids": (lambda x, p: rl.apply_rope(x), (x, ids)),
        "ids": (lambda x, p: rl.apply_rope(x, p), (x, ids)),
        "per-batch ids past 2^24": (lambda x, p: rl.apply_rope(x, p), (x, per_batch)),
        "interleaved + ids": (lambda x, p: rl.apply_rope(x, p, layout="interleaved"),
                              (x, per_batch)),
        "partial rotary + ids": (lambda x, p: rl.apply_rope(x, p, rotary_dim=dim // 2),
                                 (x, per_batch)),
        "bfloat16 + ids": (lambda x, p: rl.apply_rope(x, p), (x.bfloat16(), per_batch)),
    }
    for label, (function, args) in cases.items():
        row = {"case": label}
        if time.perf_counter() > deadline:
            record.add("compile", {**row, "skipped": "time budget"})
            continue
        try:
            torch._dynamo.reset()
            started = time.perf_counter()
            got = torch.compile(function, fullgraph=True)(*args)
            sync()
            row["compile_s"] = round(time.perf_counter() - started, 1)
            expected = function(*args)
            difference = float((got.double() - expected.double()).abs().max())
            limit = 2**-7 if got.dtype == torch.bfloat16 else 1e-5
            row.update(max_difference=difference, ok=difference <= limit)
        except Exception as caught:  # noqa: BLE001
            row.update(ok=False, exc=failure(caught))
        record.add("compile", row)


# --- bf16 rounding (issue 26 item 6) ---------------------------------------------------------

def bf16_rounding(record: Record, dry: bool):
    """test_low_precision_close_to_float32 on this device, and where its error comes from.

    For the test's x: the test's error metric; how many outputs differ from the float32
    result of the reference formula rounded once to bfloat16, and from the kernel's own
    float32 output rounded once; and whether an FMA in ``a·c − b·s`` (one rounding instead of
    two, emulated exactly in float64 on the CPU) predicts the kernel's float32 output. Then
    the test's new bound: |out − ref| ≤ 2^-8·|ref| + 2^-21·(|a| + |b|) per element.
    """
    result = record.data["bf16_rounding"]
    for layout in ("half", "interleaved"):
        entry = result[layout] = {}
        try:
            torch.manual_seed(0)
            x = torch.randn(1, 4, 256 if dry else 4096, 64, device=DEVICE).bfloat16()
            reference32 = rl.apply_rope(x.float(), layout=layout)  # what the test compares to
            out = rl.apply_rope(x, layout=layout).float()
            error = (out - reference32).abs() / reference32.abs().clamp_min(1.0)
            worst = int(error.argmax())
            entry.update(path=fast.auto_backend(x, layout),
                         test_error=float(error.max()), test_tolerance=2**-8,
                         worst=dict(out=float(out.flatten()[worst]),
                                    reference=float(reference32.flatten()[worst])))
            formula32 = rl.apply_rope(x.float(), layout=layout, backend="reference")
            entry["fraction_differing_from_formula_rounded_once"] = float(
                (out != formula32.bfloat16().float()).float().mean())
            entry["fraction_differing_from_own_float32_rounded_once"] = float(
                (out != reference32.bfloat16().float()).float().mean())
            entry["float32_kernel_vs_formula_max_abs"] = float(
                (reference32 - formula32).abs().max())
            # FMA emulation: a·c − b·s with one rounding of the products' combination, with
            # the kernel's own cos and sin: the pair (1, 0) turned by m·θ_i is (cos, sin)
            # exactly, FMA or not (1·c − 0·s = c)
            unit = torch.cat((torch.ones(32), torch.zeros(32))).expand(1, 1, x.shape[-2], 64)
            tables = rl.apply_rope(unit.to(DEVICE).contiguous(), layout="half")
            entry["tables_from"] = fast.auto_backend(unit.to(DEVICE), "half")
            xf = x.float().cpu().double()
            c, s = tables[..., :32].cpu().double(), tables[..., 32:].cpu().double()
            if layout == "half":
                a, b = xf[..., :32], xf[..., 32:]
            else:
                a, b = xf[..., 0::2], xf[..., 1::2]

            def r32(t):
                return t.float().double()

            predictions = {
                "two roundings (torch)": (r32(r32(a * c) - r32(b * s)),
                                          r32(r32(a * s) + r32(b * c))),
                "fma(a, c, -(b·s))": (r32(a * c - r32(b * s)), r32(a * s + r32(b * c))),
                "fma(-b, s, a·c)": (r32(r32(a * c) - b * s), r32(r32(a * s) + b * c)),
            }
            kernel = reference32.cpu().double()
            kernel_first = kernel[..., :32] if layout == "half" else kernel[..., 0::2]
            kernel_second = kernel[..., 32:] if layout == "half" else kernel[..., 1::2]
            entry["float32_kernel_matches"] = {
                label: float(((first == kernel_first) & (second == kernel_second))
                             .double().mean())
                for label, (first, second) in predictions.items()}
            pair = (a.abs() + b.abs())
            bound_input = torch.cat([pair, pair], -1) if layout == "half" else \
                torch.stack([pair, pair], -1).flatten(-2)
            excess = ((out.cpu().double() - reference32.cpu().double()).abs()
                      - 2**-8 * reference32.cpu().double().abs())
            entry["new_bound_holds"] = bool((excess <= 2**-21 * bound_input).all())
            entry["new_bound_worst_excess_over_2^-21(|a|+|b|)"] = float(
                (excess / bound_input.clamp_min(1e-30)).max() / 2**-21)
        except Exception as caught:  # noqa: BLE001
            entry["exc"] = failure(caught)
        record.save()


# --- main ------------------------------------------------------------------------------------

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="gpu_check.json", help="the JSON to write")
    parser.add_argument("--quick", action="store_true",
                        help="fewer cases: correctness, one speed pass, per-call, syncs, graphs")
    parser.add_argument("--budget", type=float, default=190.0,
                        help="seconds after which timed sections skip what is left")
    args = parser.parse_args(argv)
    dry = not CUDA
    record = Record(args.out)
    started = time.perf_counter()
    deadline = started + (min(args.budget, 90.0) if args.quick else args.budget)
    # Correctness first, but within 45 % of the budget (each new kernel variant compiles).
    correct_deadline = started + 0.45 * (deadline - started)
    sections = [("environment", lambda: environment(record)),
                ("correct", lambda: correctness(record, dry, correct_deadline)),
                ("bf16_rounding", lambda: bf16_rounding(record, dry)),
                ("syncs", lambda: syncs(record)),
                ("graphs", lambda: graphs(record)),
                ("per_call", lambda: per_call(record, dry)),
                ("speed", lambda: speed(record, dry, deadline)),
                ("compile", lambda: compiled(record, dry, deadline))]
    if args.quick:
        global SHAPES
        SHAPES = {name: shape for name, shape in SHAPES.items()
                  if name.startswith(("decode", "prefill"))}
    for name, section in sections:
        began = time.perf_counter()
        try:
            section()
        except Exception as caught:  # noqa: BLE001 - a section never stops the others
            record.data["errors"].append(f"{name}: {failure(caught)}")
        record.data["seconds"][name] = round(time.perf_counter() - began, 1)
        record.save()
        print(f"{name}: {record.data['seconds'][name]} s", flush=True)
    summarize(record)
    return 0


def summarize(record: Record):
    data = record.data
    for section in ("correct", "grad", "syncs", "graphs", "compile"):
        rows = [r for r in data[section] if "ok" in r]
        skipped = sum("skipped" in r for r in data[section])
        data[f"ok_{section}"] = f"{sum(r['ok'] for r in rows)}/{len(rows)}"
        print(f"{section}: {data[f'ok_{section}']} ok"
              + (f", {skipped} skipped" if skipped else ""))
        for r in rows:
            if not r["ok"]:
                print("  FAIL", {k: v for k, v in r.items() if k != "ok"})
    for row in data["speed"]:
        ratios = row.get("times_clone", {})
        print(row.get("case"), row.get("dtype"),
              {k: round(v, 2) for k, v in ratios.items()}, row.get("exc", ""))
    for row in data["per_call"]:
        print("per call", row.get("case"), row.get("dtype"), row.get("call"),
              round(row.get("host_us_per_call", math.nan), 1), "µs host,",
              row.get("cuda_kernels_per_call"), "kernels", row.get("exc", ""))
    print("bf16:", json.dumps(data["bf16_rounding"], default=str)[:1500])
    print("errors:", data["errors"])
    record.save()


if __name__ == "__main__":
    raise SystemExit(main())
