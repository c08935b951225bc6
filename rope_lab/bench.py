"""The benchmark: how fast is RoPE next to a plain copy? (And the CLI for panel redraws.)

    python -m rope_lab.bench [--device cpu|cuda] [--dtype float32|bfloat16] [--json PATH]
    python -m rope_lab.bench decode [--device cpu|cuda] [--json PATH]
    python -m rope_lab.bench widgets [--json PATH]

RoPE reads every element of q (or k) once and writes it once, with about 3 FLOPs per
element: memory-bound. So every implementation is timed next to ``x.clone()`` on the same
tensor, in the same process, interleaved round-robin (a neighbour's load slows both alike).
GB/s counts the bytes of x read plus the bytes written; the cos/sin tables (a few percent,
and reused by every layer) are not counted.

Timing: warm-up calls, then repeats in turns; CUDA events on a GPU. A time is the median of
its repeats; "× clone" is the median of the per-turn ratios (each call divided by the clone
timed in the same turn), which cancels the machine's slow drifts, and the verdict line gives
the quartiles of those ratios so that a reader sees how much one run can swing. On a CPU
every call starts from fresh memory pages (see :func:`rope_lab.timing.release_free_memory`).

Each path of ``apply_rope`` is timed through its public switch (``backend=...``), with and
without position ids. ``decode`` times what a model pays per call: one decode step (q and k
of a handful of numbers, position ids given) next to Hugging Face's own path
(``LlamaRotaryEmbedding.forward`` + ``apply_rotary_pos_emb``, transformers installed), side
by side in one process, as paired ratios. The main command prints those rows too. The
harness is :mod:`rope_lab.timing`; bytes and FLOPs are counted in :mod:`rope_lab.cost`;
``widgets`` times the panels (:func:`rope_lab.widgets.redraw_times`, imported only then).

A ratio r of times is said both ways round correctly: "2.00 × slower than" for r = 2,
"2.00 × faster than" for r = 0.5 (:func:`versus`), never "0.5 × faster".
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

import torch

from rope_lab import _angles, _atomic, _ckernel, _eager, _validate, fast, rope
from rope_lab.i18n import N_, LazyText, lazy_gettext, using_language
from rope_lab.i18n import gettext as _
from rope_lab.implementations import (
    apply_rope_complex,
    apply_rope_dense,
    apply_rope_interleaved,
    apply_rope_rotate_half,
    rotate_half,
)
from rope_lab.timing import paired_ratios, provenance, quartiles, time_in_turns, time_round_robin

# The reference shape, a LLaMA-7B-sized head: batch 1, 32 heads, 2048 tokens, head dim 128
# (32 MiB in float32).
DEFAULT_SHAPE = (1, 32, 2048, 128)
# The dense form builds a (dim × dim) matrix per token: timed on this many tokens, scaled up.
DENSE_TOKENS = 128
# One decode step of a small model: batch 1, 8 heads for q and for k, one new token, head dim
# 64, at position DECODE_POSITION.
DECODE_SHAPE = (1, 8, 1, 64)
DECODE_POSITION = 37


def versus(ratio: float, baseline: str) -> str:
    """A time ratio (this ÷ baseline) in words that read right: "2.00 × slower than X" for
    2, "2.00 × faster than X" for 0.5, "as fast as X" within half a percent (in the course's
    language: notebook 09 prints them in its sentences)."""
    if abs(ratio - 1) < 0.005:
        return _("as fast as {baseline}").format(baseline=baseline)
    if ratio > 1:
        return _("{ratio:.2f} × slower than {baseline}").format(ratio=ratio, baseline=baseline)
    return _("{ratio:.2f} × faster than {baseline}").format(ratio=1 / ratio, baseline=baseline)


@dataclass
class Result:
    name: str
    layout: str
    ms: float
    gb_per_s: float
    times_clone: float
    note: str = ""
    # Lower and upper quartile of the per-turn ratios to clone (None in runs saved before
    # they were recorded).
    times_clone_quartiles: tuple | None = None


# --- the implementations ----------------------------------------------------------------------

def hf_style_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Hugging Face's eager ``apply_rotary_pos_emb`` for one tensor: x·cos + rotate_half(x)·sin.

    cos, sin: ``(seq, dim)`` — the angles concatenated with themselves, as HF caches them.
    """
    return x * cos + rotate_half(x) * sin


def hf_tables(seq: int, dim: int, *, device, dtype=torch.float32):
    """HF's cos/sin: ``(seq, dim)`` = cat(angles, angles), in x's dtype as HF casts them."""
    angles = rope.rope_angles(torch.arange(seq, device=device), rope.inv_freq(dim, device=device))
    doubled = torch.cat((angles, angles), dim=-1)
    return doubled.cos().to(dtype), doubled.sin().to(dtype)


