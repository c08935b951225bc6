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
time. Notebook 12 plots it.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812 — the usual name

from rope_lab import scaling, timing
from rope_lab.experiments.extrapolation import periodic_batch, token_losses
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
    for _ in range(config.steps):
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
    """Train one (scheme, seed) and evaluate it on both tasks: the record stored in the JSON."""
    torch.set_num_threads(threads)
    wall, cpu = time.perf_counter(), time.process_time()
    device = torch.device(device)
    model, train_loss = train(scheme, seed, config, device)
    metrics = {task: {variant: evaluate(model, variant, task, seed, config, device)
                      for variant in variants(scheme)} for task in TASKS}
    return {"scheme": scheme, "seed": seed, "train_loss": train_loss, **metrics,
            "wall_seconds": round(time.perf_counter() - wall, 2),
            "cpu_seconds": round(time.process_time() - cpu, 2)}


def unit_key(scheme: str, seed: int) -> str:
    return f"{scheme}|{seed}"


def config_dict(config: Config) -> dict:
    return {**dataclasses.asdict(config), "multiples": list(config.multiples),
            "seeds": list(config.seeds)}


def schemes_dict(config: Config) -> dict:
    return {name: {"label": label, "options": {k: list(v) if isinstance(v, tuple) else v
                                               for k, v in model_options(name, config).items()}}
            for name, (label, _) in SCHEMES.items()}


def run(config: Config = Config(), device: str = "cpu", *, out: Path | None = None,
        jobs: int = 1, threads: int = 1, schemes=None, progress: bool = True,
        command: str | None = None) -> dict:
    """Train and evaluate every (scheme, seed) not already in ``out``; return the results.

    ``out`` is rewritten after every finished unit, so a killed run loses at most the units
    in flight; a run with the same config resumes from it. ``jobs`` > 1 trains units in that
    many processes (CPU only).
    """
    from tqdm.auto import tqdm

    schemes = list(SCHEMES) if schemes is None else list(schemes)
    results = _load_partial(out, config)
    results["provenance"] = _provenance(device, command, jobs, threads)
    todo = [(scheme, seed) for seed in config.seeds for scheme in schemes
            if unit_key(scheme, seed) not in results["units"]]
    resumed = sum(unit["scheme"] in schemes for unit in results["units"].values())
    results["provenance"]["units_reused"] = len(results["units"])
    start = time.perf_counter()
    bar = tqdm(total=len(todo) + resumed, initial=resumed, desc="(scheme, seed)",
               disable=not progress)

    def finish(record):
        results["units"][unit_key(record["scheme"], record["seed"])] = record
        bar.update(1)
        bar.set_postfix(last=f"{record['scheme']}/{record['seed']}")
        _save(results, out, time.perf_counter() - start)

    if jobs > 1 and device == "cpu" and len(todo) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(jobs, mp_context=context) as pool:
            futures = [pool.submit(run_unit, *unit, config, device, threads) for unit in todo]
            for future in as_completed(futures):
                finish(future.result())
    else:
        for unit in todo:
            finish(run_unit(*unit, config, device, threads))
    bar.close()
    _save(results, out, time.perf_counter() - start)
    return results


def _load_partial(out, config) -> dict:
    fresh = {"tasks": {
        "copy": "periodic copy: x_t = x_{t-P}, P in [2, L/2]; loss on determined tokens",
        "retrieval": "key-value pairs at random depths, each key asked at the end; "
                     "accuracy of the recalled values"},
        "config": config_dict(config), "schemes": schemes_dict(config),
        "ablations": {name: {"scheme": owner, "what": what}
                      for name, (owner, what) in ABLATIONS.items()},
        "guess_loss": math.log(config.vocab_size), "units": {}}
    if out is None or not Path(out).exists():
        return fresh
    stored = json.loads(Path(out).read_text())
    if stored.get("config") != fresh["config"]:
        raise ValueError(
            f"{out} holds results of another config; expected config "
            f"{fresh['config']}; delete it or pass another --out to start afresh")
    # A unit is reused while its scheme is defined as when it was trained: adding a scheme
    # trains only the new one, redefining one retrains it, --schemes never drops the others.
    unchanged = {name for name, spec in stored.get("schemes", {}).items()
                 if fresh["schemes"].get(name) == spec}
    fresh["units"] = {key: unit for key, unit in stored["units"].items()
                      if unit["scheme"] in unchanged}
    fresh["previous_seconds"] = stored["provenance"].get("wall_seconds", 0.0)
    return fresh


