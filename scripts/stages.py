"""Run `make`'s stages and say how long each took (`make test` uses it).

    python scripts/stages.py STAGE[+STAGE...]...

Each stage is `make STAGE`, run one after another, its output passed through as it comes
(run from a recipe, the make of ``$MAKE`` is used and variables given to the first make,
such as ``TORCH=cpu``, reach every stage through MAKEFLAGS). Stages joined by ``+`` run side
by side: ``browser+compat`` starts both, the last one's output passes through as it comes,
the others' is kept and printed, whole, once the last one ends (a line says when each of
them ended and how). `make test` runs the browser stage beside the version sessions: the
browser stage mostly waits for JupyterLab and Chromium, and the sessions leave a core idle
while they install, so the two together take about the time of the sessions alone.

At the end, also when a stage fails, a table: each stage, its time, the CPU time its
processes used (user + system, of every process the stage started and waited for: pytest's
workers, kernels, browsers; "CPU" near "time" × cores means the cores were busy, far below
it that the stage mostly waited), passed / FAILED / not run, and the total (time from the
first stage's start to the last one's end). The exit status is the first failed stage's
(0 when all passed). A failed stage stops the run: later stages would only repeat its
failure (the stages beside it run to their end).

The table is the last thing `make test`, and so CI (`.ci/run`), prints: every run shows where
its time went.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time

Result = tuple[str, float | None, str, float | None]


def _keep(stream, into: io.BytesIO) -> None:
    for chunk in iter(lambda: stream.read1(1 << 16), b""):
        into.write(chunk)
    stream.close()


def _side_by_side(group: list[str], make: str, out) -> list[tuple[Result, int]]:
    """Start every stage of ``group``; the last one's output passes through, the others'
    is kept (read from a pipe as it comes) and printed once all have ended."""
    start = time.monotonic()
    running: dict[int, tuple[str, subprocess.Popen, threading.Thread | None]] = {}
    keeping: dict[str, io.BytesIO] = {}
    for index, stage in enumerate(group):
        last = index == len(group) - 1
        print(f"\n=== make {stage}" + ("" if last else f" (beside {group[-1]}: its output "
                                                     f"follows when {group[-1]} ends)")
              + " ===", file=out, flush=True)
        process = subprocess.Popen([make, "--no-print-directory", stage],
                                   stdout=None if last else subprocess.PIPE,
                                   stderr=None if last else subprocess.STDOUT)
        reader = None
        if not last:
            keeping[stage] = io.BytesIO()
            reader = threading.Thread(target=_keep, args=(process.stdout, keeping[stage]),
                                      daemon=True)
            reader.start()
        running[process.pid] = (stage, process, reader)
    ended: dict[str, tuple[Result, int]] = {}
    while running:
        # os.wait4: each stage's own CPU time (its processes and all they waited for)
        pid, wait_status, usage = os.wait4(-1, 0)
        if pid not in running:
            continue
        stage, process, reader = running.pop(pid)
        code = process.returncode = os.waitstatus_to_exitcode(wait_status)
        seconds = time.monotonic() - start
        result = "passed" if code == 0 else "FAILED"
        if len(group) > 1:
            result += f", beside {' and '.join(s for s in group if s != stage)}"
        ended[stage] = ((stage, seconds, result, usage.ru_utime + usage.ru_stime), code)
        if reader is not None:
            reader.join(10)  # a process the stage left running may hold the pipe open
            print(f"\n=== make {stage}: {'passed' if code == 0 else 'FAILED'} after "
                  f"{_minutes(seconds)} (its output follows when {group[-1]} ends) ===",
                  file=out, flush=True)
    for stage in group[:-1]:
        print(f"\n=== make {stage}: its output (it ran beside {group[-1]}) ===", file=out,
              flush=True)
        out.write(keeping[stage].getvalue().decode("utf-8", "replace"))
        out.flush()
    return [ended[stage] for stage in group]


def run_stages(stages: list[str], *, make: str = "make", out=sys.stdout) -> int:
    results: list[Result] = []
    status = 0
    start = time.monotonic()
    for entry in stages:
        group = entry.split("+")
        if status:
            results += [(stage, None, "not run", None) for stage in group]
            continue
        for result, code in _side_by_side(group, make, out):
            results.append(result)
            status = status or code
    print(table(results, time.monotonic() - start), file=out, flush=True)
    return status


def _minutes(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds // 60:.0f} min {seconds % 60:02.0f} s"


def table(results: list[Result], total: float | None = None) -> str:
    """``total``: the run's time (stages side by side overlap); default the stages' sum."""
    width = max([len(stage) for stage, *_ in results] + [5])
    lines = ["", f"{'stage':<{width}}  {'time':>10}  {'CPU':>10}  result",
             f"{'-' * width}  {'-' * 10}  {'-' * 10}  ------"]
    for stage, seconds, result, cpu in results:
        lines.append(f"{stage:<{width}}  {_minutes(seconds):>10}  {_minutes(cpu):>10}  {result}")
    if total is None:
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
        print("usage: python scripts/stages.py STAGE[+STAGE...]...", file=sys.stderr)
        return 2
    return run_stages(stages, make=os.environ.get("MAKE", "make"))


if __name__ == "__main__":
    sys.exit(main())
