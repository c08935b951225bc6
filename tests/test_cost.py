"""rope_lab.cost: the byte/FLOP model against counts done by hand, and the kernel counter
against what each path really runs."""

import pytest
import torch

import rope_lab as rl
from rope_lab import _angles, _ckernel, bench, cost, rope


def test_rope_traffic_counts():
    traffic = cost.rope_traffic(2, 3, 5, 8, bytes_per_element=2)
    elements = 2 * 3 * 5 * 8
    assert traffic["elements"] == elements
    assert traffic["tensor_bytes"] == 2 * elements * 2  # one read, one write
    assert traffic["table_bytes"] == 2 * 5 * 4 * 4  # cos and sin, (seq, d/2) float32
    assert traffic["flops"] == 3 * elements  # 6 per pair
    assert cost.attainable_gflops(0.5, 1000.0, 100.0) == 50.0  # memory roof
    assert cost.attainable_gflops(50.0, 1000.0, 100.0) == 1000.0  # compute roof


def test_layer_flops_match_matmul_counts():
    seq, width = 6, 4
    flops = cost.layer_flops(seq, width, ffn_multiplier=2)
    assert flops["scores q kᵀ"] == 2 * seq * seq * width  # (L×D)(D×L), summed over heads
    assert flops["q, k, v, o projections"] == 4 * 2 * seq * width * width
    assert flops["MLP"] == 2 * (2 * seq * width * 2 * width)
    assert flops["RoPE on q and k"] == 2 * 3 * seq * width
    assert set(bench.measure_layer(seq=8, d_model=16, heads=2, repeats=1)) == set(flops)


def test_count_kernels_sees_the_passes():
    x = torch.randn(2, 4, 16)
    cos, sin = _angles.cached_cos_sin(4, 16, rope.DEFAULT_BASE, x.device, torch.float32)
    reference = cost.count_kernels(rope.rotate_reference, x, cos, sin, "half")
    assert reference["names"].count("mul") == 4 and reference["bytes_written"] == 4 * x.nbytes
    assert cost.count_kernels(x.clone)["bytes_written"] == x.nbytes
    interleaved = cost.count_kernels(rl.apply_rope, x, layout="interleaved", backend="complex")
    assert interleaved["names"].count("mul") == 1




def test_count_kernels_sees_the_raw_kernels_too():
    """The C loop and Triton write through raw pointers; they must still be counted, or a
    path that wrote twice would look free."""
    x = torch.randn(2, 4, 16, dtype=torch.float64)
    # a cold cos/sin table, whatever ran before in this worker (an earlier test that built
    # it left eager 2 of the 3 passes below): the table's kernels, then the rotation's
    _angles._table_cache.clear()
    eager = cost.count_kernels(rl.apply_rope, x, backend="eager")
    assert eager["kernels"] >= 3 and eager["bytes_written"] >= 3 * x.nbytes
    rotation = cost.count_kernels(rl.apply_rope, x, backend="eager")  # the table is cached
    assert rotation["kernels"] >= 3 and rotation["bytes_written"] >= 2 * x.nbytes
    if not _ckernel.available():
        pytest.skip(_ckernel.status())
    loop = cost.count_kernels(rl.apply_rope, x, backend="c")
    assert loop["names"] == ["rope_lab C loop"] and loop["bytes_written"] == x.nbytes
    rl.apply_rope(x, backend="c", rotary_dim=8)  # the cos/sin table for 8 features, cached
    partial = cost.count_kernels(rl.apply_rope, x, backend="c", rotary_dim=8)
    assert sorted(partial["names"]) == ["copy_", "rope_lab C loop"]
    assert partial["bytes_written"] == x.nbytes  # the tail copied, the head rotated
    scratch = x.clone()
    in_place = cost.count_kernels(rl.apply_rope_, scratch, backend="c")
    assert in_place["bytes_written"] == x.nbytes
