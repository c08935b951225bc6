"""Compile rope_lab's Triton kernels for real GPUs, without a GPU (run as a script).

Triton's interpreter (what the other tests use on CPU tensors) runs the kernels as Python
and accepts what the compiler refuses: a module-level constant that is not a
``tl.constexpr(...)`` object passed the interpreter and failed every compile on the first
H200 run. And it says nothing about speed: the second H200 run found the positions kernel
at 255 registers with spills (2048 angles per program), 4–8 × a copy where it computed its
angles for every head. This script does two things, with the ptxas that ships in the triton
wheel (no driver needed):

- compiles every variant (x dtype, layout, kind of positions, the backward's sign, the q and
  k kernel, the table kernel) for Hopper (sm_90: H100/H200) and Ampere (sm_80);
- at the launch shapes that ``plan_positions``/``plan_pair`` choose for the issue's shapes
  (and other head dims, partial rotary, HF's memory order, grouped-query k), reads ptxas's
  report (``-v``, as Triton runs it) and fails on any spill or stack frame.

Each kernel is compiled as it is launched: the arguments of a real plan (made for meta
tensors of the shape) go through Triton's own binder, which decides what to specialize
(aligned pointers, strides that are 1 or multiples of 16), with stand-ins for the tensors
(a dtype and an aligned address). It prints one line per compile and exits 1 if any fails.
Run by tests/test_triton.py in a fresh process (the interpreter must be off, and it is
chosen when the kernels are defined).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys

os.environ.pop("TRITON_INTERPRET", None)

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource, make_backend  # noqa: E402
from triton.runtime.jit import create_function_from_signature  # noqa: E402

import rope_lab as rl  # noqa: E402
from rope_lab import _triton_rope  # noqa: E402

# Plans for meta tensors (shapes and strides only): the device is what this script fakes.
_triton_rope._device_problem = lambda device: None

META = torch.device("meta")


class _Pointer:
    """What Triton's binder needs of a tensor: its dtype and a 16-byte aligned address
    (as from PyTorch's allocator)."""

    def __init__(self, dtype):
        self.dtype = dtype

    def data_ptr(self):
        return 1 << 20


def compile_as_launched(kernel, tensors, plan, arch, *, ptxas_log=False):
    """Compile ``kernel`` for sm_{arch} as ``kernel[plan.grid](*tensors, *plan.ints,
    **plan.constants)`` would: Triton's binder specializes the arguments. Returns ptxas's
    report when asked (then the compile skips Triton's cache, which would skip ptxas)."""
    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    kwargs = {**plan.constants, "debug": False}
    arguments = [_Pointer(t.dtype) for t in tensors] + list(plan.ints)
    bound, specialization, options = binder(*arguments, **kwargs)
    options, signature, constexprs, attrs = kernel._pack_args(backend, kwargs, bound,
                                                              specialization, options)
    source = ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs)
    if not ptxas_log:
        triton.compile(source, target=target, options=options.__dict__)
        return ""
    log = io.StringIO()
    knobs = triton.knobs
    with contextlib.redirect_stdout(log), knobs.nvidia.scope(), knobs.compilation.scope():
        knobs.nvidia.dump_ptxas_log = True
        knobs.compilation.always_compile = True
        triton.compile(source, target=target, options=options.__dict__)
    return log.getvalue()


def spills(report: str) -> tuple[int, int, int]:
    """(registers, spill stores + loads in bytes, stack frame in bytes) from ptxas -v."""
    registers = re.search(r"Used (\d+) registers", report)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    stack = re.search(r"(\d+) bytes stack frame", report)
    if not (registers and spill and stack):
        raise RuntimeError(f"no ptxas report in Triton's output: {report[-300:]!r}")
    return (int(registers.group(1)), int(spill.group(1)) + int(spill.group(2)),
            int(stack.group(1)))


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device=META)


def ids(*shape):
    return torch.empty(shape, dtype=torch.int64, device=META)


