"""What RoPE costs, counted rather than timed: bytes, FLOPs, kernels, and the roofline.

Counts do not depend on the machine or its load, so notebook 09 checks claims on them and
only shows timings. :func:`rope_traffic` and :func:`layer_flops` are the model (formulas);
:func:`count_kernels` measures what a call actually does, every path included: PyTorch's
dispatcher sees each aten kernel, and the raw kernels that bypass it (the C loop, Triton)
report their writes to it (``rope_lab.fast._raw_kernel_listeners``).
"""

from __future__ import annotations

import torch

from rope_lab import fast
from rope_lab.i18n import lazy_gettext


def rope_traffic(batch: int, heads: int, seq: int, head_dim: int, *,
                 bytes_per_element: int = 4) -> dict:
    """Bytes moved and FLOPs done by RoPE on one ``(batch, heads, seq, head_dim)`` tensor.

    Each pair (a, b) costs 4 multiplies and 2 adds (a·c − b·s, a·s + b·c): 3 FLOPs per
    element. Each element is read once and written once; the cos and sin tables
    (seq × d/2 float32 each) are read too, but are shared by every head and batch row.
    """
    elements = batch * heads * seq * head_dim
    tensor_bytes = 2 * elements * bytes_per_element
    table_bytes = 2 * seq * (head_dim // 2) * 4
    flops = 3 * elements
    # Lazy keys: code reads them in English (traffic["flops"]), a printed key speaks the
    # course's language (notebook 09 prints the dict).
    return {lazy_gettext("elements"): elements, lazy_gettext("tensor_bytes"): tensor_bytes,
            lazy_gettext("table_bytes"): table_bytes, lazy_gettext("flops"): flops,
            lazy_gettext("intensity"): flops / (tensor_bytes + table_bytes)}


def attainable_gflops(intensity: float, peak_gflops: float, bandwidth_gb_s: float) -> float:
    """The roofline: min(peak compute, intensity × memory bandwidth), in GFLOP/s."""
    return min(peak_gflops, intensity * bandwidth_gb_s)


def layer_flops(seq: int, d_model: int, *, ffn_multiplier: int = 4) -> dict:
    """FLOPs of one transformer layer's parts on ``seq`` tokens (heads × head_dim = d_model).

    A matmul of (n × k) by (k × m) costs 2·n·k·m FLOPs.
    """
    return {
        "q, k, v, o projections": 4 * 2 * seq * d_model * d_model,
        "RoPE on q and k": 2 * 3 * seq * d_model,
        "scores q kᵀ": 2 * seq * seq * d_model,
        "softmax": 5 * seq * seq * (d_model // 64),  # ~5 FLOPs per score, heads of 64
        "weights × v": 2 * seq * seq * d_model,
        "MLP": 2 * 2 * seq * d_model * ffn_multiplier * d_model,
    }


_ALLOCATIONS = {"empty", "empty_like", "empty_strided", "detach", "lift_fresh"}


def count_kernels(function, *args, **kwargs) -> dict:
    """The kernels ``function`` runs and the bytes they write (views and allocations aside):
    a count that does not depend on the machine or its load.

    Every aten kernel is seen by PyTorch's dispatcher; the C loop and the Triton kernel,
    which write through raw pointers, report themselves ("rope_lab C loop", "rope_lab
    Triton kernel") with the bytes they wrote.

    Returns {"kernels": n, "bytes_written": b, "names": [...]}.
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names, self.bytes_written = [], 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            name = func.overloadpacket.__name__
            outputs = result if isinstance(result, (tuple, list)) else [result]
            tensors = [t for t in outputs if isinstance(t, torch.Tensor)]
            if tensors and not func.is_view and name not in _ALLOCATIONS:
                self.names.append(name)
                self.bytes_written += sum(t.numel() * t.element_size() for t in tensors)
            return result

    recorder = Recorder()

    def raw_kernel(name, *written):  # one launch, the tensors it wrote
        recorder.names.append(name)
        recorder.bytes_written += sum(t.numel() * t.element_size() for t in written)

    fast._raw_kernel_listeners.append(raw_kernel)
    try:
        with recorder:
            function(*args, **kwargs)
    finally:
        fast._raw_kernel_listeners.remove(raw_kernel)
    return {"kernels": len(recorder.names), "bytes_written": recorder.bytes_written,
            "names": recorder.names}
