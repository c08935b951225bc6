"""Timing on a shared machine: one harness, one thread pinner, one provenance record.

Used by the benchmark (:mod:`rope_lab.bench`), the panels' redraw timer, the linear-attention
timings of notebook 07 and the base search of notebook 05.

Timing: warm-up calls, then repeats in turns (every function once per turn, in order), so a
neighbour's load slows all of them alike and per-turn ratios cancel it; CUDA events on a
GPU. On a CPU every call starts from fresh memory pages (see :func:`release_free_memory`).
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import platform
import shlex
import statistics
import sys
import time

import torch


@contextlib.contextmanager
def cpu_threads(count: int):
    """Run the block with ``count`` torch CPU threads, then restore the previous number.

    One thread gives steadier numbers on a shared machine: a multi-threaded kernel waits for
    its slowest thread, and a busy neighbour can stall that thread for a whole time slice.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def time_round_robin(functions: dict, *, device, warmup: int = 2, repeats: int = 7) -> dict:
    """Median seconds per call of each function, measured in turns so load hits all alike."""
    samples = time_in_turns(functions, device=device, warmup=warmup, repeats=repeats)
    return {name: statistics.median(times) for name, times in samples.items()}


def time_in_turns(functions: dict, *, device, warmup: int = 2, repeats: int = 7) -> dict:
    """Seconds of every call: name → list of ``repeats`` times, the k-th of each list
    measured in the same turn (all functions once, in order, per turn)."""
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a whole number ≥ 1, got {repeats!r}")
    device = torch.device(device)
    for function in functions.values():
        for _ in range(warmup):
            function()
    samples = {name: [] for name in functions}
    for _ in range(repeats):
        for name, function in functions.items():
            samples[name].append(_time_once(function, device))
    return samples


def paired_ratios(samples: dict, name: str, baseline: str = "clone") -> list[float]:
    """Per-turn ratios samples[name][k] / samples[baseline][k] (see :func:`time_in_turns`)."""
    return [t / b for t, b in zip(samples[name], samples[baseline], strict=True)]


def quartiles(values) -> tuple[float, float, float]:
    """(lower quartile, median, upper quartile) of values (the median for fewer than 2)."""
    values = list(values)
    if len(values) < 2:
        return (values[0],) * 3
    low, middle, high = statistics.quantiles(values, n=4, method="inclusive")
    return low, middle, high


def _time_once(function, device) -> float:
    if device.type == "cuda":
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        function()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    release_free_memory()
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (macOS, Windows, musl).
    Looked up on first use: ``find_library`` may start a subprocess."""
    import ctypes
    import ctypes.util

    for name in ("libc.so.6", ctypes.util.find_library("c")):
        try:
            return ctypes.CDLL(name).malloc_trim
        except (OSError, AttributeError, TypeError):
            continue
    return None


def release_free_memory() -> bool:
    """Hand the C heap's free pages back to the operating system (glibc only).

    Why the CPU timings call it before every timed call: a new 32 MiB tensor comes either
    from fresh pages, which the kernel must fault in and zero (several ms, more than the copy
    itself), or from pages an earlier tensor left in the heap (no faults), depending on what
    the process did before. Without this, the same ``clone()`` can take 9 ms in one turn and
    1 ms in the next, and every "× clone" with it. After it, every allocation in the timed
    call starts from fresh pages, the usual state of a PyTorch process that frees its large
    tensors, so runs compare. Memory that already exists (``copy_`` into a buffer, the
    in-place variant) is not affected. Returns False where there is nothing to call.
    """
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


# --- where the numbers come from -----------------------------------------------------------

def provenance(device, dtype=None) -> dict:
    """Where and how the numbers were measured: device, versions, threads, time, command.

    The one record behind every committed measurement (the benchmark's runs, the
    extrapolation experiment's results)."""
    device = torch.device(device)
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = _cpu_name()
    return {
        "device": device.type,
        "device_name": name,
        "dtype": None if dtype is None else str(dtype).removeprefix("torch."),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": _triton_version(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": _cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "rope_lab": _version(),
        "measured_at": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"),
        "command": "python -m rope_lab.bench " + shlex.join(sys.argv[1:]),
    }


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _cpu_count() -> int | None:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _triton_version() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return triton.__version__


def _version() -> str:
    from rope_lab._version import __version__

    return __version__
