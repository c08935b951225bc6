"""A systematic probe of bad input across the public API (issue 15, item 6).

Each bad input must get one clear ``ValueError`` or ``TypeError`` whose message names the
parameter; each valid edge input must still work. Run this file as a script to print the
tally (clear error / valid accepted / raw error / silently accepted).
"""

import math

import pytest
import torch

import rope_lab as rl
from rope_lab import scaling
from rope_lab.alibi import alibi_bias, alibi_slopes
from rope_lab.linear_attention import linear_attention

X = torch.randn(2, 5, 8)
Q, K, V = torch.randn(5, 8), torch.randn(5, 8), torch.randn(5, 8)
BIG = 2**24


def _plots():
    pytest.importorskip("matplotlib")
    from rope_lab import plots

    return plots


def _widgets():
    pytest.importorskip("ipywidgets")
    from rope_lab import widgets

    return widgets


def _inference_tensor():
    with torch.inference_mode():
        return torch.randn(5, 8)


def _overlapping():
    return torch.randn(64).as_strided((5, 8), (1, 1))


# (id, call, error type, a word the message must contain: the parameter's name)
BAD = [
    # scaling: the method, and every option given the wrong type or value
    ("scaling-hf-dict", lambda: scaling.scaled_inv_freq({"rope_type": "linear", "factor": 2.0}, 8),
     TypeError, "method"),
    ("scaling-method-none", lambda: scaling.scaled_inv_freq(None, 8), ValueError, "method"),
    ("scaling-method-unknown", lambda: scaling.scaled_inv_freq("longish", 8), ValueError,
     "method"),
    ("scaling-factor-str", lambda: scaling.linear_inv_freq(8, factor="2"), TypeError, "factor"),
    ("scaling-factor-nan", lambda: scaling.linear_inv_freq(8, factor=math.nan), ValueError,
     "factor"),
    ("scaling-factor-bool", lambda: scaling.linear_inv_freq(8, factor=True), TypeError, "factor"),
    ("scaling-base-one", lambda: scaling.ntk_inv_freq(8, base=1.0), ValueError, "base"),
    ("scaling-length-bool", lambda: scaling.yarn_inv_freq(8, factor=2.0,
                                                          original_max_position=True),
     TypeError, "original_max_position"),
    ("scaling-length-float", lambda: scaling.yarn_inv_freq(8, factor=2.0,
                                                           original_max_position=4096.0),
     TypeError, "original_max_position"),
    # seq_len 0 is an empty input, which transformers' RoPE functions accept; −1 is not
    ("scaling-seq-len-negative", lambda: scaling.dynamic_inv_freq(8, factor=2.0,
                                                                  original_max_position=16,
                                                                  seq_len=-1),
     ValueError, "seq_len"),
    ("dynamic-overflow", lambda: scaling.dynamic_inv_freq(8, factor=1e300,
                                                          original_max_position=2,
                                                          seq_len=10**9),
     ValueError, "factor"),
    ("dynamic-overflow-raw", lambda: scaling.dynamic_inv_freq(4, factor=1e200,
                                                              original_max_position=1,
                                                              seq_len=10**9),
     ValueError, "factor"),
    ("yarn-truncate-str", lambda: scaling.yarn_inv_freq(8, factor=2.0, original_max_position=64,
                                                        truncate="no"), TypeError, "truncate"),
    ("yarn-truncate-int", lambda: scaling.yarn_inv_freq(8, factor=2.0, original_max_position=64,
                                                        truncate=0), TypeError, "truncate"),
    ("yarn-beta-nan", lambda: scaling.yarn_inv_freq(8, factor=2.0, original_max_position=64,
                                                    beta_fast=math.nan), ValueError, "beta_fast"),
    ("yarn-mscale-str", lambda: scaling.yarn_inv_freq(8, factor=2.0, original_max_position=64,
                                                      mscale="1"), TypeError, "mscale"),
    ("llama3-low-str", lambda: scaling.llama3_inv_freq(8, factor=2.0, original_max_position=64,
                                                       low_freq_factor="1"),
     TypeError, "low_freq_factor"),
    ("scaling-dtype-complex", lambda: scaling.linear_inv_freq(8, dtype=torch.complex64),
     ValueError, "dtype"),
    # attention
    ("attention-mixed-dtype", lambda: rl.attention(Q, K.double(), V), TypeError, "k"),
    ("attention-mixed-v-dtype", lambda: rl.attention(Q, K, V.half()), TypeError, "v"),
    ("attention-int-q", lambda: rl.attention(Q.long(), K, V), TypeError, "q"),
    ("attention-complex-q", lambda: rl.attention(Q.cfloat(), K, V), TypeError, "q"),
    ("attention-0d", lambda: rl.attention(torch.tensor(1.0), K, V), ValueError, "q"),
    ("attention-mask-str", lambda: rl.attention(Q, K, V, mask="future"), ValueError, "mask"),
    ("attention-return-weights-str", lambda: rl.attention(Q, K, V, return_weights="yes"),
     TypeError, "return_weights"),
    ("causal-mask-bool", lambda: rl.causal_mask(True), TypeError, "seq_q"),
    ("causal-mask-zero", lambda: rl.causal_mask(0), ValueError, "seq_q"),
    ("linear-mixed-dtype", lambda: linear_attention(Q, K.double(), V), TypeError, "k"),
    ("linear-negative-features", lambda: linear_attention(Q, K, V, feature_map=lambda t: t),
     ValueError, "feature_map"),
    ("linear-causal-str", lambda: linear_attention(Q, K, V, causal="no"), TypeError, "causal"),
    ("linear-rope-str", lambda: linear_attention(Q, K, V, rope="no"), TypeError, "rope"),
    # meta tensors
    ("meta-positions", lambda: rl.rope_angles(torch.arange(3, device="meta"), rl.inv_freq(4)),
     ValueError, "positions"),
    ("meta-positions-apply", lambda: rl.apply_rope(X, torch.arange(5, device="meta")),
     ValueError, "positions"),
    ("meta-check-close", lambda: rl.check_close("c", torch.ones(2, device="meta"),
                                                torch.ones(2)), ValueError, "actual"),
    # rotate_half and the layouts
    ("rotate-half-odd", lambda: rl.rotate_half(torch.randn(5)), ValueError, "x"),
    ("rotate-half-0d", lambda: rl.rotate_half(torch.tensor(1.0)), ValueError, "x"),
    ("rotate-half-list", lambda: rl.rotate_half([1.0, 2.0]), TypeError, "x"),
    ("half-to-interleaved-odd", lambda: rl.half_to_interleaved(torch.randn(3, 5)), ValueError,
     "x"),
    ("interleaved-to-half-odd", lambda: rl.interleaved_to_half(torch.randn(3, 5)), ValueError,
     "x"),
    # apply_rope family
    ("apply-rope-int", lambda: rl.apply_rope(X.long()), TypeError, "x"),
    ("apply-rope-complex", lambda: rl.apply_rope(X.cfloat()), TypeError, "x"),
    ("apply-rope-1d", lambda: rl.apply_rope(torch.randn(8)), ValueError, "x"),
    ("apply-rope-base-nan", lambda: rl.apply_rope(X, base=math.nan), ValueError, "base"),
    ("apply-rope-base-bool", lambda: rl.apply_rope(X, base=True), TypeError, "base"),
    ("apply-rope-rotary-bool", lambda: rl.apply_rope(X, rotary_dim=True), TypeError,
     "rotary_dim"),
    ("apply-rope-positions-nan", lambda: rl.apply_rope(X, [0, 1, 2, 3, math.nan]), ValueError,
     "positions"),
    ("apply-rope-positions-bool", lambda: rl.apply_rope(X, torch.ones(5, dtype=torch.bool)),
     TypeError, "positions"),
    ("apply-rope-positions-complex", lambda: rl.apply_rope(X, torch.arange(5) + 0j), TypeError,
     "positions"),
    ("apply-rope-backend", lambda: rl.apply_rope(X, backend="cuda"), ValueError, "backend"),
    ("apply-rope-float32-big-positions",
     lambda: rl.apply_rope(X, torch.arange(5, dtype=torch.float32) + BIG), ValueError,
     "positions"),
    ("rope-angles-float32-big-positions",
     lambda: rl.rope_angles(torch.arange(5, dtype=torch.float32) + BIG, rl.inv_freq(8)),
     ValueError, "positions"),
    # in place
    ("inplace-overlap", lambda: rl.apply_rope_(_overlapping()), ValueError, "x"),
    ("inplace-inference", lambda: rl.apply_rope_(_inference_tensor()), ValueError, "x"),
    ("inplace-expand", lambda: rl.apply_rope_(torch.randn(1, 8).expand(5, 8)), ValueError, "x"),
    ("inplace-requires-grad", lambda: rl.apply_rope_(torch.randn(5, 8, requires_grad=True)),
     ValueError, "x"),
    # check_close: never a wrong verdict
    ("check-close-huge-int", lambda: rl.check_close("c", torch.tensor([2**53 + 1]),
                                                    torch.tensor([2**53])),
     ValueError, "actual"),
    ("check-close-atol-nan", lambda: rl.check_close("c", 1.0, 1.0, atol=math.nan), ValueError,
     "atol"),
    ("check-close-atol-negative", lambda: rl.check_close("c", 1.0, 1.0, atol=-1.0), ValueError,
     "atol"),
    ("check-close-rtol-str", lambda: rl.check_close("c", 1.0, 1.0, rtol="0"), TypeError, "rtol"),
    # tables and encodings
    ("inv-freq-complex-dtype", lambda: rl.inv_freq(8, dtype=torch.complex64), ValueError,
     "dtype"),
    ("rope-matrix-odd", lambda: rl.rope_matrix(3, 7), ValueError, "dim"),
    ("rope-pairs-layout", lambda: rl.rope_pairs(8, "neox"), ValueError, "layout"),
    ("sinusoidal-bool", lambda: rl.sinusoidal_pe(True, 8), TypeError, "length"),
    ("sinusoidal-negative", lambda: rl.sinusoidal_pe(-1, 8), ValueError, "length"),
    ("alibi-slopes-zero", lambda: alibi_slopes(0), ValueError, "n_heads"),
    ("alibi-bias-bool", lambda: alibi_bias(True, 4), TypeError, "seq_len"),
    ("embedding-zero", lambda: rl.LearnedPositionalEmbedding(0, 8), ValueError, ""),
    ("rotary-embedding-odd", lambda: rl.RotaryEmbedding(7), ValueError, "dim"),
    ("permute-heads-zero", lambda: rl.permute_for_half_layout(torch.randn(8, 8), 0), ValueError,
     "n_heads"),
    ("seed-str", lambda: rl.seed_everything("0"), TypeError, "seed"),
    ("seed-negative", lambda: rl.seed_everything(-1), ValueError, "seed"),
    # plots: indices and sizes
    ("alibi-heatmap-head-out-of-range", lambda: _plots().alibi_heatmap(n_heads=4, heads=(0, 7)),
     ValueError, "heads"),
    ("alibi-heatmap-head-negative", lambda: _plots().alibi_heatmap(n_heads=4, heads=(-1,)),
     ValueError, "heads"),
    ("alibi-heatmap-head-float", lambda: _plots().alibi_heatmap(n_heads=4, heads=(1.0,)),
     TypeError, "heads"),
    ("alibi-heatmap-heads-empty", lambda: _plots().alibi_heatmap(n_heads=4, heads=()),
     TypeError, "heads"),
    ("plot-frequencies-odd-dim", lambda: _plots().rope_frequencies(dim=7), ValueError, "dim"),
    ("plot-frequencies-negative-base", lambda: _plots().rope_frequencies(base=-10.0),
     ValueError, "base"),
    ("plot-frequencies-zero-length", lambda: _plots().rope_frequencies(length=0), ValueError,
     "length"),
    ("plot-rotation-theta-nan", lambda: _plots().rotation_2d(theta=math.nan), ValueError,
     "theta"),
    ("plot-rotation-m-float", lambda: _plots().rotation_2d(m=1.5), TypeError, "m"),
    ("plot-rotation-shift-bool", lambda: _plots().rotation_2d(shift=True), TypeError, "shift"),
    ("plot-complex-angle-inf", lambda: _plots().complex_rotation(angle=math.inf), ValueError,
     "angle"),
    ("plot-abel-negative-distance", lambda: _plots().abel_curve(max_distance=-5), ValueError,
     "max_distance"),
    ("plot-overlay-unknown-method", lambda: _plots().frequency_overlay(method="nope"),
     ValueError, "method"),
    ("plot-overlay-factor-below-1", lambda: _plots().frequency_overlay(factor=0.5), ValueError,
     "factor"),
    ("plot-rope-2d-size-zero", lambda: _plots().rope_2d_kernels(size=0), ValueError, "size"),
    ("plot-roofline-negative-peak", lambda: _plots().roofline(-1.0, 10.0), ValueError,
     "peak_gflops"),
    ("widget-sinusoidal-odd-dim", lambda: _widgets().sinusoidal_panel(dim=7), ValueError, "dim"),
    ("widget-sinusoidal-negative-base", lambda: _widgets().sinusoidal_panel(base=-1.0),
     ValueError, "base"),
    ("widget-sinusoidal-length-off-slider", lambda: _widgets().sinusoidal_panel(length=10**9),
     ValueError, "length"),
    ("widget-binary-bool-dim", lambda: _widgets().binary_panel(dim=True), TypeError, "dim"),
    ("plot-roofline-bandwidth-nan", lambda: _plots().roofline(1.0, math.nan), ValueError,
     "bandwidth_gb_s"),
]


