"""The paths made of PyTorch's own kernels: the reference formula, eager blocks, one complex
multiply, and four whole-tensor kernels (see :mod:`rope_lab.fast` for when each runs).

All rotate the first 2·cos.shape[-1] features of x by tables ``cos, sin`` of shape
``(..., seq, r/2)`` (float32 or float64, broadcasting against ``x.shape[:-1]``) and trust
their inputs.
"""

from __future__ import annotations

import itertools
import math
import weakref

import torch


def rotate_reference(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str
) -> torch.Tensor:
    """The formula as written, the reference every fast path is tested against.

    Rotates the first 2·cos.shape[-1] features of x and passes the rest; trusts its inputs.
    cos, sin: ``(..., seq, r/2)`` in float32 or float64, broadcasting against x.
    """
    half = cos.shape[-1]
    rotary_dim = 2 * half
    compute = torch.promote_types(x.dtype, cos.dtype)
    rotated = x[..., :rotary_dim].to(compute)
    if layout == "half":
        a, b = rotated[..., :half], rotated[..., half:]
        out = torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
    else:
        a, b = rotated[..., 0::2], rotated[..., 1::2]
        out = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    out = out.to(x.dtype)
    if rotary_dim == x.shape[-1]:
        return out
    return torch.cat((out, x[..., rotary_dim:]), dim=-1)


# Block size for the eager half-layout path, per intra-op CPU thread: x block + out block
# should stay in cache while the three kernels pass over it (1 MiB of x is one head of 2048
# tokens × 128 features in float32). Smaller blocks mean more kernel launches, and with
# several threads each launch ends by waiting for all of them. Measured on 2 quiet cores,
# (1, 32, 2048, 128) float32: 1 MiB blocks on one thread, 4 MiB on two, were the fastest
# (1.25-1.30 and 1.20-1.27 × clone); whole-tensor kernels on two threads 1.40-1.49 ×.
BLOCK_BYTES = 1 << 20
MULTI_THREAD_BLOCK_BYTES = 4 << 20


def rotate_complex(x, cos, sin, out, compute):
    """Interleaved pairs (2i, 2i+1) as complex numbers: one multiply by e^{i m θ_i}, straight
    into out when the memory allows complex views, else through one temporary."""
    rotation = complex_rotation(cos, sin)
    if x.dtype == compute and complex_view_ok(x, out):
        torch.mul(_as_complex(x), rotation, out=_as_complex(out))
        return
    product = _as_complex(x.to(compute).contiguous()) * rotation
    out.copy_(torch.view_as_real(product).flatten(-2))


def rotate_in_blocks(x, cos, sin, layout, out, compute, in_place):
    """Rotate x with three kernels, block by block where blocks pay (see blocking_pays);
    on other devices with :func:`rotate_whole`."""
    if not blocking_pays(x):
        rotate_whole(x, cos, sin, layout, out, compute, in_place)
        return
    half = cos.shape[-1]
    batch = x.shape[:-1]
    cos_both = cos_for_both(cos, layout).expand(*batch, 2 * half)
    sin = sin.expand(*batch, half)
    # Write straight into out when it has the compute dtype and is not x itself (the first
    # kernel writes x·cos before the others read x); otherwise go through a scratch block.
    direct = out.dtype == compute and not in_place
    row_bytes = x.shape[-1] * compute.itemsize
    blocks = list(block_indices(batch, row_bytes, block_bytes()))
    scratch = None
    if not direct:
        biggest = x[blocks[0]].shape
        scratch = torch.empty(biggest, dtype=compute, device=x.device)
    for index in blocks:
        x_block, out_block = x[index], out[index]
        if direct:
            rotate_block(x_block, cos_both[index], sin[index], layout, out_block)
        else:
            target = scratch[tuple(slice(0, n) for n in x_block.shape)]
            rotate_block(x_block, cos_both[index], sin[index], layout, target)
            out_block.copy_(target)  # the single rounding to out's dtype


def blocking_pays(x) -> bool:
    """Blocks pay on a CPU (caches shared by the three kernels); on a GPU without Triton
    they only add launches (:func:`rotate_whole` runs there). On a heavily oversubscribed
    machine multi-threaded blocks can stall (every kernel waits for a descheduled thread);
    ``torch.set_num_threads(1)`` is then the faster setting.
    """
    return x.device.type == "cpu"


