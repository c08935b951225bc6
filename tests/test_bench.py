"""rope_lab.bench: the command line, the counts, the widget benchmark (no timing assertions),
and the figures and panel of notebook 09 that draw its numbers."""

import json

import ipywidgets
import pytest
import torch

import rope_lab as rl
from rope_lab import bench, exercises, plots, rope, widgets

TINY = ["--shape", "1", "2", "16", "8", "--repeats", "1", "--no-sweeps"]


def test_command_line_writes_every_implementation_with_provenance(tmp_path, capsys):
    path = tmp_path / "cpu.json"
    assert bench.main([*TINY, "--device", "cpu", "--json", str(path), "--note", "test"]) == 0
    printed = capsys.readouterr().out
    assert "apply_rope (default)" in printed and "× clone" in printed
    run = json.loads(path.read_text())
    assert run["note"] == "test" and run["shape"] == [1, 2, 16, 8]
    for key in ("device", "device_name", "torch", "dtype", "measured_at", "command"):
        assert run["provenance"][key]
    names = {(r["name"], r["layout"]) for r in run["results"]}
    for layout in ("half", "interleaved"):
        for name in ("clone", "apply_rope (default)", "apply_rope_ (in place)",
                     "reference formula (eager)", "HF-style eager rotate_half",
                     "dense matrix R_m x"):
            assert (name, layout) in names
    assert ("package rotate_half", "half") in names
    assert ("package complex", "interleaved") in names
    clone = next(r for r in run["results"] if r["name"] == "clone")
    assert clone["times_clone"] == 1.0 and clone["ms"] > 0
    assert set(run["targets"]) == {"half", "interleaved"}


def test_paired_ratios_and_quartiles():
    samples = {"clone": [1.0, 2.0, 4.0, 1.0, 2.0], "f": [1.5, 2.0, 6.0, 1.1, 3.0]}
    assert bench.paired_ratios(samples, "f") == [1.5, 1.0, 1.5, 1.1, 1.5]
    assert bench.quartiles([1.5, 1.0, 1.5, 1.1, 1.5]) == (1.1, 1.5, 1.5)
    assert bench.quartiles([2.0]) == (2.0, 2.0, 2.0)
    turns = bench.time_in_turns({"a": lambda: None, "b": lambda: None}, device="cpu",
                                warmup=0, repeats=3)
    assert [len(times) for times in turns.values()] == [3, 3]


def test_repeats_below_one_are_refused(capsys):
    with pytest.raises(ValueError, match=r"repeats must be a whole number ≥ 1, got 0"):
        bench.time_in_turns({"a": lambda: None}, device="cpu", repeats=0)
    with pytest.raises(SystemExit):
        bench.main(["--repeats", "0"])
    assert "--repeats must be at least 1, got 0" in capsys.readouterr().err


def test_release_free_memory_reports_whether_it_ran():
    import platform as platform_module

    ran = bench.release_free_memory()
    assert ran == (bench._malloc_trim() is not None)
    if platform_module.system() == "Linux" and platform_module.libc_ver()[0] == "glibc":
        assert ran


def test_bfloat16_and_sweeps_run():
    results = bench.run_benchmark((1, 2, 8, 8), dtype=torch.bfloat16, repeats=1, warmup=0,
                                  dense=False, layouts=("half",))
    assert {r.name for r in results} >= {"clone", "apply_rope (default)"}
    rows = bench.sweep("seq", [4, 8], heads=1, head_dim=8, repeats=1)
    assert [row["seq"] for row in rows] == [4, 8]
    assert rows[1]["elements"] == 2 * rows[0]["elements"]
    assert "rope ns/element" in bench.format_sweep(rows)


def test_hf_style_baseline_equals_apply_rope():
    x = torch.randn(2, 3, 10, 16)
    cos, sin = bench.hf_tables(10, 16, device="cpu")
    torch.testing.assert_close(bench.hf_style_rope(x, cos, sin), rl.apply_rope(x))