# (id, call): valid edge inputs that must keep working
VALID = [
    ("seq-of-one", lambda: rl.apply_rope(torch.randn(1, 8))),
    ("rotary-dim-is-head-dim", lambda: rl.apply_rope(X, rotary_dim=8)),
    ("bf16", lambda: rl.apply_rope(X.bfloat16())),
    ("fp16-in-place", lambda: rl.apply_rope_(X.clone().half())),
    ("meta-x-shape-only", lambda: rl.apply_rope(torch.empty(2, 5, 8, device="meta"))),
    ("attention-bf16", lambda: rl.attention(Q.bfloat16(), K.bfloat16(), V.bfloat16())),
    ("rotate-half-int", lambda: rl.rotate_half(torch.arange(4))),
    ("check-close-int-exact", lambda: rl.check_close("c", torch.tensor([1, 2]), [1, 2])),
    ("check-close-int-float", lambda: rl.check_close("c", torch.tensor([1, 2]), [1.0, 2.0])),
    ("check-close-bool-by-value", lambda: rl.check_close("c", torch.tensor([True]), [1])),
    ("check-close-int-at-2^53", lambda: rl.check_close("c", torch.tensor([2**53]), [2**53])),
    ("yarn-truncate-false", lambda: scaling.yarn_inv_freq(8, factor=2.0, original_max_position=64,
                                                          truncate=False)),
    ("dynamic-long", lambda: scaling.dynamic_inv_freq(8, factor=4.0, original_max_position=16,
                                                      seq_len=10**6)),
    ("positions-int64-at-2^24", lambda: rl.apply_rope(X, torch.arange(5) + BIG)),
    ("positions-float64-at-2^25", lambda: rl.apply_rope(X, torch.arange(5).double() + 2 * BIG)),
    ("linear-attention-elu", lambda: linear_attention(Q, K, V)),
    ("alibi-heads-one", lambda: alibi_slopes(1)),
    ("alibi-heatmap-last-head", lambda: _plots().alibi_heatmap(n_heads=4, heads=(3,))),
]