def implementations(x: torch.Tensor, layout: str, *, compile_baseline: bool = False) -> dict:
    """name → zero-argument callable rotating x (or copying it, for "clone")."""
    seq, dim = x.shape[-2], x.shape[-1]
    cos, sin = _angles.cached_cos_sin(seq, dim, rope.DEFAULT_BASE, x.device, torch.float32)
    hf_cos, hf_sin = hf_tables(seq, dim, device=x.device, dtype=x.dtype)
    scratch, buffer = x.clone(), torch.empty_like(x)
    # Position ids as a model passes them: one tensor of integers per call (here 0 … seq−1,
    # so the result equals the default's).
    ids = torch.arange(seq, device=x.device)
    # The names are keys that code reads (targets, the committed JSON); N_ marks them for the
    # catalog, and the figures of notebook 09 show them translated.
    functions = {
        "clone": lambda: x.clone(),
        # The same bytes without allocating: the floor for a path that reuses its output.
        N_("copy_ into a buffer"): lambda: buffer.copy_(x),
        N_("apply_rope (default)"): lambda: rope.apply_rope(x, layout=layout),
        N_("apply_rope + position ids"): lambda: rope.apply_rope(x, ids, layout=layout),
        N_("apply_rope_ (in place)"): lambda: rope.apply_rope_(scratch, layout=layout),
        N_("reference formula (eager)"): lambda: rope.rotate_reference(x, cos, sin, layout),
        N_("HF-style eager rotate_half"): lambda: hf_style_rope(x, hf_cos, hf_sin),
    }
    if layout == "half":
        fallback = (N_("backend='eager' (no Triton)") if x.is_cuda
                    else N_("backend='eager' (no C compiler)"))
        if fast.auto_backend(x, layout) != "eager":
            functions[fallback] = lambda: rope.apply_rope(x, layout=layout, backend="eager")
        functions[N_("package rotate_half")] = lambda: apply_rope_rotate_half(x)
    else:
        functions[N_("package interleaved")] = lambda: apply_rope_interleaved(x)
        functions[N_("package complex")] = lambda: apply_rope_complex(x)
    if compile_baseline:
        # Inductor fuses each formula into one kernel (C++ on CPU, Triton on CUDA); the first
        # call compiles (tens of seconds on a CPU), which the warm-up absorbs.
        compiled_hf = torch.compile(hf_style_rope, dynamic=False)
        compiled_reference = torch.compile(rope.rotate_reference, dynamic=False)
        functions[N_("torch.compile(HF-style)")] = lambda: compiled_hf(x, hf_cos, hf_sin)
        functions[N_("torch.compile(reference)")] = lambda: compiled_reference(x, cos, sin,
                                                                               layout)
    return functions


def run_benchmark(
    shape=DEFAULT_SHAPE,
    *,
    device="cpu",
    dtype=torch.float32,
    layouts=("half", "interleaved"),
    repeats: int = 7,
    warmup: int = 2,
    compile_baseline: bool = False,
    dense: bool = True,
) -> list[Result]:
    """Time every implementation at ``shape`` for each layout; one Result per (name, layout)."""
    device = torch.device(device)
    generator = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(shape, generator=generator, device=device, dtype=torch.float32).to(dtype)
    moved = 2 * x.numel() * x.element_size()  # read x, write the result
    results = []
    for layout in layouts:
        functions = implementations(x, layout, compile_baseline=compile_baseline)
        first_calls = _first_calls(functions, device)
        samples = time_in_turns(functions, device=device, warmup=warmup, repeats=repeats)
        for name, times in samples.items():
            s = statistics.median(times)
            low, ratio, high = quartiles(paired_ratios(samples, name))
            note = ""
            if name in ("apply_rope (default)", "apply_rope + position ids"):
                note = _default_path_name(x, layout, ids=name.endswith("ids"))
            if name in first_calls:
                note = NOTE_FIRST_CALL.format(seconds=first_calls[name])
            results.append(Result(name, layout, s * 1e3, moved / s / 1e9, ratio, note,
                                  (low, high)))
        seconds = {name: statistics.median(times) for name, times in samples.items()}
        if dense:
            results.append(_dense_result(x, layout, seconds["clone"], device, repeats))
    return results


def _default_path_name(x, layout, *, ids: bool = False) -> str:
    """What backend="auto" ran, in words, with the C loop's build time (ids: position ids
    were given)."""
    backend = fast.auto_backend(x, layout)
    if backend == "c":
        how = _ckernel.status().split("(")[-1].rstrip(")")  # "built in 0.31 s" / "loaded …"
        return (NOTE_C_IDS if ids else NOTE_C).format(threads=torch.get_num_threads(), how=how)
    if backend == "triton":
        return NOTE_TRITON_IDS if ids else NOTE_TRITON
    if backend in ("complex", "reference"):
        return {"complex": NOTE_COMPLEX, "reference": NOTE_REFERENCE}[backend]
    if not _eager.blocking_pays(x):
        return NOTE_EAGER_WHOLE
    return NOTE_EAGER_BLOCKS.format(mebibytes=_eager.block_bytes() >> 20)