def test_rope_traffic_counts():
    cost = bench.rope_traffic(2, 3, 5, 8, bytes_per_element=2)
    elements = 2 * 3 * 5 * 8
    assert cost["elements"] == elements
    assert cost["tensor_bytes"] == 2 * elements * 2  # one read, one write
    assert cost["table_bytes"] == 2 * 5 * 4 * 4  # cos and sin, (seq, d/2) float32
    assert cost["flops"] == 3 * elements  # 6 per pair
    assert bench.attainable_gflops(0.5, 1000.0, 100.0) == 50.0  # memory roof
    assert bench.attainable_gflops(50.0, 1000.0, 100.0) == 1000.0  # compute roof


def test_layer_flops_match_matmul_counts():
    seq, width = 6, 4
    flops = bench.layer_flops(seq, width, ffn_multiplier=2)
    assert flops["scores q kᵀ"] == 2 * seq * seq * width  # (L×D)(D×L), summed over heads
    assert flops["q, k, v, o projections"] == 4 * 2 * seq * width * width
    assert flops["MLP"] == 2 * (2 * seq * width * 2 * width)
    assert flops["RoPE on q and k"] == 2 * 3 * seq * width
    assert set(bench.measure_layer(seq=8, d_model=16, heads=2, repeats=1)) == set(flops)


def test_count_kernels_sees_the_passes():
    x = torch.randn(2, 4, 16)
    cos, sin = rope._cached_cos_sin(4, 16, rope.DEFAULT_BASE, x.device, torch.float32)
    reference = bench.count_kernels(rope.rotate_reference, x, cos, sin, "half")
    assert reference["names"].count("mul") == 4 and reference["bytes_written"] == 4 * x.nbytes
    assert bench.count_kernels(x.clone)["bytes_written"] == x.nbytes
    interleaved = bench.count_kernels(rl.apply_rope, x, layout="interleaved")
    assert interleaved["names"].count("mul") == 1


def test_committed_results_are_well_formed():
    committed = bench.committed_results()
    assert committed, "rope_lab/benchmarks/ should hold at least the CPU run"
    for name, run in committed.items():
        assert run["provenance"]["device"] in ("cpu", "cuda"), name
        table = bench.format_table([bench.Result(**r) for r in run["results"]])
        assert "apply_rope (default)" in table


# --- the widget benchmark ---------------------------------------------------------------------

def _toy_factory(calls):
    @plots.course_style
    def draw(steps, scale, base, colour, flag):
        calls.append({"steps": steps, "scale": scale, "base": base, "colour": colour,
                      "flag": flag})
        figure, axes = plots.new_figure(width=3, height=2)
        axes.plot(range(steps), [scale * i for i in range(steps)], color=colour)
        axes.set(title="toy", xlabel="i", ylabel="scale · i")
        return figure

    def toy_panel():
        return widgets.Panel(draw, {
            "steps": widgets.slider("int", "steps", 4, 2, 10),
            "scale": widgets.slider("float", "scale", 1.0, -1.0, 3.0),
            "base": widgets.slider("log", "base", 100.0, 1, 4),
            "colour": widgets.dropdown("colour", [("blue", plots.PALETTE[0]),
                                                  ("orange", plots.PALETTE[1])],
                                       value=plots.PALETTE[0]),
            "flag": ipywidgets.Checkbox(value=False, description="flag"),
        })

    return toy_panel


def test_widget_benchmark_turns_every_control_of_every_registered_panel(monkeypatch):
    calls = []
    monkeypatch.setattr(widgets, "PANELS", {"toy_panel": _toy_factory(calls)})
    report = bench.widget_redraw_times()
    assert list(report) == ["toy_panel"]
    seen = {name: {call[name] for call in calls} for name in calls[0]}
    assert {2, 6, 10} <= seen["steps"]
    assert {-1.0, 3.0} <= seen["scale"]
    assert min(seen["base"]) == pytest.approx(10.0) and max(seen["base"]) == pytest.approx(1e4)
    assert set(plots.PALETTE[:2]) <= seen["colour"]
    assert seen["flag"] == {False, True}
    row = report["toy_panel"]
    assert row["redraws"] == len(calls) - 1  # the build's redraw is left out
    assert 0 < row["median_ms"] <= row["max_ms"]
    assert "toy_panel" in bench.format_widget_table(report)


