"""Which path computes a rotation: the dispatcher between :mod:`rope_lab.rope` and the backends.

RoPE is memory-bound. Per element it reads x once and writes the result once (8 bytes in
float32) and does about 3 FLOPs, so its floor is the time of a same-size copy, ``x.clone()``.
The literal formula (:func:`rope_lab._eager.rotate_reference`, backend "reference")

    out = cat(a·cos − b·sin, a·sin + b·cos)          (a, b the two features of each pair)

runs seven kernels (four multiplies, a subtract, an add, a concatenate) and allocates a
temporary for each: together they move about 4.5 times the bytes of a copy. The backends
bring it back to about one read and one write:

- "c", on a CPU: a small C kernel (:mod:`rope_lab._ckernel`), compiled on first use when a C
  compiler is present, rotates each row in one loop, on ``torch.get_num_threads()`` threads
  (both layouts; float32, float64, bfloat16). Given position ids it also computes their cos
  and sin, so the call is one C call.
- "triton", on CUDA: one Triton kernel (:mod:`rope_lab._triton_rope`) loads a block of rows,
  rotates it in registers and stores it; with float32 angles (the usual case) it computes
  them itself from the positions and θ, so a call is one launch and reads nothing on the
  host. Used when Triton is installed and passed its self-check on the device.
- "complex", interleaved layout: the pairs (2i, 2i + 1) sit next to each other, so they *are*
  complex numbers a + ib, and one complex multiply by e^{i m θ_i} = cos + i·sin does the
  whole rotation, reading x once and writing straight into the output (``out=``).
- "eager": three PyTorch kernels (out = x·cos, out_a −= b·sin, out_b += a·sin), the first one
  a plain multiply over whole rows, run on one block of rows at a time (1 MiB per block on
  one thread, 4 MiB on several), small enough to stay in the cache, so that main memory sees
  one read of x and one write of out; the passes over the cache still cost time (the
  benchmark's "eager blocks" row). On CUDA without Triton, four whole-tensor kernels (the
  cache-sized blocks are a CPU idea; on a GPU they only add launches).

"auto" takes, in this order, the first that applies: Triton on CUDA, the C loop on a CPU,
one complex multiply for the interleaved layout, the eager kernels; "reference" on other
devices, under torch.compile (where the formula fuses by itself) and when gradients must flow
into the tables. A backend named by the caller runs or raises :class:`BackendUnavailable`.

Every path rotates by cos/sin tables or angles from :mod:`rope_lab._angles` (one angle rule).
No extra memory on a CPU: the output, the cos/sin tables (and cos repeated to the full width,
built once per table, for the eager path), and at most one cache-sized scratch block. (The
CUDA fallback without Triton uses one temporary the size of half of x.)
Autograd works: the backward of a rotation by m·θ is the rotation by −m·θ (sin → −sin).
"""

from __future__ import annotations

import os
import warnings

import torch

from rope_lab import _angles, _ckernel, _eager, _validate
from rope_lab.i18n import gettext as _

# Devices the eager fast path is written for; others (MPS, XLA …) use the reference.
_FAST_DEVICES = ("cpu", "cuda")

_is_compiling = _validate._is_compiling

BACKENDS = _validate.BACKENDS  # the names apply_rope(..., backend=NAME) takes
BackendUnavailable = _ckernel.BackendUnavailable
FastPathWarning = _ckernel.FastPathWarning


def rope(x: torch.Tensor, positions, theta: torch.Tensor, layout: str, *, base=None,
         out: torch.Tensor | None = None, backend: str = "auto") -> torch.Tensor:
    """x rotated by m·θ_i: what :func:`rope_lab.apply_rope` runs once it has checked its
    arguments (into ``out`` when given, which may be x itself).

    Args:
        x: ``(..., seq, D)``; the first r = 2·len(theta) features rotate, the rest pass.
        positions: validated, broadcasting to x.shape[:-1], or None for 0 … seq − 1.
        theta: ``(r/2,)`` on x's device, float32 or float64 (the dtype of the angles).
        base: the base θ was computed from, or None (inv_freq given): with a base, the
            cos/sin tables of 0 … seq − 1 are cached.
        backend: as in :func:`rope_lab.apply_rope`.

    With float32 angles on CUDA the Triton kernel computes them itself from the positions
    (one launch, no tables), and on a CPU the C loop computes the cos/sin of the given
    positions in the same call; every other path rotates by cos/sin tables.
    """
    if _angles_in_kernel(x, positions, theta, layout, backend):
        rotated = _rotate_by_positions(x, positions, theta, layout, out, backend)
        if rotated is not None:
            return rotated
    if positions is None and base is not None:  # the common call: a cached table
        cos, sin = _angles.cached_cos_sin(x.shape[-2], 2 * theta.shape[0], base, x.device,
                                          theta.dtype)
    else:
        if positions is None:
            positions = torch.arange(x.shape[-2], device=x.device)
        cos, sin = _angles.cos_sin_table(positions, theta, theta.dtype)
    return rotate(x, cos, sin, layout, out=out, backend=backend)


