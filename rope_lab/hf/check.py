"""Does a model rotate the way its config says? Run its own rotary embedding and compare.

:func:`check_rotary` calls a transformers model's rotary embedding module(s), the code that
actually runs, at the positions you give, and compares the cos and sin they return with
the ones :mod:`rope_lab` computes from the config (:func:`rope_lab.hf.inv_freq_from_config`,
in float64). It catches what a config review misses:

- a scaling block the model never read (a misspelled key: the model runs plain RoPE);
- the wrong number of rotary features (partial rotary ignored or applied twice);
- angles that lost precision (``model.to(torch.bfloat16)`` rounds the ``inv_freq``
  buffer to 8 bits, so at position 10 000 cos is off by ~1);
- given ``apply_rotary=``, a re-implementation of ``apply_rotary_pos_emb`` that pairs the
  wrong features.

It returns a :class:`RotaryVerdict`: one row per layer type, with the max differences, the
dtype and the tolerance; its repr is a small table that notebooks print. What it says (the
table, a row's ``problem``) is in the course's language; the numbers are what code reads.
"""

from __future__ import annotations

import inspect
import unicodedata
from dataclasses import dataclass, field

import torch

from rope_lab.hf.config import config_warnings, inv_freq_from_spec, layer_types, rope_spec
from rope_lab.i18n import _
from rope_lab.rope import apply_rope

# float32 holds an angle to ±2^-24 relative; HF multiplies two float32 numbers (position and
# inv_freq), so its angle may sit a few of those from the exact one.
_ANGLE_ULPS = 8 * 2.0**-24
# Rounding the returned cos/sin to the module's output dtype costs half an ulp of 1.
_OUTPUT_EPS = {torch.float64: 1e-12, torch.float32: 1e-6, torch.bfloat16: 2.0**-8,
               torch.float16: 2.0**-10}


@dataclass(frozen=True)
class RotaryRow:
    """The comparison for one layer type (``None``: the model has one kind of RoPE)."""

    layer_type: str | None
    modules: tuple[str, ...]
    dtype: torch.dtype | None
    rotary_dim: int | None  # features the model rotates (None: the call failed)
    expected_rotary_dim: int
    head_dim: int
    max_cos_error: float | None
    max_sin_error: float | None
    tolerance: float
    max_apply_error: float | None = None
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class RotaryVerdict:
    """What :func:`check_rotary` found. ``ok`` is True when every layer type matches."""

    rows: tuple[RotaryRow, ...]
    positions: tuple[int, int]  # smallest and largest position checked
    notes: tuple[str, ...] = field(default=())  # what transformers would ignore in the config

    @property
    def ok(self) -> bool:
        return all(row.ok for row in self.rows)

    @property
    def max_error(self) -> float:
        """The largest cos, sin (or applied) difference over every layer type (inf if a
        layer type's rotary dims differ)."""
        errors = []
        for row in self.rows:
            if row.max_cos_error is None:
                return float("inf")
            errors += [row.max_cos_error, row.max_sin_error, row.max_apply_error or 0.0]
        return max(errors)

    def __repr__(self) -> str:
        low, high = self.positions
        lines = [(_("✔ rotary embedding matches rope_lab for this config (positions {low} … "
                    "{high})") if self.ok else
                  _("✘ rotary embedding does NOT match rope_lab for this config (positions "
                    "{low} … {high})")).format(low=low, high=high)]
        header = (_("layer type"), _("module(s)"), "dtype", _("rotary dims"), _("max |Δcos|"),
                  _("max |Δsin|"), _("max |Δ rotated|"), _("tolerance"))
        table = [header]
        # Translators: the layer type of a model with one kind of RoPE
        every = _("all")
        for row in self.rows:
            dims = (_("{rotary} of {head_dim}").format(rotary=row.rotary_dim,
                                                       head_dim=row.head_dim)
                    if row.rotary_dim is not None else "?")
            modules = row.modules[0] + (f" (+{len(row.modules) - 1})"
                                        if len(row.modules) > 1 else "")
            table.append((row.layer_type or every, modules,
                          str(row.dtype).replace("torch.", "") if row.dtype else "?", dims,
                          _number(row.max_cos_error), _number(row.max_sin_error),
                          _number(row.max_apply_error), f"{row.tolerance:.1e}"))
        widths = [max(_width(line[i]) for line in table) for i in range(len(header))]
        for line in table:
            cells = (cell + " " * (width - _width(cell))
                     for cell, width in zip(line, widths, strict=True))
            lines.append(("  " + "  ".join(cells)).rstrip())
        for row in self.rows:
            if row.problem:
                lines.append(f"  ✘ {row.layer_type or every}: {row.problem}")
        lines += ["  " + _("note: {note}").format(note=note) for note in self.notes]
        return "\n".join(lines)


