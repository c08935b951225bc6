"""The compiled kernel (rope_lab._ckernel), both layouts: equal to the reference formula bit
for bit where it applies, declines cleanly where it does not, and the eager path takes over
when it cannot be built."""

import concurrent.futures
import ctypes
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rope_lab as rl
from rope_lab import _angles, _ckernel, fast, rope

needs_kernel = pytest.mark.skipif(not _ckernel.available(),
                                  reason=f"no compiled kernel here ({_ckernel.status()})")


def tables(seq, half, *, lead=(), dtype=torch.float64, seed=0):
    generator = torch.Generator().manual_seed(seed)
    angles = torch.rand(*lead, seq, half, generator=generator, dtype=torch.float64) * 50
    return angles.cos().to(dtype), angles.sin().to(dtype)


def reference(x, cos, sin, layout="half"):
    return rope.rotate_reference(x, cos, sin, layout)


def kernel(x, cos, sin, layout="half"):
    out = torch.full(x.shape, float("nan"), dtype=x.dtype)
    assert _ckernel.rotate(x, cos, sin, out, layout)
    return out


@needs_kernel
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1, 32, 64, 128), (2, 3, 5, 8), (3, 7, 2), (7, 2),
                                   (1, 1, 1, 2), (2, 3, 4, 5, 6, 16)])
def test_equals_the_reference_bit_for_bit(shape, dtype, layout):
    """bfloat16 x with float32 tables: computed in float32, rounded once, as the formula."""
    x = torch.randn(shape, dtype=torch.float64).to(dtype)
    cos, sin = tables(shape[-2], shape[-1] // 2, dtype=_ckernel.TABLE_DTYPES[dtype])
    assert torch.equal(kernel(x, cos, sin, layout), reference(x, cos, sin, layout))


@needs_kernel
def test_bfloat16_rounds_to_nearest_even_and_keeps_nan_and_inf():
    """The C rounding against torch's float32 → bfloat16 conversion on every kind of value:
    halfway cases both ways, just below halfway, subnormals, the largest float, ±inf, NaN
    (a signalling one too). The pair (a, b) = (1, 0) turned by a "cos" of v and a sin of 0
    gives out_a = 1·v − 0·0 = v exactly in float32; the kernel then rounds it once."""
    bits = torch.tensor([0x3F808000, 0x3F818000, 0x3F80FFFF, 0x00000001, 0x807FFFFF,
                         0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001],
                        dtype=torch.int64).to(torch.int32)
    values = bits.view(torch.float32)
    x = torch.tensor([1.0, 0.0], dtype=torch.bfloat16).expand(len(values), 1, 2).contiguous()
    cos, sin = values[:, None, None], torch.zeros(len(values), 1, 1)
    out = torch.empty_like(x)
    assert _ckernel.rotate(x, cos, sin, out, "half")
    expected = values.bfloat16().float()
    got = out[:, 0, 0].float()
    nan = torch.isnan(values)
    assert torch.equal(got[~nan], expected[~nan])
    assert torch.isnan(got[nan]).all()


@needs_kernel
@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 3), heads=st.integers(1, 4), seq=st.integers(1, 9),
       half=st.integers(1, 8), order=st.permutations([0, 1, 2]), per_batch=st.booleans(),
       seed=st.integers(0, 2**16), layout=st.sampled_from(["half", "interleaved"]))
def test_any_memory_order_and_table_broadcast(batch, heads, seq, half, order, per_batch, seed,
                                              layout):
    # q stored in some order of (batch, heads, seq), viewed as (batch, heads, seq, dim)
    sizes = (batch, heads, seq)
    stored = torch.randn(*(sizes[k] for k in order), 2 * half, dtype=torch.float64,
                         generator=torch.Generator().manual_seed(seed))
    x = stored.permute(*(order.index(k) for k in range(3)), 3)
    cos, sin = tables(seq, half, lead=(batch, 1) if per_batch else (), seed=seed)
    assert torch.equal(kernel(x, cos, sin, layout), reference(x, cos, sin, layout))


