"""RoPE as one Triton kernel. Imported only by :mod:`rope_lab.fast`.

Three kernels, each one read of x and one write of out:

- :func:`rotate_positions` (what ``apply_rope`` runs on CUDA for float32 angles): each
  program loads the positions of a few rows (one row = one token of one head) and θ, and
  computes the angles and their cos and sin for that small tile of rows × pairs (a few per
  thread: the float64 argument reduction needs registers, and a big tile spills). Then it
  rotates those rows for a run of heads (or whatever dim the positions do not vary along),
  several heads per load with cos and sin broadcast over them, so each angle is computed
  once per run instead of once per head and each load moves many bytes. No cos/sin table,
  no host work that depends on values: one launch, capturable in a CUDA graph.
- :func:`rotate_pair`: the same for q and k in one launch (``RotaryEmbedding.forward``).
- :func:`rotate` rotates by given cos/sin tables (float64 angles; the backward pass of the
  autograd function in :mod:`rope_lab.fast`).

A launch is planned once per shape, strides and dtypes (:class:`Launch`); after Triton has
compiled it, later calls skip Triton's per-call Python and hand the same arguments to its
launcher.

Any memory order works: the leading dims of x, out and the positions or tables (broadcast to
x's leading dims, stride 0 where they repeat) are folded into three
(:func:`rope_lab._strides.fold`), and the kernels take every tensor's strides, the feature
stride included. So per-batch positions, a transposed ``(batch, seq, heads, dim)`` view and
partial rotary need no copy. x and out may be float16, bfloat16, float32 (or float64 for the
table kernel); the rotation is computed in float32 (float64) and rounded once.

The angle rule is :func:`rope_lab._angles.cos_sin_table`'s: m·θ_i formed exactly in float64,
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


@triton.jit
def _angle_tile(pos_ptr, theta_ptr, row_block, n_rows, size_1, size_2, pos_0, pos_1, pos_2,
                HALF: tl.constexpr, BLOCK_HALF: tl.constexpr, ROWS: tl.constexpr,
                FROM_INDEX: tl.constexpr, NEGATE: tl.constexpr):
    """cos and sin of m·θ_i for ROWS rows × the pairs, shaped (1, ROWS, BLOCK_HALF), with
    the rows' folded indices (i0, i1, i2), their mask and the pair indices."""
    rows = row_block.to(tl.int64) * ROWS + tl.arange(0, ROWS)[None, :, None]
    pairs = tl.arange(0, BLOCK_HALF)[None, None, :]
    row_ok = rows < n_rows
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
    product = m * theta  # exact: |m| < 2^29, θ_i a float32
    big = tl.abs(m) >= _EXACT_LIMIT
    angle = tl.where(big, product, product.to(tl.float32).to(tl.float64))
    cos, sin = _cos_sin(angle)
    if NEGATE:  # the backward pass: the rotation by −m·θ_i
        sin = -sin
    return cos, sin, i0, i1, i2, row_ok, pairs


