"""Fast RoPE: the same rotation as :func:`rope_lab.rope.rotate_reference`, in fewer passes.

RoPE is memory-bound. Per element it reads x once and writes the result once (8 bytes in
float32) and does about 3 FLOPs, so its floor is the time of a same-size copy, ``x.clone()``.
The literal formula

    out = cat(a·cos − b·sin, a·sin + b·cos)          (a, b the two features of each pair)

runs seven kernels (four multiplies, a subtract, an add, a concatenate) and allocates a
temporary for each: together they move about 4.5 times the bytes of a copy. Three ideas
bring it back to about one read and one write:

1. interleaved layout: the pairs (2i, 2i + 1) sit next to each other, so they *are* complex
   numbers a + ib, and one complex multiply by e^{i m θ_i} = cos + i·sin does the whole
   rotation, reading x once and writing straight into the output (``out=``).
2. half layout on a CPU: a 30-line C kernel (:mod:`rope_lab._ckernel`), compiled on first
   use when a C compiler is present, rotates each row in one loop, on
   ``torch.get_num_threads()`` threads. Without a compiler (and for 16-bit dtypes or mixed
   dtypes) it is three eager kernels instead
   (out = x·cos, out_a −= b·sin, out_b += a·sin), the first one a plain multiply over whole
   rows, run on one block of rows at a time (1 MiB per block on one thread, 4 MiB on
   several), small enough to stay in the cache, so that main memory sees one read of x and
   one write of out; the passes over the cache still cost time (the benchmark's "eager
   blocks" row).
3. CUDA: one Triton kernel (:mod:`rope_lab._triton_rope`) loads a block of rows, rotates it
   in registers and stores it. Used when Triton is installed; the eager paths run otherwise.

No extra memory: the output, the cos/sin tables (and cos repeated to the full width, built
once per table), and at most one cache-sized scratch block.
Autograd works: the backward of a rotation by m·θ is the rotation by −m·θ (sin → −sin).
"""

from __future__ import annotations

import itertools
import math
import warnings
import weakref

import torch

from rope_lab import _ckernel

# Block size for the eager half-layout path, per intra-op CPU thread: x block + out block
# should stay in cache while the three kernels pass over it (1 MiB of x is one head of 2048
# tokens × 128 features in float32). Smaller blocks mean more kernel launches, and with
# several threads each launch ends by waiting for all of them. Measured on 2 quiet cores,
# (1, 32, 2048, 128) float32: 1 MiB blocks on one thread, 4 MiB on two, were the fastest
# (1.25-1.30 and 1.20-1.27 × clone); whole-tensor kernels on two threads 1.40-1.49 ×.
BLOCK_BYTES = 1 << 20
MULTI_THREAD_BLOCK_BYTES = 4 << 20

# Devices the eager fast path is written for; others (MPS, XLA …) use the reference.
_FAST_DEVICES = ("cpu", "cuda")

# torch.compiler.is_compiling appeared in torch 2.3; older versions never report compiling.
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)


def can_use_fast_path(x: torch.Tensor, cos: torch.Tensor) -> bool:
    """True when :func:`rotate` may replace the reference for these inputs."""
    return (
        not _is_compiling()  # under torch.compile the formula fuses by itself
        and x.device.type in _FAST_DEVICES
        and x.numel() > 0
        and cos.dtype in (torch.float32, torch.float64)
        and not (torch.is_grad_enabled() and cos.requires_grad)
    )