@needs_kernel
def test_apply_rope_uses_it_for_partial_rotary_and_autograd():
    x = torch.randn(2, 4, 9, 16, dtype=torch.float64, requires_grad=True)
    cos, sin = _angles.cached_cos_sin(9, 8, rope.DEFAULT_BASE, x.device, torch.float64)
    rotated = rl.apply_rope(x, rotary_dim=8)
    assert torch.equal(rotated, reference(x, cos, sin))
    assert torch.autograd.gradcheck(lambda t: rl.apply_rope(t, rotary_dim=8), (x,))


@needs_kernel
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_in_place_reads_each_pair_before_writing_it(layout):
    x = torch.randn(2, 3, 10, 16, dtype=torch.float64)
    cos, sin = tables(10, 8)
    expected = reference(x, cos, sin, layout)
    assert _ckernel.rotate(x, cos, sin, x, layout)
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


# --- position ids in one call: angles, cos, sin and rotation --------------------------------

def exact_rotation(x, positions, theta, layout="half"):
    """The rotation in float64 by exact m times the given θ (float64 math, independent of
    the package): the contract for integer positions at any size."""
    angles = positions.double()[..., None] * theta.double()
    x = x.double()
    a, b = x.chunk(2, dim=-1) if layout == "half" else (x[..., 0::2], x[..., 1::2])
    first, second = a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()
    if layout == "half":
        return torch.cat((first, second), -1)
    return torch.stack((first, second), -1).flatten(-2)


@needs_kernel
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_position_ids_in_one_call_equal_float64_math(dtype, layout):
    """Positions near and past 2^24 and negative ones, per batch (b, 1, seq) and shared."""
    theta = _angles.inv_freq_values(64, 1e4, "cpu", _ckernel.TABLE_DTYPES[dtype])
    x = torch.randn(3, 8, 2, 64, dtype=torch.float64).to(dtype)
    for positions in (torch.tensor([[[5, 4095]], [[2**24 - 1, 2**24 + 1]], [[2**25 + 3, -7]]]),
                      torch.tensor([2**31 - 1, 123_456_789])):
        out = torch.empty_like(x)
        assert _ckernel.rotate_positions(x, positions, theta, out, layout)
        expected = exact_rotation(x, positions, theta, layout)
        m = positions.abs().double()
        # below 2^24: the float32 product (transformers' arithmetic) is off by up to
        # 2^-24 of the angle; at and past it the angle is exact; then out's own rounding
        below = m[m < 2**24]
        angle = 1e-6 + (float(below.max()) * 2**-24
                        if dtype != torch.float64 and below.numel() else 0.0)
        ulp = {torch.float32: 2**-23, torch.float64: 2**-52, torch.bfloat16: 2**-7}[dtype]
        scale = float(expected.abs().max())
        assert float((out.double() - expected).abs().max()) <= (angle + 2 * ulp) * scale


@needs_kernel
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_position_ids_in_one_call_match_the_table_path(layout):
    """Against apply_rope's own tables (one angle rule): bit for bit below 2^24, where both
    take the float32 product and its correctly rounded cos and sin (the C code by its own
    reduction and polynomial, torch in float64), for ids spread over [−2^24, 2^24), base 10⁴
    and 5·10⁵, one and two threads, a decode step and a table of 2^18 entries. Past 2^24 the
    tables reduce the angle to [−π, π) and round it to float32 (1.2e-7 rad) where the C code
    takes cos in double. Hence 2e-6 there, for outputs of size up to about 4."""
    generator = torch.Generator().manual_seed(0)
    previous = torch.get_num_threads()
    try:
        for base, threads, count in ((1e4, 1, 3), (5e5, 2, 4096), (1e4, 2, 4096)):
            torch.set_num_threads(threads)
            theta = _angles.inv_freq_values(128, base, "cpu", torch.float32)
            positions = torch.randint(-(2**24) + 1, 2**24, (count,), generator=generator)
            x = torch.randn(2, count, 128, generator=generator)
            out = torch.empty_like(x)
            assert _ckernel.rotate_positions(x, positions, theta, out, layout)
            cos, sin = _angles.cos_sin_table(positions, theta)
            assert torch.equal(out, reference(x, cos, sin, layout))
    finally:
        torch.set_num_threads(previous)
    x = torch.randn(2, 8, 3, 64)
    positions = torch.tensor([[3, 70, 2**24 + 5], [0, 1000, 2**20]])[:, None, :]
    theta = _angles.inv_freq_values(64, 1e4, "cpu", torch.float32)
    out = torch.empty_like(x)
    assert _ckernel.rotate_positions(x, positions, theta, out, layout)
    cos, sin = _angles.cos_sin_table(positions, theta)
    torch.testing.assert_close(out, reference(x, cos, sin, layout), rtol=0, atol=2e-6)
    # default positions (None): 0 … seq − 1, in place
    y = x.clone()
    assert _ckernel.rotate_positions(y, None, theta, y, layout)
    cos, sin = _angles.cos_sin_table(torch.arange(3), theta)
    assert torch.equal(y, reference(x, cos, sin, layout))


