"""The experiments: the tasks' definitions, smoke runs, resuming, the committed results."""

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from rope_lab.experiments import _files, extrapolation
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


@pytest.mark.slow
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


@pytest.mark.slow
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


def test_a_grid_of_another_config_is_not_resumed(tmp_path, capsys):
    _quick(tmp_path, "--schemes", "none", "--seeds", "0")
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        _quick(tmp_path, "--schemes", "none", "--seeds", "0", "--steps", "2")
    assert stop.value.code == 2
    error = capsys.readouterr().err
    assert "grid.json: it holds results of another config (steps: 3 in the file, 2 here)" in error


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
    monkeypatch.setattr(ps, "_prepare", lambda config, device, out, *args: seen.update(
        device=device) or types.SimpleNamespace(out=out))
    monkeypatch.setattr(ps, "_train", lambda plan, progress: {
        "units": {}, "provenance": {"wall_seconds": 0, "cpu_seconds": 0}})
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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.versions
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


# ---- where results go, and that they survive ------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = (extrapolation.RESULTS_PATH, ps.RESULTS_PATH)


def _digests():
    return [hashlib.sha256(path.read_bytes()).hexdigest() for path in COMMITTED]


def _one_line_error(capsys) -> str:
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Traceback" not in error, error
    return error


def _no_training(monkeypatch):
    def trains(*args, **kwargs):
        raise AssertionError("trained before refusing")

    monkeypatch.setattr(ps, "run_unit", trains)
    monkeypatch.setattr(ps, "train", trains)
    monkeypatch.setattr(extrapolation, "train", trains)