@pytest.mark.parametrize("call, error, name", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_input_gets_one_clear_error_naming_the_parameter(call, error, name):
    with pytest.raises(error) as caught:
        call()
    assert name in str(caught.value)


@pytest.mark.parametrize("call", [c[1] for c in VALID], ids=[c[0] for c in VALID])
def test_valid_edge_input_is_accepted(call, capsys):
    call()


def test_check_close_never_passes_different_bools_or_ints():
    with pytest.raises(AssertionError):
        rl.check_close("c", torch.tensor([True]), torch.tensor([False]))
    with pytest.raises(AssertionError):
        rl.check_close("c", torch.tensor([2**53 - 1]), torch.tensor([2**53]))


def test_angles_past_2_to_the_24_are_exact():
    """int64 positions past 2^24 (float32 cannot hold every integer there): apply_rope keeps
    them exact without reading them; rope_angles widens when a dtype asks (float64)."""
    positions = torch.arange(4) + 2**25 + 1
    freqs = rl.inv_freq(8)
    exact = (positions.double()[:, None] * freqs.double())
    assert torch.equal(rl.rope_angles(positions.double(), freqs), exact)
    assert rl.rope_angles(positions, freqs).dtype == torch.float32  # dtypes decide, not values
    x = torch.randn(4, 8, dtype=torch.float64)
    ref = rl.apply_rope(x, positions, inv_freq=freqs.double())
    got = rl.apply_rope(x.float(), positions).double()
    assert (got - ref).abs().max() < 1e-5


def tally():
    """Counts for the issue: clear error / valid accepted / raw error / silently accepted."""
    counts = {"clear error": 0, "valid accepted": 0, "raw error": 0, "silently accepted": 0,
              "valid rejected": 0}
    for case, call, error, name in BAD:
        try:
            call()
        except (ValueError, TypeError) as caught:
            if isinstance(caught, error) and name in str(caught):
                counts["clear error"] += 1
                continue
            counts["raw error"] += 1
            print("raw:", case, type(caught).__name__, str(caught)[:120])
        except Exception as caught:  # noqa: BLE001 - the tally's point
            counts["raw error"] += 1
            print("raw:", case, type(caught).__name__, str(caught)[:120])
        else:
            counts["silently accepted"] += 1
            print("silent:", case)
    for case, call in VALID:
        try:
            call()
            counts["valid accepted"] += 1
        except Exception as caught:  # noqa: BLE001
            counts["valid rejected"] += 1
            print("rejected:", case, type(caught).__name__, str(caught)[:120])
    return counts


if __name__ == "__main__":
    print(tally())
