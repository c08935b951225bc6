"""Where the time of a RoPE call goes on a GPU, and which launch shape the positions kernel wants.

Two questions ``scripts/gpu_check.py`` raises and cannot answer on its own:

- ``kernel``: the GPU time of the Triton kernels alone (CUDA-graph replays, so host overhead
  is out), against a copy of the same bytes: the table kernel (cos/sin read from memory),
  the positions kernel (angles computed in the kernel) at its default launch shape and at
  others around it (``ANGLES_PER_PROGRAM`` angles per program, ``PAIRS_PER_STEP`` pairs per
  step of the loop over heads, about ``TARGET_PROGRAMS`` programs, ``POSITION_WARPS``), and
  the q-and-k kernel against a copy of q and k.
- ``host``: host µs per call, split into rope_lab's own Python (the launch replaced by a
  no-op), the launch with the plan ready (rope_lab's direct launch, and Triton's own), the
  whole call, q and k through ``RotaryEmbedding`` (one launch), Hugging Face's step and
  Liger's call for q and k together when liger-kernel is installed.

Run on a GPU machine from the repository root (see scripts/gpu_check.py for the wheels):

    python3 scripts/gpu_tune.py --out $OUT/gpu_tune.json

About two minutes on an H200 (each launch shape compiles once). Writes its JSON after every
row and records failures in place. Without a GPU, ``--host-only`` with TRITON_INTERPRET=1
measures the host rows that need no GPU (rope_lab's Python with the launch stubbed) on CPU
tensors through ``backend="triton"``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import rope_lab as rl  # noqa: E402
from rope_lab import _atomic, fast  # noqa: E402
from rope_lab import _triton_rope as kernels  # noqa: E402

CUDA = torch.cuda.is_available() and not kernels.INTERPRETED
DEVICE = "cuda" if CUDA else "cpu"
SHAPES = (("train bf16", (8, 32, 4096, 128), torch.bfloat16),
          ("prefill bf16", (1, 32, 8192, 128), torch.bfloat16),
          ("train fp32", (8, 32, 4096, 128), torch.float32),
          ("prefill fp32", (1, 32, 8192, 128), torch.float32),
          ("decode bf16", (64, 32, 1, 128), torch.bfloat16),
          ("small bf16", (1, 8, 512, 64), torch.bfloat16))
# Launch shapes to sweep: (angles per program, pairs per step, target programs, warps); the
# first is the default. Each changes one knob.
CONFIGS = ((512, 2048, 4096, 4), (256, 2048, 4096, 4), (1024, 2048, 4096, 4),
           (512, 1024, 4096, 4), (512, 4096, 4096, 4), (512, 2048, 1024, 4),
           (512, 2048, 16384, 4), (512, 2048, 4096, 8))
KNOBS = ("ANGLES_PER_PROGRAM", "PAIRS_PER_STEP", "TARGET_PROGRAMS", "POSITION_WARPS")


def gpu_us(fn) -> float:
    """GPU µs per call from CUDA-graph replays (no host overhead)."""
    from triton.testing import do_bench_cudagraph
    return 1000 * do_bench_cudagraph(fn, rep=20)


def host_us(fn, calls: int = 2000) -> float:
    """Host µs per call, the GPU kept busy enough not to throttle the loop."""
    for _ in range(50):
        fn()
    sync()
    start = time.perf_counter()
    for index in range(calls):
        fn()
        if index % 200 == 199:
            sync()
    sync()
    return (time.perf_counter() - start) / calls * 1e6


def sync():
    if CUDA:
        torch.cuda.synchronize()


@contextlib.contextmanager
def launch_shape(config):
    """The positions kernel's launch-shape knobs set to config (plans made afresh)."""
    saved = [getattr(kernels, name) for name in KNOBS]
    for name, value in zip(KNOBS, config, strict=True):
        setattr(kernels, name, value)
    kernels._plans.clear()
    try:
        yield
    finally:
        for name, value in zip(KNOBS, saved, strict=True):
            setattr(kernels, name, value)
        kernels._plans.clear()


