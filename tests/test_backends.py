"""apply_rope(..., backend=NAME): every path gives the formula's answer, or says why it cannot.

Expected values: a dense rotation matrix in float64 built entry by entry (tests/dense_oracle.py,
independent of the package),
and ``backend="reference"`` for the many shapes where that matrix would be slow.
"""

from __future__ import annotations

import pytest
import torch
from dense_oracle import dense_rope  # tests/dense_oracle.py
from hypothesis import given, settings
from hypothesis import strategies as st

import rope_lab as rl
from rope_lab import _ckernel, cost, fast

CPU_BACKENDS = ["reference", "eager", "c", "complex"]


def _layouts_for(backend):
    return {"complex": ["interleaved"]}.get(backend, ["half", "interleaved"])


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_every_backend_equals_the_dense_matrix(backend):
    if backend == "c" and not _ckernel.available():
        pytest.skip(_ckernel.status())
    x = torch.randn(2, 3, 6, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for layout in _layouts_for(backend):
        got = rl.apply_rope(x, layout=layout, backend=backend)
        torch.testing.assert_close(got, dense_rope(x, layout), rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    backend=st.sampled_from(["eager", "complex", "c"]),
    layout=st.sampled_from(["half", "interleaved"]),
    dtype=st.sampled_from([torch.float32, torch.bfloat16, torch.float64]),
    shape=st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 9)),
    half=st.integers(1, 6),
    extra=st.integers(0, 3),
    transpose=st.booleans(),
    in_place=st.booleans(),
)
def test_named_backends_match_the_reference(backend, layout, dtype, shape, half, extra,
                                            transpose, in_place):
    layout = layout if layout in _layouts_for(backend) else _layouts_for(backend)[0]
    dim = 2 * half + extra
    x = torch.randn(*shape, dim, generator=torch.Generator().manual_seed(1)).to(dtype)
    if transpose:
        x = x.transpose(0, 1)
    expected = rl.apply_rope(x, layout=layout, rotary_dim=2 * half, backend="reference")
    call = rl.apply_rope_ if in_place else rl.apply_rope
    target = x.clone() if in_place else x
    try:
        got = call(target, layout=layout, rotary_dim=2 * half, backend=backend)
    except rl.BackendUnavailable as error:
        # The C loop needs a compiler: that is the one refusal for these dtypes.
        assert backend == "c" and not _ckernel.available(), error
        return
    tolerance = {torch.float64: 1e-12, torch.float32: 1e-6, torch.bfloat16: 2**-7}[dtype]
    torch.testing.assert_close(got.double(), expected.double(), rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("backend", ["eager", "complex", "c", "reference"])
def test_gradients_through_each_backend(backend):
    if backend == "c" and not _ckernel.available():
        pytest.skip(_ckernel.status())
    for layout in _layouts_for(backend):
        x = torch.randn(2, 5, 8, dtype=torch.float64, requires_grad=True)
        positions = torch.tensor([3, 0, 2**24 + 1, -5, 9])
        for ids in (None, positions):
            torch.autograd.gradcheck(
                lambda t, ids=ids, layout=layout: rl.apply_rope(
                    t, ids, layout=layout, rotary_dim=6, backend=backend), (x,))


def test_a_named_backend_never_falls_back():
    x = torch.randn(2, 4, 8)
    with pytest.raises(rl.BackendUnavailable, match=r"backend='complex'.*interleaved"):
        rl.apply_rope(x, layout="half", backend="complex")
    with pytest.raises(rl.BackendUnavailable,
                       match="float32, float64 and bfloat16 x; got torch.float16"):
        rl.apply_rope(x.half(), backend="c")
    with _ckernel.disabled(), pytest.raises(rl.BackendUnavailable, match="turned off"):
        rl.apply_rope(x, backend="c")
    freqs = rl.inv_freq(8).requires_grad_()
    with pytest.raises(rl.BackendUnavailable,
                       match="inv_freq or the tables; use backend='reference'"):
        rl.apply_rope(x, inv_freq=freqs, backend="eager")
    # The reference differentiates with respect to inv_freq, as "auto" does.
    rl.apply_rope(x, inv_freq=freqs, backend="reference").sum().backward()
    assert freqs.grad is not None


def test_no_compiler_is_a_clear_refusal(monkeypatch):
    monkeypatch.setattr(_ckernel, "_library", None)
    monkeypatch.setattr(_ckernel, "_reason", "no C compiler found (tried $CC, cc, gcc, clang)")
    with pytest.raises(rl.BackendUnavailable, match="no C compiler found"):
        rl.apply_rope(torch.randn(2, 4, 8), backend="c")


def test_triton_refusals_name_the_reason(monkeypatch):
    monkeypatch.setattr(fast, "_triton_import",
                        "the triton package is not installed (No module named 'triton')")
    with pytest.raises(rl.BackendUnavailable, match="triton package is not installed"):
        rl.apply_rope(torch.randn(2, 4, 8), backend="triton")
    try:
        from rope_lab import _triton_rope
    except ImportError:
        return
    monkeypatch.setattr(fast, "_triton_import", _triton_rope)
    monkeypatch.setattr(_triton_rope, "INTERPRETED", False)
    monkeypatch.setattr(_triton_rope, "_plans", {})  # plans made with the interpreter on
    with pytest.raises(rl.BackendUnavailable, match="runs CUDA tensors; x is on cpu"):
        rl.apply_rope(torch.randn(2, 4, 8), backend="triton")


@pytest.mark.parametrize("bad", ["fast", "C", "", None, 3, ("c",)])
def test_unknown_backend_names_are_refused(bad):
    with pytest.raises(ValueError, match=r"backend must be one of .*got"):
        rl.apply_rope(torch.randn(2, 4, 8), backend=bad)
    with pytest.raises(ValueError, match=r"backend must be one of .*got"):
        rl.apply_rope_(torch.randn(2, 4, 8), backend=bad)


def test_auto_names_the_path_it_takes():
    x = torch.randn(1, 2, 4, 8)
    with _ckernel.disabled():
        assert fast.auto_backend(x, "interleaved") == "complex"
        assert fast.auto_backend(x.bfloat16(), "interleaved") == "eager"
    assert fast.auto_backend(x, "interleaved") == ("c" if _ckernel.available() else "complex")
    # A tensor this small runs the C loop on one thread: no OpenMP needed.
    assert fast.auto_backend(x, "half") == ("c" if _ckernel.available() else "eager")
    assert cost.count_kernels(rl.apply_rope, x)["names"] == (
        ["rope_lab C loop"] if _ckernel.available() else ["mul", "addcmul_", "addcmul_"])
    with _ckernel.disabled():
        assert fast.auto_backend(x, "half") == "eager"
    assert fast.auto_backend(x.to("meta"), "half") == "reference"
