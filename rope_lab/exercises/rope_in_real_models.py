"""Exercises of notebook 10 (RoPE in real models): frequencies from a config.json dict.

10.1 reads plain RoPE or linear scaling from a config in either schema, with an explicit
``head_dim`` or a partial rotary factor; 10.2 adds LongRoPE's switch between its short and
long factor lists. Both are compared with :func:`rope_lab.hf.inv_freq_from_config`, which the
learner may not call.
"""

from __future__ import annotations

import copy

import torch

from rope_lab.exercises.grading import (
    Learner,
    Wrong,
    compare,
    context,
    grader,
    log_uniform,
    matches,
    randint,
)
from rope_lab.hf import config as hf_config
from rope_lab.i18n import N_, _
from rope_lab.rope import inv_freq

FORBIDDEN = ("rope_lab.hf.inv_freq_from_config", "rope_lab.hf.config.inv_freq_from_config",
             "rope_lab.hf.inv_freq_from_spec", "rope_lab.hf.config.inv_freq_from_spec")
# an answer may read transformers' own code (its rope functions): imported before the clock
PRELOAD = ("transformers",)
RTOL = 1e-6  # float32 answers are exact to about 6e-8; the reference is rounded once


def _expected(config, seq_len=None) -> torch.Tensor:
    return hf_config.inv_freq_from_config(config, seq_len=seq_len, dtype=torch.float64)[0]


def _tolerance(expected: torch.Tensor) -> torch.Tensor:
    return RTOL * expected.abs()


def _config(head_dim, heads, base, *, schema, explicit_head=False, partial=None, factor=None,
            old_type_key=False):
    """A config.json dict for plain RoPE (factor None) or linear scaling."""
    hidden = heads * (head_dim + 16 if explicit_head else head_dim)
    # a partial rotary factor is a Phi config: Phi's rotary embedding applies it to plain RoPE,
    # Llama's ignores it (transformers 5), and the exercise asks for r = int(head dim × factor)
    config = {"model_type": "phi" if partial is not None else "llama", "hidden_size": hidden,
              "num_attention_heads": heads, "max_position_embeddings": 4096}
    if explicit_head:
        config["head_dim"] = head_dim
    block = {"rope_type": "linear", "factor": factor} if factor else {"rope_type": "default"}
    if schema == "old":
        config["rope_theta"] = base
        if partial is not None:
            config["partial_rotary_factor"] = partial
        if factor:
            key = "type" if old_type_key else "rope_type"
            config["rope_scaling"] = {key: "linear", "factor": factor}
        else:
            config["rope_scaling"] = None
    else:
        block["rope_theta"] = base
        if partial is not None:
            block["partial_rotary_factor"] = partial
        config["rope_parameters"] = block
    return config


def _hint(answer, config, expected) -> str | None:
    """Name the likely slip when the answer equals a plausible wrong reading."""
    spec = hf_config.rope_spec(config)
    tries = []
    if spec.partial_rotary_factor < 1:
        tries.append((inv_freq(spec.head_dim, spec.base, dtype=torch.float64),
                      _("partial_rotary_factor: only int(head_dim × factor) features rotate, "
                        "and θ_i = base^(−2i/rotary_dim) uses that rotary dim")))
    if "head_dim" in config:
        wrong = config["hidden_size"] // config["num_attention_heads"]
        tries.append((inv_freq(int(wrong * spec.partial_rotary_factor), spec.base,
                               dtype=torch.float64),
                      _("the config's head_dim wins over hidden_size / num_attention_heads")))
    factor = spec.params.get("factor")
    if factor:
        tries.append((expected * factor, _("linear scaling divides every θ_i by the factor")))
        tries.append((expected / factor, _("linear scaling divides θ_i by the factor once")))
    for wrong, hint in tries:
        if matches(answer, wrong, _tolerance(wrong)):
            return hint
    return None


@grader("10.1", N_("inv_freq from a config.json"), forbidden=FORBIDDEN, preload=PRELOAD,
        answer="config_inv_freq")
def check_config_inv_freq(function: Learner, generator: torch.Generator) -> None:
    """10.1: ``function(config)`` returns the ``(rotary_dim // 2,)`` θ_i of a config dict.

    Plain RoPE or linear scaling, in the transformers 4 schema (rope_theta + rope_scaling,
    with "type" or "rope_type") or the 5 schema (rope_parameters); head_dim explicit or
    hidden_size / num_attention_heads; partial_rotary_factor at the top level (4) or in the
    block (5). Any float dtype; relative tolerance 1e-6.
    """
    cases = [_config(16, 4, 10000.0, schema="old"),
             _config(32, 2, 500000.0, schema="old", explicit_head=True),
             _config(80, 4, 10000.0, schema="old", partial=0.4),
             _config(64, 2, 10000.0, schema="old", factor=4.0, old_type_key=True),
             _config(64, 2, 1e6, schema="new", factor=8.0, explicit_head=True),
             _config(96, 2, 10000.0, schema="new", partial=0.5)]
    for _draw in range(2):
        head = 8 * randint(generator, 2, 16)
        partial = [None, 0.25, 0.5][randint(generator, 0, 2)]
        factor = [None, round(log_uniform(generator, 1.5, 16.0), 2)][randint(generator, 0, 1)]
        cases.append(_config(head, randint(generator, 1, 4),
                             round(log_uniform(generator, 100.0, 1e6), 1),
                             schema=["old", "new"][randint(generator, 0, 1)],
                             explicit_head=bool(randint(generator, 0, 1)), partial=partial,
                             factor=factor, old_type_key=bool(randint(generator, 0, 1))))
    for number, config in enumerate(cases):
        function.random = number >= 6
        answer = function(copy.deepcopy(config))
        expected = _expected(config)
        what = _("for config = {config}").format(config=config)
        failure = compare(answer, expected, atol=_tolerance(expected), what=what)
        if failure is not None:
            hint = _hint(answer, config, expected)
            raise Wrong(context(what) + hint if hint else failure)