def single(x, positions, layout="half", rotary_dim=None, negate=False):
    """The positions kernel's launch for apply_rope(x, positions): (kernel, tensors, plan)."""
    rotary_dim = rotary_dim or x.shape[-1]
    theta = torch.empty(rotary_dim // 2, dtype=torch.float32, device=META)
    x_rot = x[..., :rotary_dim]
    out = torch.empty(x.shape, dtype=x.dtype, device=META)[..., :rotary_dim]
    plan = _triton_rope.plan_positions(x_rot, positions, theta, out, layout, negate)
    assert not isinstance(plan, str), plan
    return (_triton_rope._rope_positions_kernel,
            (x, out, theta if positions is None else positions, theta), plan)


def pair(q, k, positions, layout="half"):
    theta = torch.empty(q.shape[-1] // 2, dtype=torch.float32, device=META)
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    plan = _triton_rope.plan_pair(q, k, positions, theta, q_out, k_out, layout)
    assert not isinstance(plan, str), plan
    return (_triton_rope._rope_positions_pair_kernel,
            (q, q_out, k, k_out, theta if positions is None else positions, theta), plan)


def tables(x, table_dtype, layout):
    half = x.shape[-1] // 2
    cos = torch.empty(x.shape[-2], half, dtype=table_dtype, device=META)
    out = torch.empty_like(x)
    return (_triton_rope._rope_kernel, (x, out, cos, cos),
            _triton_rope.plan_tables(x, cos, cos, out, layout))


def launch_shapes():
    """(name, launch) at the shapes a model uses: every one must compile without spills."""
    fp32 = torch.float32
    yield "train (8, 32, 4096, 128) bf16, ids (4096,)", single(meta(8, 32, 4096, 128),
                                                              ids(4096))
    yield "train (8, 32, 4096, 128) fp32, ids (4096,)", single(
        meta(8, 32, 4096, 128, dtype=fp32), ids(4096))
    yield "train bf16 interleaved", single(meta(8, 32, 4096, 128), ids(4096), "interleaved")
    yield "train fp32 interleaved", single(meta(8, 32, 4096, 128, dtype=fp32), ids(4096),
                                           "interleaved")
    yield "train bf16 backward (−m·θ)", single(meta(8, 32, 4096, 128), ids(4096), negate=True)
    yield "prefill (1, 32, 8192, 128) bf16, ids (1, 1, 8192)", single(
        meta(1, 32, 8192, 128), ids(1, 1, 8192))
    yield "prefill bf16, default positions", single(meta(1, 32, 8192, 128), None)
    yield "decode (64, 32, 1, 128) bf16, per-batch ids", single(meta(64, 32, 1, 128),
                                                                ids(64, 1, 1))
    yield "decode (64, 32, 1, 128) bf16, one id", single(meta(64, 32, 1, 128), ids(1))
    yield "decode (64, 32, 1, 128) fp32 interleaved", single(
        meta(64, 32, 1, 128, dtype=fp32), ids(64, 1, 1), "interleaved")
    yield "decode (1, 8, 1, 64) bf16", single(meta(1, 8, 1, 64), ids(1, 1, 1))
    yield "small (1, 8, 512, 64) bf16, default positions", single(meta(1, 8, 512, 64), None)
    yield "HF memory (2, 512, 32, 128) as (2, 32, 512, 128), ids (2, 1, 512)", single(
        meta(2, 512, 32, 128).transpose(1, 2), ids(2, 1, 512))
    yield "head dim 256 (1, 8, 1024, 256) bf16", single(meta(1, 8, 1024, 256), ids(1024))
    yield "head dim 80 (1, 32, 1024, 80) bf16", single(meta(1, 32, 1024, 80), ids(1024))
    yield "partial rotary 32 of (1, 32, 1024, 128)", single(meta(1, 32, 1024, 128), ids(1024),
                                                            rotary_dim=32)
    yield "ids for every head (2, 4, 128, 64)", single(meta(2, 4, 128, 64), ids(2, 4, 128))
    yield "q and k: (1, 32, 1, 128) and (1, 8, 1, 128) bf16, ids (1, 1, 1)", pair(
        meta(1, 32, 1, 128), meta(1, 8, 1, 128), ids(1, 1, 1))
    yield "q and k: (8, 32, 4096, 128) and (8, 8, 4096, 128) bf16, ids (4096,)", pair(
        meta(8, 32, 4096, 128), meta(8, 8, 4096, 128), ids(4096))
    yield "q and k interleaved fp32, HF memory", pair(
        meta(2, 512, 32, 128, dtype=fp32).transpose(1, 2),
        meta(2, 512, 8, 128, dtype=fp32).transpose(1, 2), ids(2, 1, 512), "interleaved")
    yield "table kernel (1, 32, 2048, 128) bf16, float32 tables", tables(
        meta(1, 32, 2048, 128), fp32, "half")


def variants():
    """(name, launch) for every kernel variant, small shapes: each must compile."""
    for x_type in (torch.bfloat16, torch.float16, torch.float32):
        for layout in ("half", "interleaved"):
            x = meta(2, 3, 7, 64, dtype=x_type)
            label = f"x={str(x_type)[6:]} {layout}"
            yield f"positions kernel {label}, int32 ids", single(
                x, torch.empty(7, dtype=torch.int32, device=META), layout)
            yield f"positions kernel {label}, float ids, backward", single(
                x, torch.empty(2, 1, 7, dtype=torch.float32, device=META), layout, negate=True)
            yield f"q and k kernel {label}, default positions", pair(
                x, meta(2, 1, 7, 64, dtype=x_type), None, layout)
            for table in (torch.float32, torch.float64):
                yield f"table kernel {label}, {str(table)[6:]} tables", tables(x, table, layout)


class _FakeDriver:
    """Just enough of Triton's CUDA driver for a launch without a GPU: the launcher records
    its arguments instead of launching."""

    def __init__(self):
        self.launches = []
        driver = self

        class Launcher:
            def __init__(self, source, metadata):
                pass

            def __call__(self, *arguments):
                driver.launches.append(arguments)

        class Utils:
            @staticmethod
            def load_binary(name, kernel, shared, device):
                return "module", "function", 32, 0, 1024

            @staticmethod
            def get_device_properties(device):
                return {"max_shared_mem": 232448, "multiprocessor_count": 132}

        self.launcher_cls, self.utils = Launcher, Utils

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 7  # a stream handle

    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)


def launch_check() -> int:
    """rope_lab's direct launch (``Launch.__call__`` after the first call) must hand Triton's
    launcher exactly what Triton's own ``kernel[grid](...)`` hands it; and how long each
    takes in Python (the launcher itself a no-op here, as the GPU's C launcher is not)."""
    import timeit

    fake = _FakeDriver()
    triton.runtime.driver.set_active(fake)
    if not _triton_rope.FAST_LAUNCH:
        print(f"the direct launch is off for Triton {triton.__version__}")
        return 0
    q = torch.randn(1, 8, 1, 64, dtype=torch.bfloat16)
    k = torch.randn(1, 2, 1, 64, dtype=torch.bfloat16)
    positions = torch.tensor([[37]])[:, None, :]
    theta = rl.inv_freq(64)
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    plans = {"one tensor": (_triton_rope.plan_positions(q, positions, theta, q_out),
                            (q, q_out, positions, theta)),
             "q and k": (_triton_rope.plan_pair(q, k, positions, theta, q_out, k_out),
                         (q, q_out, k, k_out, positions, theta))}
    failures = 0
    for name, (plan, tensors) in plans.items():
        fake.launches.clear()
        plan(*tensors)  # Triton's launch (compiles)
        plan(*tensors)  # the direct one
        by_triton, direct = fake.launches
        # The metadata for a profiler's hooks is made afresh per launch: compare its contents.
        differ = [index for index, (a, b) in enumerate(zip(by_triton, direct, strict=False))
                  if not (a is b or (index == 6 and vars(a) == vars(b))
                          or (type(a) is type(b) and not isinstance(a, torch.Tensor)
                              and a == b))]
        if len(by_triton) != len(direct) or differ:
            failures += 1
            print(f"FAILED {name}: the direct launch differs from Triton's at arguments "
                  f"{differ}: {[(by_triton[i], direct[i]) for i in differ][:3]}"[:1500])
            continue
        calls = 20000
        direct_us = min(timeit.repeat(lambda p=plan, t=tensors: p(*t), number=calls,
                                      repeat=5)) / calls
        arguments = (*tensors, *plan.ints)
        triton_us = min(timeit.repeat(
            lambda p=plan, a=arguments: p.kernel[p.grid](*a, **p.constants), number=calls,
            repeat=5)) / calls
        print(f"ok     {name}: the direct launch passes Triton's arguments "
              f"({len(direct) - 9} of them); Python per launch: Triton's "
              f"{triton_us * 1e6:.1f} µs, direct {direct_us * 1e6:.1f} µs")
    return 1 if failures else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="compile only the launch shapes whose name starts so")
    parser.add_argument("--angles-per-program", type=int,
                        help="plan with this tile instead of ANGLES_PER_PROGRAM (a check that "
                             "the spill check can fail: 4096 spills)")
    parser.add_argument("--launch-check", action="store_true",
                        help="compare rope_lab's direct launch with Triton's (a fake driver)")
    args = parser.parse_args(argv)
    if args.launch_check:
        torch.set_num_threads(1)
        return launch_check()
    if args.angles_per_program:
        _triton_rope.ANGLES_PER_PROGRAM = args.angles_per_program
    failures = 0
    done = set()

    def attempt(name, launch, arch, check_spills):
        nonlocal failures
        kernel, tensors, plan = launch
        key = (kernel.fn.__name__, tuple(str(t.dtype) for t in tensors), plan.ints,
               tuple(sorted(plan.constants.items())), arch, check_spills)
        if key in done:
            return
        done.add(key)
        try:
            report = compile_as_launched(kernel, tensors, plan, arch, ptxas_log=check_spills)
            if check_spills:
                registers, spilled, stack = spills(report)
                tile = {k: plan.constants[k] for k in ("ROWS", "HEADS", "STEPS", "BLOCK_HALF")
                        if k in plan.constants}
                verdict = f"{registers} registers, {spilled} B spilled, {stack} B stack, {tile}"
                if spilled or stack:
                    failures += 1
                    print(f"SPILLS {name} sm_{arch}: {verdict}")
                    return
                name = f"{name}: {verdict}"
        except Exception as error:  # a compile error of any kind is the finding
            failures += 1
            print(f"FAILED {name} sm_{arch}: {type(error).__name__}: {str(error)[-600:]}")
        else:
            print(f"ok     {name} sm_{arch}", flush=True)

    if args.only:
        for name, launch in launch_shapes():
            if name.startswith(args.only):
                attempt(name, launch, 90, True)
        return 1 if failures or not done else 0
    for name, launch in launch_shapes():
        attempt(name, launch, 90, True)
    for index, (name, launch) in enumerate(launch_shapes()):
        if index in (0, 7):  # train and decode on Ampere too
            attempt(name, launch, 80, True)
    for name, launch in variants():
        attempt(name, launch, 90, False)
        if "x=bfloat16 half" in name:
            attempt(name, launch, 80, False)
    return 1 if failures else 0


if __name__ == "__main__":
    assert rl.__file__  # the package under test is importable
    sys.exit(main())