@needs_kernel
def test_frequencies_above_one_keep_the_rule():
    """θ_i > 1 (an inv_freq set by hand) can push m·θ_i past where the polynomial's reduction
    is exact; libm takes those, still the float32 product's correctly rounded cos."""
    theta = torch.tensor([3.0, 1e3, 1e6, 0.5])
    positions = torch.tensor([1, 7, 9000, 2**23 - 1, -(2**23)])
    x = torch.randn(5, 8)
    out = torch.empty_like(x)
    assert _ckernel.rotate_positions(x, positions, theta, out, "half")
    cos, sin = _angles.cos_sin_table(positions, theta)
    assert torch.equal(out, reference(x, cos, sin))


@needs_kernel
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_apply_rope_with_ids_is_one_c_call_at_any_size(layout):
    q = torch.randn(1, 8, 1, 64)
    positions = torch.tensor([[[37]]])
    rl.apply_rope(q, positions, layout=layout)  # θ for this head dim, computed once and cached
    assert cost_names(rl.apply_rope, q, positions, layout=layout) == ["rope_lab C loop"]
    big = torch.randn(1, 32, 64, 128)  # 2^18 numbers: the threaded loop, its own table
    rl.apply_rope(big, torch.arange(64), layout=layout)
    assert cost_names(rl.apply_rope, big, torch.arange(64), layout=layout) == ["rope_lab C loop"]
    many = torch.arange(17)  # 17 positions × 32 pairs: past the table kept on the stack
    small = torch.randn(1, 2, 17, 64)
    int32 = positions.int()
    theta = _angles.inv_freq_values(64, 1e4, "cpu", torch.float32)
    for declined in (int32, torch.zeros(1)):  # int64 only (apply_rope converts int32)
        assert not _ckernel.rotate_positions(q, declined, theta, torch.empty_like(q), layout)
    with _ckernel.disabled():
        assert not _ckernel.rotate_positions(q, positions, theta, torch.empty_like(q), layout)
    # every one of those gets the formula's answer through apply_rope
    for x, p in ((big, torch.arange(64)), (small, many), (q, int32)):
        assert torch.equal(rl.apply_rope(x, p, layout=layout),
                           rl.apply_rope(x, p, layout=layout, backend="reference"))


def cost_names(function, *args, layout="half"):
    from rope_lab import cost

    return cost.count_kernels(function, *args, layout=layout)["names"]


@pytest.mark.parametrize("case", ["float16", "mixed dtypes", "unfoldable",
                                  "strided features", "disabled"])
def test_declines_what_it_does_not_handle_and_apply_rope_stays_right(case):
    x = torch.randn(2, 3, 4, 5, 6, 16)
    cos, sin = tables(6, 8, dtype=torch.float32)
    out = torch.empty_like(x)
    if case == "float16":
        x, out = x.half(), out.half()
    elif case == "mixed dtypes":
        cos, sin = cos.double(), sin.double()
    elif case == "unfoldable":
        x = x.permute(1, 0, 3, 2, 4, 5)
        out = torch.empty_like(x)
    elif case == "strided features":
        x = torch.randn(2, 3, 4, 5, 6, 32)[..., ::2]
    if case == "disabled":
        with _ckernel.disabled():
            assert not _ckernel.rotate(x, cos, sin, out, "half")
            assert not _ckernel.available()
    else:
        assert not _ckernel.rotate(x, cos, sin, out, "half")
    # the fast path falls back to the eager kernels and still gives the formula's answer
    torch.testing.assert_close(fast.rotate(x.clone(), cos, sin, "half"), reference(x, cos, sin))