# A row's note, English in the results and the JSON a run writes (code and committed runs read
# them); format_table shows it in the course's language through note_text, which recognises
# these templates. Words a field holds ("loaded from the cache") are templates too.
NOTE_C = N_("backend 'c': C loop, {threads} threads ({how})")
NOTE_C_IDS = N_("backend 'c': C loop, {threads} threads, cos/sin from the ids ({how})")
NOTE_TRITON = N_("backend 'triton': one Triton kernel")
NOTE_TRITON_IDS = N_("backend 'triton': one Triton kernel, angles from the ids inside")
NOTE_COMPLEX = N_("backend 'complex': one complex multiply")
NOTE_REFERENCE = N_("backend 'reference': the reference formula")
NOTE_EAGER_WHOLE = N_("backend 'eager': four whole-tensor kernels")
NOTE_EAGER_BLOCKS = N_("backend 'eager': three kernels per {mebibytes} MiB block")
NOTE_FIRST_CALL = N_("first call (compiling) {seconds:.1f} s")
NOTE_DENSE = N_("timed on {tokens} tokens, scaled ×{factor:g} (cost is linear in L)")
_NOTE_TEMPLATES = (NOTE_C, NOTE_C_IDS, NOTE_TRITON, NOTE_TRITON_IDS, NOTE_COMPLEX,
                   NOTE_REFERENCE, NOTE_EAGER_WHOLE, NOTE_EAGER_BLOCKS, NOTE_FIRST_CALL,
                   NOTE_DENSE,
                   # what _ckernel.status() says in the parentheses of NOTE_C
                   N_("loaded from the cache"), N_("built in {seconds:.2f} s"))
_FIELD = re.compile(r"\{(\w+)(?::[^}]*)?\}")


def _template_pattern(template: str) -> re.Pattern:
    parts = _FIELD.split(template)  # literal, name, literal, name, …
    return re.compile("".join(re.escape(part) if i % 2 == 0 else f"(?P<{part}>.+?)"
                              for i, part in enumerate(parts)))


_NOTE_PATTERNS = [(template, _template_pattern(template)) for template in _NOTE_TEMPLATES]


def note_text(note: str) -> str:
    """A benchmark row's note (English, as :func:`run_benchmark` and the committed runs hold
    it) in the course's language; a note that matches no template comes back as it is."""
    for template, pattern in _NOTE_PATTERNS:
        match = pattern.fullmatch(note)
        if match:
            translated = _FIELD.sub(lambda field: "{" + field[1] + "}", _(template))
            return translated.format(**{name: note_text(value)
                                        for name, value in match.groupdict().items()})
    return note


def _first_calls(functions: dict, device) -> dict:
    """Seconds of the first call of each torch.compile row: the compile time a user waits."""
    seconds = {}
    for name, function in functions.items():
        if name.startswith("torch.compile"):
            start = time.perf_counter()
            function()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            seconds[name] = time.perf_counter() - start
    return seconds


