"""Where the time of a RoPE call goes on a GPU, and which launch shape the positions kernel wants.

Two questions ``scripts/gpu_check.py`` raises and cannot answer on its own:

- ``kernel``: the GPU time of the Triton kernels alone (CUDA-graph replays, so host overhead
  is out), against a copy of the same bytes: the table kernel (cos/sin read from memory)
  and the positions kernel (angles computed in the kernel) at several launch shapes
  (``POSITION_TILE`` angles per program, about ``TARGET_PROGRAMS`` programs, warps).
- ``host``: host µs per call, split into rope_lab's own Python (the launch replaced by a
  no-op), the bare Triton launch with arguments prepared, the whole call, and Liger's call
  for q and k together when liger-kernel is installed.

Run on a GPU machine from the repository root (see scripts/gpu_check.py for the wheels):

    python3 scripts/gpu_tune.py --out $OUT/gpu_tune.json

About a minute on an H200. Writes its JSON after every row and records failures in place.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import rope_lab as rl  # noqa: E402
from rope_lab import _triton_rope as kernels  # noqa: E402
from rope_lab import fast  # noqa: E402

SHAPES = (("train bf16", (8, 32, 4096, 128), torch.bfloat16),
          ("prefill bf16", (1, 32, 8192, 128), torch.bfloat16),
          ("train fp32", (8, 32, 4096, 128), torch.float32),
          ("decode bf16", (64, 32, 1, 128), torch.bfloat16),
          ("small bf16", (1, 8, 512, 64), torch.bfloat16))
# (angles per program, target programs, warps); a huge target means no reuse across heads
NO_REUSE = 1 << 40
CONFIGS = ((2048, 2048, 4), (2048, NO_REUSE, 4), (4096, NO_REUSE, 4), (4096, 2048, 4),
           (4096, NO_REUSE, 8), (1024, NO_REUSE, 4))


def gpu_us(fn) -> float:
    """GPU µs per call from CUDA-graph replays (no host overhead)."""
    from triton.testing import do_bench_cudagraph
    return 1000 * do_bench_cudagraph(fn, rep=20)


def host_us(fn, calls: int = 2000) -> float:
    """Host µs per call, the GPU kept busy enough not to throttle the loop."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for index in range(calls):
        fn()
        if index % 200 == 199:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def kernel_rows(record, save):
    theta_cache = {}
    for name, shape, dtype in SHAPES:
        record["kernel"].append(kernel_row(name, shape, dtype, theta_cache))
        save()


def kernel_row(name, shape, dtype, theta_cache):
    x = torch.randn(shape, device="cuda", dtype=dtype)
    out = torch.empty_like(x)
    ids = torch.arange(shape[-2], device="cuda")
    if shape[-1] not in theta_cache:
        theta_cache[shape[-1]] = rl.inv_freq(shape[-1], device="cuda")
    theta = theta_cache[shape[-1]]
    row = {"case": name, "shape": list(shape), "dtype": str(dtype).replace("torch.", "")}
    try:
        row["copy"] = gpu_us(lambda: out.copy_(x))
        angles = ids.float()[:, None] * theta
        cos, sin = angles.cos(), angles.sin()
        row["table kernel"] = gpu_us(lambda: kernels.rotate(x, cos, sin, "half", out))
        saved = (kernels.POSITION_TILE, kernels.TARGET_PROGRAMS, kernels.POSITION_WARPS)
        for tile, programs, warps in CONFIGS:
            label = (f"positions kernel tile {tile}, "
                     f"{'no reuse' if programs == NO_REUSE else f'{programs} programs'}, "
                     f"{warps} warps")
            try:
                (kernels.POSITION_TILE, kernels.TARGET_PROGRAMS,
                 kernels.POSITION_WARPS) = tile, programs, warps
                plan = kernels.plan_positions(x, ids, theta, out)
                row[label] = gpu_us(
                    lambda plan=plan: kernels.rotate_positions(x, ids, theta, "half", out, plan))
            except Exception as error:  # a config that does not compile is a finding
                row[label] = f"{type(error).__name__}: {str(error)[:200]}"
            finally:
                (kernels.POSITION_TILE, kernels.TARGET_PROGRAMS,
                 kernels.POSITION_WARPS) = saved
        row["apply_rope(x, ids), GPU time"] = gpu_us(lambda: rl.apply_rope(x, ids))
        row["apply_rope(x), GPU time"] = gpu_us(lambda: rl.apply_rope(x))
    except Exception:
        row["error"] = traceback.format_exc()[-800:]
    print(name, {k: (round(v / row["copy"], 2) if isinstance(v, float) and row.get("copy")
                     else v) for k, v in row.items() if k not in ("shape", "dtype", "case")},
          flush=True)
    return row


class _NoLaunch:
    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


def host_rows(record, save):
    for shape, dtype in (((1, 8, 1, 64), torch.bfloat16), ((64, 32, 1, 128), torch.bfloat16)):
        record["host"].append(host_row(shape, dtype))
        save()


def host_row(shape, dtype):
    q = torch.randn(shape, device="cuda", dtype=dtype)
    k = torch.randn(shape, device="cuda", dtype=dtype)
    ids = torch.randint(0, 4096, (shape[0], 1, 1), device="cuda")
    theta = rl.inv_freq(shape[-1], device="cuda")
    out = torch.empty_like(q)
    row = {"shape": list(shape), "dtype": str(dtype).replace("torch.", "")}
    try:
        row["apply_rope(q, ids)"] = host_us(lambda: rl.apply_rope(q, ids))
        row["apply_rope(q)"] = host_us(lambda: rl.apply_rope(q))
        plan = kernels.plan_positions(q, ids, theta, out)
        row["launch only (plan ready)"] = host_us(
            lambda: kernels.rotate_positions(q, ids, theta, "half", out, plan))
        row["torch.empty_like only"] = host_us(lambda: torch.empty_like(q))
        launch = kernels._rope_positions_kernel
        kernels._rope_positions_kernel = _NoLaunch()
        try:
            row["rope_lab Python, launch stubbed"] = host_us(lambda: rl.apply_rope(q, ids))
        finally:
            kernels._rope_positions_kernel = launch
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
    args = parser.parse_args()
    record = {"environment": {"gpu": torch.cuda.get_device_name(),
                              "torch": torch.__version__, "status": fast.status()},
              "host": [], "kernel": []}

    def save():
        Path(args.out).write_text(json.dumps(record, indent=1))

    host_rows(record, save)
    kernel_rows(record, save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
