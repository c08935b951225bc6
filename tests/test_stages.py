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


def test_stages_side_by_side_each_get_their_own_time_cpu_and_output(tmp_path):
    """`browser+compat`: both start at once; the first one's output is kept and printed
    whole after the last one ends, each row has its own CPU time (os.wait4 per stage), and a
    failure beside stops the stages after the group."""
    makefile = tmp_path / "Makefile"
    makefile.write_text(
        "side:\n\t@echo side-starts; " + sys.executable + " -c 'sum(range(10**8))'; "
        "echo side-ends; exit 4\n"
        "main:\n\t@sleep 1\n"
        "never:\n\t@touch never-ran\n")
    out = io.StringIO()
    import os

    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        status = stages.run_stages(["side+main", "never"], out=out)
    finally:
        os.chdir(here)
    assert status == 2 and not (tmp_path / "never-ran").exists()
    text = out.getvalue()
    assert "=== make side: FAILED after" in text
    kept = text.split("=== make side: its output (it ran beside main) ===\n", 1)[1]
    assert kept.startswith("side-starts\nside-ends\n"), text
    rows = {line.split()[0]: line for line in text.splitlines() if line.split()[:1] in
            (["side"], ["main"], ["never"])}
    assert rows["side"].endswith("FAILED, beside main")
    assert rows["main"].endswith("passed, beside side")
    assert rows["never"].endswith("not run")
    # CPU: the busy stage's own, not the sleeping one's
    assert "0 min 00 s  FAILED" not in rows["side"] and "0 min 00 s  passed" in rows["main"]