def _dense_result(x, layout, clone_seconds, device, repeats) -> Result:
    """The d×d matrix form, timed on DENSE_TOKENS tokens and scaled to the full length."""
    tokens = min(DENSE_TOKENS, x.shape[-2])
    part = x[..., :tokens, :]
    seconds = time_round_robin(
        {"dense": lambda: apply_rope_dense(part, layout=layout)},
        device=device, warmup=1, repeats=max(3, repeats // 2),
    )["dense"] * x.shape[-2] / tokens
    moved = 2 * x.numel() * x.element_size()
    note = NOTE_DENSE.format(tokens=tokens, factor=x.shape[-2] / tokens)
    return Result(N_("dense matrix R_m x"), layout, seconds * 1e3, moved / seconds / 1e9,
                  seconds / clone_seconds, note)


def sweep(
    parameter: str,
    values,
    *,
    device="cpu",
    dtype=torch.float32,
    heads: int = 32,
    seq: int = 2048,
    head_dim: int = 128,
    layout: str = "half",
    repeats: int = 5,
) -> list[dict]:
    """Default apply_rope and clone versus ``parameter`` ("seq" or "head_dim")."""
    rows = []
    for value in values:
        sizes = {"seq": seq, "head_dim": head_dim, parameter: value}
        x = torch.randn(1, heads, sizes["seq"], sizes["head_dim"], device=device).to(dtype)
        seconds = time_round_robin(
            {"clone": lambda x=x: x.clone(),
             "apply_rope": lambda x=x: rope.apply_rope(x, layout=layout),
             "reference": lambda x=x: _reference(x, layout)},
            device=device, repeats=repeats, warmup=1,
        )
        rows.append({parameter: value, "elements": x.numel(),
                     **{f"{name}_ms": s * 1e3 for name, s in seconds.items()}})
    return rows


def _reference(x, layout):
    cos, sin = _angles.cached_cos_sin(x.shape[-2], x.shape[-1], rope.DEFAULT_BASE, x.device,
                                    torch.float32)
    return rope.rotate_reference(x, cos, sin, layout)


# --- one decode step: what a call costs -------------------------------------------------------

HF_DECODE = "HF: LlamaRotaryEmbedding + apply_rotary_pos_emb"


def decode_functions(shape=DECODE_SHAPE, *, device="cpu", dtype=torch.float32,
                     position: int = DECODE_POSITION, base: float = rope.DEFAULT_BASE) -> dict:
    """name → zero-argument callable doing one decode step's RoPE, on q and on k.

    ``shape`` (batch, heads, new tokens, head dim) for q and for k. Hugging Face's path is
    transformers' own code as a Llama layer runs it: ``LlamaRotaryEmbedding.forward`` (cos and
    sin from the position ids) and ``apply_rotary_pos_emb`` (q and k). Ours: ``apply_rope`` on
    q and on k with the same ids (as ``(batch, 1, seq)``), in place, with the default
    positions 0 … seq − 1, and ``RotaryEmbedding(q, k, ids)`` (on CUDA q and k in one
    launch). Raises ImportError without transformers.
    """
    import transformers
    from transformers.models.llama import modeling_llama

    from rope_lab.hf import tiny

    batch, heads, seq, dim = shape
    device = torch.device(device)
    generator = torch.Generator(device=device).manual_seed(0)
    q, k = (torch.randn(shape, generator=generator, device=device).to(dtype) for _ in range(2))
    ids = position + torch.arange(seq, device=device).expand(batch, seq)  # HF: (batch, seq)
    positions = ids[:, None, :]  # ours: (batch, 1, seq), broadcasting over heads
    config = transformers.LlamaConfig(hidden_size=heads * dim, num_attention_heads=heads,
                                      num_key_value_heads=heads, head_dim=dim,
                                      **tiny.rope_config_kwargs(base))
    # By keyword: 4.45's first positional parameter is the old ``dim``.
    rotary = modeling_llama.LlamaRotaryEmbedding(config=config).to(device)
    apply_rotary = modeling_llama.apply_rotary_pos_emb
    q_scratch, k_scratch = q.clone(), k.clone()
    module = rope.RotaryEmbedding(dim, base).to(device)

    def hf():
        cos, sin = rotary(q, ids)
        return apply_rotary(q, k, cos, sin)

    return {
        HF_DECODE: hf,
        "apply_rope(q, ids), apply_rope(k, ids)":
            lambda: (rope.apply_rope(q, positions), rope.apply_rope(k, positions)),
        "apply_rope_(q, ids), apply_rope_(k, ids)":
            lambda: (rope.apply_rope_(q_scratch, positions),
                     rope.apply_rope_(k_scratch, positions)),
        "apply_rope(q), apply_rope(k), no ids":
            lambda: (rope.apply_rope(q), rope.apply_rope(k)),
        "RotaryEmbedding(q, k, ids)": lambda: module(q, k, positions),
    }


def decode_benchmark(shape=DECODE_SHAPE, *, device="cpu", dtype=torch.float32,
                     repeats: int = 25, calls: int = 100, warmup: int = 2) -> dict:
    """Time one decode step of every row of :func:`decode_functions`, in turns.

    Each turn runs every row ``calls`` times in a loop (a step takes microseconds), so a
    time is per step; "× HF" is the median of the per-turn ratios to Hugging Face's path,
    with their quartiles. Returns {"shape", "dtype", "device", "calls", "rows": [...]}."""
    functions = decode_functions(shape, device=device, dtype=dtype)
    looped = {name: (lambda function=function: [function() for _ in range(calls)])
              for name, function in functions.items()}
    samples = time_in_turns(looped, device=device, warmup=warmup, repeats=repeats)
    rows = []
    for name, times in samples.items():
        low, ratio, high = quartiles(paired_ratios(samples, name, HF_DECODE))
        rows.append({"name": name, "us_per_step": statistics.median(times) / calls * 1e6,
                     "times_hf": ratio, "times_hf_quartiles": (low, high)})
    return {"shape": list(shape), "dtype": str(dtype).removeprefix("torch."),
            "device": torch.device(device).type, "calls": calls, "repeats": repeats,
            "rows": rows}


def format_decode(report: dict) -> str:
    """The decode table: µs per step, and each row against Hugging Face's path in words
    (in the course's language; the rows are code)."""
    # lazy texts pad in monospace columns (the headers stay over their columns); marked
    # outside the f-string, where the catalog's extractor sees them
    step, spread, words = (lazy_gettext("step"), lazy_gettext("quartiles"),
                           lazy_gettext("in words"))
    lines = [_("one decode step, q and k of shape {shape} each, {dtype}, {device} ({calls} "
               "steps per turn)").format(shape=tuple(report["shape"]), dtype=report["dtype"],
                                         device=report["device"], calls=report["calls"]),
             f"{step:50} {'µs/step':>8} {'× HF':>6}  {spread:9}   {words}"]
    for row in report["rows"]:
        low, high = row["times_hf_quartiles"]
        lines.append(f"{row['name']:50} {row['us_per_step']:8.1f} {row['times_hf']:6.2f}  "
                     f"{low:.2f}–{high:.2f}   {versus(row['times_hf'], 'HF')}")
    return "\n".join(lines)


# --- counting: bytes, FLOPs, the roofline ----------------------------------------------------

def measure_layer(seq: int = 512, d_model: int = 512, heads: int = 8, *, device="cpu",
                  repeats: int = 5) -> dict:
    """Measured seconds of the parts of one attention + MLP layer (no batching, float32)."""
    device = torch.device(device)
    generator = torch.Generator(device=device).manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=generator, device=device) / shape[-1] ** 0.5

    tokens = randn(seq, d_model)
    w_qkvo, w_up, w_down = randn(4, d_model, d_model), randn(d_model, 4 * d_model), randn(
        4 * d_model, d_model)
    head_dim = d_model // heads
    q, k, v = (randn(heads, seq, head_dim) for _ in range(3))
    scores = q @ k.transpose(-1, -2)
    weights = scores.softmax(-1)
    functions = {
        "q, k, v, o projections": lambda: [tokens @ w for w in w_qkvo],
        "RoPE on q and k": lambda: (rope.apply_rope(q), rope.apply_rope(k)),
        "scores q kᵀ": lambda: q @ k.transpose(-1, -2),
        "softmax": lambda: scores.softmax(-1),
        "weights × v": lambda: weights @ v,
        "MLP": lambda: torch.relu(tokens @ w_up) @ w_down,
    }
    return time_round_robin(functions, device=device, repeats=repeats, warmup=1)


