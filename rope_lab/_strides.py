"""Folding the leading dims of several tensors into three, for kernels that take strides.

A kernel that loops over (batch, heads, seq) rows needs each tensor's strides over those
dims. Any number of leading dims reduces to three when neighbours that step like one dim are
merged, so a kernel with three loop levels serves every shape and memory order that matter
(contiguous, transposed heads and seq, per-batch position tables broadcast with stride 0).
Used by the C loop (:mod:`rope_lab._ckernel`) and the Triton kernels.
"""

from __future__ import annotations

import torch


def fold(batch: torch.Size, strides: list) -> tuple | None:
    """Fold the leading dims ``batch`` (seq last) into three, the same way for every tensor.

    strides: one tuple of strides over ``batch`` per tensor (0 where it broadcasts). Dims of
    size 1 are dropped; neighbours k, k+1 merge when every tensor steps over k exactly as over
    a whole row of k+1. Returns (sizes, strides per tensor), three each, or None when more than
    three dims remain.
    """
    keep = [k for k, n in enumerate(batch) if n != 1]
    sizes = [batch[k] for k in keep]
    folded = [[s[k] for k in keep] for s in strides]
    k = len(sizes) - 2
    while k >= 0:
        if all(s[k] == s[k + 1] * sizes[k + 1] for s in folded):
            sizes[k] *= sizes.pop(k + 1)
            for s in folded:
                s[k] = s.pop(k + 1)
        k -= 1
    if len(sizes) > 3:
        return None
    pad = 3 - len(sizes)
    return [1] * pad + sizes, [[0] * pad + s for s in folded]


def broadcast_strides(tensor: torch.Tensor, batch, *, trailing: int = 1) -> list:
    """Strides of ``tensor``'s dims but the last ``trailing`` (a table's pairs: 1; positions:
    0) broadcast to ``batch``: 0 where it repeats (a dim of size 1, or one it lacks). Shape
    arithmetic only, no new tensor: ``tensor.expand(*batch, n).stride()[:-1]`` for a table
    known to broadcast."""
    shape, stride = tensor.shape, tensor.stride()
    dims = len(shape) - trailing
    return [0] * (len(batch) - dims) + [0 if shape[k] == 1 else stride[k] for k in range(dims)]