@contextlib.contextmanager
def launches(fast_launch=None, stubbed=False):
    """Triton's own launch instead of rope_lab's direct one; or no launch at all."""
    saved_flag, saved_call = kernels.FAST_LAUNCH, kernels.Launch.__call__
    if fast_launch is not None:
        kernels.FAST_LAUNCH = fast_launch and saved_flag
    if stubbed:
        kernels.Launch.__call__ = lambda self, *tensors: None
    try:
        yield
    finally:
        kernels.FAST_LAUNCH, kernels.Launch.__call__ = saved_flag, saved_call


def kernel_rows(record, save):
    for name, shape, dtype in SHAPES:
        record["kernel"].append(kernel_row(name, shape, dtype))
        save()
    record["kernel"].append(pair_row((8, 32, 4096, 128), (8, 8, 4096, 128)))
    record["kernel"].append(pair_row((64, 32, 1, 128), (64, 8, 1, 128)))
    save()


def kernel_row(name, shape, dtype):
    x = torch.randn(shape, device=DEVICE, dtype=dtype)
    out = torch.empty_like(x)
    ids = torch.arange(shape[-2], device=DEVICE)
    theta = rl.inv_freq(shape[-1], device=DEVICE)
    row = {"case": name, "shape": list(shape), "dtype": str(dtype).replace("torch.", "")}
    try:
        row["copy"] = gpu_us(lambda: out.copy_(x))
        angles = ids.float()[:, None] * theta
        cos, sin = angles.cos(), angles.sin()
        row["table kernel"] = gpu_us(lambda: kernels.rotate(x, cos, sin, "half", out))
        for config in CONFIGS:
            label = ("positions kernel: {} angles, {} pairs a step, {} programs, {} warps"
                     .format(*config))
            try:
                with launch_shape(config):
                    plan = kernels.plan_positions(x, ids, theta, out)
                    row[label] = gpu_us(
                        lambda plan=plan: kernels.rotate_positions(x, ids, theta, out, plan))
                    row[label + " (tile)"] = {k: plan.constants[k] for k in
                                              ("ROWS", "HEADS", "STEPS", "BLOCK_HALF")}
                    row[label + " (tile)"]["programs"] = plan.grid[0]
            except Exception as error:  # a config that does not compile is a finding
                row[label] = f"{type(error).__name__}: {str(error)[:200]}"
        plan = kernels.plan_positions(x, ids, theta, out, "interleaved")
        row["positions kernel, interleaved"] = gpu_us(
            lambda: kernels.rotate_positions(x, ids, theta, out, plan))
        hf_memory = x.transpose(1, 2).contiguous().transpose(1, 2)  # (b, s, h, d) memory
        per_batch = (torch.arange(shape[0], device=DEVICE)[:, None, None] * 7 + ids)
        plan = kernels.plan_positions(hf_memory, per_batch, theta, out)
        row["positions kernel, HF memory, per-batch ids"] = gpu_us(
            lambda: kernels.rotate_positions(hf_memory, per_batch, theta, out, plan))
        row["apply_rope(x, ids), GPU time"] = gpu_us(lambda: rl.apply_rope(x, ids))
        row["apply_rope(x), GPU time"] = gpu_us(lambda: rl.apply_rope(x))
    except Exception:
        row["error"] = traceback.format_exc()[-800:]
    print(name, {k: (round(v / row["copy"], 2) if isinstance(v, float) and row.get("copy")
                     else v) for k, v in row.items() if k not in ("shape", "dtype", "case")},
          flush=True)
    return row


def pair_row(q_shape, k_shape, dtype=torch.bfloat16):
    """q and k (grouped-query: fewer k heads) in one launch, against copying both."""
    q = torch.randn(q_shape, device=DEVICE, dtype=dtype)
    k = torch.randn(k_shape, device=DEVICE, dtype=dtype)
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    ids = torch.arange(q_shape[-2], device=DEVICE)
    theta = rl.inv_freq(q_shape[-1], device=DEVICE)
    row = {"case": f"q and k {tuple(q_shape)} {tuple(k_shape)}", "dtype": "bfloat16"}
    try:
        row["copy"] = gpu_us(lambda: (q_out.copy_(q), k_out.copy_(k)))
        plan = kernels.plan_pair(q, k, ids, theta, q_out, k_out)
        row["q and k kernel"] = gpu_us(
            lambda: kernels.rotate_pair(q, k, ids, theta, q_out, k_out, plan))
        module = rl.RotaryEmbedding(q_shape[-1]).to(DEVICE)
        row["RotaryEmbedding(q, k, ids), GPU time"] = gpu_us(lambda: module(q, k, ids))
        row["apply_rope(q, ids) + apply_rope(k, ids), GPU time"] = gpu_us(
            lambda: (rl.apply_rope(q, ids), rl.apply_rope(k, ids)))
    except Exception:
        row["error"] = traceback.format_exc()[-800:]
    print(row["case"], {k: (round(v / row["copy"], 2) if isinstance(v, float) else v)
                        for k, v in row.items() if k not in ("case", "dtype")}, flush=True)
    return row