def rotate(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    *,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Rotate the first 2·cos.shape[-1] features of x; the rest are copied through.

    Differentiable with respect to x (not cos/sin). Trusts its inputs (validated by
    :func:`rope_lab.apply_rope`).

    Args:
        x: ``(..., seq, dim)`` any float dtype, any strides.
        cos, sin: ``(..., seq, r/2)`` float32 or float64, broadcasting against x.shape[:-1].
        layout: "half" or "interleaved".
        out: where to write (may be ``x`` itself for an in-place rotation); default a new
            contiguous tensor like x. Not differentiable when given.

    Returns:
        ``out``: x rotated, computed in promote(x.dtype, cos.dtype), rounded once.
    """
    if out is None and torch.is_grad_enabled() and x.requires_grad:
        return _Rotate.apply(x, cos, sin, layout)
    return _rotate_into(x, cos, sin, layout, out)


class _Rotate(torch.autograd.Function):
    """Fast forward and fast backward: ∂L/∂x = R(−m·θ) ∂L/∂out, a rotation the other way."""

    @staticmethod
    def forward(ctx, x, cos, sin, layout):
        ctx.save_for_backward(cos, sin)
        ctx.layout = layout
        return _rotate_into(x, cos, sin, layout, None)

    @staticmethod
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        return rotate(grad, cos, -sin, ctx.layout), None, None, None


def _rotate_into(x, cos, sin, layout, out):
    """Dispatch to Triton (CUDA), the C kernel (half layout, CPU), one complex multiply, or
    the blocked eager kernels."""
    half = cos.shape[-1]
    rotary_dim = 2 * half
    compute = torch.promote_types(x.dtype, cos.dtype)
    if out is None:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    in_place = out is x
    if rotary_dim < x.shape[-1] and not in_place:
        out[..., rotary_dim:].copy_(x[..., rotary_dim:])  # partial rotary: the tail passes
    x_rot, out_rot = x[..., :rotary_dim], out[..., :rotary_dim]

    if (x.is_cuda and _triton_rotate(x_rot, cos, sin, layout, out_rot)) or (
        layout == "half" and _ckernel.rotate_half(x_rot, cos, sin, out_rot)  # one C loop
    ):
        _mark_written(out)
        return out
    if layout == "interleaved" and x.dtype == compute and _complex_view_ok(x_rot, out_rot):
        # Pairs (2i, 2i+1) are adjacent: view them as complex numbers, one multiply.
        torch.mul(_as_complex(x_rot), _rotation(cos, sin), out=_as_complex(out_rot))
        return out
    _rotate_in_blocks(x_rot, cos, sin, layout, out_rot, compute, in_place)
    return out


# torch.autograd.graph.increment_version is the public name; where a torch lacks it, the
# private function it wraps (which has been there longer) does the same.
_increment_version = (getattr(torch.autograd.graph, "increment_version", None)
                      or torch._C._increment_version)


def _mark_written(t: torch.Tensor) -> None:
    """Tell autograd that t changed. A kernel that writes through a raw pointer (C, Triton)
    does not move the version counter as PyTorch's own in-place ops do, so a tensor that
    autograd saved for backward would be used, rotated, without the usual "modified by an
    inplace operation" error. Inference tensors have no counter to move."""
    if not t.is_inference():
        _increment_version(t)


def _rotate_in_blocks(x, cos, sin, layout, out, compute, in_place):
    """Rotate x with three kernels, block by block where blocks pay (see _blocking_pays)."""
    half = cos.shape[-1]
    batch = x.shape[:-1]
    cos_both = _cos_for_both(cos, layout).expand(*batch, 2 * half)
    sin = sin.expand(*batch, half)
    # Write straight into out when it has the compute dtype and is not x itself (the first
    # kernel writes x·cos before the others read x); otherwise go through a scratch block.
    direct = out.dtype == compute and not in_place
    row_bytes = x.shape[-1] * compute.itemsize
    # A scratch block must stay small ("no extra memory"), so those paths always use blocks.
    block_bytes = _block_bytes() if not direct or _blocking_pays(x) else math.inf
    blocks = list(_blocks(batch, row_bytes, block_bytes))
    scratch = None
    if not direct:
        biggest = x[blocks[0]].shape
        scratch = torch.empty(biggest, dtype=compute, device=x.device)
    for index in blocks:
        x_block, out_block = x[index], out[index]
        if direct:
            _rotate_block(x_block, cos_both[index], sin[index], layout, out_block)
        else:
            target = scratch[tuple(slice(0, n) for n in x_block.shape)]
            _rotate_block(x_block, cos_both[index], sin[index], layout, target)
            out_block.copy_(target)  # the single rounding to out's dtype


def _blocking_pays(x) -> bool:
    """Blocks pay on a CPU (caches shared by the three kernels); on a GPU without Triton
    they only add launches. On a heavily oversubscribed machine multi-threaded blocks can
    stall (every kernel waits for a descheduled thread); ``torch.set_num_threads(1)`` is
    then the faster setting.
    """
    return x.device.type == "cpu"


def _block_bytes() -> int:
    return BLOCK_BYTES if torch.get_num_threads() == 1 else MULTI_THREAD_BLOCK_BYTES


def _rotate_block(x, cos_both, sin, layout, out):
    """out = R x for one block: a' = a·c − b·s, b' = a·s + b·c, as three in-cache kernels.

    cos_both: cos repeated to the width of x in the pairs' layout, so that the first kernel
    (out = x·cos for every feature) is one plain multiply over contiguous rows.
    """
    torch.mul(x, cos_both, out=out)  # (a·c, b·c)
    a, b = _pair_views(x, layout)
    out_a, out_b = _pair_views(out, layout)
    out_a.addcmul_(b, sin, value=-1)  # a·c − b·s
    out_b.addcmul_(a, sin)  # b·c + a·s


# Tables derived from cos/sin (cos repeated to full width, e^{imθ} as complex numbers), by
# the ids of their sources. The cached tables of apply_rope come back as the same tensors on
# every call, so each derived table is built once; weak references and version counters make
# sure a freed or modified source is never served stale.
_derived_cache: dict = {}


def _derived(kind: str, build, *sources: torch.Tensor) -> torch.Tensor:
    if any(t.is_inference() for t in sources):  # no version counter to trust: no caching
        return build(*sources)
    key = (kind, *(id(t) for t in sources))
    entry = _derived_cache.get(key)
    if entry is not None and all(
        ref() is t and version == t._version
        for (ref, version), t in zip(entry[0], sources, strict=True)
    ):
        return entry[1]
    table = build(*sources)
    if len(_derived_cache) >= 32:
        _derived_cache.clear()

    def forget(_, key=key):  # a source died: its derived table goes with it
        _derived_cache.pop(key, None)

    _derived_cache[key] = ([(weakref.ref(t, forget), t._version) for t in sources], table)
    return table


def _cos_for_both(cos: torch.Tensor, layout: str) -> torch.Tensor:
    """cos at every feature: (c_0 … c_{r/2−1}, c_0 … c_{r/2−1}) for "half", (c_0, c_0, c_1, c_1,
    …) for "interleaved"; ``(..., seq, r)``."""
    if layout == "half":
        return _derived("half", lambda c: torch.cat((c, c), dim=-1), cos)
    return _derived("interleaved", lambda c: c.repeat_interleave(2, dim=-1), cos)


def _rotation(cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """e^{i m θ_i} = cos + i·sin as a complex tensor ``(..., seq, r/2)``."""
    return _derived("complex", torch.complex, cos, sin)


def _pair_views(t, layout):
    """The first and the second feature of every pair, as two ``(..., r/2)`` views."""
    if layout == "half":
        half = t.shape[-1] // 2
        return t[..., :half], t[..., half:]
    return t[..., 0::2], t[..., 1::2]


def _blocks(batch: torch.Size, row_bytes: int, block_bytes: int):
    """Index tuples cutting the leading dims ``batch`` into blocks of about block_bytes.

    Whole dims are iterated from the left; the first dim whose slices fit is cut into
    ranges. One block (``...``) when everything fits.
    """
    rows_per_index = [math.prod(batch[k + 1:]) for k in range(len(batch))]
    if math.prod(batch) * row_bytes <= block_bytes:
        yield (Ellipsis,)
        return
    split = next(k for k, rows in enumerate(rows_per_index)
                 if rows * row_bytes <= block_bytes or k == len(batch) - 1)
    step = max(1, block_bytes // (rows_per_index[split] * row_bytes))
    for outer in itertools.product(*(range(n) for n in batch[:split])):
        for start in range(0, batch[split], step):
            yield (*outer, slice(start, start + step))


def _complex_view_ok(*tensors) -> bool:
    """view_as_complex needs unit stride on features and even strides/offset elsewhere."""
    return all(
        t.dtype in (torch.float32, torch.float64)
        and t.stride(-1) == 1
        and t.storage_offset() % 2 == 0
        and all(s % 2 == 0 for s in t.stride()[:-1])
        for t in tensors
    )


def _as_complex(t):
    return torch.view_as_complex(t.unflatten(-1, (-1, 2)))


# --- CUDA: Triton ---------------------------------------------------------------------------

_triton_module = None  # rope_lab._triton_rope once imported; False when unavailable


def triton_available() -> bool:
    """True when the Triton kernel can run here (a CUDA device and the triton package)."""
    global _triton_module
    if _triton_module is None:
        _triton_module = False
        if torch.cuda.is_available():
            try:
                from rope_lab import _triton_rope
            except ImportError:  # no triton: the eager paths serve CUDA too
                pass
            else:
                _triton_module = _triton_rope
    return bool(_triton_module)


def _triton_rotate(x, cos, sin, layout, out) -> bool:
    """Run the Triton kernel when it supports these inputs; False to fall back to eager."""
    global _triton_module
    if not triton_available():
        return False
    try:
        return _triton_module.rotate(x, cos, sin, layout, out)
    except Exception as error:  # a Triton that cannot compile here: say so once, go eager
        _triton_module = False
        warnings.warn(f"rope_lab: Triton RoPE kernel failed ({error}); using the eager path",
                      RuntimeWarning, stacklevel=4)
        return False
