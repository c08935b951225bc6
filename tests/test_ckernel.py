"""The compiled half-layout kernel (rope_lab._ckernel): equal to the reference formula bit for
bit where it applies, declines cleanly where it does not, and the eager path takes over when
it cannot be built."""

import os
import re
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rope_lab as rl
from rope_lab import _ckernel, fast, rope

needs_kernel = pytest.mark.skipif(not _ckernel.available(),
                                  reason=f"no compiled kernel here ({_ckernel.status()})")


def tables(seq, half, *, lead=(), dtype=torch.float64, seed=0):
    generator = torch.Generator().manual_seed(seed)
    angles = torch.rand(*lead, seq, half, generator=generator, dtype=torch.float64) * 50
    return angles.cos().to(dtype), angles.sin().to(dtype)


def reference(x, cos, sin):
    return rope.rotate_reference(x, cos, sin, "half")


def kernel(x, cos, sin):
    out = torch.full(x.shape, float("nan"), dtype=x.dtype)
    assert _ckernel.rotate_half(x, cos, sin, out)
    return out


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(1, 32, 64, 128), (2, 3, 5, 8), (3, 7, 2), (7, 2),
                                   (1, 1, 1, 2), (2, 3, 4, 5, 6, 16)])
def test_equals_the_reference_bit_for_bit(shape, dtype):
    x = torch.randn(shape, dtype=torch.float64).to(dtype)
    cos, sin = tables(shape[-2], shape[-1] // 2, dtype=dtype)
    assert torch.equal(kernel(x, cos, sin), reference(x, cos, sin))


@needs_kernel
@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 3), heads=st.integers(1, 4), seq=st.integers(1, 9),
       half=st.integers(1, 8), order=st.permutations([0, 1, 2]), per_batch=st.booleans(),
       seed=st.integers(0, 2**16))
def test_any_memory_order_and_table_broadcast(batch, heads, seq, half, order, per_batch, seed):
    # q stored in some order of (batch, heads, seq), viewed as (batch, heads, seq, dim)
    sizes = (batch, heads, seq)
    stored = torch.randn(*(sizes[k] for k in order), 2 * half, dtype=torch.float64,
                         generator=torch.Generator().manual_seed(seed))
    x = stored.permute(*(order.index(k) for k in range(3)), 3)
    cos, sin = tables(seq, half, lead=(batch, 1) if per_batch else (), seed=seed)
    assert torch.equal(kernel(x, cos, sin), reference(x, cos, sin))


@needs_kernel
def test_apply_rope_uses_it_for_partial_rotary_and_autograd():
    x = torch.randn(2, 4, 9, 16, dtype=torch.float64, requires_grad=True)
    cos, sin = rope._cached_cos_sin(9, 8, rope.DEFAULT_BASE, x.device, torch.float64)
    rotated = rl.apply_rope(x, rotary_dim=8)
    assert torch.equal(rotated, reference(x, cos, sin))
    assert torch.autograd.gradcheck(lambda t: rl.apply_rope(t, rotary_dim=8), (x,))


@needs_kernel
def test_in_place_reads_each_pair_before_writing_it():
    x = torch.randn(2, 3, 10, 16, dtype=torch.float64)
    cos, sin = tables(10, 8)
    expected = reference(x, cos, sin)
    assert _ckernel.rotate_half(x, cos, sin, x)
    assert torch.equal(x, expected)


@needs_kernel
def test_threads_give_the_same_bits():
    x = torch.randn(2, 8, 512, 64)
    cos, sin = tables(512, 32, dtype=torch.float32)
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = kernel(x, cos, sin)
        torch.set_num_threads(2)
        two = kernel(x, cos, sin)
    finally:
        torch.set_num_threads(previous)
    assert x.numel() >= _ckernel.PARALLEL_MIN_ELEMENTS
    assert torch.equal(one, two) and torch.equal(one, reference(x, cos, sin))


@pytest.mark.parametrize("case", ["bfloat16", "mixed dtypes", "unfoldable",
                                  "strided features", "disabled"])
