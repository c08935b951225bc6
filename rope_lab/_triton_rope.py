"""RoPE as one Triton kernel. Imported only by :mod:`rope_lab.fast`.

Each program loads BLOCK_ROWS rows of x (one row = one token of one head), the cos/sin rows
of their positions, rotates every pair in registers and stores the result: one read of x,
one write of out, cos/sin served from L2. This is what reaches copy bandwidth on a GPU.

Any memory order works: the leading dims of x, out, cos and sin (cos/sin broadcast to x's
leading dims, stride 0 where they repeat) are folded into three
(:func:`rope_lab._strides.fold`), and the kernel takes every tensor's strides, the feature
stride included. So per-batch positions, a transposed ``(batch, seq, heads, dim)`` view and
partial rotary need no copy. x and out may be float16, bfloat16, float32 or float64; the
rotation is computed in the dtype of cos/sin (float32, or float64) and rounded once.

Where it runs: CUDA tensors; or CPU tensors when ``TRITON_INTERPRET=1`` was set before this
module was imported (Triton's interpreter runs the same kernel with NumPy, slowly: for tests).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from rope_lab import _strides

# Triton reads TRITON_INTERPRET when a kernel is defined (below), so this is the mode for the
# life of the process.
INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def _rope_kernel(
    x_ptr, out_ptr, cos_ptr, sin_ptr,
    n_rows, size_1, size_2,
    x_0, x_1, x_2, x_f, out_0, out_1, out_2, out_f,
    cos_0, cos_1, cos_2, sin_0, sin_1, sin_2,
    HALF: tl.constexpr, BLOCK_HALF: tl.constexpr, BLOCK_ROWS: tl.constexpr,
    INTERLEAVED: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    pairs = tl.arange(0, BLOCK_HALF)
    mask = (rows[:, None] < n_rows) & (pairs[None, :] < HALF)
    # Row r of the folded (size_0, size_1, size_2) leading dims has index (i0, i1, i2).
    i2 = rows % size_2
    i1 = (rows // size_2) % size_1
    i0 = rows // (size_2 * size_1)
    cos_rows = cos_ptr + (i0 * cos_0 + i1 * cos_1 + i2 * cos_2)[:, None]
    sin_rows = sin_ptr + (i0 * sin_0 + i1 * sin_1 + i2 * sin_2)[:, None]
    cos = tl.load(cos_rows + pairs[None, :], mask=mask, other=0.0)
    sin = tl.load(sin_rows + pairs[None, :], mask=mask, other=0.0)
    if INTERLEAVED:
        first = 2 * pairs  # pairs (2i, 2i + 1)
        second = first + 1
    else:
        first = pairs  # pairs (i, i + r/2)
        second = pairs + HALF
    x_rows = x_ptr + (i0 * x_0 + i1 * x_1 + i2 * x_2)[:, None]
    a = tl.load(x_rows + first[None, :] * x_f, mask=mask, other=0.0).to(cos.dtype)
    b = tl.load(x_rows + second[None, :] * x_f, mask=mask, other=0.0).to(cos.dtype)
    out_rows = out_ptr + (i0 * out_0 + i1 * out_1 + i2 * out_2)[:, None]
    dtype = out_ptr.dtype.element_ty
    tl.store(out_rows + first[None, :] * out_f, (a * cos - b * sin).to(dtype), mask=mask)
    tl.store(out_rows + second[None, :] * out_f, (a * sin + b * cos).to(dtype), mask=mask)


X_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def problem(x, cos, sin, out) -> str | None:
    """Why the kernel cannot rotate these tensors, or None when it can."""
    if x.dtype not in X_DTYPES or out.dtype not in X_DTYPES:
        return f"it handles float16, bfloat16, float32 and float64 x; got {x.dtype}"
    if not (cos.dtype == sin.dtype and cos.dtype in (torch.float32, torch.float64)):
        return f"it needs float32 or float64 cos/sin of one dtype; got {cos.dtype}, {sin.dtype}"
    devices = {t.device for t in (x, cos, sin, out)}
    if len(devices) != 1:
        return f"x, out and the angle tables must share a device; got {sorted(map(str, devices))}"
    device = next(iter(devices))
    if device.type != "cuda" and not (device.type == "cpu" and INTERPRETED):
        return (f"it runs CUDA tensors; x is on {device.type} (TRITON_INTERPRET=1, set before "
                "rope_lab is imported, runs Triton's interpreter on CPU tensors)")
    if any(t.stride(-1) != 1 and t.shape[-1] != 1 for t in (cos, sin)):
        return "it needs cos/sin with unit stride along the pairs"
    if _fold(x, cos, sin, out) is None:
        return (f"x's leading dims {tuple(x.shape[:-1])} with strides {x.stride()[:-1]} do not "
                "fold into three")
    return None


def _fold(x, cos, sin, out):
    batch = x.shape[:-1]
    half = cos.shape[-1]
    tensors = (x, out, cos.expand(*batch, half), sin.expand(*batch, half))
    return _strides.fold(batch, [t.stride()[:-1] for t in tensors])


def rotate(x, cos, sin, layout, out) -> None:
    """Write RoPE of x into out with one kernel launch (see :func:`problem` for the inputs)."""
    rows = x.shape[:-1].numel()
    if rows == 0:
        return
    (_, size_1, size_2), (x_s, out_s, cos_s, sin_s) = _fold(x, cos, sin, out)
    half = cos.shape[-1]
    block_half = triton.next_power_of_2(half)
    block_rows = max(1, min(64, 4096 // block_half))
    grid = (triton.cdiv(rows, block_rows),)
    _rope_kernel[grid](
        x, out, cos, sin, rows, size_1, size_2,
        *x_s, x.stride(-1), *out_s, out.stride(-1), *cos_s, *sin_s,
        HALF=half, BLOCK_HALF=block_half, BLOCK_ROWS=block_rows,
        INTERLEAVED=layout == "interleaved", num_warps=4,
    )
