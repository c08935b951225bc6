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
2. half layout on a CPU: a small C kernel (:mod:`rope_lab._ckernel`), compiled on first
   use when a C compiler is present, rotates each row in one loop, on
   ``torch.get_num_threads()`` threads (float32, float64, bfloat16). For a decode-sized
   tensor it also computes the angles and their cos and sin, so the call is one C call (at
   that size the calls around the work cost more than the work). Without a compiler (and for
   float16 or mixed dtypes) it is three eager kernels instead
   (out = x·cos, out_a −= b·sin, out_b += a·sin), the first one a plain multiply over whole
   rows, run on one block of rows at a time (1 MiB per block on one thread, 4 MiB on
   several), small enough to stay in the cache, so that main memory sees one read of x and
   one write of out; the passes over the cache still cost time (the benchmark's "eager
   blocks" row).
3. CUDA: one Triton kernel (:mod:`rope_lab._triton_rope`) loads a block of rows, rotates it
   in registers and stores it; with float32 angles (the usual case) it computes them itself
   from the positions and θ, so a call is one launch and reads nothing on the host. Used when
   Triton is installed. Without Triton, CUDA runs four whole-tensor kernels
   (:func:`_rotate_whole`): the cache-sized blocks are a CPU idea, and on a GPU they only add
   launches.

No extra memory on a CPU: the output, the cos/sin tables (and cos repeated to the full width,
built once per table), and at most one cache-sized scratch block. (The CUDA fallback without
Triton uses one temporary the size of half of x, in the compute dtype.)
Autograd works: the backward of a rotation by m·θ is the rotation by −m·θ (sin → −sin).
"""

from __future__ import annotations

import itertools
import math
import os
import warnings
import weakref

import torch

from rope_lab import _ckernel, _validate
from rope_lab.i18n import gettext as _

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

_is_compiling = _validate._is_compiling


def can_use_fast_path(x: torch.Tensor, cos: torch.Tensor) -> bool:
    """True when :func:`rotate` may replace the reference for these inputs."""
    return (
        not _is_compiling()  # under torch.compile the formula fuses by itself
        and x.device.type in _FAST_DEVICES
        and x.numel() > 0
        and cos.dtype in (torch.float32, torch.float64)
        and not (torch.is_grad_enabled() and cos.requires_grad)
    )


BACKENDS = _validate.BACKENDS  # the names apply_rope(..., backend=NAME) takes


def rotate(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    *,
    out: torch.Tensor | None = None,
    backend: str = "auto",
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
        backend: "auto" (the fastest path that applies), or one of "eager", "c", "complex",
            "triton" by name: that path runs, or :class:`BackendUnavailable` says why not.

    Returns:
        ``out``: x rotated, computed in promote(x.dtype, cos.dtype), rounded once.
    """
    if out is None and torch.is_grad_enabled() and x.requires_grad:
        return _Rotate.apply(x, cos, sin, layout, backend)
    return _rotate_into(x, cos, sin, layout, out, backend)


def check_backend(backend: str, x: torch.Tensor, cos: torch.Tensor, layout: str) -> None:
    """Refuse a named backend that cannot run these inputs, saying why (before any work).

    What depends on memory order or on the machine (a C compiler, Triton) is checked when the
    path runs, with the same kind of error.
    """
    def refuse(why):
        raise BackendUnavailable(f"backend={backend!r} cannot run here: {why}")

    if backend in ("auto", "reference"):
        return
    if _is_compiling():
        refuse("under torch.compile the formula fuses by itself; use backend='auto'")
    if torch.is_grad_enabled() and cos.requires_grad:
        refuse("it does not differentiate with respect to inv_freq; use backend='reference'")
    if backend == "c" and layout != "half":
        refuse(f"the C loop rotates the half layout; got layout={layout!r} (backend='complex' "
               "is the one-pass path for 'interleaved')")
    if backend == "complex" and layout != "interleaved":
        refuse(f"pairs are complex numbers only in the interleaved layout; got layout={layout!r}")
    if backend == "triton":
        module = _named_triton()
        reason = module.problem(x[..., :2 * cos.shape[-1]], cos, cos, x)
        if reason is not None:
            refuse(reason)


def status() -> str:
    """Two lines: whether the C loop is built here (and how long the build took), and
    whether Triton is usable (checked per CUDA device on first use). In the course's
    language (notebook 09 prints it); the scripts that store it in a record run in English,
    and :func:`rope_lab._ckernel.status` stays English for code that reads it."""
    library = _ckernel._load()
    if library is None:
        c_kernel = _("eager path: {reason}").format(reason=_ckernel._reason)
    else:
        how = (_("built in {seconds:.2f} s").format(seconds=library.build_seconds)
               if library.build_seconds is not None else _("loaded from the cache"))
        c_kernel = _("C kernel: {path} ({how})").format(path=library._name, how=how)
    if _triton_switched_off():
        triton = _("turned off (ROPE_LAB_TRITON=0)")
    elif isinstance(_import_triton(), str):
        triton = _import_triton()
    elif not torch.cuda.is_available():
        triton = _("installed; no CUDA device here (TRITON_INTERPRET=1 runs it on CPU "
                   "tensors)")
    else:
        triton = (_("passed its self-check on this GPU") if triton_available()
                  else _("failed its self-check on this GPU: the eager path runs"))
    return _("{c_kernel}\nTriton: {triton}").format(c_kernel=c_kernel, triton=triton)


def auto_backend(x: torch.Tensor, layout: str) -> str:
    """The name of the path ``apply_rope(x, layout=layout)`` takes for a tensor like x."""
    cos_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    if not (x.device.type in _FAST_DEVICES and x.numel() > 0) or _is_compiling():
        return "reference"
    if x.is_cuda and _auto_triton(x.device) is not None:
        return "triton"
    # The C loop runs one thread below PARALLEL_MIN_ELEMENTS, so there it needs no OpenMP.
    threads = torch.get_num_threads() if x.numel() >= _ckernel.PARALLEL_MIN_ELEMENTS else 1
    if (layout == "half" and x.device.type == "cpu" and x.dtype in _ckernel.TABLE_DTYPES
            and _ckernel.available() and (threads == 1 or _ckernel._library.has_openmp)):
        return "c"
    if layout == "interleaved" and x.dtype == cos_dtype:
        return "complex"
    return "eager"


class _Rotate(torch.autograd.Function):
    """Fast forward and fast backward: ∂L/∂x = R(−m·θ) ∂L/∂out, a rotation the other way."""

    @staticmethod
    def forward(ctx, x, cos, sin, layout, backend):
        ctx.save_for_backward(cos, sin)
        ctx.layout, ctx.backend = layout, backend
        return _rotate_into(x, cos, sin, layout, None, backend)

    @staticmethod
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        return rotate(grad, cos, -sin, ctx.layout, backend=ctx.backend), None, None, None, None


def _rotate_into(x, cos, sin, layout, out, backend="auto"):
    """Run the named path, or for "auto": Triton (CUDA), the C loop (half layout, CPU), one
    complex multiply (interleaved), else the eager kernels."""
    half = cos.shape[-1]
    rotary_dim = 2 * half
    compute = torch.promote_types(x.dtype, cos.dtype)
    if out is None:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    x_rot, out_rot = _rotated_part(x, out, rotary_dim)

    if backend == "auto":
        if (x.is_cuda and _triton_rotate(x_rot, cos, sin, layout, out_rot)) or (
            layout == "half" and _ckernel.rotate_half(x_rot, cos, sin, out_rot)  # one C loop
        ):
            _raw_kernel_wrote("rope_lab C loop" if x.device.type == "cpu"
                              else "rope_lab Triton kernel", out, out_rot)
        elif (layout == "interleaved" and x.dtype == compute
              and _complex_view_ok(x_rot, out_rot)):
            _rotate_complex(x_rot, cos, sin, out_rot, compute)
        else:
            _rotate_in_blocks(x_rot, cos, sin, layout, out_rot, compute, out is x)
    elif backend == "triton":
        module = _named_triton()
        reason = module.problem(x_rot, cos, sin, out_rot)
        if reason is not None:
            raise BackendUnavailable(f"backend='triton' cannot run here: {reason}")
        module.rotate(x_rot, cos, sin, layout, out_rot)
        _raw_kernel_wrote("rope_lab Triton kernel", out, out_rot)
    elif backend == "c":
        _ckernel.rotate_half(x_rot, cos, sin, out_rot, required=True)
        _raw_kernel_wrote("rope_lab C loop", out, out_rot)
    elif backend == "complex":
        _rotate_complex(x_rot, cos, sin, out_rot, compute)
    else:  # "eager"
        _rotate_in_blocks(x_rot, cos, sin, layout, out_rot, compute, out is x)
    return out


def _rotated_part(x, out, rotary_dim):
    """The first rotary_dim features of x and out; the rest of x copied into out first
    (partial rotary: the tail passes through)."""
    if rotary_dim == x.shape[-1]:
        return x, out
    if out is not x:
        out[..., rotary_dim:].copy_(x[..., rotary_dim:])
    return x[..., :rotary_dim], out[..., :rotary_dim]


def _rotate_complex(x, cos, sin, out, compute):
    """Interleaved pairs (2i, 2i+1) as complex numbers: one multiply by e^{i m θ_i}, straight
    into out when the memory allows complex views, else through one temporary."""
    rotation = _rotation(cos, sin)
    if x.dtype == compute and _complex_view_ok(x, out):
        torch.mul(_as_complex(x), rotation, out=_as_complex(out))
        return
    product = _as_complex(x.to(compute).contiguous()) * rotation
    out.copy_(torch.view_as_real(product).flatten(-2))


# torch.autograd.graph.increment_version is the public name; where a torch lacks it, the
# private function it wraps (which has been there longer) does the same.
_increment_version = (getattr(torch.autograd.graph, "increment_version", None)
                      or torch._C._increment_version)


# Listeners told about every write a raw kernel (C, Triton) makes, which PyTorch's dispatcher
# cannot see: rope_lab.cost.count_kernels adds one while it counts.
_raw_kernel_listeners: list = []


def _raw_kernel_wrote(name: str, out: torch.Tensor, written: torch.Tensor) -> None:
    _mark_written(out)
    for listener in _raw_kernel_listeners:
        listener(name, written)


def _mark_written(t: torch.Tensor) -> None:
    """Tell autograd that t changed. A kernel that writes through a raw pointer (C, Triton)
    does not move the version counter as PyTorch's own in-place ops do, so a tensor that
    autograd saved for backward would be used, rotated, without the usual "modified by an
    inplace operation" error. Inference tensors have no counter to move."""
    if not t.is_inference():
        _increment_version(t)


def _rotate_in_blocks(x, cos, sin, layout, out, compute, in_place):
    """Rotate x with three kernels, block by block where blocks pay (see _blocking_pays);
    on other devices with :func:`_rotate_whole`."""
    if not _blocking_pays(x):
        _rotate_whole(x, cos, sin, layout, out, compute, in_place)
        return
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
    they only add launches (:func:`_rotate_whole` runs there). On a heavily oversubscribed
    machine multi-threaded blocks can stall (every kernel waits for a descheduled thread);
    ``torch.set_num_threads(1)`` is then the faster setting.
    """
    return x.device.type == "cpu"


def _rotate_whole(x, cos, sin, layout, out, compute, in_place):
    """out = R x in four whole-tensor kernels, computed in ``compute``, rounded once into out.

    t = a·c (a temporary half the size of x, in ``compute``), then out_a = t − b·s as one
    addcmul that writes straight into out's dtype; t = b·c, out_b = t + a·s likewise. For
    bfloat16 x that moves 14 bytes per element (Hugging Face's eager form, in bfloat16: about
    20), and a 16-bit out is rounded once. In place both halves are computed before either
    is written (out_a would overwrite a, which out_b needs).
    """
    a, b = _pair_views(x, layout)
    out_a, out_b = _pair_views(out, layout)
    if in_place:
        first = torch.mul(a, cos).to(compute)
        first.addcmul_(b, sin, value=-1)
        second = torch.mul(b, cos).to(compute)
        second.addcmul_(a, sin)
        out_a.copy_(first)
        out_b.copy_(second)
        return
    temporary = torch.mul(a, cos).to(compute)  # .to: a no-op unless cos is narrower
    torch.addcmul(temporary, b, sin, value=-1, out=out_a)
    torch.mul(b, cos, out=temporary)
    torch.addcmul(temporary, a, sin, out=out_b)


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
    if any(t.is_inference() for t in sources) or _capturing(sources[0]):
        # no version counter to trust, or a table whose values exist only when a CUDA graph
        # replays: not cached
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


def _capturing(t: torch.Tensor) -> bool:
    return t.is_cuda and torch.cuda.is_current_stream_capturing()


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


# --- Triton -----------------------------------------------------------------------------------

BackendUnavailable = _ckernel.BackendUnavailable
FastPathWarning = _ckernel.FastPathWarning

# Per CUDA device: the Triton module once it passed its self-check there, or False.
_triton_by_device: dict = {}
_triton_import = None  # the module, or the ImportError's text


def _import_triton():
    global _triton_import
    if _triton_import is None:
        try:
            from rope_lab import _triton_rope
        except ImportError as error:  # no triton (macOS, Windows, a CPU-only torch)
            _triton_import = f"the triton package is not installed ({error})"
        else:
            _triton_import = _triton_rope
    return _triton_import


def _triton_switched_off() -> bool:
    return os.environ.get("ROPE_LAB_TRITON", "1").strip().lower() in ("0", "false", "off")


def _named_triton():
    """The Triton module for ``backend="triton"``, or BackendUnavailable saying why."""
    if _triton_switched_off():
        raise BackendUnavailable("backend='triton' cannot run here: ROPE_LAB_TRITON=0 in the "
                                 "environment turns Triton off")
    module = _import_triton()
    if isinstance(module, str):
        raise BackendUnavailable(f"backend='triton' cannot run here: {module}")
    return module


def triton_available(device=None) -> bool:
    """True when the auto path uses the Triton kernel on this CUDA device (default: the
    current one): Triton is installed, not turned off, and passed its self-check there."""
    if not torch.cuda.is_available():
        return False
    device = torch.device("cuda", torch.cuda.current_device()) if device is None else device
    return _auto_triton(torch.device(device)) is not None


def _auto_triton(device: torch.device):
    """The Triton module if the auto path may use it on device; checked once per device."""
    if device.index is None:
        device = torch.device(device.type, torch.cuda.current_device())
    if device not in _triton_by_device:
        if torch.cuda.is_current_stream_capturing():
            # The self-check reads values, which capture forbids: this call takes the eager
            # path (capturable too); the check runs on the first call outside a capture.
            return None
        _triton_by_device[device] = _start_triton(device)
    return _triton_by_device[device] or None


def _start_triton(device):
    """Import Triton and check its kernel against the eager path on a small tensor.

    A Triton that cannot compile here (an old GPU, a broken install) or that computes wrong
    numbers would otherwise fail in the middle of a model, or silently. Either way: one
    warning, then the eager path for this device, for the rest of the process.
    """
    if _triton_switched_off():
        return False
    module = _import_triton()
    if isinstance(module, str):
        return False
    problem = self_check(module, device)
    if problem is not None:
        warnings.warn(f"rope_lab: the Triton RoPE kernel failed its self-check on {device} "
                      f"({problem}); using the eager path instead. ROPE_LAB_TRITON=0 skips "
                      "Triton altogether.", FastPathWarning, stacklevel=5)
        return False
    return module


def self_check(module, device) -> str | None:
    """Rotate a small tensor with both Triton kernels (tables; angles from positions) and
    with the eager path, both layouts, float32 and bfloat16, partial rotary, per-batch
    positions up to past 2^24; None when they agree, else what went wrong."""
    from rope_lab import rope  # the angle rule lives there (rope imports this module)

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 7, 24, generator=generator).to(device)
    positions = torch.tensor([[0, 1, 2, 3, 4, 5, 6],
                              [4095, 70_000, 2**24 - 1, 2**24 + 1, 2**25 + 3, -9, 12]])
    positions = positions[:, None, :].to(device)  # (batch, 1, seq): per-batch positions
    theta = rope._inv_freq(16, 10_000.0, device, torch.float32)
    cos, sin = rope._cos_sin_table(positions, theta)
    try:
        for layout in ("half", "interleaved"):
            for dtype in (torch.float32, torch.bfloat16):
                source = x.to(dtype)
                expected = source.clone()
                _rotate_in_blocks(source[..., :16], cos, sin, layout, expected[..., :16],
                                  torch.float32, False)
                by_tables, by_positions = source.clone(), source.clone()
                module.rotate(source[..., :16], cos, sin, layout, by_tables[..., :16])
                plan = module.plan_positions(source[..., :16], positions, theta,
                                             by_positions[..., :16], layout)
                if isinstance(plan, str):
                    return plan
                module.rotate_positions(source[..., :16], positions, theta,
                                        by_positions[..., :16], plan)
                # Relative to |value| + 1: one rounding in bfloat16 moves a value by 2^-8 of it.
                expected = expected.float()
                tolerance = 1e-5 if dtype == torch.float32 else 2**-7
                for kernel, got in (("tables", by_tables), ("positions", by_positions)):
                    error = ((got.float() - expected).abs() / (1 + expected.abs())).max().item()
                    if not error <= tolerance:
                        return (f"{kernel} kernel, {layout} layout, {dtype}: max difference "
                                f"{error:.3g} from eager")
    except Exception as error:  # compile errors, missing drivers …: all mean "not here"
        return f"{type(error).__name__}: {error}"
    return None


def _triton_rotate(x, cos, sin, layout, out) -> bool:
    """Auto path on CUDA: the Triton kernel when it is usable and takes these inputs."""
    module = _auto_triton(x.device)
    if module is None or module.problem(x, cos, sin, out) is not None:
        return False
    module.rotate(x, cos, sin, layout, out)
    return True


# --- the one-launch path: angles computed in the Triton kernel ---------------------------

def angles_in_kernel(x, positions, theta, layout, backend) -> bool:
    """True when a kernel should compute the angles itself, with no cos/sin tables: the
    Triton kernel on CUDA (float32 angles); the C loop for a decode-sized CPU tensor (half
    layout). Not under torch.compile, nor when θ wants a gradient."""
    if _is_compiling() or (torch.is_grad_enabled() and theta.requires_grad):
        return False
    if backend == "triton" or (backend == "auto" and x.is_cuda):
        return theta.dtype == torch.float32 and (
            backend == "triton" or (x.numel() > 0 and _auto_triton(x.device) is not None))
    return (backend in ("auto", "c") and layout == "half"
            and x.device.type == "cpu" and x.numel() < _ckernel.PARALLEL_MIN_ELEMENTS
            and not (torch.is_grad_enabled() and x.requires_grad))


def rotate_positions(x, positions, theta, layout, *, out=None, backend="auto"):
    """x rotated by m·θ_i with the angles computed in the kernel: one call (after
    :func:`angles_in_kernel` said yes).

    positions: validated, broadcasting to x.shape[:-1], or None for 0 … seq − 1. Returns
    out (a new tensor when None), or None when the kernel cannot take these tensors and the
    caller should build tables (backend "auto", or "c" whose table loop may still run); a
    named "triton" raises :class:`BackendUnavailable` instead. Differentiable with respect
    to x when out is None (Triton).
    """
    rotary_dim = 2 * theta.shape[0]
    partial = rotary_dim < x.shape[-1]
    target = torch.empty_like(x, memory_format=torch.contiguous_format) if out is None else out
    x_rot = x[..., :rotary_dim] if partial else x
    out_rot = target[..., :rotary_dim] if partial else target
    if x.device.type == "cpu" and backend != "triton":
        if not _ckernel.rotate_half_positions(x_rot, positions, theta, out_rot):
            return None
        if partial and target is not x:
            target[..., rotary_dim:].copy_(x[..., rotary_dim:])
        _raw_kernel_wrote("rope_lab C loop", target, out_rot)
        return target
    module = _named_triton() if backend == "triton" else _auto_triton(x.device)
    if module is None:
        return None
    plan = module.plan_positions(x_rot, positions, theta, out_rot, layout)
    if isinstance(plan, str):
        return _refuse(backend, plan)
    if out is None and torch.is_grad_enabled() and x.requires_grad:
        return _RotatePositions.apply(x, positions, theta, layout, module, False)
    if partial and target is not x:
        target[..., rotary_dim:].copy_(x[..., rotary_dim:])
    module.rotate_positions(x_rot, positions, theta, out_rot, plan)
    if out is None and not _raw_kernel_listeners:
        return target  # a new tensor: no autograd record of it to tell
    _raw_kernel_wrote("rope_lab Triton kernel", target, out_rot)
    return target


def _refuse(backend, reason):
    """A named "triton" says why it cannot run; "auto" returns None (the tables' path)."""
    if backend == "triton":
        raise BackendUnavailable(f"backend='triton' cannot run here: {reason}")
    return None


def _positions_into(module, x, positions, theta, layout, out, negate=False):
    """Run the positions kernel on the rotated features (the tail copied through)."""
    x_rot, out_rot = _rotated_part(x, out, 2 * theta.shape[0])
    plan = module.plan_positions(x_rot, positions, theta, out_rot, layout, negate)
    if isinstance(plan, str):  # a gradient in a memory order the kernel cannot take
        x_rot = x_rot.contiguous()
        plan = module.plan_positions(x_rot, positions, theta, out_rot, layout, negate)
    module.rotate_positions(x_rot, positions, theta, out_rot, plan)
    _raw_kernel_wrote("rope_lab Triton kernel", out, out_rot)
    return out


class _RotatePositions(torch.autograd.Function):
    """The one-launch rotation and its backward: the same kernel with −m·θ_i."""

    @staticmethod
    def forward(ctx, x, positions, theta, layout, module, negate):
        ctx.save_for_backward(positions, theta)
        ctx.layout, ctx.module, ctx.negate = layout, module, negate
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        return _positions_into(module, x, positions, theta, layout, out, negate)

    @staticmethod
    def backward(ctx, grad):
        positions, theta = ctx.saved_tensors
        if grad.requires_grad:  # double backward: stay differentiable
            grad_x = _RotatePositions.apply(grad, positions, theta, ctx.layout, ctx.module,
                                            not ctx.negate)
        else:
            grad_x = _positions_into(ctx.module, grad, positions, theta, ctx.layout,
                                     torch.empty(grad.shape, dtype=grad.dtype,
                                                 device=grad.device),
                                     not ctx.negate)
        return grad_x, None, None, None, None, None


def rotate_pair(q, k, positions, theta, layout, *, backend="auto"):
    """q and k rotated by m·θ_i in one launch of the Triton kernel (the same positions for
    both; ``RotaryEmbedding.forward``): ``(q_out, k_out)``, two new tensors, or None when
    that launch does not apply (not CUDA, a gradient to record, dtypes or memory orders the
    kernel cannot share; backend "triton" runs CPU tensors under TRITON_INTERPRET=1). The
    caller then rotates them one by one.

    positions: validated for both, or None for 0 … seq − 1; theta: float32 ``(r/2,)``.
    """
    if backend == "auto":
        if not q.is_cuda or theta.dtype != torch.float32 or _is_compiling():
            return None
        module = _auto_triton(q.device)
        if module is None:
            return None
    else:
        module = _named_triton()
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or theta.requires_grad):
        return None
    rotary_dim = 2 * theta.shape[0]
    q_out = torch.empty_like(q, memory_format=torch.contiguous_format)
    k_out = torch.empty_like(k, memory_format=torch.contiguous_format)
    q_rot, q_out_rot = q, q_out
    k_rot, k_out_rot = k, k_out
    if rotary_dim != q.shape[-1] or rotary_dim != k.shape[-1]:  # partial rotary
        q_rot, q_out_rot = q[..., :rotary_dim], q_out[..., :rotary_dim]
        k_rot, k_out_rot = k[..., :rotary_dim], k_out[..., :rotary_dim]
    plan = module.plan_pair(q_rot, k_rot, positions, theta, q_out_rot, k_out_rot, layout)
    if isinstance(plan, str):
        return None
    if q_rot is not q:  # the tails pass through
        q_out[..., rotary_dim:].copy_(q[..., rotary_dim:])
        k_out[..., rotary_dim:].copy_(k[..., rotary_dim:])
    module.rotate_pair(q_rot, k_rot, positions, theta, q_out_rot, k_out_rot, plan)
    for listener in _raw_kernel_listeners:
        listener("rope_lab Triton kernel", q_out_rot, k_out_rot)
    return q_out, k_out