@triton.jit
def _rotate_heads(x_ptr, out_ptr, cos, sin, i0, i1, i2, row_ok, pairs, head_block, n_reuse,
                  x_0, x_1, x_2, x_r, x_f, out_0, out_1, out_2, out_r, out_f,
                  HALF: tl.constexpr, BLOCK_HALF: tl.constexpr, ROWS: tl.constexpr,
                  HEADS: tl.constexpr, STEPS: tl.constexpr, INTERLEAVED: tl.constexpr):
    """Rotate the tile's rows at HEADS × STEPS steps of the reuse dim, HEADS per load: each
    load is (HEADS, ROWS, BLOCK_HALF) pairs, cos and sin broadcast over the heads."""
    x_rows = x_ptr + (i0 * x_0 + i1 * x_1 + i2 * x_2)
    out_rows = out_ptr + (i0 * out_0 + i1 * out_1 + i2 * out_2)
    dtype = out_ptr.dtype.element_ty
    ok_pairs = row_ok & (pairs < HALF)
    features = tl.arange(0, 2 * BLOCK_HALF)[None, None, :]
    ok_features = row_ok & (features < 2 * HALF)
    heads = head_block.to(tl.int64) * (HEADS * STEPS) + tl.arange(0, HEADS)[:, None, None]
    for step in range(STEPS):  # a constexpr bound: every Triton's interpreter runs it
        r = heads + step * HEADS
        x_at = x_rows + r * x_r
        out_at = out_rows + r * out_r
        if INTERLEAVED:  # pairs (2i, 2i + 1): load whole rows (vector loads), split in pairs
            ok = ok_features & (r < n_reuse)
            xs = tl.load(x_at + features * x_f, mask=ok, other=0.0).to(tl.float32)
            a, b = tl.split(tl.reshape(xs, (HEADS, ROWS, BLOCK_HALF, 2)))
            rotated = tl.reshape(tl.join(a * cos - b * sin, a * sin + b * cos),
                                 (HEADS, ROWS, 2 * BLOCK_HALF))
            tl.store(out_at + features * out_f, rotated.to(dtype), mask=ok)
        else:  # pairs (i, i + r/2)
            ok = ok_pairs & (r < n_reuse)
            a = tl.load(x_at + pairs * x_f, mask=ok, other=0.0).to(tl.float32)
            b = tl.load(x_at + (pairs + HALF) * x_f, mask=ok, other=0.0).to(tl.float32)
            tl.store(out_at + pairs * out_f, (a * cos - b * sin).to(dtype), mask=ok)
            tl.store(out_at + (pairs + HALF) * out_f, (a * sin + b * cos).to(dtype), mask=ok)


# Sizes and position strides vary from call to call; compiling a variant for each value
# that happens to be 1 or a multiple of 16 would only add compiles. (x's and out's strides
# keep Triton's specialization: unit and aligned strides give vector loads.)
@triton.jit(do_not_specialize=["n_rows", "size_1", "size_2", "n_reuse",
                               "pos_0", "pos_1", "pos_2"])
def _rope_positions_kernel(
    x_ptr, out_ptr, pos_ptr, theta_ptr,
    n_rows, size_1, size_2, n_reuse,
    x_0, x_1, x_2, x_r, x_f, out_0, out_1, out_2, out_r, out_f, pos_0, pos_1, pos_2,
    HALF: tl.constexpr, BLOCK_HALF: tl.constexpr, ROWS: tl.constexpr, HEADS: tl.constexpr,
    STEPS: tl.constexpr, INTERLEAVED: tl.constexpr, FROM_INDEX: tl.constexpr,
    NEGATE: tl.constexpr,
):
    """Program p: row block p mod (row blocks), head block p div (row blocks). Its angles
    once (a small tile, a few per thread), then HEADS × STEPS heads rotated with them."""
    row_blocks = (n_rows + ROWS - 1) // ROWS
    row_block = tl.program_id(0) % row_blocks
    head_block = tl.program_id(0) // row_blocks
    cos, sin, i0, i1, i2, row_ok, pairs = _angle_tile(
        pos_ptr, theta_ptr, row_block, n_rows, size_1, size_2, pos_0, pos_1, pos_2,
        HALF, BLOCK_HALF, ROWS, FROM_INDEX, NEGATE)
    _rotate_heads(x_ptr, out_ptr, cos, sin, i0, i1, i2, row_ok, pairs, head_block, n_reuse,
                  x_0, x_1, x_2, x_r, x_f, out_0, out_1, out_2, out_r, out_f,
                  HALF, BLOCK_HALF, ROWS, HEADS, STEPS, INTERLEAVED)


@triton.jit(do_not_specialize=["n_rows", "size_1", "size_2", "n_q", "n_k", "q_blocks",
                               "pos_0", "pos_1", "pos_2"])
