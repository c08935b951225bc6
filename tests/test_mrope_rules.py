"""M-RoPE position ids: the Qwen2-VL rule and transformers ≥ 5.3's rule, and grader 08.2."""

import functools

import pytest
import torch

from rope_lab import exercises, nd

# (text_before, (frames, rows, columns), text_after); the last two have more frames than
# rows and columns, where the two rules part
LAYOUTS = [(3, (1, 2, 3), 2), (2, (2, 3, 3), 1), (2, (6, 2, 3), 3), (1, (5, 1, 2), 2)]


@pytest.mark.parametrize(("before", "grid_thw", "after"), LAYOUTS)
def test_the_installed_transformers_uses_one_of_the_two_rules(before, grid_thw, after):
    pytest.importorskip("transformers")
    import hf_compat
    from packaging.version import Version

    theirs = hf_compat.qwen2_vl_position_ids(before, grid_thw, after)[:, 0].T
    rule = "transformers" if hf_compat.VERSION >= Version("5.3") else "qwen2-vl"
    assert torch.equal(theirs, nd.mrope_positions(before, grid_thw, after, rule=rule))


def test_rules_part_only_after_a_long_video():
    for before, grid_thw, after in LAYOUTS:
        ids = {rule: nd.mrope_positions(before, grid_thw, after, rule=rule)
               for rule in nd.MROPE_RULES}
        same = torch.equal(*ids.values())
        assert same == (grid_thw[0] <= max(grid_thw[1:]))
        # everything up to the text after the vision tokens is the same
        assert torch.equal(ids["qwen2-vl"][:-after], ids["transformers"][:-after])
        assert ids["transformers"][-after, 0] == before + max(grid_thw[1:])


def test_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="rule must be one of"):
        nd.mrope_positions(1, (1, 1, 1), 1, rule="qwen2.5")


def test_grader_accepts_either_rule_but_not_a_mix_or_the_classic_mistakes():
    assert exercises.check_mrope_positions(nd.mrope_positions)
    assert exercises.check_mrope_positions(
        functools.partial(nd.mrope_positions, rule="transformers"))

    def rows_only(before, grid_thw, after):  # resumes at s + rows: forgets the columns
        ids = nd.mrope_positions(before, grid_thw, 0)
        start = before + grid_thw[1]
        return torch.cat((ids, torch.arange(start, start + after)[:, None].expand(-1, 3)))

    def resumes_after_the_last_token(before, grid_thw, after):
        ids = nd.mrope_positions(before, grid_thw, 0)
        tail = torch.arange(len(ids), len(ids) + after)[:, None].expand(-1, 3)
        return torch.cat((ids, tail))

    def frames_as_rows(before, grid_thw, after):
        frames, rows, columns = grid_thw
        return nd.mrope_positions(before, (rows, frames, columns), after)

    for wrong in (rows_only, resumes_after_the_last_token, frames_as_rows):
        assert not exercises.check_mrope_positions(wrong), wrong.__name__
