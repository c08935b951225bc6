"""The extrapolation experiment: the task's definition, a smoke run, the committed results."""

import json

import pytest
import torch

from rope_lab.experiments import extrapolation


def test_periodic_batch_repeats_a_block_of_distinct_tokens():
    generator = torch.Generator().manual_seed(0)
    tokens, determined = extrapolation.periodic_batch(
        50, 40, vocab_size=30, max_period=12, generator=generator)
    assert tokens.shape == (50, 41) and determined.shape == (50, 40)
    for row, known in zip(tokens, determined, strict=True):
        period = int(known.logical_not().sum()) + 1  # targets 1 … P−1 are new
        assert 2 <= period <= 12
        assert len(set(row[:period].tolist())) == period
        assert torch.equal(row[period:], row[: 41 - period])
        assert bool(known[period - 1:].all())


def test_quick_run_writes_results_with_provenance(tmp_path):
    out = tmp_path / "results.json"
    extrapolation.main(["--quick", "--steps", "2", "--out", str(out), "--no-progress"])
    results = json.loads(out.read_text())
    config = results["config"]
    assert config["steps"] == 2
    expected = {"none", "learned", "sinusoidal", "rope", "alibi", "rope+linear", "rope+ntk",
                "rope+dynamic", "rope+yarn"}
    assert set(results["loss"]) == expected
    for losses in results["loss"].values():
        assert list(losses) == [str(k) for k in config["multiples"]]
        assert all(0 < value < 20 for value in losses.values())
    provenance = results["provenance"]
    assert provenance["command"].endswith("--quick --steps 2 --out " + str(out) + " --no-progress")
    assert {"seed", "versions", "device", "date", "wall_seconds"} <= set(provenance)
    curve = results["loss_by_position"]
    assert len(curve["bin_starts"]) == len(curve["rope"]) == config["position_bins"]


@pytest.mark.parametrize(("option", "message"), [
    (["--steps", "0"], "--steps must be ≥ 1, got 0"),
    (["--seed", "-1"], "--seed must be ≥ 0, got -1"),
    (["--threads", "0"], "--threads must be ≥ 1, got 0"),
])
def test_bad_options_are_usage_errors(option, message, capsys):
    with pytest.raises(SystemExit):
        extrapolation.main(["--quick", "--no-progress", *option])
    assert message in capsys.readouterr().err


def test_committed_results_cover_every_encoding_and_multiple():
    results = extrapolation.load_results()
    assert results["config"]["multiples"] == [1, 2, 4, 8]
    assert set(results["loss"]) >= {"none", "learned", "sinusoidal", "rope", "alibi"}
    assert results["provenance"]["command"].startswith(
        "python -m rope_lab.experiments.extrapolation")