def _rope_positions_pair_kernel(
    q_ptr, q_out_ptr, k_ptr, k_out_ptr, pos_ptr, theta_ptr,
    n_rows, size_1, size_2, n_q, n_k, q_blocks,
    q_0, q_1, q_2, q_r, q_f, q_out_0, q_out_1, q_out_2, q_out_r, q_out_f,
    k_0, k_1, k_2, k_r, k_f, k_out_0, k_out_1, k_out_2, k_out_r, k_out_f,
    pos_0, pos_1, pos_2,
    HALF: tl.constexpr, BLOCK_HALF: tl.constexpr, ROWS: tl.constexpr, HEADS: tl.constexpr,
    STEPS: tl.constexpr, INTERLEAVED: tl.constexpr, FROM_INDEX: tl.constexpr,
):
    """q and k in one launch (the same positions, rows folded alike, heads may differ as in
    grouped-query attention): head blocks 0 … q_blocks − 1 rotate q, the rest k."""
    row_blocks = (n_rows + ROWS - 1) // ROWS
    row_block = tl.program_id(0) % row_blocks
    head_block = tl.program_id(0) // row_blocks
    cos, sin, i0, i1, i2, row_ok, pairs = _angle_tile(
        pos_ptr, theta_ptr, row_block, n_rows, size_1, size_2, pos_0, pos_1, pos_2,
        HALF, BLOCK_HALF, ROWS, FROM_INDEX, False)
    if head_block < q_blocks:
        _rotate_heads(q_ptr, q_out_ptr, cos, sin, i0, i1, i2, row_ok, pairs, head_block, n_q,
                      q_0, q_1, q_2, q_r, q_f, q_out_0, q_out_1, q_out_2, q_out_r, q_out_f,
                      HALF, BLOCK_HALF, ROWS, HEADS, STEPS, INTERLEAVED)
    else:
        _rotate_heads(k_ptr, k_out_ptr, cos, sin, i0, i1, i2, row_ok, pairs,
                      head_block - q_blocks, n_k,
                      k_0, k_1, k_2, k_r, k_f, k_out_0, k_out_1, k_out_2, k_out_r, k_out_f,
                      HALF, BLOCK_HALF, ROWS, HEADS, STEPS, INTERLEAVED)


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

# The positions kernel's launch shape (see launch_shape). Each program computes the angles of
# at most ANGLES_PER_PROGRAM (row, pair)s, a few per thread: the float64 reduction and the
# polynomials need registers, and big tiles spill (the H200 record's kernel took 255
# registers and spilled at 2048 angles; tests/triton_compile.py checks the planned shapes).
# It then rotates PAIRS_PER_STEP pairs per step (a few heads × its rows × the pairs: 16
# elements of x per thread and load at 4 warps), for up to MAX_STEPS steps, as long as
# about TARGET_PROGRAMS programs remain to spread over the GPU.
ANGLES_PER_PROGRAM = 512
PAIRS_PER_STEP = 2048
MAX_STEPS = 16
TARGET_PROGRAMS = 4096
POSITION_WARPS = 4


def _fast_launch_supported() -> bool:
    """Launch.__call__'s direct launch: Triton ≥ 3.4 (triton.knobs, and the launcher's
    arguments as read in triton/runtime/jit.py of 3.4 … 3.7), compiled kernels only."""
    try:
        version = tuple(int(part) for part in triton.__version__.split(".")[:2])
    except ValueError:
        return False
    return not INTERPRETED and version >= (3, 4) and hasattr(triton, "knobs")


# Off: every launch goes through Triton's own (scripts/gpu_tune.py compares the two).
FAST_LAUNCH = _fast_launch_supported()


