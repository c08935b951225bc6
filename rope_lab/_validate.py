"""Checks run once at the public boundary.

Every message names the parameter, the value received and what was expected, so a learner
who passes a bad value reads one sentence and knows what to change.
"""

from __future__ import annotations

import math
import numbers
import weakref
from collections.abc import Sequence

import torch

LAYOUTS = ("half", "interleaved")

# A table built from a number you pass (positions × frequencies, a d×d matrix per position,
# a context length's worth of sums) is refused past this many bytes, before anything is
# allocated: a mistyped dim or length gets one clear sentence, not a frozen machine or the
# allocator's message. Raise it (rope_lab._validate.MAX_TABLE_BYTES = ...) if you mean it.
MAX_TABLE_BYTES = 1 << 30

# float32 holds every integer only up to 2^24; past it m and m + 1 can round to one value.
# Float positions in a 16/32-bit dtype that reach it are refused (the dtype already lost them);
# integer positions stay exact at any size (see rope_lab.rope.apply_rope).
FLOAT32_EXACT_LIMIT = 1 << 24

# torch.compiler.is_compiling appeared in torch 2.3; older versions never report compiling.
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)


def values_readable(tensor: torch.Tensor) -> bool:
    """Whether a check may read ``tensor``'s values now: not while torch.compile traces (a
    value read breaks the graph), not during CUDA graph capture (a read would synchronize),
    not for a meta tensor (it has none)."""
    if _is_compiling() or tensor.is_meta:
        return False
    return not (tensor.is_cuda and torch.cuda.is_current_stream_capturing())


