"""What a config's RoPE means for a model: wavelengths, the critical dimension, NoPE layers.

Used by ``python -m rope_lab.hf CONFIG_JSON`` (see :mod:`rope_lab.hf.__main__`) and
notebook 10. Pure functions over a config (dict or transformers object) or a
:class:`~rope_lab.hf.config.RopeSpec`; no transformers import.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from rope_lab.hf import config as hf_config
from rope_lab.i18n import _

# Top-level keys transformers reads for RoPE; a near miss is ignored without a word.
ROPE_TOP_KEYS = ("rope_scaling", "rope_parameters", "rope_theta", "partial_rotary_factor",
                 "original_max_position_embeddings", "max_position_embeddings", "head_dim",
                 "rope_local_base_freq", "no_rope_layers", "no_rope_layer_interval")
# Model types whose default puts a NoPE layer every no_rope_layer_interval layers.
NOPE_INTERVAL_MODELS = ("llama4", "llama4_text", "smollm3")


def printable(text: str) -> str:
    """``text`` with every control or format character but the newline escaped (``\\x1b``,
    ``\\u202e`` …): config strings reach a terminal, and a crafted one could otherwise clear
    the screen, retitle the window or reorder what the reader sees."""
    out = []
    for char in text:
        if char != "\n" and unicodedata.category(char)[0] == "C":
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else
                       f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(char)
    return "".join(out)


def _name(value) -> str:
    """A config-sourced name for the report: as is when it is a plain word, else its repr
    (a newline in a layer type's name must not start a line of its own)."""
    text = str(value)
    return text if text.replace("_", "").replace("-", "").replace(".", "").isalnum() \
        else repr(text)


@dataclass(frozen=True)
class LayerTypeReport:
    """One layer type's RoPE in numbers (what the CLI prints)."""

    spec: hf_config.RopeSpec
    inv_freq: torch.Tensor  # (pairs,) float64, as the model computes it at its start
    attention_factor: float
    wavelengths: torch.Tensor  # 2π/θ_i for the rotating pairs (float64)
    still_pairs: int  # pairs with θ_i = 0 (proportional RoPE): they never rotate
    critical_pairs: int  # pairs whose unscaled θ_i completes a turn within the trained context
    layers: tuple[int, ...]  # the layer indices of this type (empty if unknown)


def wavelengths(inv_freq: torch.Tensor) -> torch.Tensor:
    """λ_i = 2π/θ_i of the pairs that rotate (θ_i > 0), in positions."""
    inv_freq = inv_freq.double()
    return 2 * math.pi / inv_freq[inv_freq > 0]


def critical_pairs(inv_freq: torch.Tensor, context: int) -> int:
    """How many pairs complete a full turn within ``context`` positions (λ_i ≤ context).

    Twice this is the "critical dimension" of Liu et al. 2023: the pairs past it never saw a
    whole period in training, so their angles beyond the trained length are new to the model.
    """
    return int((wavelengths(inv_freq) <= context).sum())


def layers_of_type(config) -> dict[str | None, tuple[int, ...]]:
    fields = hf_config._text_fields(config)
    types = fields.get("layer_types") or []
    out: dict[str | None, list[int]] = {}
    for index, layer_type in enumerate(types):
        out.setdefault(layer_type, []).append(index)
    return {key: tuple(value) for key, value in out.items()}


def nope_layers(config) -> list[int]:
    """Indices of the layers that apply no RoPE at all (NoPE).

    Llama 4 and SmolLM3 list them in ``no_rope_layers`` (1 = RoPE, 0 = NoPE; an empty list
    means the default: every ``no_rope_layer_interval``-th layer, 4 by default, is NoPE).
    Per-layer-type configs mark a NoPE layer type with a null rope block.
    """
    fields = hf_config._text_fields(config)
    count = hf_config.layer_count(fields)
    flags = fields.get("no_rope_layers")
    model_type = fields.get("model_type")
    if flags:
        return [index for index, flag in enumerate(flags) if not flag]
    interval = fields.get("no_rope_layer_interval")
    if interval is None and model_type in NOPE_INTERVAL_MODELS:
        interval = 4
    if interval and count:
        return [index for index in range(count) if (index + 1) % interval == 0]
    block, nested, _ = hf_config._blocks(fields)
    if nested:
        by_type = layers_of_type(config)
        return sorted(i for key, value in block.items() if value is None
                      for i in by_type.get(key, ()))
    return []


def schema_warnings(config) -> list[str]:
    """Top-level problems transformers passes over in silence: near-miss key names, both
    schemas at once, a base given twice; one line each, in the course's language."""
    notes = []
    data = dict(config) if isinstance(config, Mapping) else {}
    scopes = [("", data)]
    if isinstance(data.get("text_config"), Mapping):
        scopes.append(("text_config.", data["text_config"]))
    for prefix, scope in scopes:
        for key in scope:
            if key in ROPE_TOP_KEYS:
                continue
            close = difflib.get_close_matches(key, ROPE_TOP_KEYS, n=1, cutoff=0.8)
            if close and close[0] not in key:  # v_head_dim is its own key, not a typo
                notes.append(_("{prefix}{key!r} looks like a misspelling of {close!r}: "
                               "transformers ignores it").format(prefix=prefix, key=key,
                                                                 close=close[0]))
        both = scope.get("rope_scaling") and scope.get("rope_parameters")
        if both and scope["rope_scaling"] != scope["rope_parameters"]:
            notes.append(_("{prefix}rope_scaling and rope_parameters are both set and differ: "
                           "transformers 5 reads rope_scaling and drops rope_parameters; so "
                           "does this report").format(prefix=prefix))
        # the block transformers reads: rope_scaling when both are set
        block = scope.get("rope_scaling") or scope.get("rope_parameters")
        top = scope.get("rope_theta")
        if isinstance(block, Mapping) and top is not None and "rope_theta" in block \
                and block["rope_theta"] != top:
            which = "rope_scaling" if scope.get("rope_scaling") else "rope_parameters"
            notes.append(_("{prefix}rope_theta={top!r} at the top level but {inner!r} in "
                           "{which}: the block's value is used").format(
                prefix=prefix, top=top, inner=block["rope_theta"], which=which))
        scaling_block = scope.get("rope_scaling")
        if isinstance(scaling_block, Mapping) and "rope_type" not in scaling_block and \
                "type" not in scaling_block:
            notes.append(_("{prefix}rope_scaling has no rope_type (or type): transformers "
                           "treats it as plain RoPE and ignores its other keys").format(
                prefix=prefix))
    return notes


def describe(config) -> dict[str | None, LayerTypeReport | None]:
    """Per layer type (None: one for all layers), the RoPE report; None for NoPE types."""
    by_type = layers_of_type(config)
    reports: dict[str | None, LayerTypeReport | None] = {}
    for layer_type in hf_config.layer_types(config):
        spec = hf_config.rope_spec(config, layer_type)
        if spec is None:
            reports[layer_type] = None
            continue
        freqs, factor = hf_config.inv_freq_from_spec(spec, dtype=torch.float64)
        context = spec.trained_context
        # the critical dimension is a property of the unscaled θ_i = base^(−2i/d) at L
        unscaled = dataclasses.replace(
            spec, rope_type=spec.rope_type if spec.rope_type in ("proportional", "axial")
            else "default", params={})
        base_freqs, _ = hf_config.inv_freq_from_spec(unscaled, dtype=torch.float64)
        reports[layer_type] = LayerTypeReport(
            spec=spec, inv_freq=freqs, attention_factor=factor, wavelengths=wavelengths(freqs),
            still_pairs=int((freqs == 0).sum()),
            critical_pairs=critical_pairs(base_freqs, context) if context else 0,
            layers=by_type.get(layer_type, ()))
    return reports


def softmax_mscale(spec: hf_config.RopeSpec) -> float:
    """The extra softmax scale DeepSeek-V2/V3's MLA attention applies under YaRN:
    mscale(s, mscale_all_dim)² with mscale(s, m) = 0.1·m·ln s + 1 (1 for other models)."""
    all_dim = spec.params.get("mscale_all_dim")
    factor = spec.params.get("factor")
    if spec.rope_type != "yarn" or not all_dim or not factor or factor <= 1 or \
            not (spec.model_type or "").startswith("deepseek"):
        return 1.0
    return (0.1 * all_dim * math.log(factor) + 1.0) ** 2


def all_warnings(config) -> list[str]:
    notes = schema_warnings(config) + hf_config.config_warnings(config)
    return list(dict.fromkeys(notes))


def _format_params(params: dict) -> str:
    parts = []
    for key, value in params.items():
        if isinstance(value, (list, tuple)):
            parts.append(_("{key}=[{count} values, {low:.3g}…{high:.3g}]").format(
                key=key, count=len(value), low=min(value), high=max(value)))
        elif isinstance(value, str):
            parts.append(f"{key}={value!r}")
        else:
            parts.append(f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}")
    return ", ".join(parts)


def _row(label: str, value: str) -> str:
    """One ``  label  value`` line of a layer type's block, the labels in one column of
    monospace width 16 (a CJK character takes two)."""
    width = sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in label)
    return f"  {label}{' ' * max(16 - width, 0)} {value}"