class Launch:
    """One kernel launch, ready but for its tensors: ``kernel[grid](*tensors, *ints,
    **constants)``.

    Triton's launch (``JITFunction.run``) spends about 20 µs of Python per call binding
    every argument, deciding again what to specialize (aligned pointers, ints that are 1 or
    multiples of 16), building a cache key and finding the compiled kernel: more than the
    rotation of a decode step takes on the GPU. For a plan all of that is fixed except the
    tensors' alignment, so after Triton's own launch has compiled and returned the kernel for
    an alignment (and current device), later calls hand the same arguments straight to its
    launcher, as Triton's run does and as torch.compile's generated code does.
    """

    __slots__ = ("kernel", "grid", "ints", "constants", "_constexprs", "_compiled")

    def __init__(self, kernel, grid: tuple, ints: tuple, constants: dict):
        self.kernel, self.grid, self.ints, self.constants = kernel, grid, ints, constants
        # The launcher takes every parameter in order, the constexprs too.
        self._constexprs = tuple(constants[name] for name in kernel.arg_names
                                 if name in constants)
        self._compiled: dict = {}

    def __call__(self, *tensors) -> None:
        if not self.grid[0]:
            return
        if not FAST_LAUNCH:
            self.kernel[self.grid](*tensors, *self.ints, **self.constants)
            return
        driver = triton.runtime.driver.active
        device = driver.get_current_device()
        key = (device, *[t.data_ptr() % 16 == 0 for t in tensors])  # Triton's alignment rule
        compiled = self._compiled.get(key)
        if compiled is None:  # Triton's launch: compiles (or finds) and returns the kernel
            compiled = self.kernel[self.grid](*tensors, *self.ints, **self.constants)
            if len(tensors) + len(self.ints) + len(self._constexprs) == len(
                    self.kernel.arg_names) and hasattr(compiled, "packed_metadata"):
                self._compiled[key] = compiled
            return
        arguments = (*tensors, *self.ints, *self._constexprs)
        stream = driver.get_current_stream(device)
        runtime = triton.knobs.runtime
        enter = runtime.launch_enter_hook  # a profiler's (Proton) hooks, as Triton calls them
        metadata = None if enter is None else compiled.launch_metadata(self.grid, stream,
                                                                       *arguments)
        compiled.run(self.grid[0], 1, 1, stream, compiled.function, compiled.packed_metadata,
                     metadata, enter, runtime.launch_exit_hook, *arguments)


def _device_problem(device) -> str | None:
    if device.type != "cuda" and not (device.type == "cpu" and INTERPRETED):
        return (f"it runs CUDA tensors; x is on {device.type} (TRITON_INTERPRET=1, set before "
                "rope_lab is imported, runs Triton's interpreter on CPU tensors)")
    return None


# --- the table kernel ---------------------------------------------------------------------------

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
    plan_tables(x, cos, sin, out, layout)(x, out, cos, sin)