def check_dim(dim, name: str = "dim") -> int:
    """A positive even integer: RoPE rotates features in pairs."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{name} must be an int, got {dim!r} of type {type(dim).__name__}")
    if dim <= 0 or dim % 2:
        raise ValueError(
            f"{name} must be a positive even integer (features rotate in pairs), got {dim}"
        )
    return dim


def check_positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r} of type {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return value


def check_bool(value, name: str) -> bool:
    """True or False only: a string such as "no" is truthy and would silently mean yes."""
    if not isinstance(value, bool):
        raise TypeError(
            f"{name} must be True or False, got {value!r} of type {type(value).__name__}"
        )
    return value


def check_has_data(tensor: torch.Tensor, name: str) -> torch.Tensor:
    """Refuse meta tensors where the values matter (they have a shape but no data)."""
    if tensor.device.type == "meta":
        raise ValueError(
            f"{name} is a meta tensor (a shape with no values), but its values are needed "
            f"here; expected a tensor on a real device such as 'cpu' or 'cuda'"
        )
    return tensor


def check_indices(indices, count: int, name: str, count_name: str) -> tuple[int, ...]:
    """A non-empty sequence of ints in [0, count): a negative index would silently count from
    the end, one past the end would fail deep inside a plot."""
    if isinstance(indices, (str, bytes)) or not isinstance(indices, Sequence) or not indices:
        raise TypeError(f"{name} must be a non-empty sequence of ints, got {indices!r}")
    for index in indices:
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"{name} must hold ints, got {index!r} in {indices!r}")
        if not 0 <= index < count:
            raise ValueError(
                f"{name} must lie in [0, {count_name}) = [0, {count}), got {index} in {indices!r}"
            )
    return tuple(indices)


def check_finite_number(value, name: str) -> float:
    """Any real number but NaN and ±inf (an angle, a coordinate)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r} of type {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    return float(value)


def check_int(value, name: str) -> int:
    """Any int (a position may be 0 or negative), never a bool or a float."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r} of type {type(value).__name__}")
    return value


def check_base(base, name: str = "base") -> float:
    """A finite number greater than zero (θ_i = base^(−2i/d) needs a positive base).

    Any real number: a Python int or float, a NumPy scalar (``np.float32(5e5)`` is exactly
    500000), a one-element tensor; returned as a Python float (float64)."""
    if isinstance(base, torch.Tensor) and base.numel() == 1:
        base = base.item()
    if isinstance(base, bool) or not isinstance(base, numbers.Real):  # NumPy's bool is not
        raise TypeError(f"{name} must be a number, got {base!r} of type {type(base).__name__}")
    try:
        value = float(base)
    except OverflowError:  # an int past float's range (10**400): no frequency survives it
        raise ValueError(f"{name} must be a finite number greater than 0 and below "
                         f"{_FLOAT_MAX:.3g} (float64's largest), got an int of "
                         f"{len(str(abs(int(base))))} digits") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number greater than 0, got {base}")
    return value


_FLOAT_MAX = 1.7976931348623157e308


def check_layout(layout) -> str:
    if layout not in LAYOUTS:
        choices = ", ".join(repr(c) for c in LAYOUTS)
        raise ValueError(f"layout must be one of {choices}, got {layout!r}")
    return layout


# The paths apply_rope can take, by name (see rope_lab.fast). "auto" picks the fastest one
# that applies; "reference" is the formula in plain torch ops.
BACKENDS = ("auto", "reference", "eager", "c", "complex", "triton")


def check_backend(backend) -> str:
    if not isinstance(backend, str) or backend not in BACKENDS:
        choices = ", ".join(repr(c) for c in BACKENDS)
        raise ValueError(f"backend must be one of {choices}, got {backend!r}")
    return backend


def check_float_tensor(x, name: str = "x") -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor (float16, bfloat16, float32 or float64), "
            f"got dtype {x.dtype}"
        )
    return x


def check_rope_input(x, name: str = "x") -> torch.Tensor:
    """A float tensor shaped (..., seq, dim) with an even, non-zero last dimension."""
    check_float_tensor(x, name)
    if x.ndim < 2:
        raise ValueError(
            f"{name} must have shape (..., seq, dim) with at least 2 dimensions, "
            f"got shape {tuple(x.shape)}"
        )
    return x


def check_writable_in_place(x: torch.Tensor, function: str, name: str = "x") -> None:
    """x may be overwritten in place: PyTorch allows it and each element is written once."""
    if torch.is_grad_enabled() and x.requires_grad:
        raise ValueError(
            f"{function} rotates {name} in place, but {name} requires grad; "
            f"use apply_rope({name}) instead"
        )
    if _is_compiling():  # dynamo cannot trace these two checks; it guards x's properties
        return
    if x.is_inference() and not torch.is_inference_mode_enabled():
        raise ValueError(
            f"{function} rotates {name} in place, but {name} is an inference tensor (made "
            "under torch.inference_mode()), which PyTorch lets you write into only inside "
            f"inference mode; call it inside torch.inference_mode(), or use apply_rope({name})"
        )
    if not non_overlapping(x):
        raise ValueError(
            f"{function} rotates {name} in place, but elements of {name} share memory (shape "
            f"{tuple(x.shape)}, strides {x.stride()}: an expand() or an overlapping "
            "as_strided view), so a shared element would be rotated more than once; "
            f"use apply_rope({name}), or {name}.contiguous() first"
        )


def non_overlapping(t: torch.Tensor) -> bool:
    """True when no two elements of t share memory.

    PyTorch's own test answers "no" for ordinary tensors and "yes" for expanded ones; for the
    rest (as_strided views) the strides decide, conservatively: sorted by stride, every dim
    must step past the whole extent of the dims inside it.
    """
    verdict = torch._debug_has_internal_overlap(t)  # 0 no, 1 yes, 2 too hard to tell
    if verdict != 2:
        return verdict == 0
    extent = 1
    for stride, size in sorted((t.stride(k), t.shape[k]) for k in range(t.dim())
                               if t.shape[k] > 1):
        if stride < extent:
            return False
        extent = stride * size
    return True


def check_table_size(function: str, what: str, nbytes: int) -> None:
    """Refuse a table of ``nbytes`` past MAX_TABLE_BYTES; ``what`` names the parameters."""
    if nbytes > MAX_TABLE_BYTES:
        raise ValueError(
            f"{function}: {what} needs {format_bytes(nbytes)} of memory (limit "
            f"{format_bytes(MAX_TABLE_BYTES)}, rope_lab._validate.MAX_TABLE_BYTES); "
            "expected a smaller value"
        )


def format_bytes(nbytes: float) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit}"
    return f"{nbytes:.0f} bytes"


def check_rotary_dim(rotary_dim, dim: int) -> int:
    """Default: the whole last dimension. Otherwise an even int in [2, dim]."""
    if rotary_dim is None:
        check_dim(dim, name="x.shape[-1]")
        return dim
    if isinstance(rotary_dim, bool) or not isinstance(rotary_dim, int):
        raise TypeError(
            f"rotary_dim must be an int or None, got {rotary_dim!r} "
            f"of type {type(rotary_dim).__name__}"
        )
    if rotary_dim <= 0 or rotary_dim % 2 or rotary_dim > dim:
        raise ValueError(
            f"rotary_dim must be an even integer between 2 and the feature size {dim}, "
            f"got {rotary_dim}"
        )
    return rotary_dim


_INTEGER_DTYPES = frozenset((torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64))
# torch ≥ 2.3 has these, with few operations (no abs, no arithmetic on CPU); NumPy's uint16
# and uint32 arrays arrive as them. Their values fit int64, which they are turned into.
_WIDE_UNSIGNED = tuple(getattr(torch, name) for name in ("uint16", "uint32")
                       if hasattr(torch, name))
_UINT64 = getattr(torch, "uint64", None)


def as_positions(positions, *, device=None, name: str = "positions") -> torch.Tensor:
    """Turn ints, floats, ranges, lists, numpy arrays or tensors into a finite tensor.

    Integer tensors are never read on the host: no device sync, nothing that stops a CUDA
    graph capture or torch.compile. Float positions are checked for finite values (and, in a
    16/32-bit dtype, for values below 2^24) with one reduction — a device sync on a GPU —
    except where values cannot be read (:func:`values_readable`). A ``device="meta"`` target
    (an x with no values) takes positions from any device and checks only their shape.
    """
    meta_target = device is not None and getattr(device, "type", device) == "meta"
    if isinstance(positions, torch.Tensor):
        if positions.is_meta and not meta_target:
            check_has_data(positions, name)
        tensor = positions if device is None or positions.device == device \
            else positions.to(device)
        if tensor.dtype in _INTEGER_DTYPES:  # the common case: nothing to read, nothing to check
            return tensor
        tensor = _unsigned_as_int64(tensor, name)
        if tensor.dtype == torch.int64:
            return tensor
    elif isinstance(positions, (int, float, range, Sequence)) or hasattr(positions, "__array__"):
        if isinstance(positions, bool):
            raise TypeError(f"{name} must be numbers, got {positions!r}")
        try:
            tensor = torch.as_tensor(positions, device=device)
            if tensor.dtype == torch.float32 and not hasattr(positions, "dtype"):
                # Python floats are doubles: keep their precision instead of torch's float32.
                tensor = torch.as_tensor(positions, dtype=torch.float64, device=device)
        except (TypeError, ValueError, RuntimeError) as error:
            raise TypeError(f"{name} must be numbers, got {positions!r}") from error
        tensor = _unsigned_as_int64(tensor, name)
    else:
        raise TypeError(
            f"{name} must be a tensor, a number or a sequence of numbers, "
            f"got {type(positions).__name__}"
        )
    if tensor.dtype == torch.bool or tensor.is_complex():
        raise TypeError(f"{name} must be integer or real, got dtype {tensor.dtype}")
    if tensor.is_floating_point() and tensor.numel() and values_readable(tensor):
        # One reduction (and one device sync) for both checks: max propagates NaN and inf.
        largest = tensor.abs().max().item()
        if not math.isfinite(largest):
            bad = tensor[~torch.isfinite(tensor)][0].item()
            raise ValueError(f"{name} must all be finite, found {bad}")
        if tensor.dtype != torch.float64 and largest >= FLOAT32_EXACT_LIMIT:
            raise ValueError(
                f"{name} in {tensor.dtype} reach {largest:g}, but at or beyond 2^24 = "
                f"{FLOAT32_EXACT_LIMIT} that dtype cannot hold every integer (neighbouring "
                f"positions collapse onto one); expected int64 or float64 positions"
            )
    return tensor


def _unsigned_as_int64(tensor: torch.Tensor, name: str) -> torch.Tensor:
    """uint16 / uint32 positions as int64 (exact); uint64 refused: torch cannot compute with
    it and its values may not fit int64."""
    if tensor.dtype in _WIDE_UNSIGNED:
        return tensor.to(torch.int64)
    if _UINT64 is not None and tensor.dtype == _UINT64:
        raise TypeError(f"{name} have dtype torch.uint64, which torch cannot compute with; "
                        "expected int64 positions (positions.to(torch.int64), or "
                        "numpy's .astype('int64'))")
    return tensor


def check_positions_shape(positions: torch.Tensor, batch_shape: torch.Size) -> None:
    """positions: one per token, ``(seq,)`` or a full ``x.shape[:-1]``-shaped broadcast.

    Plain broadcasting would accept two shapes that are almost always mistakes and give a
    silently wrong answer: a single position for many tokens, and Hugging Face-style
    ``(batch, seq)`` positions against ``(batch, heads, seq, dim)`` queries, which align with
    the *heads* dimension when batch == heads.
    """
    shape = positions.shape
    if (shape, batch_shape) in _shapes_that_broadcast:
        return
    seq = batch_shape[-1]
    if positions.ndim == 0 or positions.shape[-1] != seq:
        got = "a single position" if positions.ndim == 0 else f"{positions.shape[-1]} positions"
        raise ValueError(
            f"positions of shape {tuple(positions.shape)} give {got} for {seq} tokens; "
            f"expected one position per token: shape ({seq},) or one that broadcasts to "
            f"x.shape[:-1] = {tuple(batch_shape)}"
        )
    if 1 < positions.ndim < len(batch_shape):
        example = "positions[:, None, :]" if len(batch_shape) == 3 else "positions[..., None, :]"
        raise ValueError(
            f"positions of shape {tuple(positions.shape)} are ambiguous for x.shape[:-1] = "
            f"{tuple(batch_shape)}: give them {len(batch_shape)} dimensions (for (batch, seq) "
            f"positions and (batch, heads, seq, dim) x use {example}) or shape ({seq},)"
        )
    # Shape arithmetic by hand (torch.broadcast_shapes costs more than the rotation of a
    # decode step): every dim of positions, aligned from the right, is 1 or x's.
    offset = len(batch_shape) - positions.ndim
    if offset < 0 or any(size not in (1, batch_shape[offset + k])
                         for k, size in enumerate(positions.shape)):
        raise ValueError(
            f"positions of shape {tuple(positions.shape)} do not broadcast to x.shape[:-1] = "
            f"{tuple(batch_shape)}; expected a shape like ({seq},) or one that "
            f"broadcasts to {tuple(batch_shape)}"
        )
    if len(_shapes_that_broadcast) >= 256:
        _shapes_that_broadcast.clear()
    _shapes_that_broadcast.add((shape, batch_shape))


# (positions shape, x.shape[:-1]) pairs that passed check_positions_shape: a model calls with
# the same few shapes on every layer and step.
_shapes_that_broadcast: set = set()


def check_inv_freq(inv_freq, expected_len: int, *, recheck: bool = False) -> torch.Tensor:
    """A float32/float64 ``(expected_len,)`` tensor of finite values. The values are read once
    per tensor and version (a model passes the same buffer on every call; on a GPU a read is
    a device sync); ``recheck`` reads them again (the caller saw them change without a new
    version: a write through ``.data``)."""
    if not isinstance(inv_freq, torch.Tensor):
        raise TypeError(f"inv_freq must be a torch.Tensor, got {type(inv_freq).__name__}")
    if inv_freq.ndim != 1 or inv_freq.shape[0] != expected_len:
        raise ValueError(
            f"inv_freq must have shape ({expected_len},) (one frequency per rotated pair), "
            f"got shape {tuple(inv_freq.shape)}"
        )
    if inv_freq.dtype not in (torch.float32, torch.float64):
        raise TypeError(
            f"inv_freq must be float32 or float64 (16-bit frequencies put whole radians of "
            f"error into m·θ_i at long positions), got dtype {inv_freq.dtype}"
        )
    if (recheck and values_readable(inv_freq)) or _needs_finite_check(inv_freq):
        if not bool(torch.isfinite(inv_freq).all()):
            bad = inv_freq[~torch.isfinite(inv_freq)][0].item()
            raise ValueError(f"inv_freq must all be finite, found {bad}")
        _remember_finite(inv_freq)
    return inv_freq


# inv_freq tensors already found finite, by id: (weak reference, version). A model passes the
# same buffer on every call; reading it again each time would cost a device sync on a GPU.
_finite_frequencies: dict = {}


def _needs_finite_check(inv_freq: torch.Tensor) -> bool:
    """False when the values cannot be read now, or this tensor, unchanged, passed before."""
    if not values_readable(inv_freq):
        return False
    if inv_freq.is_inference():  # no version counter: check every time
        return True
    entry = _finite_frequencies.get(id(inv_freq))
    return not (entry is not None and entry[0]() is inv_freq
                and entry[1] == inv_freq._version)


def _remember_finite(inv_freq: torch.Tensor) -> None:
    """Record a tensor that passed the check (only then: one that failed must fail again)."""
    if inv_freq.is_inference():
        return
    if len(_finite_frequencies) >= 64:
        _finite_frequencies.clear()
    key = id(inv_freq)
    _finite_frequencies[key] = (
        weakref.ref(inv_freq, lambda _, key=key: _finite_frequencies.pop(key, None)),
        inv_freq._version)


def check_tables(cos, sin, x: torch.Tensor, rotary_dim: int, layout: str) -> bool:
    """cos and sin tables for x: True when they are transformers' duplicated ``(..., seq, r)``
    (one value per feature), False for ``(..., seq, r/2)`` (one value per pair); r is
    rotary_dim. Their leading dims follow the positions' rule (:func:`check_positions_shape`:
    transformers' ``(batch, seq, r)`` against ``(batch, heads, seq, dim)`` x would align batch
    with heads). A duplicated table whose two copies of a pair's value differ (the other
    layout's pairing, or not a duplicated table at all) is refused where its values can be
    read for free (a CPU tensor)."""
    if cos is None or sin is None:
        given = "cos" if sin is None else "sin"
        raise ValueError(f"pass both cos and sin tables, got only {given}")
    check_float_tensor(cos, "cos")
    check_float_tensor(sin, "sin")
    if cos.shape != sin.shape or cos.dtype != sin.dtype:
        raise ValueError(f"cos and sin must have the same shape and dtype, got cos "
                         f"{tuple(cos.shape)} {cos.dtype} and sin {tuple(sin.shape)} "
                         f"{sin.dtype}")
    if cos.ndim < 2 or cos.shape[-1] not in (rotary_dim, rotary_dim // 2):
        raise ValueError(
            f"cos and sin of shape {tuple(cos.shape)} fit neither table convention: expected "
            f"(..., seq, {rotary_dim}), one value per feature, duplicated (transformers), or "
            f"(..., seq, {rotary_dim // 2}), one value per pair (flash-attention, vLLM), for "
            f"rotary_dim = {rotary_dim}; a table for partial rotary needs rotary_dim")
    if cos.device != x.device and x.device.type != "meta":
        raise ValueError(f"cos and sin must be on x's device {x.device}, got {cos.device}")
    check_has_data(cos, "cos")
    batch, leading, width = x.shape[:-1], cos.shape[:-1], cos.shape[-1]
    if (leading, batch) not in _shapes_that_broadcast:
        seq = batch[-1]
        if leading[-1] != seq:
            raise ValueError(
                f"cos and sin of shape {tuple(cos.shape)} give {leading[-1]} rows for {seq} "
                f"tokens; expected one row per token: shape ({seq}, {width}), or leading dims "
                f"that broadcast to x.shape[:-1] = {tuple(batch)}")
        if 1 < len(leading) < len(batch):
            raise ValueError(
                f"cos and sin of shape {tuple(cos.shape)} are ambiguous for x.shape[:-1] = "
                f"{tuple(batch)}: give them {len(batch) + 1} dimensions (transformers' "
                f"(batch, seq, r) tables against (batch, heads, seq, dim) x need cos[:, None] "
                f"and sin[:, None]) or shape ({seq}, {width})")
        offset = len(batch) - len(leading)
        if offset < 0 or any(size not in (1, batch[offset + k])
                             for k, size in enumerate(leading)):
            raise ValueError(
                f"cos and sin of shape {tuple(cos.shape)} do not broadcast to x.shape[:-1] = "
                f"{tuple(batch)} (plus their last dim); expected a shape like ({seq}, {width})")
        if len(_shapes_that_broadcast) >= 256:
            _shapes_that_broadcast.clear()
        _shapes_that_broadcast.add((leading, batch))
    duplicated = width == rotary_dim
    if duplicated and cos.is_cpu and values_readable(cos):
        half = rotary_dim // 2
        for name, table in (("cos", cos), ("sin", sin)):
            first, second = ((table[..., :half], table[..., half:]) if layout == "half"
                             else (table[..., 0::2], table[..., 1::2]))
            if not torch.equal(first, second):
                pairing = ("cat((c, c), -1)" if layout == "half"
                           else "c.repeat_interleave(2, -1)")
                raise ValueError(
                    f"{name} of shape {tuple(table.shape)} reads as transformers' duplicated "
                    f"table (last dim {rotary_dim} = rotary_dim), but its two copies of each "
                    f"pair's value differ: for layout={layout!r} they are {pairing}; for one "
                    f"value per pair pass (..., seq, {rotary_dim // 2})")
    return duplicated


def check_angle_dtype(dtype, name: str = "dtype") -> torch.dtype:
    """Angles m·θ_i lose whole turns in 16-bit floats, so only float32 or float64."""
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(
            f"{name} must be torch.float32 or torch.float64 (angles need at least 24 bits of "
            f"mantissa), got {dtype}"
        )
    return dtype


def positions_for(x: torch.Tensor, positions) -> torch.Tensor:
    """``arange(seq)`` when positions is None, else validated positions for x (..., seq, dim).

    On x's device; for a meta x (a shape with no values) positions from any device are
    accepted and only their shape is checked."""
    if positions is None:
        return torch.arange(x.shape[-2], device=x.device)
    positions = as_positions(positions, device=x.device)
    check_positions_shape(positions, x.shape[:-1])
    return positions


def check_qkv(q, k, v) -> None:
    """Float tensors (..., seq, d): q and k share d; k and v share seq."""
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        check_rope_input(tensor, name)
    for name, tensor in (("k", k), ("v", v)):
        if tensor.dtype != q.dtype or tensor.device != q.device:
            raise TypeError(
                f"{name} must have the same dtype and device as q, got {name} {tensor.dtype} "
                f"on {tensor.device} and q {q.dtype} on {q.device}; expected e.g. "
                f"{name}.to(q.dtype)"
            )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same feature size, got q.shape[-1] = {q.shape[-1]} and "
            f"k.shape[-1] = {k.shape[-1]}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of positions, got k.shape[-2] = {k.shape[-2]} "
            f"and v.shape[-2] = {v.shape[-2]}"
        )