def test_widgets_command_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(widgets, "PANELS", {"toy_panel": _toy_factory([])})
    path = tmp_path / "widgets.json"
    assert bench.main(["widgets", "--json", str(path)]) == 0
    assert "toy_panel" in capsys.readouterr().out
    assert "toy_panel" in json.loads(path.read_text())["panels"]


def test_control_values_cover_the_range():
    assert bench.control_values(widgets.slider("int", "n", 5, 1, 9)) == [1, 5, 9]
    log = bench.control_values(widgets.slider("log", "b", 1e4, 0, 6))
    assert log[0] == pytest.approx(1.0) and log[-1] == pytest.approx(1e6)
    assert bench.control_values(widgets.dropdown("d", ["a", "b", "c", "d"])) == ["a", "c", "d"]


# --- notebook 09: figures, panel, exercises ---------------------------------------------------

def test_roofline_figure_and_panel():
    figure = plots.roofline(1000.0, 50.0, {"RoPE": (0.375, 18.75)})
    axes = figure.axes[0]
    assert axes.get_xscale() == "log" and axes.get_title() and axes.get_xlabel()
    x, y = axes.lines[0].get_data()
    assert y.max() == pytest.approx(1000.0) and y.min() == pytest.approx(x.min() * 50.0)
    assert "roofline_panel" in widgets.PANELS
    panel = widgets.roofline_panel()
    panel.set(bandwidth_gb_s=100.0)
    rope_marker = [line for line in panel.figure.axes[0].lines if line.get_label() == "RoPE"][0]
    intensity = bench.rope_traffic(1, 32, 2048, 128)["intensity"]
    assert rope_marker.get_ydata()[0] == pytest.approx(intensity * 100.0)
    panel.set(bandwidth_gb_s=1000.0, peak_gflops=100.0)  # now the compute roof binds
    rope_marker = [line for line in panel.figure.axes[0].lines if line.get_label() == "RoPE"][0]
    assert rope_marker.get_ydata()[0] == pytest.approx(100.0)


def test_performance_figures_plot_the_numbers():
    rows = [{"name": "clone", "layout": "half", "times_clone": 1.0},
            {"name": "apply_rope (default)", "layout": "half", "times_clone": 1.2},
            {"name": "x", "layout": "interleaved", "times_clone": 9.0}]
    bars = plots.implementation_bars(rows, layout="half").axes[0]
    assert [p.get_width() for p in bars.patches] == [1.0, 1.2]
    sweep = [{"seq": 4, "clone_ms": 1.0, "apply_rope_ms": 2.0, "reference_ms": 3.0},
             {"seq": 8, "clone_ms": 2.0, "apply_rope_ms": 4.0, "reference_ms": 6.0}]
    lines = plots.cost_versus_size(sweep, "seq").axes[0].lines
    assert [list(line.get_ydata()) for line in lines] == [[3.0, 6.0], [2.0, 4.0], [1.0, 2.0]]
    shares = plots.layer_shares({"MLP": 3.0, "RoPE on q and k": 1.0}).axes[0]
    assert [p.get_width() for p in shares.patches] == [3.0, 1.0]


def test_exercise_checkers_accept_solutions_and_reject_mistakes(capsys):
    def rope_bytes(batch, heads, seq, head_dim, width):
        return 2 * batch * heads * seq * head_dim * width

    assert exercises.check_rope_bytes(rope_bytes)
    assert not exercises.check_rope_bytes(lambda *shape: rope_bytes(*shape) // 2)
    assert "write as well as the read" in capsys.readouterr().out
    assert exercises.check_attainable(lambda i, peak, bw: min(peak, i * bw))
    assert not exercises.check_attainable(lambda i, peak, bw: i * bw)

    def complex_rope(x, cos, sin):
        pairs = torch.view_as_complex(x.unflatten(-1, (-1, 2)))
        return torch.view_as_real(pairs * torch.complex(cos, sin)).flatten(-2)

    assert exercises.check_complex_rope(complex_rope)
    assert not exercises.check_complex_rope(lambda x, cos, sin: rl.apply_rope(x))  # wrong layout
    assert not exercises.check_complex_rope(lambda x, cos, sin: 1 / 0)
    assert "ZeroDivisionError" in capsys.readouterr().out
