"""Train a tiny transformer with each position encoding at length L, test it at 1×–8× L.

    python -m rope_lab.experiments.extrapolation            # the full run, ~minutes on CPU
    python -m rope_lab.experiments.extrapolation --quick    # a smoke test, seconds

The task: each sequence repeats a random block of P distinct tokens, P drawn from
[2, L/2] for every length (x_t = x_{t−P}). After the first block every next token is
determined, and finding it needs position: look back to where the current token last
appeared and copy what followed (an induction head). The look-back never exceeds L/2, in
training or in testing — a longer test input is the same task with more context before
it. The loss counts only the determined tokens (t + 1 ≥ P); a model that has learnt the
task scores near 0, a guess scores ln(vocab_size).

Every model trains on length L with the same data and seed; each is then evaluated on
fresh sequences of length kL for every multiple k, the RoPE model also zero-shot with
its rotation speeds scaled by each method of :mod:`rope_lab.scaling` (factor k). The
results JSON (with the command, seed, versions, the code version, device and date) is what
notebook 06 plots: the copy committed with the package (:data:`RESULTS_PATH`).

Where the command writes: ``--out FILE``, else ``extrapolation_results.json`` (with
``--quick``: ``extrapolation_quick.json``) in the current folder — never into the package
unless ``--out`` names a file there. An existing file is replaced only with ``--overwrite``;
the file is written whole or not at all (:mod:`rope_lab.experiments._files`). Bad settings
get one line on stderr and exit status 2, before any training.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812 — the usual name

from rope_lab import _atomic, scaling, timing
from rope_lab.experiments import _checks, _files
from rope_lab.models import POSITION_ENCODINGS, TinyTransformer

RESULTS_PATH = Path(__file__).with_name("extrapolation_results.json")
SCALING_METHODS = ("linear", "ntk", "dynamic", "yarn")


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything that sets the numbers in the results (stored in the JSON)."""

    train_length: int = 64
    multiples: tuple = (1, 2, 4, 8)
    vocab_size: int = 256
    dim: int = 64
    n_heads: int = 4
    n_layers: int = 2
    base: float = 10000.0
    steps: int = 800
    batch_size: int = 32
    learning_rate: float = 3e-3
    eval_sequences: int = 64
    eval_batch: int = 16
    position_bins: int = 32
    seed: int = 0

    def __post_init__(self):
        """Refuse settings that cannot give results, naming the field (before any training)."""
        owner = "extrapolation.Config"
        for name in ("train_length", "vocab_size", "dim", "n_heads", "n_layers", "steps",
                     "batch_size", "eval_sequences", "eval_batch", "position_bins"):
            object.__setattr__(self, name, _checks.integer(owner, name, getattr(self, name)))
        object.__setattr__(self, "seed", _checks.integer(owner, "seed", self.seed, 0))
        object.__setattr__(self, "multiples", _checks.integers(owner, "multiples",
                                                               self.multiples, 1))
        for name in ("base", "learning_rate"):
            object.__setattr__(self, name, _checks.positive_number(owner, name,
                                                                   getattr(self, name)))
        length = self.train_length
        _checks.require(owner, length >= 4, f"train_length must be ≥ 4 (the repeated block "
                        f"has 2 … train_length // 2 tokens), got {length}")
        _checks.require(owner, self.vocab_size >= self.max_period,
                        f"vocab_size = {self.vocab_size} must be ≥ train_length // 2 = "
                        f"{self.max_period} (a block holds that many distinct tokens)")
        _checks.require(owner, self.dim % self.n_heads == 0 and (self.dim // self.n_heads) % 2
                        == 0, f"dim = {self.dim} must split into n_heads = {self.n_heads} heads "
                        "of even size (RoPE rotates pairs)")
        longest = length * max(self.multiples)
        _checks.require(owner, longest % self.position_bins == 0,
                        f"position_bins = {self.position_bins} must divide the longest test "
                        f"length train_length × max(multiples) = {longest}")

    @property
    def max_period(self) -> int:
        return self.train_length // 2


QUICK = Config(train_length=16, vocab_size=64, dim=16, n_heads=2, n_layers=1, steps=3,
               batch_size=4, eval_sequences=2, eval_batch=2, position_bins=8)


def periodic_batch(batch_size: int, length: int, *, vocab_size: int, max_period: int,
                   generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences x_t = x_{t mod P} with a block of P distinct tokens, P ∈ [2, max_period].

    Returns:
        tokens ``(batch, length + 1)`` (inputs are [:, :-1], targets [:, 1:]) and
        determined ``(batch, length)``: True where target t + 1 is a repeat (t + 1 ≥ P).
    """
    period = torch.randint(2, max_period + 1, (batch_size, 1), generator=generator)
    blocks = torch.argsort(torch.rand(batch_size, vocab_size, generator=generator), dim=1)
    t = torch.arange(length + 1)
    tokens = torch.gather(blocks, 1, t % period)
    determined = t[1:] >= period
    return tokens, determined


def token_losses(model, tokens, **rope_kwargs) -> torch.Tensor:
    """Cross-entropy of each next-token prediction: ``(batch, seq)``."""
    logits = model(tokens[:, :-1], **rope_kwargs)
    return F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten(),
                           reduction="none").view(tokens.shape[0], -1)


def train(position: str, config: Config, device, progress=None) -> tuple[TinyTransformer, float]:
    """Train one model at ``config.train_length``; returns it and its final training loss."""
    torch.manual_seed(config.seed)
    data = torch.Generator().manual_seed(config.seed)  # the same batches for every encoding
    model = TinyTransformer(
        config.vocab_size, position=position, dim=config.dim, n_heads=config.n_heads,
        n_layers=config.n_layers, base=config.base,
        max_len=config.train_length * max(config.multiples),
    ).to(device)
    # A constant learning rate: the copy skill appears suddenly (an induction head forms
    # after a few hundred steps), and a decaying rate can end the run before it does.
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
    recent = []
    model.train()
    for _ in range(config.steps):
        tokens, determined = periodic_batch(config.batch_size, config.train_length,
                                            vocab_size=config.vocab_size,
                                            max_period=config.max_period, generator=data)
        tokens, determined = tokens.to(device), determined.to(device)
        loss = token_losses(model, tokens)[determined].mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        recent = (recent + [loss.item()])[-20:]
        if progress is not None:
            progress.update(1)
            progress.set_postfix(encoding=position, loss=f"{recent[-1]:.3f}")
    return model.eval(), sum(recent) / len(recent)


def variants_for(position: str) -> list[str]:
    """What to evaluate for a trained encoding: itself, and for RoPE each scaling too."""
    if position != "rope":
        return [position]
    return ["rope"] + [f"rope+{method}" for method in SCALING_METHODS]


@torch.no_grad()
def evaluate(model, variant: str, config: Config, device) -> dict:
    """Mean loss on the determined tokens at every multiple, and loss per position bin at
    the largest multiple. Every variant sees the same test sequences."""
    losses, curve = {}, None
    for multiple in config.multiples:
        length = multiple * config.train_length
        data = torch.Generator().manual_seed(config.seed + 1000 * multiple)
        total = torch.zeros(length, dtype=torch.float64)
        count = torch.zeros(length, dtype=torch.float64)
        rope_kwargs = _rope_kwargs(variant, model.head_dim, config, multiple, length, device)
        for start in range(0, config.eval_sequences, config.eval_batch):
            size = min(config.eval_batch, config.eval_sequences - start)
            tokens, determined = periodic_batch(size, length, vocab_size=config.vocab_size,
                                                max_period=config.max_period, generator=data)
            loss = token_losses(model, tokens.to(device), **rope_kwargs).cpu().double()
            total += (loss * determined).sum(0)
            count += determined.sum(0)
        losses[str(multiple)] = float(total.sum() / count.sum())
        if multiple == max(config.multiples):
            bins = config.position_bins
            curve = (total.view(bins, -1).sum(1) / count.view(bins, -1).sum(1)).tolist()
    return {"loss": losses, "loss_by_position": curve}


def _rope_kwargs(variant, head_dim, config, multiple, length, device) -> dict:
    if "+" not in variant:
        return {}
    method = variant.split("+", 1)[1]
    freqs, factor = scaling.scaled_inv_freq(
        method, head_dim, base=config.base, factor=float(multiple),
        original_max_position=config.train_length, seq_len=length, device=device)
    return {"inv_freq": freqs, "attention_factor": factor}


def run(config: Config = Config(), device=None, *, progress: bool = True,
        command: str | None = None) -> dict:
    """Train and evaluate every encoding; return the results dictionary (see module doc).

    Writes nothing: :func:`main` (the command) writes the JSON.
    """
    from tqdm.auto import tqdm

    if not isinstance(config, Config):
        raise TypeError(f"extrapolation.run: config must be an extrapolation.Config, got "
                        f"{config!r} of type {type(config).__name__}")
    if device is not None:
        _checks.device("extrapolation.run", device)
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    start = time.perf_counter()
    bar = tqdm(total=config.steps * len(POSITION_ENCODINGS), desc="training",
               disable=not progress)
    results, train_loss = {}, {}
    for position in POSITION_ENCODINGS:
        model, train_loss[position] = train(position, config, device, bar)
        for variant in variants_for(position):
            results[variant] = evaluate(model, variant, config, device)
    bar.close()
    bin_width = max(config.multiples) * config.train_length // config.position_bins
    return {
        "task": "periodic copy: x_t = x_{t-P}, P in [2, L/2]; loss on determined tokens",
        "config": {**dataclasses.asdict(config), "multiples": list(config.multiples)},
        "provenance": _provenance(config, device, command, time.perf_counter() - start),
        "guess_loss": math.log(config.vocab_size),
        "train_loss": train_loss,
        "loss": {variant: result["loss"] for variant, result in results.items()},
        "loss_by_position": {
            "bin_starts": list(range(0, bin_width * config.position_bins, bin_width)),
            "bin_width": bin_width,
            "length": max(config.multiples) * config.train_length,
            **{variant: result["loss_by_position"] for variant, result in results.items()},
        },
    }


def _provenance(config, device, command, seconds) -> dict:
    import numpy

    machine = timing.provenance(device)
    return {
        "command": command or "python -m rope_lab.experiments.extrapolation",
        "seed": config.seed,
        "versions": {"rope_lab": machine["rope_lab"], "torch": machine["torch"],
                     "numpy": numpy.__version__, "python": machine["python"]},
        "code": _files.code_version("experiments/extrapolation.py"),
        "device": machine["device_name"] if device.type == "cuda" else str(device),
        "torch_threads": machine["torch_threads"],
        "date": machine["measured_at"],
        "wall_seconds": round(seconds, 1),
    }


def load_results(path=RESULTS_PATH) -> dict:
    """The results JSON (by default the one committed with the package).

    A file that is not such a JSON gets one :class:`~rope_lab.experiments._files.ResultsError`
    naming the file and what is missing.
    """
    results = _files.read_json(path)
    missing = [key for key in ("config", "provenance", "loss", "loss_by_position")
               if not isinstance(results.get(key), dict)]
    if missing:
        raise _files.ResultsError(f"{path} has no {', '.join(repr(k) for k in missing)}; "
                                  "expected the JSON written by "
                                  "python -m rope_lab.experiments.extrapolation")
    return results


def directions(results: dict) -> dict[str, bool]:
    """The directions notebook 06 reads from the results, each with whether ``results`` show
    it. The notebook's checks test them on the stored results (they cannot fail unless the
    experiment is run again); the command prints them for its own run next to the stored
    ones, so a new run says at once which readings it keeps."""
    loss = {variant: {int(k): v for k, v in losses.items()}
            for variant, losses in results["loss"].items()}
    longer = [k for k in sorted(loss["rope"]) if k > 1]
    longest = longer[-1]
    rope = [v for v in loss if v.startswith("rope")]
    return {
        "RoPE's loss at the longest length is more than 10× its loss at 1×":
            loss["rope"][longest] > 10 * loss["rope"][1],
        "zero-shot PI is worse than plain RoPE at every longer length":
            all(loss["rope+linear"][k] > loss["rope"][k] for k in longer),
        "at the longest length: YaRN < dynamic NTK < static NTK < plain RoPE":
            loss["rope+yarn"][longest] < loss["rope+dynamic"][longest]
            < loss["rope+ntk"][longest] < loss["rope"][longest],
        "YaRN is the best RoPE variant at every longer length":
            all(loss["rope+yarn"][k] == min(loss[v][k] for v in rope) for k in longer),
        "at 2×, static and dynamic NTK are worse than plain RoPE":
            loss["rope"][2] < min(loss["rope+ntk"][2], loss["rope+dynamic"][2]),
        "ALiBi's loss at every longer length is below its loss at 1×":
            all(loss["alibi"][k] < loss["alibi"][1] for k in longer),
        "learned positions are no worse at the longest length than at 1×":
            loss["learned"][longest] <= loss["learned"][1],
        "sinusoidal degrades with length": loss["sinusoidal"][1] < loss["sinusoidal"][longest],
    }


def compare_directions(new: dict, stored: dict | None = None) -> str:
    """:func:`directions` of a new run next to those of the stored results, one line each."""
    stored = load_results() if stored is None else stored
    theirs, ours = directions(stored), directions(new)
    lines = ["direction (notebook 06)" + " " * 50 + "stored  this run"]
    lines += [f"{claim:72s} {'yes' if theirs[claim] else 'no':7s} "
              f"{'yes' if ours[claim] else 'no'}" + ("" if ours[claim] == theirs[claim]
                                                    else "   ← differs")
              for claim in theirs]
    return "\n".join(lines)


DEFAULT_OUT, QUICK_OUT = Path("extrapolation_results.json"), Path("extrapolation_quick.json")


def main(argv=None) -> dict:
    parser = _checks.OneLineParser(prog="python -m rope_lab.experiments.extrapolation",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="a tiny model and a few steps (a smoke test, not results)")
    parser.add_argument("--steps", type=int, help="training steps per encoding")
    parser.add_argument("--seed", type=int, help="seed for data and weights")
    parser.add_argument("--device", help="cpu or cuda (default: cuda when present)")
    parser.add_argument("--out", type=Path,
                        help=f"where to write the JSON (default: {DEFAULT_OUT} in the current "
                             f"folder, {QUICK_OUT} with --quick; the copy the notebooks plot "
                             f"is {RESULTS_PATH}, replaced only if --out names it)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the output file if it exists (default: refuse)")
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads for torch (default 1: the matrices are so small "
                             "that a second thread costs more in synchronisation than it saves)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error(f"--threads must be ≥ 1, got {args.threads}")
    changes = {key: value for key, value in (("steps", args.steps), ("seed", args.seed))
               if value is not None}
    for key, value in changes.items():
        if value < (1 if key == "steps" else 0):
            parser.error(f"--{key} must be {'≥ 1' if key == 'steps' else '≥ 0'}, got {value}")
    try:
        config = dataclasses.replace(QUICK if args.quick else Config(), **changes)
        if args.device is not None:
            _checks.device("--device", args.device)
        if args.out is not None:
            out = _files.check_output(args.out)
        else:
            out = _files.check_output(QUICK_OUT if args.quick else DEFAULT_OUT, default=True)
    except (ValueError, TypeError) as error:
        parser.error(str(error))
    if out.exists() and not args.overwrite:
        parser.error(f"{out} exists; pass --overwrite to replace it, or --out to write "
                     "elsewhere")
    torch.set_num_threads(args.threads)
    given = sys.argv[1:] if argv is None else argv
    command = " ".join(["python -m rope_lab.experiments.extrapolation", *given])
    results = run(config, args.device, progress=not args.no_progress, command=command)
    out = _write(out, _json(results), overwrite=args.overwrite)
    print(f"wrote {out.resolve()}")
    for variant, losses in results["loss"].items():
        row = "  ".join(f"{k}×: {v:6.3f}" for k, v in losses.items())
        print(f"{variant:>14}  {row}")
    print(compare_directions(results))
    return results


def _json(results: dict) -> str:
    return json.dumps(results, indent=1) + "\n"


def _write(out: Path, text: str, *, overwrite: bool) -> Path:
    """Write ``text`` to ``out`` whole; without ``overwrite`` never replace a file, even one
    that another run created while this one trained (then ``NAME-2.json`` …, said aloud)."""
    if overwrite:
        _atomic.write_text(out, text)
        return out
    for number in range(1, 1000):
        target = out if number == 1 else out.with_name(f"{out.stem}-{number}{out.suffix}")
        try:
            _atomic.write_new(target, text)
        except FileExistsError:
            continue
        if target != out:
            print(f"{out} appeared while this run trained; kept it and wrote {target}",
                  file=sys.stderr)
        return target
    raise _files.ResultsError(f"{out} and 998 numbered siblings exist; pass --overwrite or "
                              "another --out")


if __name__ == "__main__":
    main()
