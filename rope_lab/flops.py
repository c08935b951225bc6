"""Count the floating-point operations a function performs, by running it.

Built on torch's own ``FlopCounterMode`` (which counts matrix products, 2·M·N·K each) with
one rule added: every elementwise +, −, ×, ÷ or negation costs one operation per output
element. That is enough to compare RoPE as a dense d×d matrix with its sparse elementwise
form in notebook 04 without counting by hand.
"""

from __future__ import annotations

import math

import torch
from torch.utils.flop_counter import FlopCounterMode

_aten = torch.ops.aten
ELEMENTWISE_OPS = (_aten.add, _aten.sub, _aten.mul, _aten.div, _aten.neg)


def _one_per_output_element(*input_shapes, out_shape=None, **kwargs) -> int:
    return math.prod(out_shape)


def count_flops(function, *args, **kwargs) -> int:
    """Run ``function(*args, **kwargs)`` and return the floating-point operations it did.

    Matrix products count 2·M·N·K (a multiply and an add per term); elementwise
    add / sub / mul / div / neg count one per output element. Functions such as cos and
    sin, and pure data movement (indexing, cat, reshape), count zero.
    """
    if not callable(function):
        raise TypeError(f"function must be callable, got {type(function).__name__}")
    rules = {op: _one_per_output_element for op in ELEMENTWISE_OPS}
    counter = FlopCounterMode(display=False, custom_mapping=rules)
    with counter:
        function(*args, **kwargs)
    return counter.get_total_flops()