def machine_roofline(*, device="cpu", megabytes: int = 64, matmul_size: int = 512,
                     repeats: int = 5) -> dict:
    """This machine's two roofs, measured: copy bandwidth (GB/s) and matmul GFLOP/s.

    Bandwidth: ``out.copy_(x)`` into a preallocated tensor (read + write, no page faults).
    Peak: a square float32 matmul, a fair stand-in for what the compute units can do.
    """
    device = torch.device(device)
    x = torch.randn(megabytes * 2**18, device=device)
    out = torch.empty_like(x)
    a = torch.randn(matmul_size, matmul_size, device=device)
    seconds = time_round_robin({"copy": lambda: out.copy_(x), "matmul": lambda: a @ a},
                               device=device, repeats=repeats)
    return {"bandwidth_gb_s": 2 * x.numel() * 4 / seconds["copy"] / 1e9,
            "peak_gflops": 2 * matmul_size**3 / seconds["matmul"] / 1e9}


# --- committed results ------------------------------------------------------------------------

def committed_results() -> dict:
    """Benchmark JSON files shipped with the package (``rope_lab/benchmarks/*.json``), by name.

    Each holds one ``python -m rope_lab.bench --json`` run with its provenance (the GPU
    records of ``scripts/gpu_check.py`` are :func:`committed_gpu_records`).
    """
    return {name: run for name, run in _committed_json("benchmarks").items() if "results" in run}


def committed_gpu_records() -> dict:
    """``scripts/gpu_check.py`` records shipped with the package
    (``rope_lab/benchmarks/gpu/*.json``), by file name: correctness, speed, per-call cost,
    syncs, graphs and compile on one GPU, with its provenance."""
    return {name: run for name, run in _committed_json("benchmarks/gpu").items()
            if "speed" in run and "correct" in run}


def _committed_json(folder_name: str) -> dict:
    from importlib import resources

    folder = resources.files("rope_lab").joinpath(*folder_name.split("/"))
    if not folder.is_dir():
        return {}
    return {item.name: json.loads(item.read_text()) for item in sorted(
        folder.iterdir(), key=lambda item: item.name) if item.name.endswith(".json")}


# --- reporting --------------------------------------------------------------------------------

