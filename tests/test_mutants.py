"""The mutant catalogue (tests/mutants/): plausible bugs, each planted in a copy of the package;
the notebook that teaches the concept must catch every one with a check (✘), with and without
the optional extras. The full run is `make mutants` (about 85 CPU-seconds: under a minute on a
quiet 2-core machine); the catalogue's own shape is checked in milliseconds."""

import subprocess
import sys
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parent / "mutants" / "run.py"
sys.path.insert(0, str(RUNNER.parent))
import run as mutants  # noqa: E402

# What the catalogue must hold (issue 36): the kinds of bug, and a bug for every notebook.
KINDS = {"sign", "off-by-one", "base", "factor", "layout", "dtype", "bound", "search", "ramp",
         "slope"}
NOTEBOOKS = {f"{n:02d}" for n in range(13)}


def test_the_catalogue_is_current_and_covers_the_course():
    catalogue = mutants.load()
    assert not mutants.stale(catalogue), mutants.stale(catalogue)
    assert len(catalogue) >= 40
    assert KINDS <= {m.kind for m in catalogue}, KINDS - {m.kind for m in catalogue}
    taught = {number for m in catalogue for number in m.notebooks}
    assert taught == NOTEBOOKS, NOTEBOOKS - taught
    for mutant in catalogue:
        assert mutant.why and mutant.old != mutant.new, mutant.id


def test_the_runner_skips_only_cells_that_draw_or_grade():
    draws = ["plots.base_sweep(bases=(1, 10))", "widgets.decay_panel()",
             "rl.show_source(decay.abel_curve)\nrl.show_source(decay.abel_bound)",
             "exercises.check_score_curve(score_curve);", "Markdown(claims.summary_markdown())"]
    checks = ["rl.check('x', True)", "x = plots.base_sweep()", "plots.f()\nrl.check('y', 1)",
              "from rope_lab import claims\n\nMarkdown(claims.summary_markdown())"]
    assert all(mutants._only_draws(source) for source in draws)
    assert not any(mutants._only_draws(source) for source in checks)


@pytest.mark.slow
def test_every_mutant_is_caught_by_a_check():
    done = subprocess.run([sys.executable, str(RUNNER)], capture_output=True, text=True,
                          check=False, timeout=900)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
