"""Tiny transformers models built from configs: real modeling code, random weights, no download.

Notebook 11 runs its experiments on transformers' own Llama, Phi and GPT-2 code. A model
with 2 layers, hidden size 64 and a vocabulary of 96 builds in milliseconds and runs on a
CPU, and every bug it shows is in the code, not in the weights.

transformers 4.45 to 5.x differ in what these helpers hide:

- RoPE configuration: 4.x takes ``rope_theta`` plus ``rope_scaling``; 5.x one
  ``rope_parameters`` dict (with ``rope_theta`` and ``partial_rotary_factor`` inside);
- the KV cache: pass a ``DynamicCache`` (every release has it) instead of the legacy tuples
  that 4.45 returns by default;
- warnings: 4.x logs a notice about logits dtypes on every forward; :func:`quiet` turns
  transformers' logging down to errors, as ``transformers.logging.set_verbosity_error()``.

transformers is imported inside the functions, so ``import rope_lab.hf`` stays cheap.
"""

from __future__ import annotations

import contextlib
import inspect

import torch

FAMILIES = ("llama", "phi", "gpt2")


def transformers_major() -> int:
    """The installed transformers' major version (4 or 5)."""
    import transformers

    return int(transformers.__version__.split(".")[0])


def quiet() -> None:
    """Show transformers' errors only (its info notices would land on stderr)."""
    import transformers

    transformers.logging.set_verbosity_error()


def rope_config_kwargs(base: float = 10_000.0, rope: dict | None = None,
                       partial_rotary_factor: float | None = None) -> dict:
    """The config keyword arguments for RoPE in the installed transformers' schema.

    ``rope``: ``{"rope_type": ..., **options}`` as transformers names them; None is plain
    RoPE. 5.x: one ``rope_parameters`` dict; 4.x: ``rope_theta`` + ``rope_scaling``.
    """
    rope = dict(rope or {"rope_type": "default"})
    if transformers_major() >= 5:
        parameters = {"rope_theta": float(base), **rope}
        if partial_rotary_factor is not None:
            parameters["partial_rotary_factor"] = partial_rotary_factor
        return {"rope_parameters": parameters}
    kwargs = {"rope_theta": float(base),
              "rope_scaling": None if rope["rope_type"] == "default" else rope}
    if partial_rotary_factor is not None:
        kwargs["partial_rotary_factor"] = partial_rotary_factor
    return kwargs


def tiny_config(family: str = "llama", *, base: float = 10_000.0, rope: dict | None = None,
                partial_rotary_factor: float | None = None, hidden_size: int = 64,
                n_heads: int = 4, n_kv_heads: int | None = None, layers: int = 2,
                vocab_size: int = 96, max_position: int = 2048,
                initializer_range: float = 0.1, **extra):
    """A small config of ``family`` ("llama", "phi" or "gpt2") with eager attention.

    ``rope`` and ``base`` set RoPE (not for GPT-2, which learns absolute positions);
    ``n_kv_heads`` < ``n_heads`` makes Llama use grouped-query attention. ``extra`` goes to
    the config class unchanged (a misspelled key there is what notebook 11 §7 is about).
    """
    import transformers

    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(map(repr, FAMILIES))}, "
                         f"got {family!r}")
    common = dict(vocab_size=vocab_size, attn_implementation="eager",
                  initializer_range=initializer_range, **extra)
    if family == "gpt2":
        # GPT-2's default bos/eos id 50256 lies outside a tiny vocabulary (a warning)
        common = dict(bos_token_id=0, eos_token_id=0, **common)
        return transformers.GPT2Config(n_embd=hidden_size, n_layer=layers, n_head=n_heads,
                                       n_positions=max_position, **common)
    shape = dict(hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                 num_hidden_layers=layers, num_attention_heads=n_heads,
                 num_key_value_heads=n_kv_heads or n_heads, max_position_embeddings=max_position)
    rope_kwargs = rope_config_kwargs(base, rope, partial_rotary_factor)
    if family == "phi":
        # PhiModel reads config.pad_token_id; transformers 5.0's PhiConfig does not set it
        common = {"pad_token_id": None, **common}
    config_class = transformers.LlamaConfig if family == "llama" else transformers.PhiConfig
    return config_class(**shape, **rope_kwargs, **common)


def tiny_model(config, seed: int = 0, dtype: torch.dtype | None = None):
    """The causal LM for ``config`` with seeded random weights, in eval mode.

    dtype: cast the *parameters* to it, as ``from_pretrained(..., dtype=...)`` loads them;
    buffers such as the rotary ``inv_freq`` stay float32. (``model.to(dtype)`` would cast
    them too: notebook 11 §6.)
    """
    import transformers

    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = transformers.AutoModelForCausalLM.from_config(config)
    finally:
        torch.random.set_rng_state(generator_state)
    if dtype is not None:
        for parameter in model.parameters():
            parameter.data = parameter.data.to(dtype)
    return model.eval()


@torch.no_grad()
def logits(model, input_ids, **kwargs) -> torch.Tensor:
    """``model(input_ids, **kwargs).logits`` in float32, without autograd."""
    return model(input_ids, **kwargs).logits.float()


