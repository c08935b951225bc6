"""The experiments: the tasks' definitions, smoke runs, resuming, the committed results."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from rope_lab.experiments import extrapolation
from rope_lab.experiments import position_schemes as ps


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


# ---- the position-scheme grid (notebook 12) -----------------------------------------------


def test_retrieval_batch_plants_each_pair_once_and_asks_every_key():
    config = ps.Config()
    generator = torch.Generator().manual_seed(1)
    batch = ps.retrieval_batch(40, 64, config=config, generator=generator)
    tokens, answer, depth = batch["tokens"], batch["answer"], batch["depth"]
    n, haystack = config.n_pairs, 65 - 2 * config.n_pairs
    assert tokens.shape == (40, 65) and answer.shape == (40, 64) and depth.shape == (40, n)
    keys = range(config.n_values, config.n_values + config.n_keys)
    for row, asked, where in zip(tokens.tolist(), answer, depth, strict=True):
        # asked positions are exactly the query keys at the end
        assert torch.nonzero(asked).flatten().tolist() == list(range(haystack, 65, 2))
        hay = row[:haystack]
        planted = [i for i, token in enumerate(hay) if token in keys]
        gaps = [b - a for a, b in zip(planted[:-1], planted[1:], strict=True)]
        assert len(planted) == n and min(gaps) >= 2
        assert all(hay[i + 1] < config.n_values for i in planted)  # a value follows each key
        fillers = [t for i, t in enumerate(hay) if i not in planted
                   and i - 1 not in planted]
        assert all(t >= config.n_values + config.n_keys for t in fillers)
        for j, position in enumerate(range(haystack, 65, 2)):
            key, value = row[position], row[position + 1]
            needle = hay.index(key)
            assert hay[needle + 1] == value
            assert abs(where[j].item() - needle / haystack) < 1e-12


def test_every_scheme_builds_with_its_documented_options():
    config = ps.Config()
    options = {name: ps.model_options(name, config) for name in ps.SCHEMES}
    assert options["partial-25"]["rotary_dim"] == config.dim // config.n_heads // 4
    assert options["local-global"]["window"] == config.train_length // 4
    assert options["nope-hybrid"]["nope_layers"] == (1,)
    for name in ps.SCHEMES:
        model = ps.build_model(name, config)
        kinds = model.layer_kinds()
        assert len(kinds) == config.n_layers
    assert ps.build_model("local-global", config).layer_kinds() == ["local", "global"]
    assert ps.build_model("nope-hybrid", config).layer_kinds() == ["rope", "nope"]
    assert float(ps.build_model("rope-5e5", config).base) == 5e5
    assert int((ps.build_model("p-rope-0.25", config).inv_freq == 0).sum()) == 6


def test_ablations_change_what_they_say():
    config = dataclasses.replace(ps.QUICK, steps=1)
    model, _ = ps.train("learned", 0, config, "cpu")
    zeroed = ps._variant_model(model, "learned+zeroed", config, 0)
    table, edited = model.learned.table.weight, zeroed.learned.table.weight
    assert torch.equal(edited[: config.train_length], table[: config.train_length])
    assert not bool(edited[config.train_length:].any())
    assert bool(table[config.train_length:].any())  # the trained model is left alone
    options = ps._forward_options("rope+linear@L", ps.build_model("rope", config), config, 4,
                                  config.train_length, "cpu")
    torch.testing.assert_close(options["inv_freq"],
                               ps.build_model("rope", config).inv_freq / 4)


def _quick(tmp_path, *extra):
    out = tmp_path / "grid.json"
    results = ps.main(["--quick", "--jobs", "1", "--no-progress", "--out", str(out), *extra])
    return out, results


def test_quick_grid_writes_every_unit_with_provenance(tmp_path):
    out, _ = _quick(tmp_path)
    results = json.loads(out.read_text())
    config = results["config"]
    assert config == ps.config_dict(ps.QUICK) and len(config["seeds"]) >= 3
    assert set(results["units"]) == {f"{s}|{seed}" for s in ps.SCHEMES for seed in config["seeds"]}
    for key, unit in results["units"].items():
        for task in ps.TASKS:
            assert set(unit[task]) == set(ps.variants(unit["scheme"])), key
            for metrics in unit[task].values():
                assert list(metrics["loss"]) == [str(k) for k in config["multiples"]]
                if task == "retrieval":
                    assert all(0 <= a <= 1 for a in metrics["accuracy"].values())
    provenance = results["provenance"]
    assert provenance["command"].endswith(f"--quick --jobs 1 --no-progress --out {out}")
    assert {"versions", "device", "date", "wall_seconds", "cpu_seconds"} <= set(provenance)
    assert provenance["units_done"] == len(results["units"])


def test_two_processes_give_the_numbers_of_one(tmp_path):
    """The parallel path (spawned workers) reproduces the serial one exactly."""
    subset = ["--schemes", "none", "rope", "--seeds", "0"]
    serial = ps.main(["--quick", "--jobs", "1", "--no-progress", "--out",
                      str(tmp_path / "serial.json"), *subset])
    parallel = ps.main(["--quick", "--jobs", "2", "--no-progress", "--out",
                        str(tmp_path / "parallel.json"), *subset])
    assert parallel["provenance"]["jobs"] == 2
    for key, unit in serial["units"].items():
        for field in ("train_loss", *ps.TASKS):
            assert parallel["units"][key][field] == unit[field], (key, field)


def test_an_interrupted_grid_resumes_from_the_finished_units(tmp_path, monkeypatch):
    real, calls = ps.run_unit, []

    def dies_after_two(scheme, seed, *args):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append((scheme, seed))
        return real(scheme, seed, *args)

    monkeypatch.setattr(ps, "run_unit", dies_after_two)
    with pytest.raises(KeyboardInterrupt):
        _quick(tmp_path, "--schemes", "rope", "alibi", "--seeds", "0", "1")
    out = tmp_path / "grid.json"
    kept = json.loads(out.read_text())["units"]
    assert set(kept) == {f"{s}|{seed}" for s, seed in calls}
    calls.clear()
    monkeypatch.setattr(ps, "run_unit", lambda *a: calls.append(a[:2]) or real(*a))
    _, results = _quick(tmp_path, "--schemes", "rope", "alibi", "--seeds", "0", "1")
    assert len(calls) == 2  # only the two missing units were trained
    assert set(results["units"]) == {"rope|0", "alibi|0", "rope|1", "alibi|1"}
    for key, unit in kept.items():
        assert results["units"][key] == unit


def test_a_subset_run_keeps_the_other_units_and_a_redefined_scheme_is_retrained(
        tmp_path, monkeypatch):
    _quick(tmp_path, "--schemes", "none", "--seeds", "0")
    _, results = _quick(tmp_path, "--schemes", "rope", "--seeds", "0")
    assert set(results["units"]) == {"none|0", "rope|0"}
    kept = results["units"]["none|0"]
    redefined = {**ps.SCHEMES, "rope": ("RoPE, base 50", {"position": "rope", "base": 50.0})}
    monkeypatch.setattr(ps, "SCHEMES", redefined)
    trained = []
    real = ps.run_unit
    monkeypatch.setattr(ps, "run_unit", lambda *a: trained.append(a[:2]) or real(*a))
    _, results = _quick(tmp_path, "--schemes", "none", "rope", "--seeds", "0")
    assert trained == [("rope", 0)]  # "none" is reused, the redefined "rope" is not
    assert results["units"]["none|0"] == kept
    assert results["schemes"]["rope"]["options"]["base"] == 50.0


def test_a_grid_of_another_config_is_not_resumed(tmp_path):
    _quick(tmp_path, "--schemes", "none", "--seeds", "0")
    with pytest.raises(ValueError, match="holds results of another config"):
        _quick(tmp_path, "--schemes", "none", "--seeds", "0", "--steps", "2")


@pytest.mark.parametrize(("option", "message"), [
    (["--device", "tpu"], "--device must be cpu or cuda, got 'tpu'"),
    (["--jobs", "0"], "--jobs must be ≥ 1, got 0"),
    (["--steps", "0"], "--steps must be ≥ 1, got 0"),
    (["--seeds", "1", "1"], "--seeds must be distinct integers ≥ 0, got [1, 1]"),
    (["--schemes", "t5"], "invalid choice: 't5'"),
])
def test_bad_grid_options_are_usage_errors(option, message, capsys):
    with pytest.raises(SystemExit):
        ps.main(["--quick", "--no-progress", *option])
    assert message in capsys.readouterr().err


def test_device_cuda_is_refused_without_a_gpu_and_passed_through_with_one(monkeypatch, capsys,
                                                                           tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit):
        ps.main(["--quick", "--device", "cuda"])
    assert "torch.cuda.is_available() is False" in capsys.readouterr().err
    seen = {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(ps, "run", lambda config, device, **kw: seen.update(device=device, **kw)
                        or {"units": {}, "provenance": {"wall_seconds": 0, "cpu_seconds": 0}})
    ps.main(["--quick", "--device", "cuda", "--out", str(tmp_path / "x.json")])
    assert seen["device"] == "cuda"


def test_compare_words_the_seed_spread():
    results = {"config": {"seeds": [0, 1, 2]}, "units": {}}
    for scheme, values in (("a", (1.0, 1.2, 1.1)), ("b", (2.0, 2.5, 2.2)), ("c", (1.15, 3, 2))):
        for seed, value in enumerate(values):
            results["units"][f"{scheme}|{seed}"] = {"copy": {scheme: {"loss": {"8": value}}}}
    assert ps.compare(results, "a", "b", "copy", "loss", 8).startswith("a < b for every seed")
    assert ps.compare(results, "b", "a", "copy", "loss", 8).startswith("b > a for every seed")
    assert "no difference within the seed spread" in ps.compare(results, "a", "c", "copy",
                                                                "loss", 8)


# ---- the committed grid --------------------------------------------------------------------

@pytest.fixture(scope="module")
def committed():
    return ps.load_results()


def test_committed_grid_matches_the_current_config_and_schemes(committed):
    assert committed["config"] == ps.config_dict(ps.Config())
    assert committed["schemes"] == ps.schemes_dict(ps.Config())
    seeds = committed["config"]["seeds"]
    assert len(seeds) >= 3
    assert set(committed["units"]) == {f"{s}|{seed}" for s in ps.SCHEMES for seed in seeds}
    for unit in committed["units"].values():
        for task in ps.TASKS:
            assert set(unit[task]) == set(ps.variants(unit["scheme"]))
    provenance = committed["provenance"]
    assert provenance["command"].startswith("python -m rope_lab.experiments.position_schemes")
    assert provenance["units_done"] == len(committed["units"])
    assert {"versions", "device", "date", "wall_seconds", "cpu_seconds"} <= set(provenance)


def test_plotted_numbers_are_the_committed_ones(committed):
    from rope_lab.plots import what_changed

    for task, metric in (("copy", "loss"), ("retrieval", "accuracy")):
        figure = what_changed.scheme_curves(committed, task)
        for axis, variants in zip(figure.axes, what_changed.PANELS.values(), strict=False):
            # the variants' lines come first (then the guess line of the copy panels)
            for line, variant in zip(axis.lines[:len(variants)], variants, strict=True):
                expected = [np.mean(ps.seed_values(committed, variant, task, metric, k))
                            for k in committed["config"]["multiples"]]
                np.testing.assert_allclose(line.get_ydata(), expected, rtol=1e-12)
    figure = what_changed.depth_heatmaps(committed, variants=("learned",))
    shown = figure.axes[0].images[0].get_array()
    seeds = committed["config"]["seeds"]
    longest = str(max(committed["config"]["multiples"]))
    by_seed = [committed["units"][f"learned|{s}"]["retrieval"]["learned"]["accuracy_by_depth"]
               [longest] for s in seeds]
    np.testing.assert_allclose(shown[:, -1], np.mean(np.array(by_seed, dtype=float), 0))
    figure = what_changed.ablations(committed)
    bars = [patch.get_height() for patch in figure.axes[0].patches]
    assert bars[1] == pytest.approx(np.mean(ps.seed_values(
        committed, "rope+window", "copy", "loss", longest)))


def test_figures_fit_the_projector(committed):
    """~848 px wide at the course's 90 dpi, no text under 14 px."""
    from matplotlib.text import Text

    from rope_lab.plots import what_changed

    for figure in (what_changed.scheme_curves(committed, "copy"),
                   what_changed.scheme_curves(committed, "retrieval"),
                   what_changed.depth_heatmaps(committed), what_changed.ablations(committed)):
        assert figure.get_figwidth() * 90 <= 848
        small = [text.get_text() for text in figure.findobj(Text)
                 if text.get_visible() and text.get_text().strip()
                 and text.get_fontsize() * 90 / 72 < 14]
        assert not small, small
