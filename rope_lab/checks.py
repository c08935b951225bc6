"""One-line verdicts for the claims a notebook makes.

Every claim in the course is followed by a check. A passing check prints one line that
starts with ✔ and the measured figure; a failing one raises ``AssertionError`` with ✘ and
the same figure, so a broken claim stops the notebook (and CI) instead of scrolling by.
"""

from __future__ import annotations

import torch


def check(claim: str, condition, detail: str = "") -> None:
    """Assert ``condition`` and print ``✔ claim — detail``."""
    if isinstance(condition, torch.Tensor):
        condition = bool(condition.all())
    line = f"{claim} — {detail}" if detail else claim
    if not condition:
        raise AssertionError(f"✘ {line}")
    print(f"✔ {line}")


def check_close(claim: str, actual, expected, *, atol: float = 1e-6, rtol: float = 0.0) -> float:
    """Assert ``|actual − expected| ≤ atol + rtol·|expected|`` everywhere; print the max gap.

    Returns the largest absolute difference, so a notebook can reuse the number.
    """
    actual = torch.as_tensor(actual)
    expected = torch.as_tensor(expected, dtype=actual.dtype, device=actual.device)
    try:
        actual, expected = torch.broadcast_tensors(actual, expected)
    except RuntimeError as error:
        raise ValueError(
            f"check_close: shapes {tuple(actual.shape)} and {tuple(expected.shape)} do not "
            "broadcast"
        ) from error
    gap = (actual.double() - expected.double()).abs()
    worst = float(gap.max()) if gap.numel() else 0.0
    allowed = atol + rtol * expected.double().abs()
    ok = bool((gap <= allowed).all()) and bool(torch.isfinite(gap).all())
    tolerance = f"atol {atol:.0e}" + (f", rtol {rtol:.0e}" if rtol else "")
    line = f"{claim} — max |difference| = {worst:.2e} ({tolerance})"
    if not ok:
        raise AssertionError(f"✘ {line}")
    print(f"✔ {line}")
    return worst