def host_rows(record, save, shapes=(((1, 8, 1, 64), torch.bfloat16),
                                    ((64, 32, 1, 128), torch.bfloat16))):
    for shape, dtype in shapes:
        record["host"].append(host_row(shape, dtype))
        save()


def host_row(shape, dtype):
    backend = "auto" if CUDA else "triton"
    q = torch.randn(shape, device=DEVICE, dtype=dtype)
    k = torch.randn(shape, device=DEVICE, dtype=dtype)
    ids = torch.randint(0, 4096, (shape[0], 1, 1), device=DEVICE)
    theta = rl.inv_freq(shape[-1], device=DEVICE)
    out = torch.empty_like(q)
    module = rl.RotaryEmbedding(shape[-1]).to(DEVICE)
    row = {"shape": list(shape), "dtype": str(dtype).replace("torch.", ""), "backend": backend}
    try:
        with launches(stubbed=True):
            row["rope_lab Python, launch stubbed"] = host_us(
                lambda: rl.apply_rope(q, ids, backend=backend))
            row["rope_lab Python, launch stubbed, no ids"] = host_us(
                lambda: rl.apply_rope(q, backend=backend))
        row["torch.empty_like only"] = host_us(lambda: torch.empty_like(q))
        if not CUDA:
            return row
        row["apply_rope(q, ids)"] = host_us(lambda: rl.apply_rope(q, ids))
        row["apply_rope(q)"] = host_us(lambda: rl.apply_rope(q))
        plan = kernels.plan_positions(q, ids, theta, out)
        row["launch only (plan ready), direct"] = host_us(
            lambda: kernels.rotate_positions(q, ids, theta, out, plan))
        with launches(fast_launch=False):
            row["launch only (plan ready), Triton's own"] = host_us(
                lambda: kernels.rotate_positions(q, ids, theta, out, plan))
            row["apply_rope(q, ids), Triton's own launch"] = host_us(
                lambda: rl.apply_rope(q, ids))
        row["RotaryEmbedding(q, k, ids), q and k"] = host_us(lambda: module(q, k, ids))
        row["apply_rope(q, ids) + apply_rope(k, ids)"] = host_us(
            lambda: (rl.apply_rope(q, ids), rl.apply_rope(k, ids)))
        try:
            from liger_kernel.transformers.rope import liger_rotary_pos_emb
            angles = ids.reshape(-1, 1).float() * theta
            emb = torch.cat((angles, angles), -1)[:, None, :]  # (batch, 1, dim)
            cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
            row["Liger q and k (tables given)"] = host_us(
                lambda: liger_rotary_pos_emb(q, k, cos, sin))
        except Exception as error:
            row["Liger q and k (tables given)"] = f"{type(error).__name__}: {error}"[:200]
    except Exception:
        row["error"] = traceback.format_exc()[-800:]
    print("host", row, flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="gpu_tune.json")
    parser.add_argument("--host-only", action="store_true",
                        help="only the host rows (without a GPU: TRITON_INTERPRET=1)")
    args = parser.parse_args()
    if not CUDA and not kernels.INTERPRETED:
        parser.error("needs a GPU, or TRITON_INTERPRET=1 with --host-only")
    record = {"environment": {"gpu": torch.cuda.get_device_name() if CUDA else "none (CPU)",
                              "torch": torch.__version__, "status": fast.status(),
                              "positions_kernel": {name: getattr(kernels, name) for name in
                                                   (*KNOBS, "MAX_STEPS", "FAST_LAUNCH")},
                              "threads": torch.get_num_threads(),
                              "load": os.getloadavg()[0]},
              "host": [], "kernel": []}

    def save():
        _atomic.write_text(args.out, json.dumps(record, indent=1))

    host_rows(record, save)
    if not args.host_only:
        kernel_rows(record, save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
