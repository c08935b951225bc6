"""`make test`'s stage table (scripts/stages.py): every stage's time and CPU time, a failed
stage stops the run and is named, and the exit status is the failed stage's."""

import importlib.util
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("stages", ROOT / "scripts" / "stages.py")
stages = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stages)


def test_a_failed_stage_stops_the_run_and_the_table_says_where_time_and_cpu_went(tmp_path):
    makefile = tmp_path / "Makefile"
    makefile.write_text(
        "busy:\n\t@" + sys.executable + " -c 'sum(range(10**8))'\n"
        "fails:\n\t@exit 3\n"
        "never:\n\t@touch never-ran\n")
    out = io.StringIO()
    import os

    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        status = stages.run_stages(["busy", "fails", "never"], out=out)
    finally:
        os.chdir(here)
    assert status == 2  # make's status for a failed recipe
    assert not (tmp_path / "never-ran").exists()
    lines = out.getvalue().splitlines()
    header = next(line for line in lines if line.startswith("stage"))
    assert header.split() == ["stage", "time", "CPU", "result"]
    rows = {line.split()[0]: line for line in lines if line.split()[:1] in
            (["busy"], ["fails"], ["never"], ["total"])}
    assert rows["busy"].endswith("passed") and rows["fails"].endswith("FAILED")
    assert rows["never"].endswith("not run")
    # the busy stage's CPU time is its child's: a real number, not zero
    assert "0 min 00 s  passed" not in rows["busy"].split("min", 1)[1]