def _longrope_config(head_dim, base, original, *, factors, top_level_original, schema,
                     heads=2, longest=None):
    """A Phi-3 style config; ``longest`` (max_position_embeddings) defaults to 32 × original,
    as in Phi-3-mini-128k (Phi-3-small-128k has 16 ×): only original_max_position_embeddings
    decides the switch."""
    short, long = factors
    config = {"model_type": "phi3", "hidden_size": heads * head_dim,
              "num_attention_heads": heads,
              "max_position_embeddings": longest or 32 * original}
    block = {"short_factor": short, "long_factor": long}
    if top_level_original:
        config["original_max_position_embeddings"] = original
    else:
        block["original_max_position_embeddings"] = original
    if schema == "old":
        config["rope_theta"] = base
        config["rope_scaling"] = {"type": "longrope", **block}
    else:
        config["rope_parameters"] = {"rope_type": "longrope", "rope_theta": base, **block}
    return config


def _factors(generator, pairs):
    short = [round(1 + 0.05 * i * float(torch.rand((), generator=generator)), 4)
             for i in range(pairs)]
    long = [round(1 + 2.0 * i * float(torch.rand((), generator=generator)), 4)
            for i in range(pairs)]
    return short, long


@grader("10.2", N_("LongRoPE's switch"), forbidden=FORBIDDEN + (
    "rope_lab.scaling.longrope_inv_freq",), preload=PRELOAD,
        answer="longrope_inv_freq")
def check_longrope_inv_freq(function: Learner, generator: torch.Generator) -> None:
    """10.2: ``function(config, seq_len)`` returns LongRoPE's θ_i for a Phi-3 style config.

    θ_i = base^(−2i/d) / short_factor[i] while seq_len ≤ original_max_position_embeddings,
    / long_factor[i] once seq_len exceeds it; original_max_position_embeddings at the top
    level (Phi-3's files) or in the block. Any float dtype; relative tolerance 1e-6.
    """
    teaching = torch.Generator().manual_seed(10)
    cases = []
    # heads 2, 4 and 3; max_position_embeddings 32, 16 and 25 × the original length: nothing
    # but the config's own keys gives the head dim or the switch point
    for head, heads, base, original, longest, top, schema in (
            (16, 2, 10000.0, 64, None, True, "old"),
            (32, 4, 10000.0, 4096, 16 * 4096, False, "new"),
            (24, 3, 5e5, 100, 2500, True, "new")):
        config = _longrope_config(head, base, original, factors=_factors(teaching, head // 2),
                                  top_level_original=top, schema=schema, heads=heads,
                                  longest=longest)
        cases += [(config, original // 2), (config, original), (config, original + 1),
                  (config, 10 * original)]
    for _draw in range(2):
        head = 8 * randint(generator, 1, 8)
        original = randint(generator, 16, 4096)
        config = _longrope_config(head, round(log_uniform(generator, 100.0, 1e6), 1), original,
                                  factors=_factors(generator, head // 2),
                                  top_level_original=bool(randint(generator, 0, 1)),
                                  schema=["old", "new"][randint(generator, 0, 1)],
                                  heads=randint(generator, 1, 8),
                                  longest=original * randint(generator, 2, 64))
        cases.append((config, original + randint(generator, -2, 2)))
    for number, (config, seq_len) in enumerate(cases):
        function.random = number >= 12
        spec = hf_config.rope_spec(config)
        original = spec.original_max_position_embeddings
        what = _("for seq_len = {seq_len} (original_max_position_embeddings = {original}, "
                 "max_position_embeddings = {longest}, hidden_size = {hidden}, "
                 "num_attention_heads = {heads})").format(
                     seq_len=seq_len, original=original,
                     longest=config["max_position_embeddings"], hidden=config["hidden_size"],
                     heads=config["num_attention_heads"])
        try:
            answer = function(copy.deepcopy(config), seq_len)
        except Wrong as crash:
            if not crash.crashed:
                raise
            raise Wrong(_("{crash}; {what}: the head dim is hidden_size // num_attention_heads "
                          "= {head_dim}, so {speeds} speeds, one per factor").format(
                              crash=crash, what=what, head_dim=spec.head_dim,
                              speeds=spec.head_dim // 2)) from None
        expected = _expected(config, seq_len)
        failure = compare(answer, expected, atol=_tolerance(expected), what=what)
        if failure is None:
            continue
        raise Wrong(_longrope_hint(answer, config, seq_len, original, what) or failure)


def _longrope_hint(answer, config, seq_len, original, what) -> str | None:
    """Name the slip when the answer is LongRoPE read with one plausible mistake."""
    other = _expected(config, original + 1 if seq_len <= original else original)
    if matches(answer, other, _tolerance(other)):
        guessed = config["max_position_embeddings"] // 32
        guess = (_("; max_position_embeddings // 32 would be {guessed}, which only some files "
                   "match").format(guessed=guessed) if guessed != original else "")
        return _("{what}: the other factor list. Short factors while seq_len ≤ "
                 "original_max_position_embeddings (= {original}, read from the config"
                 "{guess}), long ones only once seq_len exceeds it").format(
                     what=what, original=original, guess=guess)
    head_dim = hf_config.rope_spec(config).head_dim
    got = tuple(getattr(answer, "shape", ()))
    if got and got != (head_dim // 2,):
        return _("{what}: expected {speeds} speeds (the head dim is hidden_size // "
                 "num_attention_heads = {head_dim}), got shape {got}").format(
                     what=what, speeds=head_dim // 2, head_dim=head_dim, got=got)
    return None
