"""The position ids a token gets in real code: padded batches, packed rows, KV-cache decoding.

RoPE turns each query and key by its position m, and a score sees only m − n. So what
matters is *which* position each token is given, and the bugs people file about RoPE are
mostly here (notebook 11):

    left padding   generate counts only real tokens: m = cumsum(mask) − 1, so every row's
                   first real token sits at 0 (pure RoPE would forgive a constant offset;
                   learned absolute positions and length-dependent scaling would not)
    packing        several documents in one row; positions restart at 0 per document, which
                   is how varlen attention kernels and transformers' packing collator find
                   the document boundaries
    KV cache       new tokens continue right after the cached ones: past, past + 1, …

Each function returns int64 ``(batch, seq)`` position ids, the shape transformers' models
take as ``position_ids``. Nothing here imports transformers.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def position_ids_from_attention_mask(attention_mask, *, pad_position: int = 0) -> torch.Tensor:
    """The positions transformers' ``generate`` gives a padded batch: cumsum(mask) − 1.

    Real tokens (mask 1) are numbered 0, 1, 2, … in order, whatever padding comes before or
    after them, so a left-padded row gets the same positions as the unpadded prompt.
    Padding slots (mask 0) get ``pad_position``; attention never reads them. transformers 5
    writes 0 there, 4.x wrote 1.

    Args:
        attention_mask: ``(batch, seq)`` of 0 and 1 (bool, int or float), 1 for a real token.
        pad_position: the position written where the mask is 0.

    Returns:
        ``(batch, seq)`` int64 positions on the mask's device.
    """
    mask = _mask_tensor(attention_mask)
    if isinstance(pad_position, bool) or not isinstance(pad_position, int):
        raise TypeError(f"pad_position must be an int, got {pad_position!r} of type "
                        f"{type(pad_position).__name__}")
    mask = mask.long()
    return (mask.cumsum(-1) - 1).masked_fill(mask == 0, pad_position)


def packed_position_ids(lengths) -> torch.Tensor:
    """Positions for documents packed into rows: 0 … n − 1 for each document, in turn.

    ``[3, 2]`` gives ``[[0, 1, 2, 0, 1]]``, as transformers' ``DataCollatorWithFlattening``
    writes them. A position 0 marks where a document starts, which is how varlen (flash)
    attention and transformers 5's packed-sequence mask find the boundaries.

    Args:
        lengths: one row: a sequence of document lengths (ints ≥ 0); or several rows: a
            sequence of such sequences, each summing to the same row length (pad a row with
            a document of its own to make it fit).

    Returns:
        ``(batch, seq)`` int64 positions, batch 1 for a single row.
    """
    rows = _length_rows(lengths)
    totals = [sum(row) for row in rows]
    for index, total in enumerate(totals[1:], start=1):
        if total != totals[0]:
            raise ValueError(
                f"lengths[{index}] = {list(rows[index])} sums to {total}, but lengths[0] sums "
                f"to {totals[0]}; every row of a packed batch must hold the same number of "
                "tokens (add the padding as one more document)")
    out = torch.empty(len(rows), totals[0] if rows else 0, dtype=torch.long)
    for index, row in enumerate(rows):
        out[index] = torch.cat([torch.arange(n) for n in row]) if row else out[index]
    return out


def decode_position_ids(past_length, new_tokens: int) -> torch.Tensor:
    """Positions of ``new_tokens`` tokens appended after ``past_length`` cached ones.

    Token j of the new block sits at ``past_length + j``: the cache holds positions
    0 … past_length − 1, and every relative distance m − n to a cached key depends on it.
    With left padding, pass each row's count of real tokens (``attention_mask.sum(-1)``),
    which is what ``generate`` continues from.

    Args:
        past_length: tokens already in the cache: an int ≥ 0 for a batch of one, or a
            ``(batch,)`` integer tensor or sequence, one count per row.
        new_tokens: how many tokens this forward pass feeds (1 per decoding step).

    Returns:
        ``(batch, new_tokens)`` int64 positions.
    """
    if isinstance(new_tokens, bool) or not isinstance(new_tokens, int):
        raise TypeError(f"new_tokens must be an int, got {new_tokens!r} of type "
                        f"{type(new_tokens).__name__}")
    if new_tokens < 0:
        raise ValueError(f"new_tokens must be ≥ 0, got {new_tokens}")
    past = _past_lengths(past_length)
    if new_tokens and past.numel():
        last = int(past.max()) + new_tokens - 1  # Python ints: no wrap-around here
        if last > _INT64_MAX:
            raise ValueError(f"past_length + new_tokens − 1 = {last} is past the largest int64 "
                             f"position ({_INT64_MAX}); the positions would wrap to negative "
                             f"numbers")
    return past[:, None] + torch.arange(new_tokens, device=past.device)


# --- validation ---------------------------------------------------------------------------------


def _mask_tensor(attention_mask) -> torch.Tensor:
    if isinstance(attention_mask, torch.Tensor):
        mask = attention_mask
    elif isinstance(attention_mask, Sequence) and not isinstance(attention_mask, (str, bytes)) \
            or hasattr(attention_mask, "__array__"):
        try:
            mask = torch.as_tensor(attention_mask)
        except (TypeError, ValueError, RuntimeError) as error:
            raise TypeError(f"attention_mask must be a (batch, seq) tensor of 0 and 1, got "
                            f"{attention_mask!r}") from error
    else:
        raise TypeError(f"attention_mask must be a (batch, seq) tensor of 0 and 1, got "
                        f"{type(attention_mask).__name__}")
    if mask.ndim != 2:
        hint = (" (a single row? use attention_mask[None])" if mask.ndim == 1 else
                " (a 4-D additive mask? pass the 2-D 0/1 mask the tokenizer returned)")
        raise ValueError(f"attention_mask must have shape (batch, seq), got shape "
                         f"{tuple(mask.shape)}{hint}")
    if mask.is_complex():
        raise TypeError(f"attention_mask must hold 0 and 1, got dtype {mask.dtype}")
    if mask.device.type == "meta":
        raise ValueError("attention_mask is a meta tensor (no values); expected a real one")
    bad = (mask != 0) & (mask != 1)
    if bool(bad.any()):
        row, column = (int(i) for i in torch.nonzero(bad)[0])
        value = mask[row, column].item()
        hint = (" (an additive mask uses 0 and -inf; pass the 0/1 mask instead)"
                if value < 0 else "")
        raise ValueError(f"attention_mask must hold only 0 (padding) and 1 (a real token), got "
                         f"{value} at [{row}, {column}]{hint}")
    return mask


def _length_list(row, name: str) -> list[int]:
    if isinstance(row, torch.Tensor):
        if row.ndim != 1 or row.is_floating_point() or row.is_complex() or row.dtype == torch.bool:
            raise TypeError(f"{name} must be a 1-D integer tensor or a sequence of ints, got "
                            f"a {row.dtype} tensor of shape {tuple(row.shape)}")
        row = row.tolist()
    if isinstance(row, (str, bytes)) or not isinstance(row, Sequence):
        raise TypeError(f"{name} must be a sequence of document lengths (ints), got "
                        f"{type(row).__name__}")
    for index, n in enumerate(row):
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"{name}[{index}] must be an int (a document length), got {n!r}")
        if n < 0:
            raise ValueError(f"{name}[{index}] must be ≥ 0 (a document length), got {n}")
    return list(row)


def _length_rows(lengths) -> list[list[int]]:
    if isinstance(lengths, torch.Tensor):
        if lengths.ndim == 2:
            return [_length_list(row, f"lengths[{index}]") for index, row in enumerate(lengths)]
        return [_length_list(lengths, "lengths")]
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence):
        raise TypeError(f"lengths must be a sequence of document lengths, or one such sequence "
                        f"per row, got {type(lengths).__name__}")
    nested = [isinstance(row, (Sequence, torch.Tensor)) and not isinstance(row, (str, bytes))
              for row in lengths]
    if nested and all(nested):
        return [_length_list(row, f"lengths[{index}]") for index, row in enumerate(lengths)]
    if any(nested):
        raise TypeError(f"lengths must be a sequence of ints (one row) or a sequence of "
                        f"sequences (one per row), not a mix: got {lengths!r}")
    return [_length_list(lengths, "lengths")]


_INT64_MAX = 2**63 - 1


def _past_lengths(past_length) -> torch.Tensor:
    if isinstance(past_length, bool):
        raise TypeError(f"past_length must be an int or a (batch,) integer tensor, got "
                        f"{past_length!r}")
    if isinstance(past_length, int):
        if not -_INT64_MAX - 1 <= past_length <= _INT64_MAX:
            raise ValueError(f"past_length must fit an int64 position, got {past_length}")
        past = torch.tensor([past_length])
    elif isinstance(past_length, torch.Tensor) or (
            isinstance(past_length, Sequence) and not isinstance(past_length, (str, bytes))):
        try:
            past = torch.as_tensor(past_length) if not isinstance(past_length, torch.Tensor) \
                else past_length
        except (RuntimeError, OverflowError, TypeError, ValueError) as error:
            raise ValueError(f"past_length must be an int or a (batch,) integer tensor of "
                             f"int64 counts, got {past_length!r}") from error
        if past.ndim == 0:
            past = past[None]
        if past.ndim != 1 or past.is_floating_point() or past.is_complex() \
                or past.dtype == torch.bool:
            raise TypeError(f"past_length must be an int or a (batch,) integer tensor, got a "
                            f"{past.dtype} tensor of shape {tuple(past.shape)}")
    else:
        raise TypeError(f"past_length must be an int or a (batch,) integer tensor, got "
                        f"{type(past_length).__name__}")
    if past.numel() and bool((past < 0).any()):
        raise ValueError(f"past_length must be ≥ 0 (tokens already in the cache), got "
                         f"{past[past < 0][0].item()}")
    return past.long()
