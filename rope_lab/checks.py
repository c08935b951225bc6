"""One-line verdicts for the claims a notebook makes.

Every claim in the course is followed by a check. A passing check prints one line that
starts with ✔ and the measured figure; a failing one raises ``AssertionError`` with ✘ and
the same figure, so a broken claim stops the notebook (and CI) instead of scrolling by.

A check must never pass by accident, so:

* :func:`check_close` compares the values themselves, in float64 (complex128 when either
  side is complex), whatever the two dtypes: ``tensor([2])`` is 0.5 away from 2.5, and a
  float32 1.0 is 1e-9 away from a float64 1 + 1e-9.
* NaN is never close to anything (not even NaN, unless ``equal_nan=True``); equal infinities
  (+inf and +inf) are equal, as in ``torch.isclose``.
* A condition or a comparison with nothing in it (an empty tensor) is an error, not a pass.

The verdict lines speak the course's language (:mod:`rope_lab.i18n`): in a Chinese notebook
the claim arrives translated and the words the package adds (``max |difference|`` …) come
from the package's catalog.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from rope_lab.i18n import _


def check(claim: str, condition, detail: str = "") -> None:
    """Assert ``condition`` and print ``✔ claim — detail``.

    ``condition`` is a bool, or a tensor (or NumPy array) that must be true everywhere. A
    tensor holding NaN fails (``bool(nan)`` is True in Python, but NaN proves nothing); an
    empty tensor raises ``ValueError``, since "all of nothing" would pass vacuously.
    """
    line = f"{claim} — {detail}" if detail else claim
    if not isinstance(condition, torch.Tensor) and hasattr(condition, "__array__"):
        condition = torch.as_tensor(condition)
    if isinstance(condition, torch.Tensor):
        if condition.numel() == 0:
            raise ValueError(
                f"check: condition for {claim!r} is an empty tensor of shape "
                f"{tuple(condition.shape)}; expected at least one element to check"
            )
        if (condition.is_floating_point() or condition.is_complex()) and bool(
            condition.isnan().any()
        ):
            raise AssertionError(_("✘ {line} (the condition contains NaN)").format(line=line))
        condition = bool(condition.all())
    elif isinstance(condition, float) and condition != condition:
        raise AssertionError(_("✘ {line} (the condition is NaN)").format(line=line))
    if not condition:
        raise AssertionError(f"✘ {line}")
    print(f"✔ {line}")


def check_close(
    claim: str,
    actual,
    expected,
    *,
    atol: float = 1e-6,
    rtol: float = 0.0,
    equal_nan: bool = False,
) -> float:
    """Assert ``|actual − expected| ≤ atol + rtol·|expected|`` everywhere; print the max gap.

    Both sides (tensors, NumPy arrays, numbers or lists) are compared in float64, or in
    complex128 when either is complex, on the CPU: no side is rounded to the other's dtype
    first. NaN on either side fails unless ``equal_nan=True`` (then NaN must sit at the same
    places on both sides); equal infinities count as equal. The shapes must broadcast and
    hold at least one element (else ``ValueError``).

    Returns the largest absolute difference, so a notebook can reuse the number.
    """
    for name, tolerance in (("atol", atol), ("rtol", rtol)):
        if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)):
            raise TypeError(f"check_close: {name} must be a number, got {tolerance!r}")
        if not math.isfinite(tolerance) or tolerance < 0:
            raise ValueError(f"check_close: {name} must be finite and ≥ 0, got {tolerance}")
    actual, expected = _as_wide(actual, "actual"), _as_wide(expected, "expected")
    try:
        actual, expected = torch.broadcast_tensors(actual, expected)
    except RuntimeError as error:
        raise ValueError(
            f"check_close: actual of shape {tuple(actual.shape)} and expected of shape "
            f"{tuple(expected.shape)} do not broadcast; expected shapes that broadcast"
        ) from error
    if actual.numel() == 0:
        raise ValueError(
            f"check_close: {claim!r} compares empty tensors (shape {tuple(actual.shape)}); "
            "expected at least one element to compare"
        )
    if actual.is_complex() or expected.is_complex():
        actual, expected = actual.to(torch.complex128), expected.to(torch.complex128)
    # Equal values are 0 apart even where the subtraction would give NaN (inf − inf).
    gap = torch.where(actual == expected, 0.0, (actual - expected).abs())
    nan_actual, nan_expected = actual.isnan(), expected.isnan()
    if equal_nan:
        gap = torch.where(nan_actual & nan_expected, 0.0, gap)
    allowed = atol + rtol * expected.abs()
    # gap == 0 first: rtol·|inf| is NaN even when rtol is 0. NaN gaps fail both tests.
    ok = bool(((gap == 0) | (gap <= allowed)).all())
    worst = float(gap.max())  # NaN when any gap is
    tolerance = f"atol {atol:.0e}" + (f", rtol {rtol:.0e}" if rtol else "")
    line = _("{claim} — max |difference| = {gap} ({tolerance})").format(
        claim=claim, gap=f"{worst:.2e}", tolerance=tolerance)
    if not ok:
        nans = int((nan_actual ^ nan_expected).sum() if equal_nan
                   else (nan_actual | nan_expected).sum())
        raise AssertionError(f"✘ {line}" + (_("; {count} NaN element(s)").format(count=nans)
                                            if nans else ""))
    print(f"✔ {line}")
    return worst


def _as_wide(value, name: str) -> torch.Tensor:
    """value as a CPU tensor in float64, or complex128 if complex (bools and ints by value).

    Bools (0 and 1) and integers up to 2^53 are exact in float64, so their verdict is exact;
    integers past 2^53 are refused, since float64 would round them and could call two
    different integers equal.
    """
    if not isinstance(value, torch.Tensor):
        # Through NumPy, so Python floats stay doubles (torch.as_tensor would make float32).
        value = np.asarray(value)
    tensor = torch.as_tensor(value).detach()
    if tensor.device.type == "meta":
        raise ValueError(f"check_close: {name} is a meta tensor (no values to compare)")
    integral = not (tensor.is_floating_point() or tensor.is_complex())
    if integral and tensor.dtype != torch.bool and tensor.numel() and (
        int(tensor.abs().max()) > 2**53
    ):
        raise ValueError(
            f"check_close: {name} holds integers past 2^53 = {2**53}, which float64 cannot "
            f"compare exactly; expected smaller integers (or compare with torch.equal)"
        )
    wide = torch.complex128 if tensor.is_complex() else torch.float64
    return tensor.to(device="cpu", dtype=wide)
