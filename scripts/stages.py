"""Run `make`'s stages one after another and say how long each took (`make test` uses it).

    python scripts/stages.py STAGE...

Each stage is `make STAGE`, its output passed through as it comes (run from a recipe, the
make of ``$MAKE`` is used and variables given to the first make, such as ``TORCH=cpu``, reach
every stage through MAKEFLAGS). At the end, also when a stage fails, a table: each stage, its
time, passed / FAILED / not run, and the total. The exit status is the failed stage's (0 when
all passed). A failed stage stops the run: later stages would only repeat its failure.

The table is the last thing `make test`, and so CI (`.ci/run`), prints: every run shows where
its time went.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def run_stages(stages: list[str], *, make: str = "make", out=sys.stdout) -> int:
    results: list[tuple[str, float | None, str]] = []
    status = 0
    for stage in stages:
        if status:
            results.append((stage, None, "not run"))
            continue
        print(f"\n=== make {stage} ===", file=out, flush=True)
        start = time.monotonic()
        done = subprocess.run([make, "--no-print-directory", stage])
        seconds = time.monotonic() - start
        results.append((stage, seconds, "passed" if done.returncode == 0 else "FAILED"))
        status = done.returncode
    print(table(results), file=out, flush=True)
    return status


def table(results: list[tuple[str, float | None, str]]) -> str:
    width = max([len(stage) for stage, _, _ in results] + [5])
    lines = ["", f"{'stage':<{width}}  {'time':>10}  result", f"{'-' * width}  {'-' * 10}  ------"]
    for stage, seconds, result in results:
        shown = "" if seconds is None else f"{seconds // 60:.0f} min {seconds % 60:02.0f} s"
        lines.append(f"{stage:<{width}}  {shown:>10}  {result}")
    total = sum(seconds for _, seconds, _ in results if seconds is not None)
    lines.append(f"{'total':<{width}}  {total // 60:.0f} min {total % 60:02.0f} s")
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