def format_table(results: list[Result]) -> str:
    """The benchmark table, one row per Result, in the course's language (names, layouts and
    notes are English in the results: code and the JSON read them)."""
    # lazy texts pad in monospace columns; marked outside the f-string for the extractor
    implementation, layout, note = (lazy_gettext("implementation"), lazy_gettext("layout"),
                                    lazy_gettext("note"))
    lines = [f"{implementation:32} {layout:12} {'ms':>9} {'GB/s':>7} {'× clone':>8}  {note}"]
    for r in results:
        lines.append(f"{LazyText(r.name):32} {LazyText(r.layout):12} {r.ms:9.3f} "
                     f"{r.gb_per_s:7.1f} {r.times_clone:8.2f}  {note_text(r.note)}")
    return "\n".join(lines)


def format_sweep(rows: list[dict]) -> str:
    """The sweep table (:func:`sweep`), its headers in the course's language."""
    parameter = next(iter(rows[0]))
    clone, rotated, reference, per_element = (
        lazy_gettext("clone ms"), lazy_gettext("rope ms"), lazy_gettext("reference ms"),
        lazy_gettext("rope ns/element"))
    lines = [f"{parameter:>9} {clone:>9} {rotated:>9} {reference:>13} {per_element:>16}"]
    for row in rows:
        lines.append(f"{row[parameter]:9d} {row['clone_ms']:9.3f} {row['apply_rope_ms']:9.3f} "
                     f"{row['reference_ms']:13.3f} "
                     f"{row['apply_rope_ms'] * 1e6 / row['elements']:16.4f}")
    return "\n".join(lines)


def targets(results: list[Result]) -> dict:
    """The course's CPU targets per layout: default ≤ 1.3 × clone, ≥ 3 × faster than HF eager.

    ``speedup_over_hf_eager`` is HF's time ÷ the default's (above 1: the default is faster);
    :func:`versus` words it."""
    verdicts = {}
    for layout in sorted({r.layout for r in results}):
        by_name = {r.name: r for r in results if r.layout == layout}
        default = by_name["apply_rope (default)"]
        hf = by_name["HF-style eager rotate_half"]
        with_ids = by_name.get("apply_rope + position ids")
        verdicts[layout] = {
            "default_times_clone": default.times_clone,
            "ids_times_clone": None if with_ids is None else with_ids.times_clone,
            "default_times_clone_quartiles": default.times_clone_quartiles,
            "default_times_copy": default.ms / by_name["copy_ into a buffer"].ms,
            "in_place_times_copy": by_name["apply_rope_ (in place)"].ms
            / by_name["copy_ into a buffer"].ms,
            "speedup_over_hf_eager": hf.ms / default.ms,
            "fraction_of_copy_bandwidth": 1 / default.times_clone,
        }
        compiled = by_name.get("torch.compile(reference)")
        if compiled is not None:
            verdicts[layout]["compiled_reference_times_clone"] = compiled.times_clone
            verdicts[layout]["compiled_first_call_s"] = {
                r.name: float(r.note.split()[-2]) for r in by_name.values()
                if r.name.startswith("torch.compile") and r.note}
    return verdicts



def format_target_verdicts(verdicts) -> str:
    """Runs against the course's CPU targets, one line per (run, layout): default ≤ 1.3 ×
    clone, ≥ 3 × faster than HF eager, in place ≤ 1.2 × copy_ into a buffer. ``verdicts``:
    tuples (run name, layout, default ÷ clone, HF ÷ default, in place ÷ copy_), as notebook
    09 gathers them from :func:`committed_results`' targets. In the course's language."""
    run, layout, default, hf, in_place = (
        lazy_gettext("run"), lazy_gettext("layout"), lazy_gettext("default/clone"),
        lazy_gettext("HF/default"), lazy_gettext("in place/copy_"))
    met, missed = lazy_gettext("met"), lazy_gettext("MISSED")
    lines = [f"{run:28s} {layout:12s} {default:>13s} {'≤ 1.3?':>7s} {hf:>10s} {'≥ 3?':>5s} "
             f"{in_place:>15s} {'≤ 1.2?':>7s}"]
    for name, layout_name, times_clone, speedup, in_place_times in verdicts:
        lines.append(f"{name:28s} {LazyText(layout_name):12s} {times_clone:13.2f} "
                     f"{met if times_clone <= 1.3 else missed:>7s} {speedup:10.1f} "
                     f"{met if speedup >= 3 else missed:>5s} {in_place_times:15.2f} "
                     f"{met if in_place_times <= 1.2 else missed:>7s}")
    return "\n".join(lines)

# --- command line -----------------------------------------------------------------------------

def main(argv=None) -> int:
    """The command line: a tool, so it prints English whatever ROPE_LAB_LANG says."""
    with using_language("en"):
        return _main(argv)


