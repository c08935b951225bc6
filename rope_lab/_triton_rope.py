"""RoPE as one Triton kernel (CUDA). Imported only by :mod:`rope_lab.fast`, only on CUDA.

Each program loads BLOCK_ROWS rows of x (one row = one token of one head), the cos/sin rows
of their positions, rotates every pair in registers and stores the result: one read of x,
one write of out, cos/sin served from L2. This is what reaches copy bandwidth on a GPU.

Handled here: x (and out) whose leading dims flatten to rows with unit feature stride,
x in float16, bfloat16 or float32, cos/sin float32 of shape ``(seq, r/2)`` or ``(1, r/2)``
(after dropping leading 1s). Anything else returns False and the eager path runs.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rope_kernel(
    x_ptr, out_ptr, cos_ptr, sin_ptr,
    n_rows, seq_len, x_row_stride, out_row_stride, angle_row_stride,
    HALF: tl.constexpr, BLOCK_HALF: tl.constexpr, BLOCK_ROWS: tl.constexpr,
    INTERLEAVED: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    pairs = tl.arange(0, BLOCK_HALF)
    mask = (rows[:, None] < n_rows) & (pairs[None, :] < HALF)
    # Row r of the flattened (..., seq) holds token r mod seq (seq_len 1: one shared angle).
    positions = rows % seq_len
    angle_offsets = positions[:, None] * angle_row_stride + pairs[None, :]
    cos = tl.load(cos_ptr + angle_offsets, mask=mask, other=0.0)
    sin = tl.load(sin_ptr + angle_offsets, mask=mask, other=0.0)
    if INTERLEAVED:
        first = 2 * pairs  # pairs (2i, 2i + 1)
        second = first + 1
    else:
        first = pairs  # pairs (i, i + d/2)
        second = pairs + HALF
    x_rows = x_ptr + rows[:, None].to(tl.int64) * x_row_stride
    a = tl.load(x_rows + first[None, :], mask=mask, other=0.0).to(tl.float32)
    b = tl.load(x_rows + second[None, :], mask=mask, other=0.0).to(tl.float32)
    out_rows = out_ptr + rows[:, None].to(tl.int64) * out_row_stride
    dtype = out_ptr.dtype.element_ty
    tl.store(out_rows + first[None, :], (a * cos - b * sin).to(dtype), mask=mask)
    tl.store(out_rows + second[None, :], (a * sin + b * cos).to(dtype), mask=mask)


def _row_stride(t: torch.Tensor) -> int | None:
    """The stride between rows if t's leading dims flatten to rows of unit-stride features."""
    if t.stride(-1) != 1:
        return None
    dims = [(n, s) for n, s in zip(t.shape[:-1], t.stride()[:-1], strict=True) if n != 1]
    if not dims:
        return t.shape[-1]
    for (_, outer), (inner_size, inner) in zip(dims, dims[1:], strict=False):
        if outer != inner * inner_size:
            return None
    return dims[-1][1]


def _angle_table(cos: torch.Tensor, seq: int) -> torch.Tensor | None:
    """cos/sin as a 2-D (L, r/2) table with L = seq or 1, or None if it is not one."""
    table = cos.reshape(cos.shape[-2:]) if all(n == 1 for n in cos.shape[:-2]) else None
    if table is None or table.shape[0] not in (seq, 1) or table.stride(-1) != 1:
        return None
    return table


def rotate(x, cos, sin, layout, out) -> bool:
    """Write RoPE of x into out with one kernel launch; False when the inputs do not fit."""
    if (
        x.dtype not in (torch.float16, torch.bfloat16, torch.float32)
        or cos.dtype != torch.float32
        or x.shape[:-1].numel() == 0
    ):
        return False
    x_stride, out_stride = _row_stride(x), _row_stride(out)
    cos_table, sin_table = _angle_table(cos, x.shape[-2]), _angle_table(sin, x.shape[-2])
    if None in (x_stride, out_stride, cos_table, sin_table):
        return False
    if cos_table.stride(0) != sin_table.stride(0):
        sin_table = sin_table.contiguous()
        cos_table = cos_table.contiguous()
    half = cos.shape[-1]
    rows = x.shape[:-1].numel()
    block_half = triton.next_power_of_2(half)
    block_rows = max(1, min(64, 4096 // block_half))
    grid = (triton.cdiv(rows, block_rows),)
    _rope_kernel[grid](
        x, out, cos_table, sin_table,
        rows, cos_table.shape[0], x_stride, out_stride, cos_table.stride(0),
        HALF=half, BLOCK_HALF=block_half, BLOCK_ROWS=block_rows,
        INTERLEAVED=layout == "interleaved", num_warps=4,
    )
    return True