def _width(text: str) -> int:
    """Monospace columns: a CJK character takes two (the table's columns line up)."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def _number(value) -> str:
    return "—" if value is None else f"{value:.1e}"


def check_rotary(model_or_module, config, positions=None, *, apply_rotary=None,
                 dtype=None) -> RotaryVerdict:
    """Compare a transformers model's own cos/sin with rope_lab's for ``config``.

    Args:
        model_or_module: a transformers model (every ``…RotaryEmbedding`` inside it is
            checked), or one rotary module called as ``module(x, position_ids)``, as
            transformers' are (a re-implementation with that interface works too).
        config: the config the model *should* follow: a transformers config object or a
            dict read from ``config.json`` (either schema).
        positions: the positions to check, ints ``(seq,)`` or ``(batch, seq)``; default 64
            positions from 0 to max_position_embeddings − 1 (4095 if the config has none).
        apply_rotary: optionally a function ``(q, k, cos, sin) -> (q, k)`` as transformers'
            ``apply_rotary_pos_emb``: it is fed the module's cos/sin and random q, k with the
            whole ``head_dim``, and must rotate the first rotary dims in pairs (i, i + r/2)
            and pass the rest through, as rope_lab does.
        dtype: the dtype of the dummy input the modules see (they return cos/sin in it);
            default the model's parameter dtype, float32 for a bare module.

    Returns:
        A :class:`RotaryVerdict`; print it for the table, read ``.ok`` for the answer.
    """
    modules = _rotary_modules(model_or_module)
    if dtype is None:
        parameter = next(iter(getattr(model_or_module, "parameters", lambda: iter(()))()), None)
        dtype = parameter.dtype if parameter is not None else torch.float32
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    types = layer_types(config)
    spec0 = rope_spec(config, types[0])
    position_ids = _position_ids(positions, spec0.max_position_embeddings if spec0 else None)
    seq_len = int(position_ids.max()) + 1 if position_ids.numel() else 1
    rows = []
    for layer_type in types:
        spec = rope_spec(config, layer_type)
        if spec is None:  # NoPE layers: nothing rotates
            continue
        chosen = [(name, module) for name, module in modules
                  if _module_layer_type(name, module, types) in (layer_type, "any")]
        if not chosen:
            chosen = modules
        inv, factor = inv_freq_from_spec(spec, seq_len=seq_len, dtype=torch.float64)
        angles = position_ids.double()[..., None] * inv
        expected_cos = torch.cat((angles, angles), -1).cos() * factor
        expected_sin = torch.cat((angles, angles), -1).sin() * factor
        row = None
        for name, module in chosen:
            found = _compare(name, module, layer_type, spec, position_ids, dtype, expected_cos,
                             expected_sin, inv, factor, angles, apply_rotary)
            if row is None or _worse(found, row):
                row = found
        rows.append(RotaryRow(**{**row.__dict__, "modules": tuple(n for n, _ in chosen)}))
    return RotaryVerdict(tuple(rows), (int(position_ids.min()), int(position_ids.max())),
                         tuple(config_warnings(config)))


def _worse(a: RotaryRow, b: RotaryRow) -> bool:
    if a.ok != b.ok:
        return not a.ok
    return (a.max_cos_error or 0) + (a.max_sin_error or 0) > (b.max_cos_error or 0) + (
        b.max_sin_error or 0)


def _rotary_modules(model_or_module) -> list[tuple[str, object]]:
    if isinstance(model_or_module, torch.nn.Module) and not _is_rotary(model_or_module):
        found = [(name, module) for name, module in model_or_module.named_modules()
                 if _is_rotary(module)]
        if not found:
            raise ValueError(f"model_or_module ({type(model_or_module).__name__}) holds no "
                             f"rotary embedding module (a class named …RotaryEmbedding); "
                             f"expected a RoPE model or its rotary module")
        return found
    if not callable(model_or_module):
        raise TypeError(f"model_or_module must be a transformers model or a rotary module "
                        f"called as module(x, position_ids), got "
                        f"{type(model_or_module).__name__}")
    return [(type(model_or_module).__name__, model_or_module)]


def _is_rotary(module) -> bool:
    return type(module).__name__.endswith("RotaryEmbedding")


def _takes_layer_type(module) -> bool:
    forward = getattr(module, "forward", module)
    try:
        return "layer_type" in inspect.signature(forward).parameters
    except (TypeError, ValueError):
        return False


def _module_layer_type(name: str, module, types) -> str | None:
    """The layer type a module serves: all of them if it takes ``layer_type``; transformers
    4's Gemma 3 keeps a second module (``rotary_emb_local``) for the sliding layers."""
    if _takes_layer_type(module) or len(types) == 1:
        return "any"
    if "local" in name.rsplit(".", 1)[-1]:
        return "sliding_attention"
    return "full_attention" if "full_attention" in types else types[0]