def test_without_a_compiler_the_eager_path_runs_and_status_says_why(monkeypatch):
    monkeypatch.setattr(_ckernel, "_library", None)
    monkeypatch.setattr(_ckernel, "_reason", None)
    monkeypatch.setattr(_ckernel, "_warned", False)
    monkeypatch.setattr(_ckernel, "_compilers", lambda: [])
    assert not _ckernel.available()
    assert _ckernel.status() == "eager path: no C compiler found ($CC, cc, gcc, clang)"
    x = torch.randn(2, 4, 8, 16)
    cos, sin = _angles.cached_cos_sin(8, 16, rope.DEFAULT_BASE, x.device, torch.float32)
    with pytest.warns(_ckernel.FastPathWarning, match="no C compiler found") as caught:
        torch.testing.assert_close(rl.apply_rope(x), reference(x, cos, sin))
        rl.apply_rope(x)  # once per process
    assert len(caught) == 1 and caught[0].filename == __file__  # points at the caller


def test_a_failing_compiler_is_reported(monkeypatch, tmp_path):
    monkeypatch.setattr(_ckernel, "_library", None)
    monkeypatch.setattr(_ckernel, "_reason", None)
    monkeypatch.setattr(_ckernel, "_warned", True)
    monkeypatch.setattr(_ckernel, "_compilers", lambda: [["false"]])
    monkeypatch.setenv("ROPE_LAB_CACHE_DIR", str(tmp_path))
    assert not _ckernel.available()
    assert _ckernel.status().startswith("eager path: compiling failed: false -O3")


def run_python(code, **environment):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, **environment}, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.slow
def test_environment_switch_turns_it_off():
    printed = run_python("from rope_lab import _ckernel; print(_ckernel.status())",
                         ROPE_LAB_C_KERNEL="0")
    assert printed == "eager path: turned off by ROPE_LAB_C_KERNEL=0"


@pytest.mark.slow
@needs_kernel
def test_builds_into_the_cache_folder_once(tmp_path):
    code = "from rope_lab import _ckernel; print(_ckernel.status())"
    first = run_python(code, ROPE_LAB_CACHE_DIR=str(tmp_path))
    built = sorted(path.name for path in tmp_path.glob("*.so"))
    assert re.fullmatch(rf"C kernel: {re.escape(str(tmp_path))}/rope-\w+\.so "
                        r"\(built in \d+\.\d\d s\)", first) and len(built) == 1
    second = run_python(code, ROPE_LAB_CACHE_DIR=str(tmp_path))  # reused, not rebuilt
    assert second == first.split(" (")[0] + " (loaded from the cache)"
    assert sorted(path.name for path in tmp_path.glob("*.so")) == built
    assert sorted(path.name for path in tmp_path.iterdir()) == [*built, "rope.lock"]
    assert (tmp_path / built[0]).stat().st_mode & 0o777 == 0o700  # whatever the umask


def test_in_place_on_memory_shared_by_several_elements_is_refused():
    # an expanded tensor: all 6 (batch, head) rows are one row in memory
    x = torch.randn(1, 1, 8, 16).expand(2, 3, 8, 16)
    out = torch.empty(2, 3, 8, 16)
    cos, sin = tables(8, 8, dtype=torch.float32)
    assert not _ckernel.rotate(x, cos, sin, x, "half")
    assert _ckernel.rotate(x, cos, sin, out, "half") == _ckernel.available()  # reading is fine
    with pytest.raises(ValueError, match="elements of x share memory"):
        rope.apply_rope_(x)


# --- a failing compiler: one warning, bounded time, remembered -----------------------------

FIRST_ROTATION = """
import time, warnings
import torch
import rope_lab as rl
from rope_lab import _ckernel
x = torch.randn(2, 8, 16)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    started = time.perf_counter()
    rl.apply_rope(x)
    first = time.perf_counter() - started
    started = time.perf_counter()
    rl.apply_rope(x)
    second = time.perf_counter() - started
kinds = [w.category.__name__ for w in caught]
print(f"{first:.3f} {second:.3f} {kinds} {_ckernel.status()}")
"""


def fake_compiler(folder, body):
    """$CC = a script; PATH holds nothing else, so cc, gcc and clang are not found."""
    script = folder / "fakecc"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return {"CC": str(script), "PATH": str(folder)}


def first_rotation(cache, environment):
    words = run_python(FIRST_ROTATION, ROPE_LAB_CACHE_DIR=str(cache), **environment).split(" ", 2)
    return float(words[0]), float(words[1]), words[2]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="no build on Windows")
