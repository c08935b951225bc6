"""rope_lab.bench: the command line and its rows, the panels' redraw timer
(rope_lab.widgets.redraw_times), and the figures and panel of notebook 09 that draw the numbers.
No timing assertions."""

import json

import ipywidgets
import pytest
import torch

import rope_lab as rl
from rope_lab import bench, cost, exercises, plots, widgets

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
    assert ("apply_rope + position ids", "half") in names  # the path a model calls
    assert run["targets"]["half"]["ids_times_clone"] > 0
    assert "faster than HF-style eager" in printed or "slower than HF-style eager" in printed
    decode = run["decode"]  # the per-call rows, next to HF's own path
    assert decode["shape"] == list(bench.DECODE_SHAPE)
    assert {row["name"] for row in decode["rows"]} >= {bench.HF_DECODE,
                                                      "apply_rope(q, ids), apply_rope(k, ids)"}
    assert "one decode step" in printed
    assert ("package complex", "interleaved") in names
    assert any(name.startswith("backend='eager'") for name, layout in names if layout == "half")
    clone = next(r for r in run["results"] if r["name"] == "clone")
    assert clone["times_clone"] == 1.0 and clone["ms"] > 0
    assert set(run["targets"]) == {"half", "interleaved"}


def test_ratios_read_right_both_ways():
    """Issue 26 item 5: never "0.5 × faster"."""
    assert bench.versus(2.0, "HF") == "2.00 × slower than HF"
    assert bench.versus(0.5, "HF") == "2.00 × faster than HF"
    assert bench.versus(0.8, "HF") == "1.25 × faster than HF"
    assert bench.versus(1.001, "HF") == "as fast as HF"


def test_decode_command_times_one_step_next_to_hugging_face(tmp_path, capsys):
    pytest.importorskip("transformers")
    path = tmp_path / "decode.json"
    assert bench.main(["decode", "--repeats", "2", "--calls", "3", "--device", "cpu",
                       "--json", str(path)]) == 0
    printed = capsys.readouterr().out
    assert bench.HF_DECODE in printed and "µs/step" in printed
    report = json.loads(path.read_text())["decode"]
    rows = {row["name"]: row for row in report["rows"]}
    assert rows[bench.HF_DECODE]["times_hf"] == 1.0
    assert all(row["us_per_step"] > 0 for row in rows.values())
    assert bench.main(["decode", "--calls", "0"]) == 2