def cache_argument(model) -> str:
    """The name the model's forward takes its KV cache under: ``cache`` from transformers
    5.24 (``past_key_values`` is deprecated there and warns), ``past_key_values`` before."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters \
        else "past_key_values"


@torch.no_grad()
def decode_logits(model, input_ids, prefix: int, step_positions=None) -> torch.Tensor:
    """Logits as generation computes them: the first ``prefix`` tokens in one forward pass,
    then one token at a time, each step reading a ``DynamicCache``.

    step_positions: ``(past_length, new_tokens) -> (1, new_tokens)`` position ids for each
    decoding step (the prompt always gets 0 … prefix − 1); None lets the model count them
    from the cache. Returns ``(batch, seq − prefix + 1, vocab)``: the logits after the
    prompt, then after each fed token, the rows of a full forward's ``[:, prefix − 1:]``.
    """
    from transformers import DynamicCache

    cache = DynamicCache()
    seq = input_ids.shape[1]
    feed = {cache_argument(model): cache, "use_cache": True}
    out = [model(input_ids[:, :prefix], **feed,
                 position_ids=torch.arange(prefix)[None]).logits[:, -1:]]
    for past in range(prefix, seq):
        kwargs = dict(feed)
        if step_positions is not None:
            kwargs["position_ids"] = step_positions(past, 1)
        out.append(model(input_ids[:, past:past + 1], **kwargs).logits[:, -1:])
    return torch.cat(out, dim=1).float()


def generate_position_ids(model, input_ids, attention_mask) -> torch.Tensor:
    """The position ids transformers' ``generate`` computes for a padded prompt.

    5.x: ``GenerationMixin._prepare_position_ids_for_generation``; 4.x: the model's
    ``prepare_inputs_for_generation``. Both count real tokens (cumsum of the mask − 1).
    """
    prepare = getattr(model, "_prepare_position_ids_for_generation", None)
    if prepare is not None:
        return prepare(input_ids, {"attention_mask": attention_mask})
    # the prompt's step: the cache is empty, so the cache positions are 0 … seq − 1 (5.0 and
    # 5.1 need them given; 4.x fills them in)
    inputs = model.prepare_inputs_for_generation(
        input_ids, attention_mask=attention_mask,
        cache_position=torch.arange(input_ids.shape[1], device=input_ids.device))
    return inputs["position_ids"]


def block_diagonal_mask(lengths, dtype=torch.float32) -> torch.Tensor:
    """An additive ``(1, 1, seq, seq)`` mask for documents packed in one row: causal within
    each document, no attention across documents. 0 where allowed, dtype's min elsewhere
    (the 4-D form transformers 4.45 to 5.x accept as ``attention_mask``)."""
    document = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    seq = len(document)
    allowed = (document[:, None] == document[None, :]) & torch.ones(seq, seq).bool().tril()
    mask = torch.zeros(seq, seq, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
    return mask[None, None]


def document_starts(position_ids) -> torch.Tensor:
    """Where transformers' varlen (flash) attention path thinks documents start in a packed
    row: its ``cu_seqlens``, read off the position ids (every restart opens a document).

    5.x (and 4.55): ``prepare_fa_kwargs_from_position_ids``; 4.54: ``_prepare_from_posids``;
    4.53: ``_prepare_flash_attention_from_position_ids``; older 4.x:
    ``prepare_fa2_from_position_ids``.
    All are plain torch; no flash-attn kernel is needed to call them.
    """
    from transformers import modeling_flash_attention_utils as flash

    if hasattr(flash, "prepare_fa_kwargs_from_position_ids"):
        (starts, _), _ = flash.prepare_fa_kwargs_from_position_ids(position_ids)
        return starts.long()
    # the newest name first: each older one warns (FutureWarning) in the release after
    prepare = next(getattr(flash, name) for name in (
        "_prepare_from_posids", "_prepare_flash_attention_from_position_ids",
        "prepare_fa2_from_position_ids") if hasattr(flash, name))
    seq = position_ids.shape[-1]
    dummy = torch.zeros(1, seq, 1, 2)
    *_, (starts, _), _ = prepare(dummy, dummy, dummy, position_ids)
    return starts.long()


def detects_packed_sequences() -> bool:
    """Whether the installed transformers builds the block-diagonal mask of a packed row by
    itself, from position ids that restart (``masking_utils.find_packed_sequence_indices``,
    used when no attention mask and no cache are passed); older releases never do."""
    try:
        from transformers import masking_utils
    except ImportError:
        return False
    return hasattr(masking_utils, "find_packed_sequence_indices")


def apply_rotary_interleaved(q, k, cos, sin, *args, **kwargs):
    """Meta's rotation in transformers' ``apply_rotary_pos_emb`` signature: pairs (2i, 2i+1).

    transformers' cos/sin tables hold each angle twice, (θ_0 … θ_{d/2−1}, θ_0 … θ_{d/2−1});
    the first half is the angle of pair i. Swapped in for transformers' own function it
    turns a Llama into the model Meta's code runs (notebook 11 §1).
    """
    half = cos.shape[-1] // 2
    cos, sin = cos[..., :half].unsqueeze(1), sin[..., :half].unsqueeze(1)

    def rotate(x):
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), -1).flatten(-2)

    return rotate(q), rotate(k)


def rotary_modules(model) -> list[tuple[str, torch.nn.Module]]:
    """Every ``…RotaryEmbedding`` module in ``model``, as ``(name, module)``."""
    return [(name, module) for name, module in model.named_modules()
            if type(module).__name__.endswith("RotaryEmbedding")]


@contextlib.contextmanager
def replaced(namespace, name: str, value):
    """Temporarily set ``namespace.name = value`` (a module's function, a model's attribute)."""
    original = getattr(namespace, name)
    setattr(namespace, name, value)
    try:
        yield value
    finally:
        setattr(namespace, name, original)