@pytest.mark.parametrize("body", ["echo 'fakecc: broken' >&2; exit 1", "/bin/sleep 60"],
                         ids=["exits 1", "hangs"])
def test_a_failing_compiler_warns_once_stops_in_time_and_is_remembered(tmp_path, body):
    bin_folder, cache = tmp_path / "bin", tmp_path / "cache"
    bin_folder.mkdir()
    environment = fake_compiler(bin_folder, body)
    started = time.perf_counter()
    first, second, rest = first_rotation(cache, environment)
    whole = time.perf_counter() - started
    assert first < _ckernel.BUILD_SECONDS_LIMIT + 2 and second < 1
    assert whole < 60  # and the hung compiler did not keep the process waiting either
    assert rest.startswith("['FastPathWarning'] eager path: compiling failed: ")
    failed = list(cache.glob("*.failed"))
    assert len(failed) == 1 and failed[0].stat().st_mode & 0o777 == 0o600
    assert not list(cache.glob("build-*"))  # temporary folders cleaned
    # a new process reads the failure instead of compiling again
    first, _, rest = first_rotation(cache, environment)
    assert first < 1 and "remembered in" in rest and "FastPathWarning" in rest
    failed[0].unlink()  # deleting it retries
    first, _, rest = first_rotation(cache, environment)
    assert "compiling failed" in rest and "delete it" not in rest


@pytest.mark.slow
def test_environment_switch_is_silent():
    printed = run_python(FIRST_ROTATION, ROPE_LAB_C_KERNEL="0")
    assert printed.split(" ", 2)[2] == "[] eager path: turned off by ROPE_LAB_C_KERNEL=0"


def test_failure_is_remembered_in_process(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(_ckernel, "_library", None)
    monkeypatch.setattr(_ckernel, "_reason", None)
    monkeypatch.setattr(_ckernel, "_warned", True)
    monkeypatch.setattr(_ckernel, "_compilers", lambda: calls.append(1) or [["false"]])
    monkeypatch.setenv("ROPE_LAB_CACHE_DIR", str(tmp_path))
    for _ in range(3):
        assert not _ckernel.available()
    assert calls == [1]


# --- the cache folder is private ------------------------------------------------------------

def folder_problem(path, monkeypatch, *, fallback=None):
    """The reason _cache_folder gives for refusing ``path`` (and the fallback)."""
    monkeypatch.setenv("ROPE_LAB_CACHE_DIR", str(path))
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(fallback or path.parent / "nope"))
    with pytest.raises(_ckernel._Unavailable) as error:
        _ckernel._cache_folder()
    return str(error.value)


def test_new_cache_folder_is_0700_whatever_the_umask(tmp_path, monkeypatch):
    monkeypatch.setenv("ROPE_LAB_CACHE_DIR", str(tmp_path / "a" / "cache"))
    previous = os.umask(0)
    try:
        folder = _ckernel._cache_folder()
    finally:
        os.umask(previous)
    assert folder == str(tmp_path / "a" / "cache")
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700


def test_symlinked_cache_folder_refused(tmp_path, monkeypatch):
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "nope").write_text("a file, not a folder")
    assert "symlink" in folder_problem(tmp_path / "link", monkeypatch)


def test_cache_folder_writable_by_others_refused(tmp_path, monkeypatch):
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    (tmp_path / "nope").write_text("a file, not a folder")
    assert "mode 777 lets others write to it" in folder_problem(folder, monkeypatch)


def test_cache_folder_of_another_user_refused(tmp_path, monkeypatch):
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    (tmp_path / "nope").write_text("a file, not a folder")
    real_fstat = os.fstat
    monkeypatch.setattr(os, "fstat", lambda fd: os.stat_result(
        (*real_fstat(fd)[:4], os.getuid() + 1, *real_fstat(fd)[5:])))
    assert f"belongs to user id {os.getuid() + 1}" in folder_problem(folder, monkeypatch)


def test_fallback_folder_must_be_exactly_0700(tmp_path, monkeypatch):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the folder should be")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    fallback = temporary / f"rope_lab-{os.getuid()}"
    fallback.mkdir()
    fallback.chmod(0o755)  # not writable by others, but readable: not private enough
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(temporary))
    monkeypatch.setenv("ROPE_LAB_CACHE_DIR", str(blocked / "cache"))
    with pytest.raises(_ckernel._Unavailable, match="mode 755 lets others in; expected 700"):
        _ckernel._cache_folder()
    fallback.chmod(0o700)
    assert _ckernel._cache_folder() == str(fallback)