def _save(results, out, seconds) -> None:
    # wall_seconds adds up every run that trained a stored unit (a resumed grid included)
    provenance = results["provenance"]
    provenance["wall_seconds"] = round(results.get("previous_seconds", 0.0) + seconds, 1)
    provenance["cpu_seconds"] = round(sum(u["cpu_seconds"] for u in results["units"].values()),
                                      1)
    provenance["units_done"] = len(results["units"])
    if out is None:
        return
    temporary = Path(str(out) + ".tmp")
    temporary.write_text(json.dumps(results, indent=1) + "\n")
    os.replace(temporary, out)  # atomic: a kill mid-write leaves the previous file whole


def _provenance(device, command, jobs, threads) -> dict:
    import numpy

    machine = timing.provenance(torch.device(device))
    return {
        "command": command or "python -m rope_lab.experiments.position_schemes",
        "versions": {"rope_lab": machine["rope_lab"], "torch": machine["torch"],
                     "numpy": numpy.__version__, "python": machine["python"]},
        "device": machine["device_name"] if device == "cuda" else device,
        "jobs": jobs, "torch_threads": threads, "cpu_count": os.cpu_count(),
        "date": machine["measured_at"],
    }


def load_results(path=RESULTS_PATH) -> dict:
    """The results JSON (by default the one committed with the package)."""
    return json.loads(Path(path).read_text())


def seed_values(results: dict, variant: str, task: str, metric: str, multiple) -> list[float]:
    """One number per seed (in seed order): ``metric`` of ``variant`` on ``task`` at
    ``multiple``. metric: "loss" or "accuracy"."""
    scheme = ABLATIONS[variant][0] if variant in ABLATIONS else variant
    return [results["units"][unit_key(scheme, seed)][task][variant][metric][str(multiple)]
            for seed in results["config"]["seeds"]]


def compare(results: dict, a: str, b: str, task: str, metric: str, multiple) -> str:
    """A sentence from the seed spread: "a < b", "a > b" when every seed of one lies beyond
    every seed of the other, else "no difference within the seed spread"."""
    first, second = (seed_values(results, v, task, metric, multiple) for v in (a, b))
    if max(first) < min(second):
        relation = "<"
    elif min(first) > max(second):
        relation = ">"
    else:
        return (f"{a} vs {b}: no difference within the seed spread "
                f"({_span(first)} vs {_span(second)})")
    return f"{a} {relation} {b} for every seed ({_span(first)} vs {_span(second)})"


def _span(values) -> str:
    return f"{min(values):.2f}–{max(values):.2f}"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m rope_lab.experiments.position_schemes",
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
                        help=f"the JSON, rewritten after every unit (default: {RESULTS_PATH.name}"
                             " in the package, or position_schemes_quick.json here with --quick)")
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
    config = QUICK if args.quick else Config()
    changes = {"steps": args.steps, "seeds": tuple(args.seeds) if args.seeds else None}
    config = dataclasses.replace(config, **{k: v for k, v in changes.items() if v is not None})
    out = args.out or (Path("position_schemes_quick.json") if args.quick else RESULTS_PATH)
    given = sys.argv[1:] if argv is None else argv
    command = " ".join(["python -m rope_lab.experiments.position_schemes", *given])
    results = run(config, args.device, out=out, jobs=jobs, threads=args.threads,
                  schemes=args.schemes, progress=not args.no_progress, command=command)
    print(f"wrote {out}: {len(results['units'])} units, "
          f"{results['provenance']['wall_seconds']} s wall, "
          f"{results['provenance']['cpu_seconds']} s CPU")
    return results


if __name__ == "__main__":
    main()
