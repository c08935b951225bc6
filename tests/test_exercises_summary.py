"""exercises.report / exercises.summary: the per-notebook summary a learner pastes."""

import pytest

from rope_lab import exercises
from rope_lab.exercises import grading


@pytest.fixture(autouse=True)
def _fresh_session(monkeypatch):
    monkeypatch.setattr(grading, "_results", {})
    monkeypatch.setattr(grading, "_titles", {})
    monkeypatch.setattr(grading, "_feedback", {})


def test_report_prints_the_verdict_and_returns_it(capsys):
    passed = exercises.report("05.1", "decay curve", None)
    failed = exercises.report("05.2", "beat the bound", "expected 1, got 2")
    assert passed and not failed
    assert (passed.exercise, passed.passed, failed.feedback) == ("05.1", True,
                                                                 "expected 1, got 2")
    out = capsys.readouterr().out.splitlines()
    assert out == ["✔ Exercise 05.1 (decay curve): passed",
                   "✘ Exercise 05.2 (beat the bound): expected 1, got 2"]


def test_a_verdict_shows_nothing_more_in_a_notebook():
    """A cell ending with a grader shows its ✔/✘ line only, no stray True/False under it."""
    from IPython.core.formatters import DisplayFormatter

    verdict = exercises.report("00.1", "the scaled dot product", "no")
    assert DisplayFormatter().format(verdict) == ({}, {})
    assert DisplayFormatter().format(False) != ({}, {})  # what a bool showed


def test_summary_groups_by_notebook_with_titles_and_feedback(capsys):
    exercises.report("05.2", "beat the bound", "not attempted yet")
    exercises.report("05.1", "decay curve", None)
    exercises.report("03.1", "rotate a vector", None)
    capsys.readouterr()
    result = exercises.summary()
    out = capsys.readouterr().out
    assert result == {"03.1": True, "05.1": True, "05.2": False}
    assert "notebook 03: RoPE in two dimensions (1 of 1 passed)" in out
    assert "notebook 05: Long-range decay (1 of 2 passed)" in out
    assert "  ✘ 05.2 beat the bound: not attempted yet" in out
    assert "  ✔ 05.1 decay curve" in out
    assert "total: 2 of 3 passed" in out
    assert out.index("03.1") < out.index("05.1") < out.index("05.2")


@pytest.mark.parametrize("prefix", ["05", "05.", 5])
def test_summary_for_one_notebook(prefix, capsys):
    exercises.report("05.1", "decay curve", None)
    exercises.report("06.1", "ntk base", "wrong")
    capsys.readouterr()
    assert exercises.summary(prefix) == {"05.1": True}
    out = capsys.readouterr().out
    assert "06.1" not in out and "total" not in out


def test_a_later_attempt_replaces_the_earlier_verdict(capsys):
    exercises.report("05.1", "decay curve", "wrong sign")
    exercises.report("05.1", "decay curve", None)
    capsys.readouterr()
    assert exercises.summary() == {"05.1": True}
    assert "wrong sign" not in capsys.readouterr().out


def test_summary_without_graded_exercises_says_what_to_do(capsys):
    assert exercises.summary() == {}
    assert "No exercises graded yet" in capsys.readouterr().out
    exercises.report("05.1", "decay curve", None)
    capsys.readouterr()
    assert exercises.summary(4) == {}
    assert "'04.'" in capsys.readouterr().out


def test_unknown_notebook_number_still_prints():
    exercises.report("42.1", "bonus", None)
    assert exercises.summary("42") == {"42.1": True}