def test_fallback_folder_symlink_refused(tmp_path, monkeypatch):
    blocked = tmp_path / "blocked"
    blocked.write_text("x")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (temporary / f"rope_lab-{os.getuid()}").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(temporary))
    monkeypatch.setenv("ROPE_LAB_CACHE_DIR", str(blocked / "cache"))
    with pytest.raises(_ckernel._Unavailable, match="symlink"):
        _ckernel._cache_folder()


@pytest.mark.parametrize("problem", ["symlink", "writable by others", "not ours"])
def test_library_file_checked_again_before_loading(tmp_path, monkeypatch, problem):
    path = tmp_path / "rope-0.so"
    if problem == "symlink":
        (tmp_path / "target.so").write_bytes(b"")
        path.symlink_to(tmp_path / "target.so")
        expected = "not a regular file"
    else:
        path.write_bytes(b"")
        path.chmod(0o766 if problem == "writable by others" else 0o700)
        expected = "others can write" if problem == "writable by others" else "belongs to user"
    if problem == "not ours":  # the open file is checked, not the path
        real_fstat = os.fstat
        monkeypatch.setattr(os, "fstat", lambda fd: os.stat_result(
            (*real_fstat(fd)[:4], os.getuid() + 1, *real_fstat(fd)[5:])))
    loaded = []
    monkeypatch.setattr(ctypes, "CDLL", lambda p: loaded.append(p))
    with pytest.raises(_ckernel._Unavailable, match=expected):
        _ckernel._open(str(path))
    assert _ckernel._load_built([str(path)]) is None and loaded == []


@pytest.mark.slow
@pytest.mark.skipif(not _ckernel.available(), reason="needs a working compiler")
def test_concurrent_first_use_from_processes_builds_once(tmp_path):
    code = "from rope_lab import _ckernel; print(_ckernel.status())"
    environment = {**os.environ, "ROPE_LAB_CACHE_DIR": str(tmp_path)}
    processes = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                  text=True, env=environment) for _ in range(4)]
    printed = [process.communicate(timeout=120)[0] for process in processes]
    assert all(line.startswith("C kernel: ") for line in printed), printed
    assert sum("built in" in line for line in printed) == 1  # the others waited, then loaded
    assert len(list(tmp_path.glob("*.so"))) == 1 and not list(tmp_path.glob("build-*"))


@pytest.mark.skipif(not _ckernel.available(), reason="needs a working compiler")
def test_concurrent_first_use_from_threads(tmp_path, monkeypatch):
    monkeypatch.setattr(_ckernel, "_library", None)
    monkeypatch.setattr(_ckernel, "_reason", None)
    monkeypatch.setenv("ROPE_LAB_CACHE_DIR", str(tmp_path))
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: _ckernel.available(), range(8)))
    assert all(results) and len(list(tmp_path.glob("*.so"))) == 1


# --- the cache cannot be swapped between the check and the load ------------------------------

PLANTED_C = r"""
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
    int fd = open(MARKER, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) { (void)!write(fd, "x", 1); close(fd); }
}
"""

SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = (os.fsencode(p) for p in sys.argv[1:3])
AT_FDCWD, RENAME_EXCHANGE = -100, 2
if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
    sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
print("ready", flush=True)
while True:
    libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
"""

LOADER = r"""
import ctypes, os, resource, sys, time
from rope_lab import _ckernel
folder, name, how, attempts, marker = sys.argv[1:6]
# every load keeps its descriptor open (as _open does): room for a few thousand
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
wanted = 8000 if hard == resource.RLIM_INFINITY else min(hard, 8000)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
enough = min(3000, max(soft, wanted) - 200)
print("ready", flush=True)
sys.stdin.readline()
loaded = refused = 0
deadline = time.monotonic() + 20  # on a busy machine the swapper may wait for a core
for i in range(int(attempts)):
    if how == "safe" and min(loaded, refused) >= enough or time.monotonic() > deadline:
        break
    # a new name each time (up to PATH_MAX): dlopen returns a library it loaded under the same
    # name without opening the file again, which would hide the race
    path = os.path.join(folder, "./" * (i % 1800), name)
    try:
        if how == "safe":
            _ckernel._open(path)
        else:  # the loader before: check the path with lstat, then load the path
            info = os.lstat(path)
            if info.st_mode & 0o022:
                raise _ckernel._Unavailable("others can write to it")
            ctypes.CDLL(path)
        loaded += 1
    except (_ckernel._Unavailable, OSError):
        refused += 1
    if os.path.exists(marker):
        break