def _position_ids(positions, max_position) -> torch.Tensor:
    if positions is None:
        last = (max_position or 4096) - 1
        return torch.linspace(0, last, 64).round().long().unique()[None]
    if not isinstance(positions, torch.Tensor):
        try:
            positions = torch.as_tensor(positions)
        except (TypeError, ValueError, RuntimeError) as error:
            raise TypeError(f"positions must be integer positions (seq,) or (batch, seq), got "
                            f"{positions!r}") from error
    if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(f"positions must be integers (transformers' position_ids), got dtype "
                        f"{positions.dtype}")
    if positions.ndim == 1:
        positions = positions[None]
    if positions.ndim != 2 or positions.numel() == 0:
        raise ValueError(f"positions must have shape (seq,) or (batch, seq) with at least one "
                         f"position, got shape {tuple(positions.shape)}")
    if bool((positions < 0).any()):
        raise ValueError(f"positions must be ≥ 0, got {int(positions.min())}")
    return positions.long()


def _compare(name, module, layer_type, spec, position_ids, dtype, expected_cos, expected_sin,
             inv, factor, angles, apply_rotary) -> RotaryRow:
    device = _device_of(module)
    x = torch.zeros(1, dtype=dtype, device=device)
    kwargs = {"layer_type": layer_type} if _takes_layer_type(module) else {}
    tolerance = (_ANGLE_ULPS * float(angles.abs().max()) + _OUTPUT_EPS.get(dtype, 1e-3)) * \
        max(abs(factor), 1.0)
    base = dict(layer_type=layer_type, modules=(name,), expected_rotary_dim=2 * len(inv),
                head_dim=spec.head_dim, tolerance=tolerance)
    try:
        with torch.no_grad():
            cos, sin = module(x, position_ids.to(device), **kwargs)
    except Exception as error:  # noqa: BLE001 - reported in the verdict, one line
        return RotaryRow(**base, dtype=None, rotary_dim=None, max_cos_error=None,
                         max_sin_error=None, problem=_(
                             "{name}(x, position_ids) raised {error}: {message}").format(
                             name=name, error=type(error).__name__,
                             message=str(error).splitlines()[0][:120]))
    cos, sin = cos.detach().cpu(), sin.detach().cpu()
    if cos.ndim == 2:  # (seq, dim): one table for the batch
        cos, sin = cos[None], sin[None]
    found = dict(base, dtype=cos.dtype, rotary_dim=cos.shape[-1])
    if cos.shape[-1] != expected_cos.shape[-1]:
        return RotaryRow(**found, max_cos_error=None, max_sin_error=None, problem=_(
            "the model rotates {found} features per head, the config says {expected} of "
            "head_dim {head_dim} (rope_type {rope_type!r}, partial_rotary_factor "
            "{partial:g})").format(found=cos.shape[-1], expected=expected_cos.shape[-1],
                                   head_dim=spec.head_dim, rope_type=spec.rope_type,
                                   partial=spec.partial_rotary_factor))
    cos_error = float((cos.double() - expected_cos).abs().max())
    sin_error = float((sin.double() - expected_sin).abs().max())
    problem = None
    if not (cos_error <= tolerance and sin_error <= tolerance):
        worst = int((cos.double() - expected_cos).abs().amax(-1).max(0).values.argmax())
        problem = _("cos/sin differ by up to {error:.2g} (tolerance {tolerance:.1g}); worst "
                    "at position {position} — the model's frequencies are not the "
                    "config's").format(error=max(cos_error, sin_error), tolerance=tolerance,
                                       position=int(position_ids[0, worst]))
    apply_error = None
    if apply_rotary is not None and problem is None:
        apply_error, apply_problem = _compare_apply(apply_rotary, cos, sin, spec, position_ids,
                                                    inv, factor, tolerance)
        problem = apply_problem
    return RotaryRow(**found, max_cos_error=cos_error, max_sin_error=sin_error,
                     max_apply_error=apply_error, problem=problem)