def _main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["widgets"]:
        return _main_widgets(argv[1:])
    if argv[:1] == ["decode"]:
        return _main_decode(argv[1:])
    return _main_rope(argv)


class _Refused(ValueError):
    """An argument the command cannot run with: one line, exit status 2."""


# x, its clone, each implementation's output and the buffers kept between turns.
_TENSORS_PER_SHAPE = 8
MAX_THREADS = 1024


def _check_arguments(args, prog: str) -> None:
    """Everything the command line asks for, checked before any timing: the --json path, the
    shape (positive, an even feature size, tensors within MAX_TABLE_BYTES), the counts and
    the thread count. :class:`_Refused` names the argument, the value and the limit."""
    if getattr(args, "json", None):
        try:
            _atomic.check_target(args.json, "--json")
        except ValueError as error:
            raise _Refused(str(error)) from None
    shape = getattr(args, "shape", None)
    if shape is not None:
        given = " ".join(str(n) for n in shape)
        if any(n < 1 for n in shape):
            raise _Refused(f"--shape {given}: every size must be at least 1")
        if shape[-1] % 2:
            raise _Refused(f"--shape {given}: DIM = {shape[-1]} must be even (RoPE rotates "
                           "pairs of features)")
        itemsize = torch.empty((), dtype=getattr(torch, args.dtype)).element_size()
        nbytes = math.prod(shape) * itemsize * _TENSORS_PER_SHAPE
        if nbytes > _validate.MAX_TABLE_BYTES:
            raise _Refused(f"--shape {given}: the benchmark's tensors need "
                           f"{_validate.format_bytes(nbytes)} (limit "
                           f"{_validate.format_bytes(_validate.MAX_TABLE_BYTES)}, "
                           "rope_lab._validate.MAX_TABLE_BYTES); expected a smaller shape")
    for name in ("repeats", "calls"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            raise _Refused(f"--{name} {value}: must be at least 1")
    threads = getattr(args, "threads", None)
    if threads is not None and not 1 <= threads <= MAX_THREADS:
        raise _Refused(f"--threads {threads}: expected a number of threads from 1 to "
                       f"{MAX_THREADS}")


def _write_json(prog: str, path: str, payload: dict) -> int:
    """Write the results whole or not at all; a full disk gets one line and status 2 (the
    tables above stay on the screen)."""
    try:
        _atomic.write_text(path, json.dumps(payload, indent=1))
    except OSError as error:
        print(f"{prog}: could not write --json {path}: {error.strerror or error}; the results "
              "are only in the output above", file=sys.stderr)
        return 2
    print(f"\nwrote {path}")
    return 0


def _refuse(prog: str, error: Exception) -> int:
    print(f"{prog}: {error}", file=sys.stderr)
    return 2


def _device_and_dtype(parser, args):
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise _Refused("--device cuda: no CUDA device is available here")
    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)
    return device, getattr(torch, args.dtype)