def rotate(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    *,
    out: torch.Tensor | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """Rotate the first 2·cos.shape[-1] features of x by tables; the rest are copied through.

    Differentiable with respect to x (and, on the reference path, cos/sin). Trusts its
    inputs (validated by :func:`rope_lab.apply_rope`).

    Args:
        x: ``(..., seq, dim)`` any float dtype, any strides.
        cos, sin: ``(..., seq, r/2)`` float32 or float64, broadcasting against x.shape[:-1].
        layout: "half" or "interleaved".
        out: where to write (may be ``x`` itself for an in-place rotation); default a new
            contiguous tensor like x. Not differentiable when given.
        backend: "auto" (the fastest path that applies), or one of "reference", "eager",
            "c", "complex", "triton" by name: that path runs, or
            :class:`BackendUnavailable` says why not.

    Returns:
        ``out``: x rotated, computed in promote(x.dtype, cos.dtype), rounded once.
    """
    if backend == "auto" and not can_use_fast_path(x, cos):
        backend = "reference"
    if backend == "reference":
        result = _eager.rotate_reference(x, cos, sin, layout)
        return result if out is None else out.copy_(result)
    check_backend(backend, x, cos, layout)
    if out is None and torch.is_grad_enabled() and x.requires_grad:
        return _Rotate.apply(x, cos, sin, layout, backend)
    return _rotate_into(x, cos, sin, layout, out, backend)


def can_use_fast_path(x: torch.Tensor, cos: torch.Tensor) -> bool:
    """True when a backend other than the reference may run these inputs on "auto"."""
    return (
        not _is_compiling()  # under torch.compile the formula fuses by itself
        and x.device.type in _FAST_DEVICES
        and x.numel() > 0
        and cos.dtype in (torch.float32, torch.float64)
        and not (torch.is_grad_enabled() and cos.requires_grad)
    )


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
        refuse("it does not differentiate with respect to inv_freq or the tables; use "
               "backend='reference'")
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
    if _c_runs(x):
        return "c"
    if layout == "interleaved" and x.dtype == cos_dtype:
        return "complex"
    return "eager"


def _c_runs(x: torch.Tensor) -> bool:
    """Whether the C loop takes a CPU tensor like x on "auto" (built, a dtype it handles,
    OpenMP when torch uses several threads for it)."""
    if not (x.device.type == "cpu" and x.dtype in _ckernel.TABLE_DTYPES
            and _ckernel.available()):
        return False
    # The C loop runs one thread below PARALLEL_MIN_ELEMENTS, so there it needs no OpenMP.
    return (x.numel() < _ckernel.PARALLEL_MIN_ELEMENTS or torch.get_num_threads() == 1
            or _ckernel._library.has_openmp)


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
    """Run the named path, or for "auto": Triton (CUDA), the C loop (CPU), one complex
    multiply (interleaved), else the eager kernels."""
    rotary_dim = 2 * cos.shape[-1]
    fresh = out is None
    if fresh:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    x_rot, out_rot = _rotated_part(x, out, rotary_dim)

    if backend == "auto" and ((x.is_cuda and _triton_rotate(x_rot, cos, sin, layout, out_rot))
                              or (x.device.type == "cpu" and _ckernel.rotate(
                                  x_rot, cos, sin, out_rot, layout, fresh=fresh))):
        _raw_kernel_wrote("rope_lab C loop" if x.device.type == "cpu"
                          else "rope_lab Triton kernel", out, out_rot, fresh)
        return out
    compute = torch.promote_types(x.dtype, cos.dtype)
    if backend == "auto":
        if (layout == "interleaved" and x.dtype == compute
                and _eager.complex_view_ok(x_rot, out_rot)):
            _eager.rotate_complex(x_rot, cos, sin, out_rot, compute)
        else:
            _eager.rotate_in_blocks(x_rot, cos, sin, layout, out_rot, compute, out is x)
    elif backend == "triton":
        module = _named_triton()
        reason = module.problem(x_rot, cos, sin, out_rot)
        if reason is not None:
            raise BackendUnavailable(f"backend='triton' cannot run here: {reason}")
        module.rotate(x_rot, cos, sin, layout, out_rot)
        _raw_kernel_wrote("rope_lab Triton kernel", out, out_rot, fresh)
    elif backend == "c":
        _ckernel.rotate(x_rot, cos, sin, out_rot, layout, required=True, fresh=fresh)
        _raw_kernel_wrote("rope_lab C loop", out, out_rot, fresh)
    elif backend == "complex":
        _eager.rotate_complex(x_rot, cos, sin, out_rot, compute)
    else:  # "eager"
        _eager.rotate_in_blocks(x_rot, cos, sin, layout, out_rot, compute, out is x)
    return out


def _rotated_part(x, out, rotary_dim):
    """The first rotary_dim features of x and out; the rest of x copied into out first
    (partial rotary: the tail passes through)."""
    if rotary_dim == x.shape[-1]:
        return x, out
    if out is not x:
        out[..., rotary_dim:].copy_(x[..., rotary_dim:])
    return x[..., :rotary_dim], out[..., :rotary_dim]


# torch.autograd.graph.increment_version is the public name; where a torch lacks it, the
# private function it wraps (which has been there longer) does the same.
_increment_version = (getattr(torch.autograd.graph, "increment_version", None)
                      or torch._C._increment_version)


# Listeners told about every write a raw kernel (C, Triton) makes, which PyTorch's dispatcher
# cannot see: rope_lab.cost.count_kernels adds one while it counts.
_raw_kernel_listeners: list = []


def _raw_kernel_wrote(name: str, out: torch.Tensor, written: torch.Tensor,
                      fresh: bool = False) -> None:
    """A raw kernel wrote ``written`` (part of ``out``); fresh: out was made by this call,
    so autograd holds no record of it to tell."""
    if not fresh:
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


# --- Triton -----------------------------------------------------------------------------------

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
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 7, 24, generator=generator).to(device)
    positions = torch.tensor([[0, 1, 2, 3, 4, 5, 6],
                              [4095, 70_000, 2**24 - 1, 2**24 + 1, 2**25 + 3, -9, 12]])
    positions = positions[:, None, :].to(device)  # (batch, 1, seq): per-batch positions
    theta = _angles.inv_freq_values(16, 10_000.0, device, torch.float32)
    cos, sin = _angles.cos_sin_table(positions, theta)
    try:
        for layout in ("half", "interleaved"):
            for dtype in (torch.float32, torch.bfloat16):
                source = x.to(dtype)
                expected = source.clone()
                _eager.rotate_in_blocks(source[..., :16], cos, sin, layout,
                                        expected[..., :16], torch.float32, False)
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


