"""Do the widget notebooks run headless without a cell stalling?

Executes each notebook ``--repeat`` times under nbclient, the client that nbconvert
--execute, papermill, nbval and ``make book`` all use, with a kernel from this Python
environment, while ``--burners`` processes keep CPU cores busy (a stall showed up more
often under load). For every run it records the wall time and the slowest cell, prints a
table, and exits 1 if any cell took longer than ``--max-cell-seconds`` (or failed).

    python scripts/stall_check.py                      # notebooks 00, 04, 06; 10 runs each
    python scripts/stall_check.py notebooks/05_long_range_decay.ipynb --repeat 3 --burners 0

A stall looked like this (the Output widget era): a cell that takes a second hangs until
nbclient's cell timeout runs out, then the notebook goes on as if nothing happened.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rope_lab import _atomic  # noqa: E402

DEFAULT_NOTEBOOKS = [
    ROOT / "notebooks" / "00_start_here.ipynb",
    ROOT / "notebooks" / "04_rope_in_d_dimensions.ipynb",
    ROOT / "notebooks" / "06_length_extrapolation.ipynb",
]


def burn():
    """Keep one core busy until terminated."""
    while True:
        pass


def run_once(path: Path, timeout: float) -> dict:
    """Execute ``path`` once; its wall time, per-cell times and the error, if any."""
    import nbformat
    from nbclient import NotebookClient

    class TimedClient(NotebookClient):
        """NotebookClient that also times each cell, as seen from the client."""

        async def async_execute_cell(self, cell, cell_index, *args, **kwargs):
            start = time.perf_counter()
            try:
                return await super().async_execute_cell(cell, cell_index, *args, **kwargs)
            finally:
                self.cell_seconds[cell_index] = time.perf_counter() - start

    nb = nbformat.read(path, as_version=4)
    # "python3" is this environment's kernel: jupyter_client runs a kernelspec whose command
    # is `python` with the interpreter running this script.
    client = TimedClient(nb, timeout=timeout, kernel_name="python3",
                         resources={"metadata": {"path": str(path.parent)}})
    client.cell_seconds = {}
    error = None
    start = time.perf_counter()
    try:
        # The kernel's own log (a warning about TCP without encryption) would garble the
        # progress bar; what the cells print still arrives as outputs.
        client.execute(stderr=subprocess.DEVNULL)
    except Exception as exc:  # a timeout or a failing cell: record it, go on with the next run
        # nbclient's CellExecutionError carries the cell's exception as ename and evalue.
        error = (f"{getattr(exc, 'ename', type(exc).__name__)}: "
                 f"{getattr(exc, 'evalue', str(exc))}".strip())
    wall = time.perf_counter() - start
    slowest = max(client.cell_seconds, key=client.cell_seconds.get, default=None)
    return {"notebook": path.name, "wall_seconds": wall,
            "slowest_cell": slowest,
            "slowest_cell_seconds": client.cell_seconds.get(slowest, 0.0),
            "error": error}


def table(runs: list[dict], max_cell_seconds: float) -> str:
    """One row per notebook: wall time min/median/max, slowest cell, stalled runs."""
    header = (f"{'notebook':<36} {'runs':>4} {'wall min':>9} {'median':>8} {'max':>8} "
              f"{'max cell':>9} {'cell >' + format(max_cell_seconds, 'g') + ' s':>10} "
              f"{'errors':>6}")
    lines = [header, "-" * len(header)]
    for name in dict.fromkeys(run["notebook"] for run in runs):
        mine = [run for run in runs if run["notebook"] == name]
        walls = [run["wall_seconds"] for run in mine]
        cells = [run["slowest_cell_seconds"] for run in mine]
        stalled = sum(cell > max_cell_seconds for cell in cells)
        errors = sum(run["error"] is not None for run in mine)
        median = statistics.median(walls)
        lines.append(f"{name:<36} {len(mine):>4} {min(walls):>8.1f}s {median:>7.1f}s "
                     f"{max(walls):>7.1f}s {max(cells):>8.1f}s {stalled:>10} {errors:>6}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, default=DEFAULT_NOTEBOOKS,
                        help="notebooks to run (default: 00, 04 and 06)")
    parser.add_argument("--repeat", type=int, default=10, help="runs per notebook (10)")
    parser.add_argument("--burners", type=int, default=1,
                        help="CPU-burning processes running beside the notebooks (1)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="nbclient's per-cell timeout in seconds (120); a stalled cell "
                             "waits this long, then the notebook goes on without an error")
    parser.add_argument("--max-cell-seconds", type=float, default=30.0,
                        help="a cell slower than this counts as a stall (30)")
    parser.add_argument("--json", type=Path, help="also write every run to this file")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.burners < 0:
        parser.error(f"--repeat must be ≥ 1 and --burners ≥ 0, got {args.repeat}, "
                     f"{args.burners}")
    missing = [str(path) for path in args.notebooks if not path.exists()]
    if missing:
        parser.error(f"no such notebook(s): {', '.join(missing)}")

    from tqdm import tqdm

    burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(args.burners)]
    for burner in burners:
        burner.start()
    runs = []
    try:
        # Round robin (00, 04, 06, 00, …) so a slow spell of the machine hits every notebook.
        order = [path for _ in range(args.repeat) for path in args.notebooks]
        with tqdm(order, unit="run", file=sys.stderr) as progress:
            for path in progress:
                progress.set_postfix_str(path.name)
                run = run_once(path.resolve(), args.timeout)
                runs.append(run)
                if run["slowest_cell_seconds"] > args.max_cell_seconds or run["error"]:
                    progress.write(f"{run['notebook']}: cell {run['slowest_cell']} took "
                                   f"{run['slowest_cell_seconds']:.1f} s"
                                   + (f" ({run['error']})" if run["error"] else ""))
    finally:
        for burner in burners:
            burner.terminate()
            burner.join()

    print(f"{args.repeat} run(s) per notebook, {args.burners} CPU burner(s), "
          f"{multiprocessing.cpu_count()} CPU(s)")
    print(table(runs, args.max_cell_seconds))
    if args.json:
        _atomic.write_text(args.json, json.dumps(runs, indent=1))
    failed = [run for run in runs
              if run["slowest_cell_seconds"] > args.max_cell_seconds or run["error"]]
    if failed:
        print(f"FAIL: {len(failed)} of {len(runs)} runs had a cell over "
              f"{args.max_cell_seconds:g} s or an error")
        return 1
    print(f"OK: no cell over {args.max_cell_seconds:g} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
