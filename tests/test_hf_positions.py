"""rope_lab.hf.positions against what transformers itself computes.

The position ids are read off transformers' own code: the ids ``generate`` hands the model
(captured at the rotary embedding while ``generate`` runs), the ids ``DataCollatorWithFlattening``
writes, and the ids a model counts from its KV cache. Left padding, right padding, a batch
of one and an empty (all-padding) row are covered; every bad input gets one error naming
its parameter.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lab import hf
from rope_lab.hf import positions as P

transformers = pytest.importorskip("transformers")
from rope_lab.hf import tiny  # noqa: E402

tiny.quiet()

MASKS = {
    "left padding": [[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]],
    "right padding": [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]],
    "both, batch of three": [[0, 1, 1, 0, 0], [0, 0, 0, 1, 1], [1, 1, 1, 1, 1]],
    "left padding, batch of three": [[0, 0, 1, 1, 1], [0, 0, 0, 1, 1], [1, 1, 1, 1, 1]],
    "batch of one": [[1, 1, 1, 1]],
    "one token": [[1]],
    "an empty row": [[0, 0, 0], [1, 1, 1]],
}


@pytest.fixture(scope="module")
def llama():
    return tiny.tiny_model(tiny.tiny_config("llama", layers=1), seed=0)


class _Recorder:
    """Records the position_ids a model's rotary embedding is called with."""

    def __init__(self, model):
        self.calls = []
        rotary = model.model.rotary_emb
        self.handle = rotary.register_forward_pre_hook(self._record, with_kwargs=True)

    def _record(self, module, args, kwargs):
        # transformers 4.x passes (x, position_ids) positionally, 5.x by keyword
        self.calls.append(kwargs.get("position_ids", args[1] if len(args) > 1 else None).clone())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.remove()


@pytest.mark.parametrize("name", MASKS)
def test_position_ids_equal_transformers_generate(name, llama):
    mask = torch.tensor(MASKS[name])
    theirs = tiny.generate_position_ids(llama, torch.ones_like(mask), mask)
    real = mask == 1
    ours = hf.position_ids_from_attention_mask(mask)
    assert torch.equal(ours[real], theirs[real])
    # the dummy written in padding slots: 0 in transformers 5, 1 in 4.x
    fill = int(theirs[~real][0]) if (~real).any() else 0
    assert torch.equal(hf.position_ids_from_attention_mask(mask, pad_position=fill), theirs)


@pytest.mark.parametrize("name", ["left padding", "left padding, batch of three",
                                  "batch of one"])
def test_generate_runs_the_model_at_these_positions(name, llama):
    """Captured inside generate: the prompt's positions, then each new token's.

    Left padding only: generate expects it (with right padding transformers 5 continues a
    row from its last slot's dummy position, and warns)."""
    mask = torch.tensor(MASKS[name])
    ids = torch.randint(1, 96, mask.shape, generator=torch.Generator().manual_seed(0))
    with _Recorder(llama) as recorder:
        llama.generate(ids, attention_mask=mask, max_new_tokens=3, min_new_tokens=3,
                       do_sample=False,
                       pad_token_id=0)
    prompt, *steps = recorder.calls
    real = mask == 1
    assert torch.equal(prompt[real], hf.position_ids_from_attention_mask(mask)[real])
    assert len(steps) == 2
    for step, positions in enumerate(steps):
        expected = hf.decode_position_ids(mask.sum(-1) + step, 1)
        assert torch.equal(positions, expected), (step, positions, expected)


# transformers 4.x warns on every call that the batch becomes one row
@pytest.mark.filterwarnings("ignore:Using `DataCollatorWithFlattening`:UserWarning")
@pytest.mark.parametrize("lengths", [[3, 2], [5], [1, 1, 1], [4, 0, 2], [7, 1]])
def test_packed_positions_equal_the_flattening_collator(lengths):
    generator = torch.Generator().manual_seed(len(lengths))
    features = [{"input_ids": torch.randint(1, 96, (n,), generator=generator).tolist()}
                for n in lengths]
    collated = transformers.DataCollatorWithFlattening(return_tensors="pt")(features)
    assert torch.equal(hf.packed_position_ids(lengths), collated["position_ids"])


def test_packed_positions_mark_the_document_starts_the_varlen_path_reads():
    positions = hf.packed_position_ids([4, 3, 5])
    assert tiny.document_starts(positions).tolist() == [0, 4, 7, 12]


def test_packed_rows_and_empty_rows():
    assert hf.packed_position_ids([[2, 2], [4], [1, 3]]).tolist() == [
        [0, 1, 0, 1], [0, 1, 2, 3], [0, 0, 1, 2]]
    assert hf.packed_position_ids([]).shape == (1, 0)
    assert hf.packed_position_ids([[], []]).shape == (2, 0)
    assert hf.packed_position_ids(torch.tensor([2, 1])).tolist() == [[0, 1, 0]]