print(loaded, refused, flush=True)
"""


def _compile_planted(folder, marker):
    source = folder / "planted.c"
    source.write_text(PLANTED_C)
    compiler = _ckernel._compilers()[0]
    subprocess.run([*compiler, "-shared", "-fPIC", f'-DMARKER="{marker}"', str(source), "-o",
                    str(folder / "planted.so")], check=True, capture_output=True, timeout=60)
    return folder / "planted.so"


def _race(tmp_path, how, attempts):
    """A loader against a swapper that exchanges the cache folder with a planted one; returns
    (loads, refusals, whether the planted library's constructor ran)."""
    shared = tmp_path / how / "shared"
    shared.mkdir(parents=True)
    shared.chmod(0o777)  # others may write here, and no sticky bit: they can rename the cache
    cache, evil = shared / "cache", shared / "evil"
    cache.mkdir(mode=0o700)
    evil.mkdir(mode=0o700)
    name = "rope-race.so"
    shutil.copyfile(_ckernel._load()._name, cache / name)
    (cache / name).chmod(0o700)
    marker = tmp_path / how / "planted-ran"
    planted = _compile_planted(tmp_path / how, marker)
    shutil.copyfile(planted, evil / name)
    (evil / name).chmod(0o777)  # stands for a file of another user: refused when checked
    loader = subprocess.Popen([sys.executable, "-c", LOADER, str(cache), name, how,
                               str(attempts), str(marker)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "ROPE_LAB_C_KERNEL": "0"})
    swapper = None
    try:
        assert loader.stdout.readline() == "ready\n"
        swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(cache), str(evil)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if swapper.stdout.readline() != "ready\n":
            pytest.skip(f"cannot exchange folders here: {swapper.communicate()[1].strip()}")
        loader.stdin.write("go\n")
        loader.stdin.flush()
        loads, refusals = map(int, loader.stdout.readline().split())
    finally:
        for process in (loader, swapper):
            if process is not None:
                process.kill()
                process.wait()
    return loads, refusals, marker.exists()


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux") or not _ckernel.available(),
                    reason="renameat2(RENAME_EXCHANGE) is Linux's; needs a built kernel")
def test_a_cache_folder_swapped_during_loading_never_loads_a_planted_library(tmp_path):
    """The review's attack: the folder is exchanged with one holding another library while
    the loader checks and loads. Checked by path and loaded by path, the planted library's
    constructor runs; opened once, checked and loaded through its descriptor, never."""
    loads, refusals, planted = _race(tmp_path, "path", 1800)
    if not planted:
        pytest.skip(f"the swapper never won against the path loader ({loads} loads, "
                    f"{refusals} refusals): the race was not exercised on this machine")
    loads, refusals, planted = _race(tmp_path, "safe", 1_000_000)
    assert not planted, f"a planted library was loaded ({loads} loads, {refusals} refusals)"
    assert loads > 0 and refusals > 0  # it met both folders, and loaded only the real one


def _fallback_elsewhere(tmp_path, monkeypatch):
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(temporary))
    return temporary / f"rope_lab-{os.getuid()}"


