"""Run `make`'s stages one after another and say how long each took (`make test` uses it).

    python scripts/stages.py STAGE...

Each stage is `make STAGE`, its output passed through as it comes (run from a recipe, the
make of ``$MAKE`` is used and variables given to the first make, such as ``TORCH=cpu``, reach
every stage through MAKEFLAGS). At the end, also when a stage fails, a table: each stage, its
time, the CPU time its processes used (user + system, of every process the stage started and
waited for: pytest's workers, kernels, browsers; "CPU" near "time" × cores means the cores
were busy, far below it that the stage mostly waited), passed / FAILED / not run, and the
total. The exit status is the failed stage's (0 when
all passed). A failed stage stops the run: later stages would only repeat its failure.

The table is the last thing `make test`, and so CI (`.ci/run`), prints: every run shows where
its time went.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run_stages(stages: list[str], *, make: str = "make", out=sys.stdout) -> int:
    results: list[tuple[str, float | None, str, float | None]] = []
    status = 0
    for stage in stages:
        if status:
            results.append((stage, None, "not run", None))
            continue
        print(f"\n=== make {stage} ===", file=out, flush=True)
        start, cpu = time.monotonic(), _children_cpu()
        done = subprocess.run([make, "--no-print-directory", stage])
        seconds = time.monotonic() - start
        results.append((stage, seconds, "passed" if done.returncode == 0 else "FAILED",
                        _children_cpu() - cpu))
        status = done.returncode
    print(table(results), file=out, flush=True)
    return status


def _minutes(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds // 60:.0f} min {seconds % 60:02.0f} s"


def table(results: list[tuple[str, float | None, str, float | None]]) -> str:
    width = max([len(stage) for stage, *_ in results] + [5])
    lines = ["", f"{'stage':<{width}}  {'time':>10}  {'CPU':>10}  result",
             f"{'-' * width}  {'-' * 10}  {'-' * 10}  ------"]
    for stage, seconds, result, cpu in results:
        lines.append(f"{stage:<{width}}  {_minutes(seconds):>10}  {_minutes(cpu):>10}  {result}")
    total = sum(seconds for _, seconds, _, _ in results if seconds is not None)
    cpu = sum(cpu for *_, cpu in results if cpu is not None)
    lines.append(f"{'total':<{width}}  {_minutes(total):>10}  {_minutes(cpu):>10}")
    if hasattr(os, "getloadavg"):
        lines.append(f"(load average {os.getloadavg()[0]:.1f} at the end, "
                     f"{os.cpu_count()} CPU cores)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    stages = list(sys.argv[1:] if argv is None else argv)
    if not stages:
        print("usage: python scripts/stages.py STAGE...", file=sys.stderr)
        return 2
    return run_stages(stages, make=os.environ.get("MAKE", "make"))


if __name__ == "__main__":
    sys.exit(main())
