"""Compile rope_lab's Triton kernels for real GPUs, without a GPU (run as a script).

Triton's interpreter (what the other tests use on CPU tensors) runs the kernels as Python
and accepts what the compiler refuses: a module-level constant that is not a
``tl.constexpr(...)`` object passed the interpreter and failed every compile on the first
H200 run. This script lowers each kernel to a cubin for the architectures below with the
ptxas that ships in the triton wheel, which needs no driver. It prints one line per variant
and exits 1 if any fails. Run by tests/test_triton.py in a fresh process (the interpreter
must be off, and it is chosen when the kernels are defined).
"""

from __future__ import annotations

import itertools
import os
import sys

os.environ.pop("TRITON_INTERPRET", None)

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from rope_lab import _triton_rope  # noqa: E402

# Hopper (H100/H200) for every variant, Ampere (A100, consumer cards) for one of each kernel:
# the two code generators differ, and each variant costs about a second to compile.
ARCHITECTURES = (90, 80)
X_TYPES = ("bf16", "fp32")


def _compile(kernel, pointers: dict, constants: dict, arch: int) -> None:
    signature = {}
    for name in kernel.arg_names:
        if name in constants:
            signature[name] = "constexpr"
        else:
            signature[name] = pointers.get(name, "i64")
    source = ASTSource(fn=kernel, signature=signature,
                       constexprs={(kernel.arg_names.index(k),): v for k, v in constants.items()})
    triton.compile(source, target=GPUTarget("cuda", arch, 32))


def variants():
    for arch, x_type, interleaved in itertools.product(ARCHITECTURES, X_TYPES, (False, True)):
        if arch != ARCHITECTURES[0] and (x_type, interleaved) != ("bf16", False):
            continue
        for position_type, from_index, negate in (("i64", False, False), ("i32", False, True),
                                                  ("fp32", False, False), ("i64", True, False)):
            yield (f"positions kernel sm_{arch} x={x_type} positions={position_type} "
                   f"interleaved={interleaved} from_index={from_index} negate={negate}",
                   _triton_rope._rope_positions_kernel,
                   {"x_ptr": f"*{x_type}", "out_ptr": f"*{x_type}", "pos_ptr": f"*{position_type}",
                    "theta_ptr": "*fp32"},
                   {"HALF": 32, "BLOCK_HALF": 32, "BLOCK_ROWS": 16, "INTERLEAVED": interleaved,
                    "FROM_INDEX": from_index, "NEGATE": negate}, arch)
        for table in ("fp32", "fp64"):
            yield (f"table kernel sm_{arch} x={x_type} cos/sin={table} interleaved={interleaved}",
                   _triton_rope._rope_kernel,
                   {"x_ptr": f"*{x_type}", "out_ptr": f"*{x_type}", "cos_ptr": f"*{table}",
                    "sin_ptr": f"*{table}"},
                   {"HALF": 40, "BLOCK_HALF": 64, "BLOCK_ROWS": 64, "INTERLEAVED": interleaved},
                   arch)


def main() -> int:
    failures = 0
    for name, kernel, pointers, constants, arch in variants():
        try:
            _compile(kernel, pointers, constants, arch)
        except Exception as error:  # a compile error of any kind is the finding
            failures += 1
            print(f"FAILED {name}: {type(error).__name__}: {str(error)[-600:]}")
        else:
            print(f"ok     {name}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