def format_report(config, name: str = "config") -> str:
    """The CLI's text: the warnings first (what transformers would ignore or guess, and the
    rule used for a model type it does not know), then one block per layer type and the NoPE
    layers, in the course's language. Config-sourced names are quoted when they are not plain
    words; pass the result through :func:`printable` before it reaches a terminal."""
    fields = hf_config._text_fields(config)
    layers = hf_config.layer_count(fields)  # checked before anything is built per layer
    reports = describe(config)
    lines = [_("{name}: model_type={model_type!r}, {layers} layers").format(
        name=_name(name), model_type=fields.model_type,
        layers=layers if isinstance(layers, int) else "?")]
    for note in all_warnings(config):
        lines.append(_("warning: {note}").format(note=note))
    for layer_type, report in reports.items():
        title = _name(layer_type) if layer_type is not None else _("all layers")
        if report is None:
            lines.append("\n" + _("[{title}] no RoPE (null rope block): NoPE layers").format(
                title=title))
            continue
        spec = report.spec
        where = _(" ({count} layers)").format(count=len(report.layers)) if report.layers else ""
        lines.append(f"\n[{title}]{where}")
        dims = _("{rotary} of head_dim {head_dim}")
        if spec.rope_type == "proportional":
            rotating = report.inv_freq.numel() - report.still_pairs
            value = (dims.format(rotary=2 * rotating, head_dim=spec.head_dim) + " "
                     + _("(proportional: {count} pairs have θ = 0)").format(
                         count=report.still_pairs))
        elif spec.rope_type == "axial":
            value = (dims.format(rotary=spec.head_dim, head_dim=spec.head_dim) + " "
                     + _("(axial: two image axes of {half})").format(half=spec.head_dim // 2))
        else:
            value = dims.format(rotary=spec.rotary_dim, head_dim=spec.head_dim)
        lines.append(_row(_("rotary dims"), value))
        lines.append(_row(_("base"), f"{spec.base:g}"))
        params = _format_params(spec.params)
        lines.append(_row(_("rope type"), _("{rope_type} ({params})").format(
            rope_type=spec.rope_type, params=params) if params else spec.rope_type))
        lines.append(_row(_("attention factor"), _(
            "{factor:.6g} (multiplies cos and sin; logits × {squared:.6g})").format(
                factor=report.attention_factor, squared=report.attention_factor ** 2)))
        softmax = softmax_mscale(spec)
        if softmax != 1:
            lines.append(_row(_("softmax scale"), _(
                "× {scale:.6g} in the attention itself (MLA: mscale(factor, mscale_all_dim)², "
                "DeepSeek's rule)").format(scale=softmax)))
        waves = report.wavelengths
        lines.append(_row(_("wavelengths"), _("{low:.4g} … {high:.4g} positions").format(
            low=waves.min().item(), high=waves.max().item())))
        trained, scaled = spec.trained_context, spec.scaled_context
        if trained:
            pairs = report.inv_freq.numel() - report.still_pairs
            lines.append(_row(_("critical dim"), _(
                "{dims} ({critical} of {pairs} pairs of the unscaled θ_i turn fully within "
                "the trained {trained} positions)").format(
                    dims=2 * report.critical_pairs, critical=report.critical_pairs,
                    pairs=pairs, trained=trained)))
        maximum = spec.max_position_embeddings
        if spec.rope_type == "dynamic":
            lines.append(_row(_("trained context"), _(
                "{trained}; the base grows with inputs past it").format(trained=trained)))
        elif spec.rope_type not in ("default", "proportional", "axial"):
            factor = spec.params.get("factor")
            scaled_text = (f"× {factor:g} → {scaled}" if factor and scaled != maximum
                           else _("scaled for {scaled}").format(scaled=scaled))
            extra = (_("; max_position_embeddings {maximum}").format(maximum=maximum)
                     if maximum and maximum != scaled else "")
            implied = (" " + _("(implied: max_position_embeddings / factor)")
                       if spec.rope_type == "linear" and not spec.original_max_position_embeddings
                       else "")
            lines.append(_row(_("trained context"), _(
                "{trained}{implied}; {scaled} positions{extra}").format(
                    trained=trained, implied=implied, scaled=scaled_text, extra=extra)))
        elif scaled:
            lines.append(_row(_("context"), _("{count} positions").format(count=scaled)))
        if spec.rope_type == "longrope":
            lines.append(_row(_("switch"), _(
                "short_factor up to {trained} positions, long_factor past it (for the whole "
                "sequence)").format(trained=trained)))
    nope = nope_layers(config)
    if nope:
        shown = ", ".join(map(str, nope[:12])) + (", …" if len(nope) > 12 else "")
        lines.append("\n" + _("NoPE layers ({count}): {shown}").format(count=len(nope),
                                                                        shown=shown))
    return "\n".join(lines)


# --- the fixtures: real config.json files, with a source note each ---------------------


def fixture_names() -> list[str]:
    """Names of the bundled config.json fixtures (rope_lab/hf/fixtures/NAME.json)."""
    from importlib import resources

    folder = resources.files("rope_lab.hf") / "fixtures"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


def load_fixture(name: str) -> dict:
    """One fixture as a dict; its ``_source`` names the model, the file and the year."""
    import json
    from importlib import resources

    names = fixture_names()
    if name not in names:
        raise ValueError(f"name must be one of {names}, got {name!r}")
    path = resources.files("rope_lab.hf") / "fixtures" / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8"))


def atlas() -> list[tuple[str, str, int | None, dict]]:
    """(name, label, year, config) of every fixture, oldest first."""
    rows = []
    for name in fixture_names():
        config = load_fixture(name)
        source = config["_source"]
        rows.append((name, source["label"], source.get("year"), config))
    return sorted(rows, key=lambda row: (row[2] or 9999, row[1]))