# --- the one-call paths: angles computed in the kernel ---------------------------------------

def _angles_in_kernel(x, positions, theta, layout, backend) -> bool:
    """True when a kernel should compute the angles itself, with no cos/sin tables from
    PyTorch: the Triton kernel on CUDA (float32 angles); the C loop on a CPU for integer
    position ids. (Without ids a CPU takes the cached table of 0 … seq − 1: one definition
    of the default positions, and the torch angle rule, checked by the notebooks.) Not under
    torch.compile, nor when θ wants a gradient."""
    if _is_compiling() or (torch.is_grad_enabled() and theta.requires_grad):
        return False
    if backend == "triton" or (backend == "auto" and x.is_cuda):
        return theta.dtype == torch.float32 and (
            backend == "triton" or (x.numel() > 0 and _auto_triton(x.device) is not None))
    return (positions is not None and backend in ("auto", "c") and x.device.type == "cpu"
            and not positions.is_floating_point()
            and not (torch.is_grad_enabled() and x.requires_grad))


def _rotate_by_positions(x, positions, theta, layout, out, backend):
    """x rotated by m·θ_i with the angles computed in the kernel: one call (after
    :func:`_angles_in_kernel` said yes).

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
        if positions is not None and positions.dtype != torch.int64:
            positions = positions.long()
        if not _ckernel.rotate_positions(x_rot, positions, theta, out_rot, layout,
                                         fresh=out is None):
            return None
        if partial and target is not x:
            target[..., rotary_dim:].copy_(x[..., rotary_dim:])
        _raw_kernel_wrote("rope_lab C loop", target, out_rot, out is None)
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
    """q and k rotated by m·θ_i (the same positions for both; ``RotaryEmbedding.forward``)
    in one launch of the Triton kernel on CUDA, or by two calls of the C loop on a CPU with
    nothing else around them: ``(q_out, k_out)``, two new tensors, or None when that does
    not apply (a gradient to record, float positions, dtypes or memory orders the kernels
    cannot take; backend "triton" runs CPU tensors under TRITON_INTERPRET=1). The caller
    then rotates them one by one.

    positions: validated for both, or None for 0 … seq − 1; theta: ``(r/2,)``, float32 for
    Triton, x's table dtype for C.
    """
    if backend == "auto":
        if q.device.type == "cpu":
            return _c_pair(q, k, positions, theta, layout)
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


def _c_pair(q, k, positions, theta, layout):
    """:func:`rotate_pair` on a CPU: the C loop on q, then on k, for integer position ids,
    each with its own cos/sin table of the ids."""
    if _is_compiling() or (torch.is_grad_enabled() and (
            q.requires_grad or k.requires_grad or theta.requires_grad)):
        return None
    if positions is None or positions.is_floating_point():
        return None  # the cached table of 0 … seq − 1; float ids: tables
    elif positions.dtype != torch.int64:
        positions = positions.long()
    rotary_dim = 2 * theta.shape[0]
    if rotary_dim != q.shape[-1] or rotary_dim != k.shape[-1]:
        return None  # partial rotary: apply_rope's path copies the tails
    q_out = torch.empty_like(q, memory_format=torch.contiguous_format)
    k_out = torch.empty_like(k, memory_format=torch.contiguous_format)
    if not (_ckernel.rotate_positions(q, positions, theta, q_out, layout)
            and _ckernel.rotate_positions(k, positions, theta, k_out, layout)):
        return None
    for listener in _raw_kernel_listeners:
        listener("rope_lab C loop", q_out, k_out)
    return q_out, k_out