def rotate_whole(x, cos, sin, layout, out, compute, in_place):
    """out = R x in four whole-tensor kernels, computed in ``compute``, rounded once into out.

    t = a·c (a temporary half the size of x, in ``compute``), then out_a = t − b·s as one
    addcmul that writes straight into out's dtype; t = b·c, out_b = t + a·s likewise. For
    bfloat16 x that moves 14 bytes per element (Hugging Face's eager form, in bfloat16: about
    20), and a 16-bit out is rounded once. In place both halves are computed before either
    is written (out_a would overwrite a, which out_b needs).
    """
    a, b = pair_views(x, layout)
    out_a, out_b = pair_views(out, layout)
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


def block_bytes() -> int:
    return BLOCK_BYTES if torch.get_num_threads() == 1 else MULTI_THREAD_BLOCK_BYTES


def rotate_block(x, cos_both, sin, layout, out):
    """out = R x for one block: a' = a·c − b·s, b' = a·s + b·c, as three in-cache kernels.

    cos_both: cos repeated to the width of x in the pairs' layout, so that the first kernel
    (out = x·cos for every feature) is one plain multiply over contiguous rows.
    """
    torch.mul(x, cos_both, out=out)  # (a·c, b·c)
    a, b = pair_views(x, layout)
    out_a, out_b = pair_views(out, layout)
    out_a.addcmul_(b, sin, value=-1)  # a·c − b·s
    out_b.addcmul_(a, sin)  # b·c + a·s


# Tables derived from cos/sin (cos repeated to full width, e^{imθ} as complex numbers), by
# the ids of their sources. The cached tables of apply_rope come back as the same tensors on
# every call, so each derived table is built once; weak references and version counters make
# sure a freed or modified source is never served stale.
derived_cache: dict = {}


def _derived(kind: str, build, *sources: torch.Tensor) -> torch.Tensor:
    if any(t.is_inference() for t in sources) or _capturing(sources[0]):
        # no version counter to trust, or a table whose values exist only when a CUDA graph
        # replays: not cached
        return build(*sources)
    key = (kind, *(id(t) for t in sources))
    entry = derived_cache.get(key)
    if entry is not None and all(
        ref() is t and version == t._version
        for (ref, version), t in zip(entry[0], sources, strict=True)
    ):
        return entry[1]
    table = build(*sources)
    if len(derived_cache) >= 32:
        derived_cache.clear()

    def forget(_, key=key):  # a source died: its derived table goes with it
        derived_cache.pop(key, None)

    derived_cache[key] = ([(weakref.ref(t, forget), t._version) for t in sources], table)
    return table


def _capturing(t: torch.Tensor) -> bool:
    return t.is_cuda and torch.cuda.is_current_stream_capturing()


def cos_for_both(cos: torch.Tensor, layout: str) -> torch.Tensor:
    """cos at every feature: (c_0 … c_{r/2−1}, c_0 … c_{r/2−1}) for "half", (c_0, c_0, c_1, c_1,
    …) for "interleaved"; ``(..., seq, r)``."""
    if layout == "half":
        return _derived("half", lambda c: torch.cat((c, c), dim=-1), cos)
    return _derived("interleaved", lambda c: c.repeat_interleave(2, dim=-1), cos)


def complex_rotation(cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """e^{i m θ_i} = cos + i·sin as a complex tensor ``(..., seq, r/2)``."""
    return _derived("complex", torch.complex, cos, sin)


def pair_views(t, layout):
    """The first and the second feature of every pair, as two ``(..., r/2)`` views."""
    if layout == "half":
        half = t.shape[-1] // 2
        return t[..., :half], t[..., half:]
    return t[..., 0::2], t[..., 1::2]


def block_indices(batch: torch.Size, row_bytes: int, size: int):
    """Index tuples cutting the leading dims ``batch`` into blocks of about size bytes.

    Whole dims are iterated from the left; the first dim whose slices fit is cut into
    ranges. One block (``...``) when everything fits.
    """
    rows_per_index = [math.prod(batch[k + 1:]) for k in range(len(batch))]
    if math.prod(batch) * row_bytes <= size:
        yield (Ellipsis,)
        return
    split = next(k for k, rows in enumerate(rows_per_index)
                 if rows * row_bytes <= size or k == len(batch) - 1)
    step = max(1, size // (rows_per_index[split] * row_bytes))
    for outer in itertools.product(*(range(n) for n in batch[:split])):
        for start in range(0, batch[split], step):
            yield (*outer, slice(start, start + step))


def complex_view_ok(*tensors) -> bool:
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