def _main_decode(argv) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rope_lab.bench decode",
        description="Time one decode step's RoPE (q and k, position ids given) next to "
                    "Hugging Face's LlamaRotaryEmbedding + apply_rotary_pos_emb.")
    parser.add_argument("--device", choices=["cpu", "cuda"], default=None,
                        help="default: cuda when available, else cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--shape", type=int, nargs=4, default=DECODE_SHAPE,
                        metavar=("BATCH", "HEADS", "TOKENS", "DIM"))
    parser.add_argument("--repeats", type=int, default=25, help="turns (default 25)")
    parser.add_argument("--calls", type=int, default=200, help="steps per turn (default 200)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    try:
        _check_arguments(args, parser.prog)
        device, dtype = _device_and_dtype(parser, args)
    except _Refused as error:
        return _refuse(parser.prog, error)
    try:
        report = decode_benchmark(tuple(args.shape), device=device, dtype=dtype,
                                  repeats=args.repeats, calls=args.calls)
    except ImportError as error:
        print(f"python -m rope_lab.bench decode compares with transformers, which is not "
              f"installed here ({error}); pip install 'rope_lab[models]'", file=sys.stderr)
        return 2
    info = provenance(device, dtype)
    print(f"RoPE per call · {info['device_name']} · torch {info['torch']} · "
          f"{info['torch_threads']} threads")
    print(format_decode(report))
    if args.json:
        return _write_json(parser.prog, args.json, {"provenance": info, "decode": report})
    return 0


def _main_rope(argv) -> int:
    parser = argparse.ArgumentParser(prog="python -m rope_lab.bench",
                                     description="Time every RoPE implementation against clone().")
    parser.add_argument("--device", choices=["cpu", "cuda"], default=None,
                        help="default: cuda when available, else cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--shape", type=int, nargs=4, default=DEFAULT_SHAPE,
                        metavar=("BATCH", "HEADS", "SEQ", "DIM"))
    parser.add_argument("--repeats", type=int, default=25,
                        help="turns per implementation (default 25)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--no-sweeps", action="store_true", help="skip length/head-dim sweeps")
    parser.add_argument("--note", default="", help="a remark stored with --json (conditions)")
    parser.add_argument("--compile", action="store_true",
                        help="also time torch.compile of the HF-style form (default on CUDA)")
    parser.add_argument("--no-decode", action="store_true",
                        help="skip the per-call rows (one decode step next to HF's path)")
    args = parser.parse_args(argv)
    try:
        _check_arguments(args, parser.prog)
        device, dtype = _device_and_dtype(parser, args)
    except _Refused as error:
        return _refuse(parser.prog, error)
    shape = tuple(args.shape)
    compile_baseline = args.compile or device.type == "cuda"

    if compile_baseline and "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        # A fresh Inductor cache, so that a compiled form's first call is the compile a user
        # waits for on first use, not a lookup in what an earlier run left on disk.
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="rope_lab-inductor-")
    info = provenance(device, dtype)
    print(f"RoPE benchmark · {info['device_name']} · torch {info['torch']} · "
          f"{info['torch_threads']} threads · {info['dtype']} · shape {shape}")
    results = run_benchmark(shape, device=device, dtype=dtype, repeats=args.repeats,
                            compile_baseline=compile_baseline)
    print(format_table(results))
    verdicts = targets(results)
    for layout, verdict in verdicts.items():
        low, high = verdict["default_times_clone_quartiles"]
        print(f"{layout:12} default = {verdict['default_times_clone']:.2f} × clone "
              f"(quartiles {low:.2f}–{high:.2f} over {args.repeats} turns; "
              f"{verdict['fraction_of_copy_bandwidth']:.0%} of copy bandwidth), "
              f"{versus(1 / verdict['speedup_over_hf_eager'], 'HF-style eager')}; "
              f"with position ids {verdict['ids_times_clone']:.2f} × clone; "
              f"{verdict['default_times_copy']:.2f} × copy_ into a buffer "
              f"(in place: {verdict['in_place_times_copy']:.2f} ×)")
        if "compiled_reference_times_clone" in verdict:
            first_calls = ", ".join(f"{name} {seconds:.1f} s" for name, seconds
                                    in verdict["compiled_first_call_s"].items())
            print(f"{'':12} torch.compile(reference) = "
                  f"{verdict['compiled_reference_times_clone']:.2f} × clone; first calls "
                  f"(compiling for this shape): {first_calls}")

    decode = None
    if not args.no_decode:
        try:
            decode = decode_benchmark(DECODE_SHAPE, device=device, dtype=dtype,
                                      repeats=args.repeats, calls=100)
        except ImportError as error:
            print(f"\n(per-call rows skipped: transformers is not installed: {error})")
        else:
            print()
            print(format_decode(decode))

    sweeps = {}
    if not args.no_sweeps:
        # A quarter of the heads keeps the CPU run short; the cost per element is what counts.
        batch, heads, seq, dim = shape
        heads = max(1, heads // 4)
        sweeps["seq"] = sweep("seq", [256, 512, 1024, 2048, 4096], device=device, dtype=dtype,
                              heads=heads, head_dim=dim, repeats=args.repeats)
        sweeps["head_dim"] = sweep("head_dim", [32, 64, 128, 256], device=device, dtype=dtype,
                                   heads=heads, seq=seq, repeats=args.repeats)
        for rows in sweeps.values():
            print()
            print(format_sweep(rows))

    if args.json:
        payload = {"provenance": {**info, "c_kernel": _ckernel.status()}, "note": args.note,
                   "shape": list(shape),
                   "results": [asdict(r) for r in results], "targets": verdicts,
                   "sweeps": sweeps, "decode": decode}
        return _write_json(parser.prog, args.json, payload)
    return 0


def _main_widgets(argv) -> int:
    parser = argparse.ArgumentParser(prog="python -m rope_lab.bench widgets",
                                     description="Redraw time of every registered panel.")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    try:
        _check_arguments(args, parser.prog)
    except _Refused as error:
        return _refuse(parser.prog, error)
    from rope_lab import widgets  # matplotlib and ipywidgets: only for this command

    report = widgets.redraw_times()
    print(widgets.format_redraw_table(report))
    print("(Python redraw per move: compute, Agg draw and PNG, for the 1× preview a key press "
          "waits for and the 2× figure drawn after a pause; the browser adds the round trip, "
          "the decode and the paint, measured by tests/browser/test_panels_in_browser.py, "
          f"which can run beside CPU burners; load average now {os.getloadavg()[0]:.1f})")
    if args.json:
        return _write_json(parser.prog, args.json,
                           {"provenance": provenance("cpu", torch.float32), "panels": report})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