def test_decode_step_rows_compute_the_same_rotation_as_hugging_face():
    """The timed rows do the same work: our q and k equal transformers' for the same ids."""
    pytest.importorskip("transformers")
    functions = bench.decode_functions((2, 4, 3, 16))
    hf_q, hf_k = functions[bench.HF_DECODE]()
    for name in ("apply_rope(q, ids), apply_rope(k, ids)", "RotaryEmbedding(q, k, ids)"):
        ours_q, ours_k = functions[name]()
        torch.testing.assert_close(ours_q, hf_q, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(ours_k, hf_k, rtol=1e-5, atol=1e-5)


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


def test_committed_gpu_records_are_apart_from_the_bench_runs():
    """scripts/gpu_check.py records (rope_lab/benchmarks/gpu/) carry their machine and
    versions and every section notebook 09 reads; committed_results() never mixes them in."""
    records = bench.committed_gpu_records()
    assert records, "rope_lab/benchmarks/gpu/ should hold the H200 record"
    for name, record in records.items():
        assert name not in bench.committed_results()
        environment = record["environment"]
        assert environment["device"] == "cuda" and environment["gpu"], name
        assert {"torch", "triton", "measured_at", "rope_lab_source_sha256"} <= set(environment)
        for section in ("correct", "grad", "syncs", "graphs", "compile"):
            good, total = map(int, record[f"ok_{section}"].split("/"))
            assert good == sum(row.get("ok", False) for row in record[section]), section
            assert total == sum("ok" in row for row in record[section]), section
        assert any("us_per_tensor" in row for row in record["speed"])


def test_committed_results_are_well_formed():
    committed = bench.committed_results()
    assert committed, "rope_lab/benchmarks/ should hold at least the CPU run"
    for name, run in committed.items():
        assert run["provenance"]["device"] in ("cpu", "cuda"), name
        table = bench.format_table([bench.Result(**r) for r in run["results"]])
        assert "apply_rope (default)" in table



def test_tables_speak_the_course_language_and_the_command_line_stays_english(monkeypatch,
                                                                             capsys):
    """Issue 31: what notebook 09 prints from the package (tables, notes, status, the cost
    model's keys) is Chinese in the Chinese edition and unchanged in English; the rows keep
    their English names for code, and the command line, a tool, prints English always."""
    from rope_lab import fast
    from rope_lab.i18n import using_language

    run = next(iter(bench.committed_results().values()))
    results = [bench.Result(**r) for r in run["results"]]
    english = bench.format_table(results)
    assert english.startswith("implementation") and "backend 'c': C loop," in english
    with using_language("zh"):
        chinese = bench.format_table(results)
        sweep = bench.format_sweep([{"seq": 8, "elements": 8, "clone_ms": 1.0,
                                     "apply_rope_ms": 1.0, "reference_ms": 1.0}])
        status = fast.status()
        traffic = cost.rope_traffic(1, 2, 8, 4)
        keys = [f"{key}" for key in traffic]
    assert chinese.startswith("实现") and "C 循环" in chinese and "C loop" not in chinese
    assert "参考公式（eager）" in chinese and "对半" in chinese
    assert len(chinese.splitlines()) == len(english.splitlines())
    assert "参考公式 ms" in sweep and "Triton：" in status
    assert "算术强度" in keys and traffic["intensity"] > 0  # code still reads the English key
    assert {r.name for r in results} >= {"apply_rope (default)", "clone"}
    verdicts = [("a.json", "half", 1.0, 4.0, 1.0), ("b.json", "interleaved", 1.5, 2.0, 1.3)]
    english_verdicts = bench.format_target_verdicts(verdicts).splitlines()
    assert english_verdicts[1].split()[3::2] == ["met"] * 3
    assert english_verdicts[2].split()[3::2] == ["MISSED"] * 3
    with using_language("zh"):
        chinese_verdicts = bench.format_target_verdicts(verdicts).splitlines()
    assert chinese_verdicts[1].split()[1::2] == ["对半", "达到", "达到", "达到"]
    assert chinese_verdicts[2].split()[3::2] == ["未达到"] * 3

    # every note template comes back from its English, in English and in Chinese
    samples = {"threads": 2, "how": "built in 0.31 s", "mebibytes": 1, "seconds": 1.25,
               "tokens": 128, "factor": 16.0}
    for template in bench._NOTE_TEMPLATES:
        note = template.format(**samples)
        assert bench.note_text(note) == note
        with using_language("zh"):
            translated = bench.note_text(note)
        assert translated != note, note
        if "{how}" in template:  # the words inside a field are translated too
            assert "编译用时 0.31 秒" in translated, translated
    with using_language("zh"):
        assert bench.note_text("a remark no template knows") == "a remark no template knows"

    monkeypatch.setenv("ROPE_LAB_LANG", "zh")
    with using_language("zh"):
        assert bench.main([*TINY, "--device", "cpu", "--no-decode"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("implementation") == 1 and "实现" not in printed


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


@pytest.mark.slow
def test_widget_benchmark_turns_every_control_of_every_registered_panel(monkeypatch):
    calls = []
    monkeypatch.setattr(widgets, "PANELS", {"toy_panel": _toy_factory(calls)})
    report = widgets.redraw_times()
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
    assert "toy_panel" in widgets.format_redraw_table(report)


@pytest.mark.slow
def test_widgets_command_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(widgets, "PANELS", {"toy_panel": _toy_factory([])})
    path = tmp_path / "widgets.json"
    assert bench.main(["widgets", "--json", str(path)]) == 0
    assert "toy_panel" in capsys.readouterr().out
    assert "toy_panel" in json.loads(path.read_text())["panels"]


def test_control_values_cover_the_range():
    assert widgets.control_values(widgets.slider("int", "n", 5, 1, 9)) == [1, 5, 9]
    log = widgets.control_values(widgets.slider("log", "b", 1e4, 0, 6))
    assert log[0] == pytest.approx(1.0) and log[-1] == pytest.approx(1e6)
    assert widgets.control_values(widgets.dropdown("d", ["a", "b", "c", "d"])) == ["a", "c", "d"]


# --- notebook 09: figures, panel, exercises ---------------------------------------------------

def test_roofline_figure_and_panel():
    figure = plots.roofline(1000.0, 50.0, {"RoPE": (0.375, 18.75)})
    axes = figure.axes[0]
    assert axes.get_xscale() == "log" and axes.get_xlabel()
    assert axes.get_title() == "Roofline: RoPE sits on the memory slope"  # 0.375 < ridge 20
    slow_memory = plots.roofline(10.0, 100.0, {"RoPE": (0.375, 10.0)}).axes[0]  # ridge 0.1
    assert slow_memory.get_title() == "Roofline: RoPE sits on the compute roof"
    x, y = axes.lines[0].get_data()
    assert y.max() == pytest.approx(1000.0) and y.min() == pytest.approx(x.min() * 50.0)
    assert "roofline_panel" in widgets.PANELS
    panel = widgets.roofline_panel()
    panel.set(bandwidth_gb_s=100.0)
    rope_marker = [line for line in panel.figure.axes[0].lines if line.get_label() == "RoPE"][0]
    intensity = cost.rope_traffic(1, 32, 2048, 128)["intensity"]
    assert rope_marker.get_ydata()[0] == pytest.approx(intensity * 100.0)
    panel.set(bandwidth_gb_s=1000.0, peak_gflops=100.0)  # now the compute roof binds
    rope_marker = [line for line in panel.figure.axes[0].lines if line.get_label() == "RoPE"][0]
    assert rope_marker.get_ydata()[0] == pytest.approx(100.0)


def test_performance_figures_plot_the_numbers():
    rows = [{"name": "clone", "layout": "half", "times_clone": 1.0},
            {"name": "apply_rope (default)", "layout": "half", "times_clone": 1.2},
            {"name": "x", "layout": "interleaved", "times_clone": 9.0}]
    stems = plots.implementation_bars(rows, layout="half").axes[0]
    # log axis: no bars (their length would mean nothing), a stem from the copy (1×) each
    assert not stems.patches
    horizontal = [line for line in stems.lines
                  if len(line.get_ydata()) == 2 and line.get_ydata()[0] == line.get_ydata()[1]]
    assert [list(line.get_xdata()) for line in horizontal] == [
        [1.0, 1.0], [1.0, 1.2]]
    assert len(stems.get_xticks()) >= 3  # never a log axis with a single tick
    bars = plots.implementation_bars(rows, layout="half", log=False).axes[0]
    assert [p.get_width() for p in bars.patches] == [1.0, 1.2]
    sweep = [{"seq": 4, "clone_ms": 1.0, "apply_rope_ms": 2.0, "reference_ms": 3.0},
             {"seq": 8, "clone_ms": 2.0, "apply_rope_ms": 4.0, "reference_ms": 6.0}]
    lines = plots.cost_versus_size(sweep, "seq").axes[0].lines
    assert [list(line.get_ydata()) for line in lines] == [[3.0, 6.0], [2.0, 4.0], [1.0, 2.0]]
    shares = plots.layer_shares({"MLP": 3.0, "RoPE on q and k": 1.0}).axes[0]
    assert [p.get_width() for p in shares.patches] == [3.0, 1.0]


def _gpu_record():
    """A small record in the form scripts/gpu_check.py writes (numbers made up)."""
    def row(case, dtype, **us):
        return {"case": case, "dtype": dtype, "us_per_tensor": us}

    return {"environment": {"gpu": "a GPU"}, "speed": [
        row("train", "bfloat16", clone=130.0, **{"apply_rope (default)": 137.0,
                                                 "HF eager (rotary + apply) / 2": 1515.0}),
        row("decode", "bfloat16", clone=5.0, **{"apply_rope (default)": 20.0,
                                                "apply_rope + position ids": 25.0}),
        row("decode", "float32", clone=6.0, **{"apply_rope (default)": 9.0}),
        {"case": "skipped", "dtype": "bfloat16", "skipped": "time budget"}]}


def test_gpu_record_figure_plots_each_shape_against_clone():
    figure = plots.gpu_speed(_gpu_record())
    panels = [axes for axes in figure.axes if axes.get_visible()]
    assert len(panels) == 2  # the two bfloat16 rows with times; float32 and skipped left out
    train, decode = panels
    assert train.get_xscale() == "log" and "clone 130 µs" in train.get_title()
    # every label on the same row of every panel; dots at µs ÷ clone's µs
    labels = ["clone", "apply_rope (default)", "HF eager (rotary + apply) / 2",
              "apply_rope + position ids"]
    assert [t.get_text() for t in train.get_yticklabels()] == labels
    dots = [line.get_xdata()[0] for line in train.lines[1::2][:len(labels)]]
    assert dots[:3] == pytest.approx([1.0, 137 / 130, 1515 / 130])
    decode_dots = [line.get_xdata()[0] for line in decode.lines[1::2][:len(labels)]]
    assert decode_dots[0] == 1.0 and decode_dots[3] == pytest.approx(5.0)
    assert len(plots.gpu_speed(_gpu_record(), dtype="float32").axes) == 1
    with pytest.raises(ValueError, match="no speed rows for dtype 'float16'"):
        plots.gpu_speed(_gpu_record(), dtype="float16")


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


@pytest.mark.slow
def test_bench_imports_no_drawing_code():
    """One job per module, no cycle: the benchmark never pulls in widgets, plots or
    matplotlib (the `widgets` command imports them only when it runs)."""
    import subprocess
    import sys

    code = ("import sys, rope_lab.bench, rope_lab.cost, rope_lab.timing; "
            "print(sorted(m for m in sys.modules if m.startswith(('rope_lab.widgets', "
            "'rope_lab.plots', 'matplotlib', 'ipywidgets'))))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(("arguments", "expected"), [
    # failed only after the whole benchmark
    (["--json", "missing/dir/x.json"], "--json missing/dir/x.json: the folder missing/dir does "
                                       "not exist"),
    # the process was OOM-killed
    (["--shape", "1", "1", "1", "2000000000"], "--shape 1 1 1 2000000000: the benchmark's "
                                               "tensors need 59.6 GiB (limit 1 GiB"),
    (["--shape", "1", "2", "16", "7"], "DIM = 7 must be even"),
    (["--shape", "1", "-2", "16", "8"], "--shape 1 -2 16 8: every size must be at least 1"),
    (["--threads", "-3"], "--threads -3: expected a number of threads from 1 to 1024"),
    (["decode", "--shape", "0", "8", "1", "64"], "every size must be at least 1"),
    (["widgets", "--json", "missing/dir/x.json"], "the folder missing/dir does not exist"),
])
def test_an_impossible_request_is_refused_before_any_timing(monkeypatch, capsys, arguments,
                                                            expected):
    """Issue 35: each gave a traceback, an OOM kill or a failure after the whole run."""
    def no_timing(*args, **kwargs):
        raise AssertionError("timed before checking its arguments")

    for name in ("run_benchmark", "decode_benchmark", "sweep"):
        monkeypatch.setattr(bench, name, no_timing)
    monkeypatch.setattr(widgets, "redraw_times", no_timing)
    assert bench.main(arguments) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and expected in err, err
