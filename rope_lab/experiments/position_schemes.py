"""Twelve position schemes, two tasks, several seeds: trained at length L, tested at 1×–8× L.

    python -m rope_lab.experiments.position_schemes            # the full grid (minutes, 2 cores)
    python -m rope_lab.experiments.position_schemes --quick    # a smoke test (seconds)

The schemes (:data:`SCHEMES`) are the 2021–2023 encodings of notebook 06 and the RoPE
variants of 2024–2026 models (plus one control: local/global with a single base), all
options of :class:`rope_lab.models.TinyTransformer`.
Each is trained from scratch once per seed, on batches that are half one task and half the
other (one model learns both; the copy task forms the look-up circuit in a few hundred steps,
which the sparser retrieval signal alone does not), and evaluated on the same test sequences
(their seed does not depend on the training seed, so the spread across seeds is the spread of
training alone).

The two tasks:

- **copy** (:func:`rope_lab.experiments.extrapolation.periodic_batch`): a random block of
  P ≤ L/2 distinct tokens repeats; the loss counts the determined tokens. The look-back never
  exceeds L/2, so a model may solve it from the first L positions alone.
- **retrieval** (:func:`retrieval_batch`): ``n_pairs`` key–value pairs are planted at random
  depths in a haystack of filler tokens; at the end each key is asked once and the value that
  followed it must be recalled. A needle at depth 7L must be found 7L tokens back: this task
  needs the positions past L. Accuracy is reported by test length and by needle depth.

The ablations (:data:`ABLATIONS`) test the mechanisms notebook 06 states: attention limited to
offsets < L (RoPE, ALiBi), PI's squeezed step at the training length, and a learned table with
its rows ≥ L zeroed or redrawn.

Results are written after every finished (scheme, seed), so an interrupted run resumes
where it stopped; the JSON carries the command, seeds, versions, device, date, wall and CPU
time, and each unit the code version that trained it (:func:`code_versions`). Notebook 12
plots the copy committed with the package (:data:`RESULTS_PATH`).

Where the command writes: ``--out FILE``, else ``position_schemes_results.json`` (with
``--quick``: ``position_schemes_quick.json``) in the current folder — never into the package
unless ``--out`` names a file there. Writes are atomic; runs sharing one file take turns
and merge their units (:mod:`rope_lab.experiments._files`). A run claims a new file before
it trains (it writes the config with no units), so a run with other settings into the same
file is refused at once rather than after its training; the claim of a run that died before
its first unit is no obstacle. Bad settings and damaged files get one line on stderr and
exit status 2, before any training; a full disk gets one line and status 2 (the units saved
before stay, and no ``NAME.lock`` is left).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime
import functools
import json
import math
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812 — the usual name

from rope_lab import _atomic, scaling, timing
from rope_lab.experiments import _checks, _files
from rope_lab.experiments.extrapolation import periodic_batch, token_losses
from rope_lab.i18n import _
from rope_lab.models import TinyTransformer

RESULTS_PATH = Path(__file__).with_name("position_schemes_results.json")
TASKS = ("copy", "retrieval")
SCALING_METHODS = ("linear", "ntk", "dynamic", "yarn")

# name → (label, TinyTransformer options). "{L}" and "{head_dim}" are filled from the config.
SCHEMES = {
    "none": ("no position (NoPE)", {"position": "none"}),
    "learned": ("learned", {"position": "learned"}),
    "sinusoidal": ("sinusoidal", {"position": "sinusoidal"}),
    "alibi": ("ALiBi", {"position": "alibi"}),
    "rope": ("RoPE, base 1e4", {"position": "rope"}),
    "rope-5e5": ("RoPE, base 5e5", {"position": "rope", "base": 5e5}),
    "p-rope-0.75": ("p-RoPE, p = 0.75", {"position": "rope", "rotating_fraction": 0.75}),
    "p-rope-0.25": ("p-RoPE, p = 0.25", {"position": "rope", "rotating_fraction": 0.25}),
    "partial-25": ("partial rotary 25%", {"position": "rope", "rotary_dim": "{head_dim}/4"}),
    "nope-hybrid": ("RoPE + NoPE layer", {"position": "rope", "nope_layers": [1]}),
    "local-global": ("local 1e4 + global 1e6",
                     {"position": "rope", "local_layers": [0], "window": "{L}/4",
                      "global_base": 1e6}),
    # the same window with one base everywhere: separates the window from the large base
    "local-global-1e4": ("local 1e4 + global 1e4",
                         {"position": "rope", "local_layers": [0], "window": "{L}/4"}),
}

# evaluated variant → (scheme it belongs to, what it changes at test time)
ABLATIONS = {
    **{f"rope+{method}": ("rope", f"zero-shot {method} scaling, factor = test length / L")
       for method in SCALING_METHODS},
    "rope+window": ("rope", "attention limited to offsets < L"),
    "rope+linear@L": ("rope", "PI with factor k on inputs of length L (k is the column)"),
    "alibi+window": ("alibi", "attention limited to offsets < L"),
    "learned+zeroed": ("learned", "table rows ≥ L set to zero"),
    "learned+redrawn": ("learned", "table rows ≥ L redrawn from the initial distribution"),
}


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything that sets the numbers in the results (stored in the JSON)."""

    train_length: int = 32
    multiples: tuple = (1, 2, 4, 8)
    vocab_size: int = 64
    dim: int = 32
    n_heads: int = 2
    n_layers: int = 2
    steps: int = 800
    batch_size: int = 32
    learning_rate: float = 3e-3
    n_pairs: int = 4
    n_keys: int = 16
    n_values: int = 16
    eval_sequences: int = 128
    eval_batch: int = 64
    depth_bins: int = 8
    position_bins: int = 16
    seeds: tuple = (0, 1, 2)

    def __post_init__(self):
        """Refuse settings that cannot give results, naming the field (before any training).

        What a scheme needs of the model (e.g. two layers for "nope-hybrid") is checked by
        :func:`check_schemes` when a run starts.
        """
        owner = "position_schemes.Config"
        for name in ("train_length", "vocab_size", "dim", "n_heads", "n_layers", "steps",
                     "batch_size", "n_pairs", "n_keys", "n_values", "eval_sequences",
                     "eval_batch", "depth_bins", "position_bins"):
            object.__setattr__(self, name, _checks.integer(owner, name, getattr(self, name)))
        object.__setattr__(self, "multiples",
                           _checks.integers(owner, "multiples", self.multiples, 1))
        object.__setattr__(self, "seeds", _checks.integers(owner, "seeds", self.seeds, 0))
        object.__setattr__(self, "learning_rate",
                           _checks.positive_number(owner, "learning_rate", self.learning_rate))
        length, n = self.train_length, self.n_pairs
        require = functools.partial(_checks.require, owner)
        require(length >= 4, f"train_length must be ≥ 4 (the copy task repeats blocks of 2 … "
                f"train_length // 2 tokens), got {length}")
        require(self.vocab_size >= length // 2, f"vocab_size = {self.vocab_size} must be ≥ "
                f"train_length // 2 = {length // 2} (a copied block holds that many distinct "
                "tokens)")
        require(self.batch_size >= 2 and self.batch_size % 2 == 0, f"batch_size must be an "
                f"even integer ≥ 2 (half of each batch is each task), got {self.batch_size}")
        require(n <= self.n_keys, f"n_pairs = {n} must be ≤ n_keys = {self.n_keys} (each pair "
                "has its own key)")
        require(4 * n <= length, f"n_pairs = {n} must be ≤ train_length / 4 = {length / 4:g} "
                "(each pair and its question take 4 positions of the shortest input)")
        filler = self.vocab_size - self.n_keys - self.n_values
        require(filler >= 1, f"vocab_size = {self.vocab_size} must exceed n_keys + n_values = "
                f"{self.n_keys + self.n_values} (the rest of the vocabulary is the haystack's "
                "filler)")
        require(self.dim % self.n_heads == 0 and (self.dim // self.n_heads) % 2 == 0,
                f"dim = {self.dim} must split into n_heads = {self.n_heads} heads of even "
                "size (RoPE rotates pairs)")
        longest = length * max(self.multiples)
        require(longest % self.position_bins == 0, f"position_bins = {self.position_bins} must "
                f"divide the longest test length train_length × max(multiples) = {longest}")


QUICK = Config(train_length=16, vocab_size=48, dim=16, n_heads=2, n_layers=2, steps=3,
               batch_size=4, n_pairs=2, n_keys=8, n_values=8, eval_sequences=4, eval_batch=4,
               depth_bins=4, position_bins=4, seeds=(0, 1, 2))


def model_options(scheme: str, config: Config) -> dict:
    """The TinyTransformer keyword arguments of ``scheme`` under ``config``."""
    head_dim = config.dim // config.n_heads
    options = {}
    for key, value in SCHEMES[scheme][1].items():
        if isinstance(value, str) and "{" in value:
            numerator, denominator = value.split("/")
            scale = {"{L}": config.train_length, "{head_dim}": head_dim}[numerator]
            value = scale // int(denominator)
        options[key] = tuple(value) if isinstance(value, list) else value
    return options


def variants(scheme: str) -> list[str]:
    """What to evaluate for a trained scheme: itself and its ablations."""
    return [scheme] + [name for name, (owner, _) in ABLATIONS.items() if owner == scheme]


def retrieval_batch(batch_size: int, length: int, *, config: Config,
                    generator: torch.Generator) -> dict:
    """Key–value pairs hidden in filler, then every key asked once at the end.

    Token ids: values ``[0, n_values)``, keys ``[n_values, n_values + n_keys)``, filler the
    rest of the vocabulary. The haystack is positions ``0 … length − 2·n_pairs``; each pair
    (key, value) sits at two adjacent positions, pairs never overlap; then the query section
    ``key, value, key, value …`` in a random order ends the sequence.

    Returns:
        ``tokens`` ``(batch, length + 1)`` (inputs [:, :-1], targets [:, 1:]);
        ``answer`` ``(batch, length)`` True at the inputs whose target is an asked value;
        ``depth`` ``(batch, n_pairs)`` the position of each asked key's needle, in the order
        the answers appear, divided by the haystack size (0 = start of the input).
    """
    n = config.n_pairs
    haystack = length + 1 - 2 * n
    filler = config.vocab_size - config.n_values - config.n_keys
    tokens = config.n_values + config.n_keys + torch.randint(
        filler, (batch_size, length + 1), generator=generator)
    keys = config.n_values + torch.argsort(
        torch.rand(batch_size, config.n_keys, generator=generator), dim=1)[:, :n]
    values = torch.randint(config.n_values, (batch_size, n), generator=generator)
    # n sorted distinct slots in [0, haystack − 1 − n), spread by +j: gaps of ≥ 2 tokens.
    slots = torch.argsort(torch.rand(batch_size, haystack - 1 - n, generator=generator),
                          dim=1)[:, :n].sort(dim=1).values + torch.arange(n)
    rows = torch.arange(batch_size)[:, None]
    tokens[rows, slots] = keys
    tokens[rows, slots + 1] = values
    order = torch.argsort(torch.rand(batch_size, n, generator=generator), dim=1)
    query_keys = torch.arange(haystack, length + 1, 2)
    tokens[rows, query_keys] = torch.gather(keys, 1, order)
    tokens[rows, query_keys + 1] = torch.gather(values, 1, order)
    answer = torch.zeros(batch_size, length, dtype=torch.bool)
    answer[:, query_keys] = True
    depth = torch.gather(slots, 1, order).double() / haystack
    return {"tokens": tokens, "answer": answer, "depth": depth}


def _batch(task, batch_size, length, config, generator):
    """(tokens, mask of the scored targets) for either task."""
    if task == "copy":
        return periodic_batch(batch_size, length, vocab_size=config.vocab_size,
                              max_period=config.train_length // 2, generator=generator)
    batch = retrieval_batch(batch_size, length, config=config, generator=generator)
    return batch["tokens"], batch["answer"]


def build_model(scheme: str, config: Config) -> TinyTransformer:
    return TinyTransformer(config.vocab_size, dim=config.dim, n_heads=config.n_heads,
                           n_layers=config.n_layers,
                           max_len=config.train_length * max(config.multiples),
                           **model_options(scheme, config))


def train(scheme: str, seed: int, config: Config, device) -> tuple:
    """One model trained at ``config.train_length`` on both tasks (half of each batch each;
    the loss is the sum of the two tasks' mean losses): (model, mean of the last 20 losses)."""
    torch.manual_seed(seed)
    data = torch.Generator().manual_seed(seed)  # the same batches for every scheme
    model = build_model(scheme, config).to(device)
    # A constant learning rate: the look-up skill appears suddenly (an induction head forms),
    # and a decaying rate can end the run before it does.
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
    recent = []
    model.train()
    for _step in range(config.steps):
        loss = 0.0
        for task in TASKS:
            tokens, scored = _batch(task, config.batch_size // 2, config.train_length, config,
                                    data)
            loss = loss + token_losses(model, tokens.to(device))[scored.to(device)].mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        recent = (recent + [loss.item()])[-20:]
    return model.eval(), sum(recent) / len(recent)


def _variant_model(model, variant, config, seed):
    """The trained model, or a copy with its learned rows ≥ L zeroed or redrawn."""
    if variant not in ("learned+zeroed", "learned+redrawn"):
        return model
    edited = copy.deepcopy(model)
    rows = edited.learned.table.weight.data[config.train_length:]
    if variant == "learned+zeroed":
        rows.zero_()
    else:
        generator = torch.Generator().manual_seed(10_000 + seed)
        rows.copy_(0.02 * torch.randn(rows.shape, generator=generator))
    return edited


def _forward_options(variant, model, config, multiple, length, device) -> dict:
    """The forward() keywords of an evaluated variant at test length ``length``."""
    if variant.endswith("+window"):
        return {"attention_window": config.train_length}
    if "+" not in variant or variant.startswith("learned"):
        return {}
    method = variant.split("+", 1)[1].removesuffix("@L")
    freqs, factor = scaling.scaled_inv_freq(
        method, model.rotary_dim, base=model.base, factor=float(multiple),
        original_max_position=config.train_length, seq_len=length, device=device)
    return {"inv_freq": freqs, "attention_factor": factor}


@torch.no_grad()
def evaluate(model, variant: str, task: str, seed: int, config: Config, device) -> dict:
    """Metrics of one variant at every multiple, on test data that ignores the seed.

    copy: ``loss`` (mean over determined tokens) per multiple, and ``loss_by_position``
    (``position_bins`` bins along the longest input). retrieval: ``accuracy`` and ``loss``
    of the answers per multiple, and ``accuracy_by_depth`` (``depth_bins`` bins of needle
    depth) per multiple.
    """
    model = _variant_model(model, variant, config, seed)
    out = {"loss": {}, "accuracy": {}, "accuracy_by_depth": {}, "loss_by_position": None}
    for multiple in config.multiples:
        length = config.train_length * (1 if variant.endswith("@L") else multiple)
        data = torch.Generator().manual_seed(1_000_000 + 1000 * multiple)
        options = _forward_options(variant, model, config, multiple, length, device)
        total = torch.zeros(length, dtype=torch.float64)
        count = torch.zeros(length, dtype=torch.float64)
        hits, depths = [], []
        for start in range(0, config.eval_sequences, config.eval_batch):
            size = min(config.eval_batch, config.eval_sequences - start)
            if task == "copy":
                tokens, scored = _batch(task, size, length, config, data)
                depth = None
            else:
                batch = retrieval_batch(size, length, config=config, generator=data)
                tokens, scored, depth = batch["tokens"], batch["answer"], batch["depth"]
            logits = model(tokens[:, :-1].to(device), **options).cpu().double()
            targets = tokens[:, 1:]
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(),
                                   reduction="none").view(size, -1)
            total += (loss * scored).sum(0)
            count += scored.sum(0)
            if task == "retrieval":
                hits.append((logits.argmax(-1) == targets)[scored].view(size, -1))
                depths.append(depth)
        key = str(multiple)
        out["loss"][key] = float(total.sum() / count.sum())
        if task == "retrieval":
            hit, depth = torch.cat(hits).double().flatten(), torch.cat(depths).flatten()
            out["accuracy"][key] = float(hit.mean())
            which = (depth * config.depth_bins).long().clamp(max=config.depth_bins - 1)
            out["accuracy_by_depth"][key] = [
                float(hit[which == b].mean()) if bool((which == b).any()) else None
                for b in range(config.depth_bins)]
        elif multiple == max(config.multiples) and not variant.endswith("@L"):
            bins = config.position_bins
            out["loss_by_position"] = (total.view(bins, -1).sum(1)
                                       / count.view(bins, -1).sum(1).clamp(min=1)).tolist()
    return {key: value for key, value in out.items() if value}


def run_unit(scheme: str, seed: int, config: Config, device: str, threads: int = 1) -> dict:
    """Train one (scheme, seed) and evaluate it on both tasks: the record stored in the JSON,
    with the code version that trained it (:func:`unit_provenance`)."""
    torch.set_num_threads(threads)
    wall, cpu = time.perf_counter(), time.process_time()
    device = torch.device(device)
    model, train_loss = train(scheme, seed, config, device)
    metrics = {task: {variant: evaluate(model, variant, task, seed, config, device)
                      for variant in variants(scheme)} for task in TASKS}
    return {"scheme": scheme, "seed": seed, "train_loss": train_loss, **metrics,
            "wall_seconds": round(time.perf_counter() - wall, 2),
            "cpu_seconds": round(time.process_time() - cpu, 2),
            "provenance": unit_provenance(device, threads)}


CODE_ENTRY = "experiments/position_schemes.py"


def unit_provenance(device, threads: int) -> dict:
    """What trained a unit: the code version (a hash of the package sources that set its
    numbers, :func:`rope_lab.experiments._files.code_version`), the git commit, torch,
    device and date."""
    code = _files.code_version(CODE_ENTRY)
    return {"code_version": code["sources_sha256"], "rope_lab": code["rope_lab"],
            "git_commit": code["git_commit"], "git_dirty": code.get("git_dirty"),
            "torch": torch.__version__, "device": str(device), "torch_threads": threads,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def code_versions(results: dict) -> dict[str, list[str]]:
    """The units of ``results`` grouped by the code version that trained them; units from
    before versions were recorded are under "not recorded"."""
    groups: dict[str, list[str]] = {}
    for key, unit in results["units"].items():
        version = (unit.get("provenance") or {}).get("code_version") or "not recorded"
        groups.setdefault(version, []).append(key)
    return groups


def unit_key(scheme: str, seed: int) -> str:
    return f"{scheme}|{seed}"


def config_dict(config: Config) -> dict:
    return {**dataclasses.asdict(config), "multiples": list(config.multiples),
            "seeds": list(config.seeds)}


def schemes_dict(config: Config) -> dict:
    return {name: {"label": label, "options": {k: list(v) if isinstance(v, tuple) else v
                                               for k, v in model_options(name, config).items()}}
            for name, (label, _) in SCHEMES.items()}


def check_schemes(config: Config, schemes=None) -> list[str]:
    """The schemes to train (default: all), each known and buildable under ``config``."""
    owner = "position_schemes"
    if schemes is None:
        schemes = list(SCHEMES)
    elif isinstance(schemes, str) or not hasattr(schemes, "__iter__"):
        raise TypeError(f"{owner}: schemes must be a list of scheme names, got {schemes!r}")
    schemes = list(schemes)
    for name in schemes:
        if name not in SCHEMES:
            raise ValueError(f"{owner}: unknown scheme {name!r}; expected some of "
                             f"{', '.join(SCHEMES)}")
    _checks.require(owner, bool(schemes) and len(set(schemes)) == len(schemes),
                    f"schemes must name at least one scheme, each once, got {schemes}")
    for name in schemes:
        try:
            with torch.device("meta"):  # checks the options without allocating weights
                build_model(name, config)
        except (ValueError, TypeError) as error:
            raise ValueError(f"{owner}: scheme {name!r} cannot be built with this config: "
                             f"{error}") from None
    return schemes


def run(config: Config = Config(), device: str = "cpu", *, out: Path | None = None,
        jobs: int = 1, threads: int = 1, schemes=None, progress: bool = True,
        command: str | None = None, log=None) -> dict:
    """Train and evaluate every (scheme, seed) not already in ``out``; return the results.

    Every setting, and the file ``out`` if it exists, is checked before any training: a
    damaged file or one of another config gets one :class:`ResultsError` naming the file
    and the problem. ``out`` is rewritten (atomically, under a lock, merged with what other
    runs sharing it wrote meanwhile) after every finished unit, so a killed run loses at
    most the units in flight and a rerun resumes. A stored unit is reused while its scheme's
    options are unchanged (a new label is only a new name); ``log`` (default: stderr) hears
    which stored units are retrained or dropped and why. ``jobs`` > 1 trains units in that
    many processes (CPU only), which end with this one even if it is killed.
    """
    return _train(_prepare(config, device, out, jobs, threads, schemes, command, log),
                  progress)


ResultsError = _files.ResultsError


@dataclasses.dataclass
class _Plan:
    config: Config
    device: str
    out: Path | None
    jobs: int
    threads: int
    schemes: list
    results: dict
    todo: list
    resumed: int
    log: object


def _prepare(config, device, out, jobs, threads, schemes, command, log) -> _Plan:
    """Everything that can be refused, refused before any training."""
    if not isinstance(config, Config):
        raise TypeError(f"position_schemes.run: config must be a position_schemes.Config, "
                        f"got {config!r} of type {type(config).__name__}")
    device = _checks.device("position_schemes.run", device)
    jobs = _checks.integer("position_schemes.run", "jobs", jobs)
    threads = _checks.integer("position_schemes.run", "threads", threads)
    schemes = check_schemes(config, schemes)
    if out is not None:
        out = _files.check_output(out, option="out")
    if log is None:
        def log(message):
            print(message, file=sys.stderr)
    results = _skeleton(config)
    results["provenance"] = _provenance(device, command, jobs, threads)
    if out is not None:
        with _files.locked(out):
            stored = _read_stored(out, config)
            if stored is None:
                # Claim the file before training: a run started next, with other settings,
                # is refused now (its config differs) instead of after its training.
                claim = {**results, "provenance": {**results["provenance"],
                                                   "running": _this_process()}}
                _atomic.write_text(out, json.dumps(claim, indent=1) + "\n")
        if stored is not None:
            results["units"], notes = _usable_units(stored, config)
            for note in notes:
                log(f"{out}: {note}")
    todo = [(scheme, seed) for seed in config.seeds for scheme in schemes
            if unit_key(scheme, seed) not in results["units"]]
    resumed = sum(unit["scheme"] in schemes for unit in results["units"].values())
    results["provenance"]["units_reused"] = len(results["units"])
    return _Plan(config, device, out, jobs, threads, schemes, results, todo, resumed, log)


def _train(plan: _Plan, progress: bool) -> dict:
    from tqdm.auto import tqdm

    results, trained = plan.results, {}
    clock = {"start": time.perf_counter(), "saved": 0.0}
    bar = tqdm(total=len(plan.todo) + plan.resumed, initial=plan.resumed, desc="(scheme, seed)",
               disable=not progress)

    def finish(record):
        trained[unit_key(record["scheme"], record["seed"])] = record
        bar.update(1)
        bar.set_postfix(last=f"{record['scheme']}/{record['seed']}")
        _save(plan, trained, clock)

    if plan.jobs > 1 and plan.device == "cpu" and len(plan.todo) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(plan.jobs, mp_context=context,
                                 initializer=_files.die_with_parent,
                                 initargs=(os.getpid(),)) as pool:
            futures = [pool.submit(run_unit, *unit, plan.config, plan.device, plan.threads)
                       for unit in plan.todo]
            for future in as_completed(futures):
                finish(future.result())
    else:
        for unit in plan.todo:
            finish(run_unit(*unit, plan.config, plan.device, plan.threads))
    bar.close()
    _save(plan, trained, clock)
    return results


def _skeleton(config) -> dict:
    return {"tasks": {
        "copy": "periodic copy: x_t = x_{t-P}, P in [2, L/2]; loss on determined tokens",
        "retrieval": "key-value pairs at random depths, each key asked at the end; "
                     "accuracy of the recalled values"},
        "config": config_dict(config), "schemes": schemes_dict(config),
        "ablations": {name: {"scheme": owner, "what": what}
                      for name, (owner, what) in ABLATIONS.items()},
        "guess_loss": math.log(config.vocab_size), "units": {}}


def _this_process() -> dict:
    import socket

    return {"host": socket.gethostname(), "pid": os.getpid()}


def _abandoned(stored: dict) -> bool:
    """A file claimed by a run on this machine that ended before it trained a unit."""
    running = stored.get("provenance", {}).get("running")
    if stored["units"] or not isinstance(running, dict) or \
            running.get("host") != _this_process()["host"]:
        return False
    try:
        os.kill(int(running["pid"]), 0)
    except ProcessLookupError:
        return True
    except (OSError, ValueError, TypeError, KeyError):
        return False
    return False


def _read_stored(out, config) -> dict | None:
    """The results stored in ``out`` (None if there is no file, or only the claim of a run
    that ended before its first unit), checked whole: a damaged file, one of another config
    (a run with other settings, finished or still training), or a unit missing a field gets
    one ResultsError."""
    if not Path(out).exists():
        return None
    stored = _files.read_json(out)
    _check_top(out, stored)
    expected = config_dict(config)
    if stored["config"] != expected and _abandoned(stored):
        return None
    if stored["config"] != expected:
        differ = [f"{k}: {stored['config'].get(k, 'missing')!r} in the file, {v!r} here"
                  for k, v in expected.items() if stored["config"].get(k, "missing") != v]
        differ += [f"{k}: not a setting" for k in stored["config"] if k not in expected]
        running = stored.get("provenance", {}).get("running")
        who = (f"a run with other settings (process {running.get('pid')} on "
               f"{running.get('host')}) is training into it" if isinstance(running, dict)
               and not stored["units"] else "it holds results of another config")
        raise ResultsError(f"{out}: {who} ({'; '.join(differ)}); wait for it, delete the "
                           "file or pass another --out to start afresh")
    for name in ("schemes", "provenance"):
        if not isinstance(stored.get(name, {}), dict):
            raise ResultsError(f"{out}: {name!r} must be an object, got "
                               f"{type(stored[name]).__name__}")
    for key, unit in stored["units"].items():
        problem = _unit_problem(key, unit, config)
        if problem:
            raise ResultsError(f"{out}: unit {key!r} {problem}; delete that unit (or the file) "
                               "to train it again")
    return stored


def _check_top(path, stored: dict) -> None:
    for key in ("config", "units"):
        if not isinstance(stored.get(key), dict):
            raise ResultsError(f"{path} has no {key!r} object; expected a results file of "
                               "python -m rope_lab.experiments.position_schemes; fix it or "
                               "move it away")


def _unit_problem(key, unit, config) -> str | None:
    """What is wrong with a stored unit, or None."""
    if not isinstance(unit, dict):
        return f"is a JSON {type(unit).__name__}, not an object"
    scheme, seed = unit.get("scheme"), unit.get("seed")
    if not isinstance(scheme, str) or isinstance(seed, bool) or not isinstance(seed, int):
        return "has no 'scheme' (a name) and 'seed' (an integer)"
    if key != unit_key(scheme, seed):
        return f"holds scheme {scheme!r}, seed {seed}: its key should be {unit_key(scheme, seed)!r}"
    for field in ("train_loss", "wall_seconds", "cpu_seconds"):
        if isinstance(unit.get(field), bool) or not isinstance(unit.get(field), int | float):
            return f"has no number {field!r}"
    multiples = [str(k) for k in config.multiples]
    for task in TASKS:
        if not isinstance(unit.get(task), dict):
            return f"has no {task!r} results"
        for variant in variants(scheme) if scheme in SCHEMES else unit[task]:
            metrics = unit[task].get(variant)
            if not isinstance(metrics, dict):
                return f"has no {task}/{variant} results"
            for metric in ("loss", "accuracy", "accuracy_by_depth") if task == "retrieval" \
                    else ("loss",):
                values = metrics.get(metric)
                if not isinstance(values, dict) or sorted(values) != sorted(multiples):
                    return (f"has no {task}/{variant}/{metric} for every test multiple "
                            f"({', '.join(multiples)})")
    if "provenance" in unit and not isinstance(unit["provenance"], dict):
        return "has a 'provenance' that is not an object"
    return None


def _usable_units(stored: dict, config: Config) -> tuple[dict, list[str]]:
    """The stored units that can be reused, and what happened to the others (sentences).

    A unit is reused while its scheme exists with the options it was trained with; the
    label is a name only (a new label keeps the units)."""
    current = schemes_dict(config)
    before = stored.get("schemes", {})
    units, notes, dropped = {}, [], {}
    for key, unit in stored["units"].items():
        name = unit["scheme"]
        if name not in current:
            dropped.setdefault((name, "is no longer a scheme"), []).append(key)
        elif name in before and (before[name] or {}).get("options") != current[name]["options"]:
            dropped.setdefault((name, f"was redefined (options {before[name].get('options')} "
                                      f"→ {current[name]['options']}); retraining"),
                               []).append(key)
        else:
            units[key] = unit
    for (name, why), keys in dropped.items():
        notes.append(f"scheme {name!r} {why}: {len(keys)} stored unit(s) not reused "
                     f"({', '.join(keys)})")
    for name, spec in before.items():
        if name in current and isinstance(spec, dict) and spec.get("label") != \
                current[name]["label"] and spec.get("options") == current[name]["options"]:
            notes.append(f"scheme {name!r} is now labelled {current[name]['label']!r} (was "
                         f"{spec.get('label')!r}); its units are kept")
    return units, notes


def _save(plan: _Plan, trained: dict, clock: dict) -> None:
    """Merge this run's units into ``plan.out`` (under its lock) and rewrite it atomically.

    Units another run sharing the file finished meanwhile are kept; wall_seconds adds this
    run's time since its last save to what the file says (every run that trained a stored
    unit, a resumed grid or a concurrent run included)."""
    results, config = plan.results, plan.config
    elapsed = time.perf_counter() - clock["start"]
    stored_wall = results["provenance"].get("wall_seconds", 0.0)
    lock = _files.locked(plan.out) if plan.out is not None else contextlib.nullcontext()
    with lock:
        units = dict(results["units"])
        out = plan.out
        if out is not None:
            try:
                stored = _read_stored(out, config)
            except ResultsError as error:
                # the file changed hands while this run trained (deleted and started anew
                # with other settings): keep it, and this run's units beside it
                out = _sibling(plan.out)
                plan.log(f"{error}; this run's units go to {out}")
                plan.out, stored = out, None
            if stored is not None:
                units.update(_usable_units(stored, config)[0])
                stored_wall = stored.get("provenance", {}).get("wall_seconds", 0.0)
        units.update(trained)
        order = [unit_key(scheme, seed) for seed in config.seeds for scheme in SCHEMES]
        results["units"] = {key: units[key] for key in order if key in units}
        provenance = results["provenance"]
        provenance["wall_seconds"] = round(stored_wall + elapsed - clock["saved"], 1)
        provenance["cpu_seconds"] = round(sum(u["cpu_seconds"] for u in units.values()), 1)
        provenance["units_done"] = len(results["units"])
        clock["saved"] = elapsed
        provenance.pop("running", None)
        if plan.out is not None:
            _atomic.write_text(plan.out, json.dumps(results, indent=1) + "\n")


def _sibling(out: Path) -> Path:
    """``NAME-2.json``, ``NAME-3.json`` …: the first that does not exist."""
    for number in range(2, 1000):
        target = out.with_name(f"{out.stem}-{number}{out.suffix}")
        if not target.exists():
            return target
    raise ResultsError(f"{out} and 998 numbered siblings exist; pass another --out")


def _provenance(device, command, jobs, threads) -> dict:
    import numpy

    machine = timing.provenance(torch.device(device))
    return {
        "command": command or "python -m rope_lab.experiments.position_schemes",
        "versions": {"rope_lab": machine["rope_lab"], "torch": machine["torch"],
                     "numpy": numpy.__version__, "python": machine["python"]},
        "code": _files.code_version(CODE_ENTRY),
        "device": machine["device_name"] if device == "cuda" else device,
        "jobs": jobs, "torch_threads": threads, "cpu_count": os.cpu_count(),
        "date": machine["measured_at"],
    }


def load_results(path=RESULTS_PATH) -> dict:
    """The results JSON (by default the one committed with the package), checked: a damaged
    file gets one :class:`ResultsError` naming it and the problem."""
    results = _files.read_json(path)
    _check_top(path, results)
    try:
        stored_config = Config(**{k: tuple(v) if isinstance(v, list) else v
                                  for k, v in results["config"].items()})
    except (TypeError, ValueError) as error:
        raise ResultsError(f"{path}: its config is not a valid setting ({error})") from None
    _read_stored(path, stored_config)
    return results


def seed_values(results: dict, variant: str, task: str, metric: str, multiple) -> list[float]:
    """One number per seed (in seed order): ``metric`` of ``variant`` on ``task`` at
    ``multiple``. metric: "loss" or "accuracy"."""
    scheme = ABLATIONS[variant][0] if variant in ABLATIONS else variant
    return [results["units"][unit_key(scheme, seed)][task][variant][metric][str(multiple)]
            for seed in results["config"]["seeds"]]


class Comparison(str):
    """What :func:`compare` says, in the course's language, with its verdict for code:
    ``relation`` is "<" or ">" (every seed of ``a`` below or above every seed of ``b``) or
    None (the seeds overlap). Test ``relation``, not the words: they change with the
    language."""

    relation: str | None

    def __new__(cls, text: str, relation: str | None) -> Comparison:
        comparison = super().__new__(cls, text)
        comparison.relation = relation
        return comparison


def compare(results: dict, a: str, b: str, task: str, metric: str, multiple) -> Comparison:
    """A sentence from the seed spread: "a < b", "a > b" when every seed of one lies beyond
    every seed of the other, else "no difference within the seed spread"; its ``relation``
    is "<", ">" or None (:class:`Comparison`)."""
    first, second = (seed_values(results, v, task, metric, multiple) for v in (a, b))
    if max(first) < min(second):
        relation = "<"
    elif min(first) > max(second):
        relation = ">"
    else:
        return Comparison(_("{a} vs {b}: no difference within the seed spread ({first} vs "
                            "{second})").format(a=a, b=b, first=_span(first),
                                                second=_span(second)), None)
    return Comparison(_("{a} {relation} {b} for every seed ({first} vs {second})").format(
        a=a, relation=relation, b=b, first=_span(first), second=_span(second)), relation)


def _span(values) -> str:
    return f"{min(values):.2f}–{max(values):.2f}"


def directions(results: dict) -> dict[str, bool]:
    """The main directions notebook 12 reads from the results (separation over every seed, as
    :func:`compare`), each with whether ``results`` show it. The notebook's checks test them
    on the stored results; the command prints them for its own run next to the stored ones."""
    multiples = results["config"]["multiples"]
    longer, longest = [k for k in multiples if k > 1], max(multiples)

    def relation(a, b, task, k):
        return compare(results, a, b, task, "loss" if task == "copy" else "accuracy",
                       k).relation

    def better(a, b):  # every longer length, both tasks: lower copy loss, higher accuracy
        return all(relation(a, b, task, k) == ("<" if task == "copy" else ">")
                   for task in TASKS for k in longer)

    found = {
        "zero-shot PI: copy loss above plain RoPE at every longer length":
            all(relation("rope+linear", "rope", "copy", k) == ">" for k in longer),
        "YaRN beats PI, NTK and dynamic NTK at every longer length, both tasks":
            all(better("rope+yarn", other) for other in ("rope+linear", "rope+ntk",
                                                         "rope+dynamic")),
        "limiting RoPE to offsets < L lowers its copy loss at the longest length":
            relation("rope+window", "rope", "copy", longest) == "<",
        "PI with factor 2 on inputs of length L is worse than plain RoPE at L":
            min(seed_values(results, "rope+linear@L", "copy", "loss", 2))
            > max(seed_values(results, "rope", "copy", "loss", 1)),
    }
    for scheme in ("rope-5e5", "nope-hybrid", "p-rope-0.25", "local-global"):
        found[f"{scheme} beats RoPE at every longer length, both tasks"] = better(scheme, "rope")
    return found


def compare_directions(new: dict, stored: dict | None = None) -> str:
    """:func:`directions` of a new run next to those of the stored results, one line each."""
    stored = load_results() if stored is None else stored
    theirs, ours = directions(stored), directions(new)
    lines = ["direction (notebook 12)" + " " * 50 + "stored  this run"]
    lines += [f"{claim:72s} {'yes' if theirs[claim] else 'no':7s} "
              f"{'yes' if ours[claim] else 'no'}" + ("" if ours[claim] == theirs[claim]
                                                    else "   ← differs")
              for claim in theirs]
    return "\n".join(lines)


DEFAULT_OUT = Path("position_schemes_results.json")
QUICK_OUT = Path("position_schemes_quick.json")


def main(argv=None) -> dict:
    parser = _checks.OneLineParser(prog="python -m rope_lab.experiments.position_schemes",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="a tiny model and a few steps (a smoke test, not results)")
    parser.add_argument("--steps", type=int, help="training steps per model")
    parser.add_argument("--seeds", type=int, nargs="+", help="training seeds (default 0 1 2)")
    parser.add_argument("--schemes", nargs="+", choices=list(SCHEMES), help="a subset")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--jobs", type=int,
                        help="processes training units in parallel on a CPU (default 2; 1 with "
                             "--quick, where starting a process costs more than it saves)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads per process (default 1: the matrices are tiny)")
    parser.add_argument("--out", type=Path,
                        help=f"the JSON, resumed and rewritten after every unit (default: "
                             f"{DEFAULT_OUT} in the current folder, {QUICK_OUT} with --quick; "
                             f"the copy notebook 12 plots is {RESULTS_PATH}, written only if "
                             "--out names it)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = parser.parse_args(argv)
    if args.device not in ("cpu", "cuda"):
        parser.error(f"--device must be cpu or cuda, got {args.device!r}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch.cuda.is_available() is False on this machine "
                     f"(torch {torch.__version__}); use --device cpu")
    for name in ("jobs", "threads", "steps"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name} must be ≥ 1, got {value}")
    if args.seeds is not None and (min(args.seeds) < 0 or len(set(args.seeds)) < len(args.seeds)):
        parser.error(f"--seeds must be distinct integers ≥ 0, got {args.seeds}")
    jobs = args.jobs or (1 if args.quick else 2)
    changes = {"steps": args.steps, "seeds": tuple(args.seeds) if args.seeds else None}
    given = sys.argv[1:] if argv is None else argv
    command = " ".join(["python -m rope_lab.experiments.position_schemes", *given])
    try:
        config = dataclasses.replace(QUICK if args.quick else Config(),
                                     **{k: v for k, v in changes.items() if v is not None})
        if args.out is not None:
            out = _files.check_output(args.out)
        else:
            out = _files.check_output(QUICK_OUT if args.quick else DEFAULT_OUT, default=True)
        plan = _prepare(config, args.device, out, jobs, args.threads, args.schemes, command,
                        None)
    except (ValueError, TypeError) as error:  # ResultsError included
        parser.error(str(error))
    try:
        results = _train(plan, not args.no_progress)
    except (ResultsError, OSError) as error:  # a full disk, a file that changed hands
        what = (f"could not write {plan.out}: {error.strerror or error}"
                if isinstance(error, OSError) else str(error))
        print(f"position_schemes: {what}; the units saved before are in {plan.out} and a "
              "rerun reuses them", file=sys.stderr)
        raise SystemExit(2) from None
    out = plan.out
    print(f"wrote {out.resolve()}: {len(results['units'])} units, "
          f"{results['provenance']['wall_seconds']} s wall, "
          f"{results['provenance']['cpu_seconds']} s CPU")
    if not args.schemes and results.get("units"):  # a subset lacks some compared schemes
        print(compare_directions(results))
    return results


if __name__ == "__main__":
    main()
