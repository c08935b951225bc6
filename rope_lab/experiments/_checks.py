"""Checks of an experiment's settings, run when a config is made (before any training).

Every message names the setting, the value received and what was expected.
"""

from __future__ import annotations

import argparse
import math
import numbers
import operator


def integer(owner: str, name: str, value, minimum: int = 1) -> int:
    """An int (numpy's too; not a bool, not a float) that is at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{owner}: {name} must be an integer ≥ {minimum}, got {value!r} of "
                        f"type {type(value).__name__}")
    value = operator.index(value)
    if value < minimum:
        raise ValueError(f"{owner}: {name} must be an integer ≥ {minimum}, got {value}")
    return value


def integers(owner: str, name: str, value, minimum: int) -> tuple[int, ...]:
    """A non-empty sequence of distinct integers ≥ ``minimum``, as a tuple."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{owner}: {name} must be a sequence of distinct integers ≥ {minimum}, "
                        f"got {value!r} of type {type(value).__name__}")
    items = tuple(value)
    if not items:
        raise ValueError(f"{owner}: {name} must hold at least one integer, got {value!r}")
    checked = tuple(integer(owner, f"{name}[{i}]", item, minimum) for i, item in enumerate(items))
    if len(set(checked)) < len(checked):
        raise ValueError(f"{owner}: {name} must hold distinct integers, got {list(checked)}")
    return checked


def positive_number(owner: str, name: str, value) -> float:
    """A finite real number > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}: {name} must be a finite number > 0, got {value!r} of type "
                        f"{type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{owner}: {name} must be a finite number > 0, got {value!r}")
    return float(value)


def require(owner: str, condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(f"{owner}: {message}")


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (and exit status 2), no usage dump."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def device(owner: str, value) -> str:
    """"cpu", or "cuda" / "mps" where torch can use them."""
    import torch

    if not isinstance(value, str | torch.device):
        raise TypeError(f"{owner}: device must be 'cpu' or 'cuda', got {value!r} of type "
                        f"{type(value).__name__}")
    try:
        kind = torch.device(value).type
    except (RuntimeError, ValueError):
        raise ValueError(f"{owner}: device must be 'cpu' or 'cuda', got {value!r}") from None
    available = {"cpu": True, "cuda": torch.cuda.is_available(),
                 "mps": bool(getattr(torch.backends, "mps", None)
                             and torch.backends.mps.is_available())}
    if kind not in available:
        raise ValueError(f"{owner}: device must be 'cpu' or 'cuda', got {value!r}")
    if not available[kind]:
        raise ValueError(f"{owner}: device {value!r}: torch {torch.__version__} cannot use "
                         f"{kind} on this machine (torch.{kind}.is_available() is False); "
                         "use 'cpu'")
    return str(value)