@pytest.mark.parametrize(("past", "new"), [(0, 5), (7, 1), (7, 3)])
def test_decode_positions_equal_what_the_model_counts_from_its_cache(past, new, llama):
    cache = transformers.DynamicCache()
    ids = torch.randint(1, 96, (1, past + new), generator=torch.Generator().manual_seed(1))
    feed = {tiny.cache_argument(llama): cache, "use_cache": True}  # `cache` from 5.24
    with torch.no_grad():
        if past:
            llama(ids[:, :past], **feed)
        with _Recorder(llama) as recorder:
            llama(ids[:, past:], **feed)
    assert torch.equal(recorder.calls[0], hf.decode_position_ids(past, new))


def test_decode_positions_per_row_and_empty():
    assert hf.decode_position_ids(torch.tensor([3, 0, 5]), 2).tolist() == [[3, 4], [0, 1],
                                                                           [5, 6]]
    assert hf.decode_position_ids(4, 0).shape == (1, 0)
    assert hf.decode_position_ids([2], 1).tolist() == [[2]]
    assert hf.decode_position_ids(2**63 - 2, 2).tolist() == [[2**63 - 2, 2**63 - 1]]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(0, 6)),
                min_size=1, max_size=4))
def test_real_tokens_count_up_from_zero_whatever_the_padding(rows):
    """Left pad, real tokens, right pad: the real tokens get 0 … n − 1, as if unpadded."""
    width = max(a + n + b for a, n, b in rows)
    mask = torch.tensor([[0] * a + [1] * n + [0] * (width - a - n) for a, n, _ in rows])
    positions = hf.position_ids_from_attention_mask(mask)
    for row, (a, n, _) in enumerate(rows):
        assert positions[row, a:a + n].tolist() == list(range(n))


BAD = [
    (lambda: hf.position_ids_from_attention_mask(torch.tensor([[1, 2]])), ValueError,
     r"attention_mask must hold only 0 \(padding\) and 1.*got 2 at \[0, 1\]"),
    (lambda: hf.position_ids_from_attention_mask(torch.tensor([[0.0, -torch.inf]])),
     ValueError, r"attention_mask .* additive mask"),
    (lambda: hf.position_ids_from_attention_mask(torch.tensor([1, 1, 0])), ValueError,
     r"attention_mask must have shape \(batch, seq\).*attention_mask\[None\]"),
    (lambda: hf.position_ids_from_attention_mask(torch.zeros(1, 1, 3, 3)), ValueError,
     r"attention_mask must have shape \(batch, seq\).*4-D"),
    (lambda: hf.position_ids_from_attention_mask("1101"), TypeError, r"attention_mask must be"),
    (lambda: hf.position_ids_from_attention_mask(torch.ones(1, 2, dtype=torch.complex64)),
     TypeError, r"attention_mask must hold 0 and 1"),
    (lambda: hf.position_ids_from_attention_mask(torch.ones(1, 2), pad_position=True),
     TypeError, r"pad_position must be an int"),
    (lambda: hf.packed_position_ids([[1, 2], [4]]), ValueError,
     r"lengths\[1\] = \[4\] sums to 4, but lengths\[0\] sums to 3"),
    (lambda: hf.packed_position_ids([3, -1]), ValueError, r"lengths\[1\] must be ≥ 0"),
    (lambda: hf.packed_position_ids([2.5]), TypeError, r"lengths\[0\] must be an int"),
    (lambda: hf.packed_position_ids([1, [2]]), TypeError, r"lengths must be .* not a mix"),
    (lambda: hf.packed_position_ids("32"), TypeError, r"lengths must be a sequence"),
    (lambda: hf.packed_position_ids(torch.tensor([1.0, 2.0])), TypeError,
     r"lengths must be a 1-D integer tensor"),
    (lambda: hf.decode_position_ids(-1, 1), ValueError, r"past_length must be ≥ 0.*got -1"),
    (lambda: hf.decode_position_ids(torch.tensor([2, -3]), 1), ValueError,
     r"past_length must be ≥ 0.*got -3"),
    (lambda: hf.decode_position_ids(torch.tensor([2.0]), 1), TypeError,
     r"past_length must be an int or a \(batch,\) integer tensor"),
    (lambda: hf.decode_position_ids(True, 1), TypeError, r"past_length must be an int"),
    (lambda: hf.decode_position_ids(3, -2), ValueError, r"new_tokens must be ≥ 0, got -2"),
    # int64 positions would wrap around to negative numbers
    (lambda: hf.decode_position_ids(2**63 - 1, 2), ValueError,
     r"past_length \+ new_tokens − 1 = 9223372036854775808 is past the largest int64"),
    (lambda: hf.decode_position_ids(torch.tensor([0, 2**63 - 2]), 3), ValueError,
     r"would wrap to negative numbers"),
    (lambda: hf.decode_position_ids(2**64, 1), ValueError, r"past_length must fit an int64"),
    (lambda: hf.decode_position_ids([2**64], 1), ValueError, r"int64 counts"),
    (lambda: hf.decode_position_ids(3, 1.0), TypeError, r"new_tokens must be an int"),
]


@pytest.mark.parametrize(("call", "error", "message"), BAD,
                         ids=[f"bad-{i}" for i in range(len(BAD))])
def test_bad_input_gets_one_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_the_module_does_not_import_transformers():
    assert "transformers" not in P.__dict__