def _compare_apply(apply_rotary, cos, sin, spec, position_ids, inv, factor, tolerance):
    generator = torch.Generator().manual_seed(0)
    batch, seq = position_ids.shape
    q = torch.randn(batch, 2, seq, spec.head_dim, generator=generator, dtype=cos.dtype)
    k = torch.randn(batch, 2, seq, spec.head_dim, generator=generator, dtype=cos.dtype)
    rotary = 2 * len(inv)
    try:
        with torch.no_grad():
            q_out, k_out = apply_rotary(q, k, cos, sin)
    except Exception as error:  # noqa: BLE001 - reported in the verdict, one line
        return None, _("apply_rotary(q, k, cos, sin) raised {error}: {message}").format(
            error=type(error).__name__, message=str(error).splitlines()[0][:120])
    errors = []
    for given, out in ((q, q_out), (k, k_out)):
        if tuple(out.shape) != tuple(given.shape):
            return None, _("apply_rotary returned shape {found} for q, k of shape "
                           "{given}").format(found=tuple(out.shape), given=tuple(given.shape))
        wide = given.double()
        expected = torch.cat((apply_rope(wide[..., :rotary], position_ids[:, None, :],
                                         inv_freq=inv, layout="half") * factor,
                              wide[..., rotary:]), -1)
        errors.append(float((out.double() - expected).abs().max()))
    error = max(errors)
    scale = float(q.abs().max()) * 2  # |q_i cos − q_j sin| ≤ 2 max|q| for unit cos, sin
    if error <= tolerance * scale:
        return error, None
    return error, _("apply_rotary differs from RoPE on the first {rotary} features in pairs "
                    "(i, i + {half}) by up to {error:.2g}: it pairs or rotates other features "
                    "than the config says").format(rotary=rotary, half=rotary // 2, error=error)


def _device_of(module) -> torch.device:
    for tensor in list(getattr(module, "buffers", lambda: iter(()))()):
        return tensor.device
    return torch.device("cpu")