def test_declines_what_it_does_not_handle_and_apply_rope_stays_right(case):
    x = torch.randn(2, 3, 4, 5, 6, 16)
    cos, sin = tables(6, 8, dtype=torch.float32)
    out = torch.empty_like(x)
    if case == "bfloat16":
        x, out = x.bfloat16(), out.bfloat16()
    elif case == "mixed dtypes":
        cos, sin = cos.double(), sin.double()
    elif case == "unfoldable":
        x = x.permute(1, 0, 3, 2, 4, 5)
        out = torch.empty_like(x)
    elif case == "strided features":
        x = torch.randn(2, 3, 4, 5, 6, 32)[..., ::2]
    if case == "disabled":
        with _ckernel.disabled():
            assert not _ckernel.rotate_half(x, cos, sin, out)
            assert not _ckernel.available()
    else:
        assert not _ckernel.rotate_half(x, cos, sin, out)
    # the fast path falls back to the eager kernels and still gives the formula's answer
    torch.testing.assert_close(fast.rotate(x.clone(), cos, sin, "half"), reference(x, cos, sin))


def test_without_a_compiler_the_eager_path_runs_and_status_says_why(monkeypatch):
    monkeypatch.setattr(_ckernel, "_library", None)
    monkeypatch.setattr(_ckernel, "_reason", None)
    monkeypatch.setattr(_ckernel, "_compilers", lambda: [])
    assert not _ckernel.available()
    assert _ckernel.status() == "eager path: no C compiler found ($CC, cc, gcc, clang)"
    x = torch.randn(2, 4, 8, 16)
    cos, sin = rope._cached_cos_sin(8, 16, rope.DEFAULT_BASE, x.device, torch.float32)
    torch.testing.assert_close(rl.apply_rope(x), reference(x, cos, sin))


def test_a_failing_compiler_is_reported(monkeypatch, tmp_path):
    monkeypatch.setattr(_ckernel, "_library", None)
    monkeypatch.setattr(_ckernel, "_reason", None)
    monkeypatch.setattr(_ckernel, "_compilers", lambda: [["false"]])
    monkeypatch.setenv("ROPE_LAB_CACHE_DIR", str(tmp_path))
    assert not _ckernel.available()
    assert _ckernel.status().startswith("eager path: compiling failed: false -O3")


def run_python(code, **environment):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, **environment}, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_environment_switch_turns_it_off():
    printed = run_python("from rope_lab import _ckernel; print(_ckernel.status())",
                         ROPE_LAB_C_KERNEL="0")
    assert printed == "eager path: turned off by ROPE_LAB_C_KERNEL=0"


@needs_kernel
def test_builds_into_the_cache_folder_once(tmp_path):
    code = "from rope_lab import _ckernel; print(_ckernel.status())"
    first = run_python(code, ROPE_LAB_CACHE_DIR=str(tmp_path))
    built = sorted(path.name for path in tmp_path.iterdir())
    assert re.fullmatch(rf"C kernel: {re.escape(str(tmp_path))}/rope_half-\w+\.so "
                        r"\(built in \d+\.\d\d s\)", first) and len(built) == 1
    second = run_python(code, ROPE_LAB_CACHE_DIR=str(tmp_path))  # reused, not rebuilt
    assert second == first.split(" (")[0] + " (loaded from the cache)"
    assert sorted(path.name for path in tmp_path.iterdir()) == built


def test_in_place_on_memory_shared_by_several_elements_is_refused():
    # an expanded tensor: all 6 (batch, head) rows are one row in memory
    x = torch.randn(1, 1, 8, 16).expand(2, 3, 8, 16)
    out = torch.empty(2, 3, 8, 16)
    cos, sin = tables(8, 8, dtype=torch.float32)
    assert not _ckernel.rotate_half(x, cos, sin, x)
    assert _ckernel.rotate_half(x, cos, sin, out) == _ckernel.available()  # reading is fine
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        rope.apply_rope_(x)