def test_a_cache_folder_under_a_folder_others_can_write_is_refused(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    fallback = _fallback_elsewhere(tmp_path, monkeypatch)
    monkeypatch.setenv("ROPE_LAB_CACHE_DIR", str(shared / "a" / "cache"))
    assert _ckernel._cache_folder() == str(fallback)  # refused, so the private fallback
    with pytest.raises(_ckernel._Unavailable,
                       match=f"the folder above it, {shared}, has mode 777: others can write"):
        _ckernel._private_folder(str(shared / "a" / "cache"), exact_mode=False)
    shared.chmod(0o1777)  # the sticky bit, as /tmp: others cannot rename what is yours
    assert _ckernel._cache_folder() == str(shared / "a" / "cache")


def test_a_symlink_on_the_way_is_checked_where_it_leads(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    (shared / "inner").mkdir(parents=True)
    shared.chmod(0o777)
    (tmp_path / "link").symlink_to(shared / "inner")
    with pytest.raises(_ckernel._Unavailable, match=f"the folder above it, {shared}, has mode"):
        _ckernel._private_folder(str(tmp_path / "link" / "cache"), exact_mode=False)


def test_a_folder_above_owned_by_another_user_is_refused(tmp_path, monkeypatch):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    real_stat = os.stat
    other = os.getuid() + 1 if os.getuid() else 1000

    def stat_of(path, *args, **kwargs):
        info = real_stat(path, *args, **kwargs)
        if str(path) == str(theirs):
            return os.stat_result((*info[:4], other, *info[5:]))
        return info

    monkeypatch.setattr(os, "stat", stat_of)
    with pytest.raises(_ckernel._Unavailable, match=f"{theirs}, belongs to user id {other}"):
        _ckernel._private_folder(str(theirs / "cache"), exact_mode=False)


def test_new_parent_folders_are_not_writable_by_others_whatever_the_umask(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setenv("ROPE_LAB_CACHE_DIR", str(tmp_path / "x" / "y" / "cache"))
    previous = os.umask(0)
    try:
        assert _ckernel._cache_folder() == str(tmp_path / "x" / "y" / "cache")
    finally:
        os.umask(previous)
    for folder in (tmp_path / "x", tmp_path / "x" / "y"):
        assert stat.S_IMODE(folder.stat().st_mode) & 0o022 == 0


@pytest.mark.skipif(not _ckernel._LOAD_BY_DESCRIPTOR or not _ckernel.available(),
                    reason="loads through /proc/self/fd on Linux only")
def test_the_library_is_loaded_through_the_descriptor_that_was_checked(tmp_path, monkeypatch):
    path = tmp_path / "rope-0.so"
    shutil.copyfile(_ckernel._load()._name, path)
    path.chmod(0o700)
    loaded = []
    real_cdll = ctypes.CDLL
    monkeypatch.setattr(ctypes, "CDLL", lambda name: loaded.append(name) or real_cdll(name))
    library = _ckernel._open(str(path))
    assert loaded == [f"/proc/self/fd/{library._descriptor}"]
    assert os.path.samestat(os.fstat(library._descriptor), os.stat(path))
    assert library._name == str(path) and library.rope_has_openmp() in (0, 1)


def test_a_fifo_under_the_library_name_is_refused_without_hanging(tmp_path):
    path = tmp_path / "rope-0.so"
    os.mkfifo(path, 0o600)
    with pytest.raises(_ckernel._Unavailable, match="not a regular file"):
        _ckernel._open(str(path))


@needs_kernel
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_a_fresh_output_faulted_in_first_gets_the_same_bits(layout):
    """A fresh output of a MiB or more has its pages faulted in by madvise before the loop
    (kernels/rope.c, populate()): the same numbers, partial rotary's tail untouched, on one
    thread and on two; an output the caller did not just allocate is never asked for it."""
    x = torch.randn(2, 8, 256, 96)  # 1.5 MiB
    theta = _angles.inv_freq_values(64, 1e4, "cpu", torch.float32)
    ids = torch.arange(256) * 3
    cos, sin = _angles.cos_sin_table(ids, theta)
    expected = reference(x, cos, sin, layout)
    previous = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for by_positions in (False, True):
                out = torch.empty_like(x)
                out[..., 64:] = x[..., 64:]  # the tail, as the dispatcher copies it first
                if by_positions:
                    assert _ckernel.rotate_positions(x[..., :64], ids, theta, out[..., :64],
                                                     layout, fresh=True)
                else:
                    assert _ckernel.rotate(x[..., :64], cos, sin, out[..., :64], layout,
                                           fresh=True)
                assert torch.equal(out, expected)
    finally:
        torch.set_num_threads(previous)
    assert _ckernel._populate_row_bytes(torch.empty(2, 8, 256, 96), True) == 96 * 4
    assert _ckernel._populate_row_bytes(torch.empty(2, 8, 256, 96), False) == 0
    assert _ckernel._populate_row_bytes(torch.empty(1, 8, 16, 96), True) == 0  # 48 KiB