def plan_tables(x, cos, sin, out, layout) -> Launch:
    """The table kernel's launch for these tensors (arguments x, out, cos, sin)."""
    rows = x.shape[:-1].numel()
    (_, size_1, size_2), (x_s, out_s, cos_s, sin_s) = _fold(x, cos, sin, out)
    half = cos.shape[-1]
    block_half = triton.next_power_of_2(half)
    block_rows = max(1, min(64, 4096 // block_half))
    return Launch(
        _rope_kernel, (triton.cdiv(rows, block_rows),),
        (rows, size_1, size_2, *x_s, x.stride(-1), *out_s, out.stride(-1), *cos_s, *sin_s),
        {"HALF": half, "BLOCK_HALF": block_half, "BLOCK_ROWS": block_rows,
         "INTERLEAVED": layout == "interleaved", "num_warps": 4})


# --- the positions kernels --------------------------------------------------------------------

def launch_shape(n_rows: int, n_reuse: int, half: int) -> dict:
    """How the positions kernel covers n_rows rows (distinct positions) × n_reuse steps of
    the reuse dim × half pairs: the tile sizes (BLOCK_HALF, ROWS, HEADS, STEPS) and the
    number of programs."""
    block_half = triton.next_power_of_2(half)
    rows = min(triton.next_power_of_2(n_rows), max(1, ANGLES_PER_PROGRAM // block_half))
    heads = min(triton.next_power_of_2(n_reuse), max(1, PAIRS_PER_STEP // (rows * block_half)))
    row_blocks = triton.cdiv(n_rows, rows)
    head_steps = triton.cdiv(n_reuse, heads)
    steps = 1  # more steps per program while enough programs remain
    while (2 * steps <= min(MAX_STEPS, head_steps)
           and row_blocks * triton.cdiv(head_steps, 2 * steps) >= TARGET_PROGRAMS):
        steps *= 2
    return {"BLOCK_HALF": block_half, "ROWS": rows, "HEADS": heads, "STEPS": steps,
            "programs": row_blocks * triton.cdiv(head_steps, steps)}


# Plans by everything they depend on (shapes, strides, dtypes, devices, layout): a model calls
# with the same few shapes again and again, and planning costs more than the launch's checks.
_plans: dict = {}


def _key(t):
    return None if t is None else (t.shape, t.stride(), t.dtype, t.device)


def _cached(key, plan_it):
    plan = _plans.get(key)
    if plan is None:
        plan = plan_it()
        if len(_plans) >= 256:
            _plans.clear()
        _plans[key] = plan
    return plan


def plan_positions(x, positions, theta, out, layout="half", negate=False):
    """How the positions kernel rotates x into out: a :class:`Launch` for
    :func:`rotate_positions`, or a str saying why it cannot (x, out: the rotated features;
    positions: None for 0 … seq − 1, else broadcasting to x's leading dims; theta: float32
    ``(r/2,)``; negate: rotate by −m·θ_i, the backward pass). Cached."""
    key = (x.shape, x.stride(), x.dtype, x.device, out.stride(), out.dtype, out.device,
           theta.shape, theta.stride(), theta.dtype, theta.device, layout, negate,
           None if positions is None else (positions.shape, positions.stride(),
                                           positions.dtype, positions.device))
    return _cached(key, lambda: _plan_positions(x, positions, theta, out, layout, negate))


def plan_pair(q, k, positions, theta, q_out, k_out, layout="half"):
    """:func:`plan_positions` for q and k in one launch (:func:`rotate_pair`); a str when
    they cannot share one (their rows must fold alike: the same positions for the same
    (batch, seq) rows; the number of heads may differ)."""
    key = ("pair", _key(q), _key(k), q_out.stride(), k_out.stride(), q_out.dtype,
           k_out.dtype, q_out.device, k_out.device, _key(theta), _key(positions), layout)
    return _cached(key, lambda: _plan_pair(q, k, positions, theta, q_out, k_out, layout))


def rotate_positions(x, positions, theta, out, plan: Launch) -> None:
    """Write RoPE of x into out with one launch, the angles m·θ_i computed in the kernel
    (plan: from :func:`plan_positions` for these tensors)."""
    plan(x, out, theta if positions is None else positions, theta)


def rotate_pair(q, k, positions, theta, q_out, k_out, plan: Launch) -> None:
    """Write RoPE of q into q_out and of k into k_out with one launch (plan: from
    :func:`plan_pair`)."""
    plan(q, q_out, k, k_out, theta if positions is None else positions, theta)


def _problem(x, positions, theta, out) -> str | None:
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
    return _device_problem(device)


def _fold_positions(x, positions, out):
    """x's leading dims folded into three with out's and the positions' strides:
    (sizes, x strides, out strides, position strides), or a str."""
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
    return sizes, x_s, out_s, pos_s


def _reuse_dims(sizes, pos_s):
    """The folded dims along which the positions do not change, largest first: a step
    along one of them (heads, usually) reuses the angles."""
    return sorted((k for k in range(3) if pos_s[k] == 0 and sizes[k] > 1),
                  key=lambda k: -sizes[k])


def _take_out(folded, reuse):
    """(sizes, x strides, out strides, position strides) with dim ``reuse`` (or none)
    taken out: then also n_reuse and x's and out's strides along it."""
    sizes, x_s, out_s, pos_s = (list(part) for part in folded)
    if reuse is None:
        return sizes, x_s, out_s, pos_s, 1, 0, 0
    n_reuse, x_r, out_r = sizes[reuse], x_s[reuse], out_s[reuse]
    sizes[reuse], x_s[reuse], out_s[reuse] = 1, 0, 0
    return sizes, x_s, out_s, pos_s, n_reuse, x_r, out_r


def _constants(shape, half, layout, positions):
    return {"BLOCK_HALF": shape["BLOCK_HALF"], "ROWS": shape["ROWS"],
            "HEADS": shape["HEADS"], "STEPS": shape["STEPS"], "HALF": half,
            "INTERLEAVED": layout == "interleaved", "FROM_INDEX": positions is None,
            "num_warps": POSITION_WARPS}


def _plan_positions(x, positions, theta, out, layout, negate):
    reason = _problem(x, positions, theta, out)
    if reason is not None:
        return reason
    folded = _fold_positions(x, positions, out)
    if isinstance(folded, str):
        return folded
    reuse = (_reuse_dims(folded[0], folded[3]) or [None])[0]
    sizes, x_s, out_s, pos_s, n_reuse, x_r, out_r = _take_out(folded, reuse)
    n_rows = sizes[0] * sizes[1] * sizes[2]
    half = theta.shape[0]
    shape = launch_shape(max(n_rows, 1), max(n_reuse, 1), half)
    programs = shape["programs"] if n_rows and n_reuse else 0
    ints = (n_rows, sizes[1], sizes[2], n_reuse, *x_s, x_r, x.stride(-1),
            *out_s, out_r, out.stride(-1), *pos_s)
    return Launch(_rope_positions_kernel, (programs,), ints,
                  {**_constants(shape, half, layout, positions), "NEGATE": negate})


def _plan_pair(q, k, positions, theta, q_out, k_out, layout):
    if q.dtype != k.dtype or q_out.dtype != k_out.dtype:
        return f"q and k must share a dtype; got {q.dtype} and {k.dtype}"
    reason = _problem(q, positions, theta, q_out) or _problem(k, positions, theta, k_out)
    if reason is not None:
        return reason
    folded_q, folded_k = _fold_positions(q, positions, q_out), _fold_positions(k, positions, k_out)
    for folded in (folded_q, folded_k):
        if isinstance(folded, str):
            return folded
    # One reuse dim for both (q's largest that k shares), the rest alike (sizes, positions).
    for reuse in [*_reuse_dims(folded_q[0], folded_q[3]), None]:
        sizes, q_s, q_out_s, pos_s, n_q, q_r, q_out_r = _take_out(folded_q, reuse)
        sizes_k, k_s, k_out_s, pos_k, n_k, k_r, k_out_r = _take_out(folded_k, reuse)
        if sizes == sizes_k and pos_s == pos_k:
            break
    else:
        return (f"q's rows {tuple(q.shape[:-1])} and k's rows {tuple(k.shape[:-1])} do not fold "
                "alike")
    n_rows = sizes[0] * sizes[1] * sizes[2]
    half = theta.shape[0]
    shape = launch_shape(max(n_rows, 1), max(n_q, n_k, 1), half)
    per_program = shape["HEADS"] * shape["STEPS"]
    q_blocks = triton.cdiv(n_q, per_program)
    programs = triton.cdiv(n_rows, shape["ROWS"]) * (q_blocks + triton.cdiv(n_k, per_program))
    ints = (n_rows, sizes[1], sizes[2], n_q, n_k, q_blocks,
            *q_s, q_r, q.stride(-1), *q_out_s, q_out_r, q_out.stride(-1),
            *k_s, k_r, k.stride(-1), *k_out_s, k_out_r, k_out.stride(-1), *pos_s)
    return Launch(_rope_positions_pair_kernel, (programs,), ints,
                  _constants(shape, half, layout, positions))
