"""RoPE as one Triton kernel. Imported only by :mod:`rope_lab.fast`.

Two kernels, each one read of x and one write of out:

- :func:`rotate_positions` (what ``apply_rope`` runs on CUDA for float32 angles): each
  program loads the positions of a block of rows (one row = one token of one head) and θ,
  computes the angles, their cos and sin in registers, then rotates those rows for a run of
  heads (or whatever dim the positions do not vary along), so each angle is computed once per
  run instead of once per head. No cos/sin table, no host work that depends on values: one
  launch, capturable in a CUDA graph.
- :func:`rotate` rotates by given cos/sin tables (float64 angles; the backward pass of the
  autograd function in :mod:`rope_lab.fast`).

Any memory order works: the leading dims of x, out and the positions or tables (broadcast to
x's leading dims, stride 0 where they repeat) are folded into three
(:func:`rope_lab._strides.fold`), and the kernels take every tensor's strides, the feature
stride included. So per-batch positions, a transposed ``(batch, seq, heads, dim)`` view and
partial rotary need no copy. x and out may be float16, bfloat16, float32 (or float64 for the
table kernel); the rotation is computed in float32 (float64) and rounded once.

The angle rule is :func:`rope_lab.rope._cos_sin_table`'s: m·θ_i formed exactly in float64,
rounded to float32 below 2^24 (the float32 product, transformers' numbers) and reduced
modulo 2π first at or beyond. cos and sin are computed here, not by ``tl.cos``/``tl.sin``
(which lower to the GPU's approximate instructions, inaccurate for large angles) nor by
libdevice (which Triton's interpreter cannot run): the angle is reduced to [−π/4, π/4] in
float64 and two short float32 polynomials (Cephes' ``sinf``/``cosf``) finish the job, within
about one float32 ulp at any angle.

Where it runs: CUDA tensors; or CPU tensors when ``TRITON_INTERPRET=1`` was set before this
module was imported (Triton's interpreter runs the same kernels with NumPy, slowly: for tests).
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

# Constants for the argument reduction. Each is exactly a float32 number, so that it means
# the same in any arithmetic a compiler might pick; two pieces where float64 accuracy counts.
# π/2 = _PIO2_HI + _PIO2_LO1 + _PIO2_LO2 to about 1e-22; _PIO2_HI has 22 significant bits,
# so k·_PIO2_HI is exact for every quadrant count k below 2^31.
_PIO2_HI = tl.constexpr(1.570796012878418)
_PIO2_LO1 = tl.constexpr(3.1391647326017846e-07)
_PIO2_LO2 = tl.constexpr(5.390302953474238e-15)
_TWO_OVER_PI_HI = tl.constexpr(0.6366197466850281)
_TWO_OVER_PI_LO = tl.constexpr(2.5682552973194106e-08)
# Cephes sinf/cosf on [−π/4, π/4]: below one float32 ulp there.
_S1 = tl.constexpr(-0.16666655242443085)
_S2 = tl.constexpr(0.008332161232829094)
_S3 = tl.constexpr(-0.00019515295571181923)
_C1 = tl.constexpr(0.04166664555668831)
_C2 = tl.constexpr(-0.0013887316454201937)
_C3 = tl.constexpr(2.44331567955669e-05)
# float32 holds every integer up to 2^24 (rope_lab._validate.FLOAT32_EXACT_LIMIT)
_EXACT_LIMIT = tl.constexpr(16777216.0)


@triton.jit
def _cos_sin(angle):
    """float32 cos and sin of float64 angles: reduce by k·π/2 in float64, then polynomials."""
    k = tl.floor(angle * _TWO_OVER_PI_HI + angle * _TWO_OVER_PI_LO + 0.5)
    r = ((angle - k * _PIO2_HI) - k * _PIO2_LO1) - k * _PIO2_LO2
    r_hi = r.to(tl.float32)
    r_lo = (r - r_hi.to(tl.float64)).to(tl.float32)  # what float32 r_hi leaves out
    z = r_hi * r_hi
    # sin(r_hi + r_lo) ≈ sin r_hi + r_lo; cos(r_hi + r_lo) ≈ cos r_hi − r_hi·r_lo
    sin_r = r_hi + (r_lo + r_hi * z * ((_S3 * z + _S2) * z + _S1))
    cos_r = 1.0 + ((z * z * ((_C3 * z + _C2) * z + _C1) - 0.5 * z) - r_hi * r_lo)
    quadrant = (k - 4.0 * tl.floor(k * 0.25)).to(tl.int32)  # k mod 4, also for negative k
    odd = (quadrant & 1) == 1
    cos = tl.where(odd, sin_r, cos_r)
    sin = tl.where(odd, cos_r, sin_r)
    cos = tl.where((quadrant == 1) | (quadrant == 2), -cos, cos)
    sin = tl.where(quadrant >= 2, -sin, sin)
    return cos, sin


# Sizes and position strides vary from call to call; compiling a variant for each value
# that happens to be 1 or a multiple of 16 would only add compiles. (x's and out's strides
# keep Triton's specialization: unit and aligned strides give vector loads.)
@triton.jit(do_not_specialize=["n_rows", "size_1", "size_2", "n_reuse", "reuse_chunk",
                               "pos_0", "pos_1", "pos_2"])
def _rope_positions_kernel(
    x_ptr, out_ptr, pos_ptr, theta_ptr,
    n_rows, size_1, size_2, n_reuse, reuse_chunk,
    x_0, x_1, x_2, x_r, x_f, out_0, out_1, out_2, out_r, out_f, pos_0, pos_1, pos_2,
    HALF: tl.constexpr, BLOCK_HALF: tl.constexpr, BLOCK_ROWS: tl.constexpr,
    INTERLEAVED: tl.constexpr, FROM_INDEX: tl.constexpr, NEGATE: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    pairs = tl.arange(0, BLOCK_HALF)
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (pairs[None, :] < HALF)
    # Row r of the folded (size_0, size_1, size_2) leading dims has index (i0, i1, i2).
    i2 = rows % size_2
    i1 = (rows // size_2) % size_1
    i0 = rows // (size_2 * size_1)
    where = i0 * pos_0 + i1 * pos_1 + i2 * pos_2
    if FROM_INDEX:  # default positions 0 … seq − 1: the offset along seq is the position
        m = where.to(tl.float64)
    else:
        m = tl.load(pos_ptr + where, mask=row_ok, other=0).to(tl.float64)
    theta = tl.load(theta_ptr + pairs, mask=pairs < HALF, other=0.0).to(tl.float64)
    product = m[:, None] * theta[None, :]  # exact: |m| < 2^29, θ_i a float32
    big = tl.abs(m) >= _EXACT_LIMIT
    angle = tl.where(big[:, None], product, product.to(tl.float32).to(tl.float64))
    cos, sin = _cos_sin(angle)
    if NEGATE:  # the backward pass: the rotation by −m·θ_i
        sin = -sin
    if INTERLEAVED:
        first = 2 * pairs  # pairs (2i, 2i + 1)
        second = first + 1
    else:
        first = pairs  # pairs (i, i + r/2)
        second = pairs + HALF
    x_rows = x_ptr + (i0 * x_0 + i1 * x_1 + i2 * x_2)[:, None]
    out_rows = out_ptr + (i0 * out_0 + i1 * out_1 + i2 * out_2)[:, None]
    dtype = out_ptr.dtype.element_ty
    start = tl.program_id(1).to(tl.int64) * reuse_chunk
    # The same angles for reuse_chunk steps along the dim the positions do not vary along.
    for step in range(0, reuse_chunk):
        r = start + step
        ok = mask & (r < n_reuse)
        x_at = x_rows + r * x_r
        a = tl.load(x_at + first[None, :] * x_f, mask=ok, other=0.0).to(tl.float32)
        b = tl.load(x_at + second[None, :] * x_f, mask=ok, other=0.0).to(tl.float32)
        out_at = out_rows + r * out_r
        tl.store(out_at + first[None, :] * out_f, (a * cos - b * sin).to(dtype), mask=ok)
        tl.store(out_at + second[None, :] * out_f, (a * sin + b * cos).to(dtype), mask=ok)


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
# The positions kernel computes in float32: float64 x takes the tables.
POSITION_X_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
POSITION_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                   torch.float16, torch.bfloat16, torch.float32)
# The positions kernel gives each program about this many (row, pair) angles, and splits the
# reuse dim among programs until there are about TARGET_PROGRAMS of them (a few per SM).
POSITION_TILE = 2048
TARGET_PROGRAMS = 2048
POSITION_WARPS = 4  # warps per program of the positions kernel


def _device_problem(device) -> str | None:
    if device.type != "cuda" and not (device.type == "cpu" and INTERPRETED):
        return (f"it runs CUDA tensors; x is on {device.type} (TRITON_INTERPRET=1, set before "
                "rope_lab is imported, runs Triton's interpreter on CPU tensors)")
    return None


def problem(x, cos, sin, out) -> str | None:
    """Why the table kernel cannot rotate these tensors, or None when it can."""
    if x.dtype not in X_DTYPES or out.dtype not in X_DTYPES:
        return f"it handles float16, bfloat16, float32 and float64 x; got {x.dtype}"
    if not (cos.dtype == sin.dtype and cos.dtype in (torch.float32, torch.float64)):
        return f"it needs float32 or float64 cos/sin of one dtype; got {cos.dtype}, {sin.dtype}"
    devices = {t.device for t in (x, cos, sin, out)}
    if len(devices) != 1:
        return f"x, out and the angle tables must share a device; got {sorted(map(str, devices))}"
    reason = _device_problem(next(iter(devices)))
    if reason is not None:
        return reason
    if any(t.stride(-1) != 1 and t.shape[-1] != 1 for t in (cos, sin)):
        return "it needs cos/sin with unit stride along the pairs"
    if _fold(x, cos, sin, out) is None:
        return (f"x's leading dims {tuple(x.shape[:-1])} with strides {x.stride()[:-1]} do not "
                "fold into three")
    return None


def _fold(x, cos, sin, out):
    batch = x.shape[:-1]
    return _strides.fold(batch, [x.stride()[:-1], out.stride()[:-1],
                                 _strides.broadcast_strides(cos, batch),
                                 _strides.broadcast_strides(sin, batch)])


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


def plan_positions(x, positions, theta, out):
    """How the positions kernel covers x: a tuple for :func:`rotate_positions`, or a str
    saying why it cannot (x, out: the rotated features; positions: None for 0 … seq − 1,
    else broadcasting to x's leading dims; theta: float32 ``(r/2,)``)."""
    if x.dtype not in POSITION_X_DTYPES or out.dtype not in POSITION_X_DTYPES:
        return f"it computes float32 angles for float16, bfloat16 and float32 x; got {x.dtype}"
    if theta.dtype != torch.float32 or theta.stride(-1) != 1:
        return f"it needs contiguous float32 θ; got {theta.dtype}"
    if positions is not None and positions.dtype not in POSITION_DTYPES:
        return f"it reads integer or 16/32-bit float positions; got {positions.dtype}"
    device = x.device
    if out.device != device or theta.device != device or (
            positions is not None and positions.device != device):
        return "x, out, θ and the positions must share a device"
    reason = _device_problem(device)
    if reason is not None:
        return reason
    batch = x.shape[:-1]
    if positions is None:  # m = the index along seq: a virtual (seq,) tensor of stride 1
        position_strides = [0] * (len(batch) - 1) + [1]
    else:
        position_strides = _strides.broadcast_strides(positions, batch, trailing=0)
    folded = _strides.fold(batch, [x.stride()[:-1], out.stride()[:-1], position_strides])
    if folded is None:
        return (f"x's leading dims {tuple(batch)} with strides {x.stride()[:-1]} do not fold "
                "into three")
    sizes, (x_s, out_s, pos_s) = folded
    # The reuse dim: the largest folded dim along which the positions do not change (heads,
    # usually); its steps share one computation of the angles.
    reuse = max((k for k in range(3) if pos_s[k] == 0 and sizes[k] > 1),
                key=lambda k: sizes[k], default=None)
    n_reuse, x_r, out_r = 1, 0, 0
    if reuse is not None:
        n_reuse, x_r, out_r = sizes[reuse], x_s[reuse], out_s[reuse]
        sizes[reuse], x_s[reuse], out_s[reuse] = 1, 0, 0
    return sizes, x_s, out_s, pos_s, n_reuse, x_r, out_r


def rotate_positions(x, positions, theta, layout, out, plan, *, negate=False) -> None:
    """Write RoPE of x into out with one launch, the angles m·θ_i computed in the kernel.

    plan: from :func:`plan_positions`. negate: rotate by −m·θ_i (the backward pass)."""
    sizes, x_s, out_s, pos_s, n_reuse, x_r, out_r = plan
    rows = sizes[0] * sizes[1] * sizes[2]
    if rows == 0 or n_reuse == 0:
        return
    half = theta.shape[0]
    block_half = triton.next_power_of_2(half)
    block_rows = max(1, min(64, POSITION_TILE // block_half))
    row_blocks = triton.cdiv(rows, block_rows)
    chunk = max(1, min(n_reuse, row_blocks * n_reuse // TARGET_PROGRAMS))
    grid = (row_blocks, triton.cdiv(n_reuse, chunk))
    _rope_positions_kernel[grid](
        x, out, theta if positions is None else positions, theta,
        rows, sizes[1], sizes[2], n_reuse, chunk,
        *x_s, x_r, x.stride(-1), *out_s, out_r, out.stride(-1), *pos_s,
        HALF=half, BLOCK_HALF=block_half, BLOCK_ROWS=block_rows,
        INTERLEAVED=layout == "interleaved", FROM_INDEX=positions is None, NEGATE=negate,
        num_warps=POSITION_WARPS,
    )