def test_without_out_results_go_to_the_current_folder(tmp_path, monkeypatch):
    before = _digests()
    monkeypatch.chdir(tmp_path)
    extrapolation.main(["--quick", "--steps", "1", "--no-progress"])
    ps.main(["--quick", "--steps", "1", "--schemes", "none", "--seeds", "0", "--no-progress"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [  # no NAME.lock left behind
        "extrapolation_quick.json", "position_schemes_quick.json"]
    assert _digests() == before


@pytest.mark.parametrize("quick", [[], ["--quick"]])
@pytest.mark.parametrize("module", [extrapolation, ps], ids=["extrapolation", "position_schemes"])
def test_a_default_inside_the_package_is_refused_before_training(module, quick, monkeypatch,
                                                                  capsys):
    """Started from the package's own folder, the default would replace the committed file."""
    before = _digests()
    _no_training(monkeypatch)
    monkeypatch.chdir(module.RESULTS_PATH.parent)
    with pytest.raises(SystemExit) as stop:
        module.main([*quick, "--no-progress"])
    assert stop.value.code == 2
    assert "lies inside the installed package" in _one_line_error(capsys)
    assert _digests() == before


@pytest.mark.parametrize("module", [extrapolation, ps], ids=["extrapolation", "position_schemes"])
@pytest.mark.parametrize("where", ["a folder", "a missing folder"])
def test_out_naming_a_folder_or_a_missing_folder_is_refused_up_front(module, where, tmp_path,
                                                                     monkeypatch, capsys):
    _no_training(monkeypatch)
    out = tmp_path if where == "a folder" else tmp_path / "nowhere" / "results.json"
    with pytest.raises(SystemExit) as stop:
        module.main(["--quick", "--no-progress", "--out", str(out)])
    assert stop.value.code == 2
    expected = "is a folder" if where == "a folder" else "does not exist"
    assert f"--out {out}" in (error := _one_line_error(capsys)) and expected in error


def test_extrapolation_replaces_a_file_only_when_asked(tmp_path, monkeypatch, capsys):
    out = tmp_path / "mine.json"
    out.write_text("precious")
    _no_training(monkeypatch)
    with pytest.raises(SystemExit) as stop:
        extrapolation.main(["--quick", "--no-progress", "--out", str(out)])
    assert stop.value.code == 2 and "pass --overwrite" in _one_line_error(capsys)
    assert out.read_text() == "precious"
    monkeypatch.undo()
    extrapolation.main(["--quick", "--steps", "1", "--no-progress", "--out", str(out),
                        "--overwrite"])
    assert json.loads(out.read_text())["config"]["steps"] == 1


def test_a_file_created_while_extrapolation_trained_is_kept(tmp_path, monkeypatch, capsys):
    out = tmp_path / "r.json"
    real = extrapolation.run

    def another_run_finishes_first(*args, **kwargs):
        out.write_text("the other run's results")
        return real(*args, **kwargs)

    monkeypatch.setattr(extrapolation, "run", another_run_finishes_first)
    extrapolation.main(["--quick", "--steps", "1", "--no-progress", "--out", str(out)])
    assert out.read_text() == "the other run's results"
    assert json.loads((tmp_path / "r-2.json").read_text())["config"]["steps"] == 1
    assert "appeared while this run trained" in capsys.readouterr().err


GRID_RUN = [sys.executable, "-m", "rope_lab.experiments.position_schemes", "--quick",
            "--jobs", "1", "--no-progress", "--steps", "2"]


@pytest.mark.slow
def test_two_runs_sharing_one_file_keep_both_runs_units(tmp_path):
    """Two real processes, half of the schemes each, one --out: all 36 units survive."""
    out = tmp_path / "shared.json"
    names = list(ps.SCHEMES)
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "ROPE_LAB_C_KERNEL": "0"}
    runs = [subprocess.Popen([*GRID_RUN, "--out", str(out), "--schemes", *half],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=environment)
            for half in (names[::2], names[1::2])]
    printed = [run.communicate(timeout=600) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], printed
    units = json.loads(out.read_text())["units"]
    seeds = ps.QUICK.seeds
    assert set(units) == {ps.unit_key(s, seed) for s in names for seed in seeds}
    assert json.loads(out.read_text())["provenance"]["units_done"] == len(names) * len(seeds)
    # the run that finished last says so
    assert any(f"{len(names) * len(seeds)} units" in stdout for stdout, _ in printed)


def _edit_unit(text, key, edit):
    results = json.loads(text)
    edit(results["units"][key])
    return json.dumps(results)


def _grid_file(tmp_path):
    out, _ = _quick(tmp_path, "--schemes", "none", "rope", "--seeds", "0", "--steps", "1")
    return out


@pytest.mark.parametrize(("damage", "expected"), [
    (lambda text: text[: len(text) // 2], "is not valid JSON ("),  # (what, at line L, …)
    (lambda text: "[]", "holds a JSON list; expected an object"),
    (lambda text: json.dumps({**json.loads(text), "units": None}), "has no 'units' object"),
    (lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "config"}),
     "has no 'config' object"),
    (lambda text: _edit_unit(text, "none|0", lambda unit: unit.pop("cpu_seconds")),
     "unit 'none|0' has no number 'cpu_seconds'"),
    (lambda text: _edit_unit(text, "rope|0", lambda unit: unit["copy"].pop("rope+yarn")),
     "unit 'rope|0' has no copy/rope+yarn results"),
    (lambda text: _edit_unit(text, "rope|0", lambda unit: unit["retrieval"]["rope"][
        "accuracy"].pop("8")), "unit 'rope|0' has no retrieval/rope/accuracy for every test"),
    (lambda text: text.replace('"none|0"', '"none|7"', 1),
     "its key should be 'none|0'"),
], ids=["truncated", "a list", "no units", "no config", "a unit without a field",
        "a unit without a variant", "a unit without a multiple", "a unit under another key"])
def test_a_damaged_results_file_gets_one_clear_error_before_any_training(
        damage, expected, tmp_path, monkeypatch, capsys):
    out = _grid_file(tmp_path)
    out.write_text(damage(out.read_text()))
    damaged = out.read_text()
    capsys.readouterr()
    _no_training(monkeypatch)
    with pytest.raises(SystemExit) as stop:
        _quick(tmp_path, "--schemes", "none", "rope", "alibi", "--seeds", "0", "--steps", "1")
    assert stop.value.code == 2
    error = _one_line_error(capsys)
    assert str(out) in error and expected in error, error
    assert out.read_text() == damaged  # left as it was, for the user to look at
    with pytest.raises(_files.ResultsError, match=re.escape(expected)):
        ps.load_results(out)


def test_load_results_names_the_file(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{")
    for module in (extrapolation, ps):
        with pytest.raises(_files.ResultsError, match=re.escape(f"{bad} is not valid JSON")):
            module.load_results(bad)
    bad.write_text("{}")
    with pytest.raises(_files.ResultsError, match=re.escape(f"{bad} has no 'config'")):
        extrapolation.load_results(bad)


def test_a_new_label_keeps_the_units_and_says_so(tmp_path, monkeypatch, capsys):
    _grid_file(tmp_path)
    capsys.readouterr()
    relabelled = {**ps.SCHEMES, "none": ("NoPE, renamed", ps.SCHEMES["none"][1])}
    monkeypatch.setattr(ps, "SCHEMES", relabelled)
    _no_training(monkeypatch)
    _, results = _quick(tmp_path, "--schemes", "none", "rope", "--seeds", "0", "--steps", "1")
    assert set(results["units"]) == {"none|0", "rope|0"}
    assert results["schemes"]["none"]["label"] == "NoPE, renamed"
    assert "scheme 'none' is now labelled 'NoPE, renamed' (was 'no position (NoPE)'); its " \
           "units are kept" in capsys.readouterr().err


def test_a_redefined_scheme_is_retrained_and_says_why(tmp_path, monkeypatch, capsys):
    _grid_file(tmp_path)
    capsys.readouterr()
    redefined = {**ps.SCHEMES, "rope": ("RoPE, base 50", {"position": "rope", "base": 50.0})}
    monkeypatch.setattr(ps, "SCHEMES", redefined)
    _quick(tmp_path, "--schemes", "none", "rope", "--seeds", "0", "--steps", "1")
    error = capsys.readouterr().err
    assert "scheme 'rope' was redefined" in error and "(rope|0)" in error


def _children(pid):
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def _cpu_seconds(pid):
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def _alive(pid):
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return False


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigkill_of_a_parallel_run_ends_its_workers(tmp_path):
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "ROPE_LAB_C_KERNEL": "0"}
    parent = subprocess.Popen(
        [sys.executable, "-m", "rope_lab.experiments.position_schemes", "--quick", "--jobs", "2",
         "--steps", "1000000", "--schemes", "none", "rope", "--seeds", "0", "--no-progress",
         "--out", str(tmp_path / "grid.json")], env=environment, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    workers = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # until both workers train (past their imports)
            workers = [pid for pid in _children(parent.pid)
                       if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]
            if len(workers) == 2 and all(_cpu_seconds(pid) > 3 for pid in workers):
                break
            time.sleep(0.2)
        assert len(workers) == 2, "the run did not start two workers"
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 20
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in workers if _alive(pid)], "workers outlived their parent"
    finally:
        parent.kill()
        for pid in workers:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


# ---- settings that cannot give results: one error naming the field, before training --------

@pytest.mark.parametrize(("field", "value", "message"), [
    ("n_pairs", 0, "n_pairs must be an integer ≥ 1, got 0"),
    ("n_pairs", -1, "n_pairs must be an integer ≥ 1, got -1"),
    ("n_pairs", 9, "n_pairs = 9 must be ≤ n_keys = 8"),
    ("n_pairs", 5, "n_pairs = 5 must be ≤ train_length / 4 = 4"),
    ("n_keys", 0, "n_keys must be an integer ≥ 1, got 0"),
    ("n_values", 0, "n_values must be an integer ≥ 1, got 0"),
    ("vocab_size", 16, "vocab_size = 16 must exceed n_keys + n_values = 16"),
    ("vocab_size", 4, "vocab_size = 4 must be ≥ train_length // 2 = 8"),
    ("train_length", 0, "train_length must be an integer ≥ 1, got 0"),
    ("train_length", 2, "train_length must be ≥ 4"),
    ("steps", 0, "steps must be an integer ≥ 1, got 0"),
    ("steps", 2.5, "steps must be an integer ≥ 1, got 2.5 of type float"),
    ("batch_size", 1, "batch_size must be an even integer ≥ 2"),
    ("batch_size", 5, "batch_size must be an even integer ≥ 2"),
    ("eval_sequences", 0, "eval_sequences must be an integer ≥ 1, got 0"),
    ("eval_batch", 0, "eval_batch must be an integer ≥ 1, got 0"),
    ("depth_bins", 0, "depth_bins must be an integer ≥ 1, got 0"),
    ("position_bins", 0, "position_bins must be an integer ≥ 1, got 0"),
    ("position_bins", 3, "position_bins = 3 must divide the longest test length"),
    ("seeds", (), "seeds must hold at least one integer"),
    ("seeds", (-1,), "seeds[0] must be an integer ≥ 0, got -1"),
    ("seeds", (0, 0), "seeds must hold distinct integers, got [0, 0]"),
    ("seeds", 3, "seeds must be a sequence of distinct integers ≥ 0, got 3"),
    ("multiples", (), "multiples must hold at least one integer"),
    ("multiples", (0, 1), "multiples[0] must be an integer ≥ 1, got 0"),
    ("multiples", (1.5,), "multiples[0] must be an integer ≥ 1, got 1.5"),
    ("dim", 30, "dim = 30 must split into n_heads = 2 heads of even size"),
    ("dim", "32", "dim must be an integer ≥ 1, got '32' of type str"),
    ("n_heads", 0, "n_heads must be an integer ≥ 1, got 0"),
    ("n_layers", True, "n_layers must be an integer ≥ 1, got True of type bool"),
    ("learning_rate", 0.0, "learning_rate must be a finite number > 0, got 0.0"),
    ("learning_rate", float("nan"), "learning_rate must be a finite number > 0, got nan"),
])
def test_a_nonsense_grid_setting_is_refused_naming_it(field, value, message):
    with pytest.raises((ValueError, TypeError), match=re.escape(
            f"position_schemes.Config: {message}")):
        dataclasses.replace(ps.QUICK, **{field: value})


def test_numpy_integers_and_lists_are_accepted():
    config = dataclasses.replace(ps.QUICK, steps=np.int64(2), seeds=[0, 1])
    assert config.steps == 2 and type(config.steps) is int and config.seeds == (0, 1)


@pytest.mark.parametrize(("arguments", "message"), [
    ({"config": dataclasses.replace(ps.QUICK, n_layers=1)},
     "scheme 'nope-hybrid' cannot be built with this config: nope_layers"),
    ({"schemes": ["t5"]}, "unknown scheme 't5'"),
    ({"schemes": "rope"}, "schemes must be a list of scheme names, got 'rope'"),
    ({"schemes": []}, "schemes must name at least one scheme"),
    ({"jobs": 0}, "jobs must be an integer ≥ 1, got 0"),
    ({"device": "tpu"}, "device must be 'cpu' or 'cuda', got 'tpu'"),
    ({"config": {"steps": 1}}, "config must be a position_schemes.Config, got {'steps': 1}"),
])
def test_a_nonsense_run_is_refused_before_training(arguments, message, monkeypatch, tmp_path):
    _no_training(monkeypatch)
    arguments = {"config": ps.QUICK, "out": tmp_path / "r.json", **arguments}
    with pytest.raises((ValueError, TypeError), match=re.escape(message)):
        ps.run(progress=False, **arguments)
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(("field", "value", "message"), [
    ("train_length", 3, "train_length must be ≥ 4"),
    ("vocab_size", 7, "vocab_size = 7 must be ≥ train_length // 2 = 8"),
    ("steps", 0, "steps must be an integer ≥ 1, got 0"),
    ("seed", -1, "seed must be an integer ≥ 0, got -1"),
    ("batch_size", 0, "batch_size must be an integer ≥ 1, got 0"),
    ("eval_batch", 0, "eval_batch must be an integer ≥ 1, got 0"),
    ("position_bins", 5, "position_bins = 5 must divide the longest test length"),
    ("multiples", (), "multiples must hold at least one integer"),
    ("base", -1.0, "base must be a finite number > 0, got -1.0"),
    ("dim", 18, "dim = 18 must split into n_heads = 2 heads of even size"),
])
def test_a_nonsense_extrapolation_setting_is_refused_naming_it(field, value, message):
    with pytest.raises((ValueError, TypeError), match=re.escape(
            f"extrapolation.Config: {message}")):
        dataclasses.replace(extrapolation.QUICK, **{field: value})


def test_extrapolation_refuses_a_bad_device_and_config_type(monkeypatch):
    _no_training(monkeypatch)
    with pytest.raises(TypeError, match="config must be an extrapolation.Config"):
        extrapolation.run({"steps": 1}, progress=False)
    with pytest.raises(ValueError, match="device must be 'cpu' or 'cuda', got 'tpu'"):
        extrapolation.run(extrapolation.QUICK, "tpu", progress=False)


# ---- which code trained a result -----------------------------------------------------------

def test_every_unit_records_the_code_that_trained_it(tmp_path):
    out = _grid_file(tmp_path)
    results = json.loads(out.read_text())
    code = _files.code_version(ps.CODE_ENTRY)
    assert results["provenance"]["code"] == code
    for unit in results["units"].values():
        assert unit["provenance"]["code_version"] == code["sources_sha256"]
        assert unit["provenance"]["torch"] == torch.__version__
    assert ps.code_versions(results) == {code["sources_sha256"]: ["none|0", "rope|0"]}
    del results["units"]["rope|0"]["provenance"]
    assert ps.code_versions(results) == {code["sources_sha256"]: ["none|0"],
                                         "not recorded": ["rope|0"]}


def test_the_code_version_covers_every_file_training_runs():
    """Trace one unit's training and evaluation: every package file whose code ran is hashed."""
    ran = set()

    def profile(frame, event, arg):
        ran.add(frame.f_code.co_filename)

    config = dataclasses.replace(ps.QUICK, steps=1, eval_sequences=2, eval_batch=2)
    sys.setprofile(profile)
    try:
        for scheme in ("rope", "learned", "alibi", "local-global"):
            ps.run_unit(scheme, 0, config, "cpu")
    finally:
        sys.setprofile(None)
    package = _files.PACKAGE
    ran = {Path(f).resolve().relative_to(package).as_posix() for f in ran
           if Path(f).resolve().is_relative_to(package)}
    hashed = set(_files.sources(ps.CODE_ENTRY))
    assert {"models.py", "rope.py", "scaling.py", "experiments/extrapolation.py"} <= ran
    assert ran - hashed <= _files.NOT_NUMERIC, ran - hashed
    assert set(_files.sources("experiments/extrapolation.py")) <= hashed


def test_the_code_version_changes_with_a_numeric_source_only(tmp_path, monkeypatch):
    import shutil

    copy_of = tmp_path / "rope_lab"
    shutil.copytree(_files.PACKAGE, copy_of, ignore=shutil.ignore_patterns("*.json", "data",
                                                                           "__pycache__"))
    monkeypatch.setattr(_files, "PACKAGE", copy_of)

    def version():
        _files._versions.clear()
        return _files.code_version(ps.CODE_ENTRY)["sources_sha256"]

    first = version()
    (copy_of / "course.py").write_text("# not a numeric source\n")
    assert version() == first
    with (copy_of / "models.py").open("a") as handle:
        handle.write("\n# an edit\n")
    assert version() != first
    _files._versions.clear()


# --- issue 35: runs that share a file, and a full disk ------------------------------------------

def test_a_run_with_other_settings_into_a_claimed_file_is_refused_before_training(
        tmp_path, monkeypatch, capsys):
    """Issue 35: two runs into one --out with different --seeds: the second trained fully,
    then died with a traceback and its units were lost. The first run claims the file before
    training; the second is refused before it trains."""
    out = tmp_path / "grid.json"
    first = ps._prepare(dataclasses.replace(ps.QUICK, seeds=(0,)), "cpu", out, 1, 1, ["none"],
                        None, lambda message: None)
    assert json.loads(out.read_text())["provenance"]["running"]["pid"] == os.getpid()
    _no_training(monkeypatch)
    with pytest.raises(SystemExit) as stop:
        ps.main(["--quick", "--jobs", "1", "--no-progress", "--out", str(out), "--seeds", "1",
                 "--schemes", "none"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"a run with other settings (process {os.getpid()} on" in err
    assert "seeds: [0] in the file, [1] here" in err
    monkeypatch.undo()
    ps._train(first, False)  # the first run finishes, and its claim is gone
    results = json.loads(out.read_text())
    assert set(results["units"]) == {"none|0"} and "running" not in results["provenance"]
    assert not out.with_name("grid.json.lock").exists()


def test_the_claim_of_a_run_that_died_before_its_first_unit_is_no_obstacle(tmp_path):
    out = tmp_path / "grid.json"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    claim = ps._skeleton(dataclasses.replace(ps.QUICK, seeds=(0,)))
    claim["provenance"] = {"running": {**ps._this_process(), "pid": int(dead)}}
    out.write_text(json.dumps(claim))
    ps._prepare(dataclasses.replace(ps.QUICK, seeds=(1,)), "cpu", out, 1, 1, ["none"], None,
                lambda message: None)
    assert json.loads(out.read_text())["config"]["seeds"] == [1]


def test_a_full_disk_after_training_is_one_line_exit_2_and_no_lock(tmp_path, monkeypatch,
                                                                   capsys):
    """Issue 35: a full disk after training gave a raw OSError and left NAME.lock behind."""
    from rope_lab import _atomic

    out = tmp_path / "grid.json"
    real, writes = _atomic.write_text, []

    def disk_fills_after_the_claim(path, text, **kwargs):
        writes.append(path)
        if len(writes) > 1:
            raise OSError(28, "No space left on device", str(path))
        return real(path, text, **kwargs)

    monkeypatch.setattr(_atomic, "write_text", disk_fills_after_the_claim)
    with pytest.raises(SystemExit) as stop:
        ps.main(["--quick", "--jobs", "1", "--no-progress", "--out", str(out), "--steps", "1",
                 "--seeds", "0", "--schemes", "none"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"could not write {out}: No space left on device" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.json"]  # the claim, no lock


@pytest.mark.slow
def test_two_processes_with_other_seeds_into_one_file(tmp_path):
    """The issue's reproduction with two real processes: the second is refused at once."""
    out = tmp_path / "shared.json"
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "ROPE_LAB_C_KERNEL": "0"}
    first = subprocess.Popen([*GRID_RUN[:-1], "40", "--out", str(out), "--seeds", "0",
                              "--schemes", "none", "rope"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=environment)
    try:
        deadline = time.monotonic() + 120
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        second = subprocess.run([*GRID_RUN, "--out", str(out), "--seeds", "1", "--schemes",
                                 "none"], capture_output=True, text=True, env=environment,
                                timeout=300)
        # refused before training, whether the first run has saved a unit yet or not
        assert second.returncode == 2 and "seeds: [0] in the file, [1] here" in second.stderr
        assert second.stderr.count("\n") == 1
        assert first.poll() is None or first.returncode == 0  # the first one goes on
    finally:
        stdout, stderr = first.communicate(timeout=600)
    assert first.returncode == 0, stderr
    assert set(json.loads(out.read_text())["units"]) == {"none|0", "rope|0"}


def test_the_stored_results_show_every_direction_the_notebooks_read():
    """Notebooks 06 and 12 check these directions on the stored results; a run of either
    command prints them for its own results next to these (tested on a doctored copy)."""
    import copy

    from rope_lab.experiments import extrapolation, position_schemes

    for module in (extrapolation, position_schemes):
        stored = module.load_results()
        assert all(module.directions(stored).values()), module.directions(stored)
        assert "differs" not in module.compare_directions(stored, stored)
    changed = copy.deepcopy(extrapolation.load_results())
    changed["loss"]["rope+yarn"]["8"] = 99.0  # YaRN no longer the best at 8×
    table = extrapolation.compare_directions(changed)
    assert "YaRN is the best RoPE variant at every longer length" in table
    # that, the ordering at the longest length, and how much of RoPE's rise YaRN removes
    assert table.count("← differs") == 3
    assert "dynamic NTK, YaRN remove most of RoPE's rise" in table
