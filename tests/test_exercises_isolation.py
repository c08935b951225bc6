"""How a grading runs: in a spawned worker process, stopped on time with everything it
started, nothing leaked into the notebook, nothing aborted at exit, nothing slow to import.

Every grading runs in :mod:`rope_lab.exercises.worker` on every platform (there is no
in-process mode left to test). The learner's functions here are defined in this test module
or in ``exec``'d code, so they reach the worker by value, as a notebook's functions do.
"""

from __future__ import annotations

import functools
import itertools
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch

import rope_lab as rl
from rope_lab import exercises
from rope_lab.exercises import grading, worker

ROOT = Path(grading.__file__).resolve().parents[2]
POSIX = pytest.mark.skipif(os.name != "posix", reason="process groups and signals: POSIX")
LINUX = pytest.mark.skipif(not worker.memory_limited(),
                           reason="the memory limit (RLIMIT_DATA): Linux, no NVIDIA GPU")


def _scaled_dot(q, k):
    return (q * k).sum(-1) / q.shape[-1] ** 0.5


def _grade(capsys, grader, learner, **kwargs):
    capsys.readouterr()
    start = time.perf_counter()
    verdict = grader(learner, **kwargs)
    elapsed = time.perf_counter() - start
    captured = capsys.readouterr()
    return verdict, captured.out, captured.err, elapsed


@pytest.fixture
def ready(grader_worker):
    return grader_worker


@pytest.fixture
def short_limit(monkeypatch, ready):
    monkeypatch.setattr(grading, "TIME_LIMIT_S", 1.0)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, killed and waiting to be reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state != "Z"


def _gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# --- stopped on time: loops with and without the GIL ------------------------------------------


def _stuck_torch_loop(q, k):
    x = torch.randn(256, 256)
    while True:
        x = (x @ x).tanh()


@pytest.mark.slow
@pytest.mark.parametrize("learner", [lambda q, k: sum(itertools.repeat(1)), _stuck_torch_loop,
                                     lambda q, k: time.sleep(60)],
                         ids=["holds the GIL", "torch loop", "sleeps"])
def test_a_function_that_never_returns_is_stopped_on_time(learner, capsys, short_limit):
    # sum over an endless iterator runs in C and never lets another thread in: no thread,
    # no signal handler, no Jupyter interrupt can stop it; killing its process does
    before = grading._worker.pid
    verdict, out, err, elapsed = _grade(capsys, exercises.check_scaled_dot, learner)
    assert not verdict and elapsed < 1.0 + 2.0, (out, elapsed)
    assert "had not finished after 1 s" in out and "busy machine" in out
    assert "(it was running on inputs (tensor of shape (8,), tensor of shape (8,)))" in out
    assert out.count("\n") == 1 and not err
    assert _gone(before)  # stopped, not left running


@pytest.mark.slow
def test_a_notebook_exits_cleanly_after_a_stuck_torch_loop():
    # issue 35: in the thread mode a torch loop kept running in the notebook's process and
    # the interpreter aborted at exit (status 134, "terminate called without an active
    # exception"); issue 28: the same after a passing 07.2
    script = textwrap.dedent("""
        import torch
        from rope_lab import exercises
        from rope_lab.exercises import grading, worker
        grading.TIME_LIMIT_S = 1.0

        def stuck(q, k):
            x = torch.randn(256, 256)
            while True:
                x = (x @ x).tanh()

        def non_positive_normalizer():
            q = torch.zeros(5, 4, dtype=torch.float64)
            q[:, 1] = q[:, 3] = -30.0
            return q, q.clone()

        assert not exercises.check_scaled_dot(stuck)
        assert exercises.check_non_positive_normalizer(non_positive_normalizer)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                        os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "✔ Exercise 07.2" in run.stdout and "terminate called" not in run.stderr


@pytest.mark.slow  # stops the worker: the next grading waits for a fresh one
def test_a_timeout_in_the_graders_own_work_does_not_blame_the_function(capsys, short_limit):
    def check(scaled_dot, generator):  # a grader whose reference takes forever
        q = torch.randn(4, generator=generator)
        scaled_dot(q, q)
        time.sleep(60)

    slow_grader = grading.grader("99.1", "a slow reference", answer="scaled_dot")(check)
    verdict, out, *_ = _grade(capsys, slow_grader, _scaled_dot)
    assert not verdict and "every call to it had returned" in out and "busy" in out


# --- os._exit, sys.exit, signals, grandchildren -----------------------------------------------


@pytest.mark.slow  # stops the worker: the next grading waits for a fresh one
def test_a_worker_that_dies_gets_a_verdict(capsys, ready):
    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, lambda q, k: os._exit(3))
    assert not verdict and "ended without an answer" in out and "exit status 3" in out
    assert "on inputs (tensor of shape (8,)" in out
    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, lambda q, k: sys.exit(3))
    assert not verdict and "your function raised SystemExit: 3" in out  # a crash, not a death


@POSIX
@pytest.mark.slow  # the worker dies: the next grading waits for a fresh one
def test_a_worker_killed_by_a_signal_gets_a_verdict(capsys, ready):
    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot,
                              lambda q, k: os.kill(os.getpid(), signal.SIGKILL))
    assert not verdict and "killed by SIGKILL" in out


def _fork_then(exit_status, pid_file):
    def learner(q, k):
        pid = os.fork()
        if pid == 0:  # the grandchild: outlive the grading, if it can
            time.sleep(60)
            os._exit(0)
        Path(pid_file).write_text(str(pid))
        if exit_status is not None:
            os._exit(exit_status)
        return _scaled_dot(q, k)
    return learner


@POSIX
@pytest.mark.slow
@pytest.mark.parametrize("exit_status", [3, None], ids=["then os._exit(3)", "then returns"])
def test_a_grandchild_does_not_outlive_the_grading(exit_status, tmp_path, capsys,
                                                     monkeypatch, ready):
    # issue 35: a forked child that forked again and called os._exit(3) was reported as
    # "had not finished after 10 s" (the grandchild held the pipe open), and the grandchild
    # kept running
    monkeypatch.setattr(grading, "TIME_LIMIT_S", 10.0)
    pid_file = tmp_path / "grandchild"
    verdict, out, _, elapsed = _grade(capsys, exercises.check_scaled_dot,
                                      _fork_then(exit_status, pid_file))
    grandchild = int(pid_file.read_text())
    assert elapsed < 5, out
    if exit_status is None:
        assert verdict, out  # a right answer, even with a process left behind
    else:
        assert not verdict and "exit status 3" in out and "had not finished" not in out
        assert "the processes it had started were stopped too" in out
    assert _gone(grandchild), "the learner's grandchild outlived the grading"


_ORPHAN = """
import itertools, os, sys, threading, time
from pathlib import Path
from rope_lab import exercises
from rope_lab.exercises import grading, worker
grading.TIME_LIMIT_S = 60.0
worker.ORPHAN_MARGIN_S = 3.0 - worker.SETUP_LIMIT_S - 60.0  # the job ends itself after 3 s
flag = sys.argv[1]

def loops(q, k):
    Path(flag).write_text(str(os.getpid()))
    sum(itertools.repeat(1))  # the GIL held in C

# started from a thread: no PR_SET_PDEATHSIG, as on macOS and Windows
threading.Thread(target=exercises.check_scaled_dot, args=(loops,), daemon=True).start()
time.sleep(300)
"""


@POSIX
@pytest.mark.slow
def test_a_worker_left_running_by_a_dead_notebook_ends_itself(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                        os.environ.get("PYTHONPATH", "")])}
    flag = tmp_path / "running"
    notebook = subprocess.Popen([sys.executable, "-c", _ORPHAN, str(flag)], env=env)
    deadline = time.monotonic() + worker.SETUP_LIMIT_S
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    pid = int(flag.read_text())
    notebook.kill()  # no atexit, nothing stops the worker
    notebook.wait()
    time.sleep(1.0)
    assert _alive(pid)  # still in the learner's loop, its notebook gone
    assert _gone(pid, within=10.0)  # its watchdog ends it, 3 s after the job started


# --- memory -----------------------------------------------------------------------------------


@LINUX
@pytest.mark.slow  # retires the worker: the next grading waits for a fresh one
@pytest.mark.parametrize("learner", [lambda q, k: torch.ones(2**28) @ torch.ones(2**28),
                                     lambda q, k: bytearray(2**30)],
                         ids=["torch", "python"])
def test_a_huge_allocation_fails_in_the_learners_call(learner, capsys, monkeypatch, ready):
    monkeypatch.setattr(grading, "MEMORY_LIMIT_BYTES", 256 * 1024**2)
    verdict, out, _, elapsed = _grade(capsys, exercises.check_scaled_dot, learner)
    assert not verdict and elapsed < 5, out
    assert "your function ran out of memory (the grader allows 0.268 GB per answer)" in out
    # and the worker is replaced: the next grading finds memory as before
    assert exercises.check_scaled_dot(_scaled_dot)


# --- the notebook waits, and can interrupt --------------------------------------------------


@POSIX
@pytest.mark.slow
def test_an_interrupt_while_waiting_stops_the_worker(ready):
    pid = ready.pid
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    # Python's own SIGINT handler, as in a notebook kernel: a process started in the
    # background of a non-interactive shell inherits SIGINT ignored and never gets one
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    start = time.perf_counter()
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):  # the interrupt reaches the notebook, as always
            exercises.check_scaled_dot(lambda q, k: time.sleep(60))
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert time.perf_counter() - start < 5
    assert _gone(pid)


# --- one worker, reused; a fresh one when needed --------------------------------------------


def _print_pid(q, k):
    print("worker", os.getpid())
    return _scaled_dot(q, k)


def _worker_pid(out: str) -> int:
    return int(next(line for line in out.splitlines() if line.startswith("worker")).split()[1])


def test_one_worker_serves_grading_after_grading(capsys, ready):
    pids = {_worker_pid(_grade(capsys, exercises.check_scaled_dot, _print_pid)[1])
            for _ in range(3)}
    pids.add(_worker_pid(_grade(capsys, exercises.check_scaled_dot,
                                lambda q, k: _print_pid(q, k) * 2)[1]))  # a wrong answer
    assert pids == {ready.pid} and ready.pid != os.getpid()


@pytest.mark.slow
def test_after_a_timeout_a_fresh_worker_is_starting(capsys, short_limit):
    old = grading._worker.pid
    assert not _grade(capsys, exercises.check_scaled_dot, lambda q, k: time.sleep(60))[0]
    assert grading._worker.pid not in (None, old)  # started in the background already
    assert _worker_pid(_grade(capsys, exercises.check_scaled_dot, _print_pid)[1]) != old


@pytest.mark.slow  # stops the worker: the next grading waits for a fresh one
def test_a_learner_thread_left_running_retires_the_worker(capsys, ready):
    def leaves_a_thread(q, k):
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        return _print_pid(q, k)

    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, leaves_a_thread)
    assert verdict, out
    assert _gone(_worker_pid(out))


# --- what the learner's function is, and how it gets there ----------------------------------


class _CallableAnswer:
    def __init__(self, scale):
        self.scale = scale

    def __call__(self, q, k):
        return (q * k).sum(-1) * self.scale


SCALE_POWER = 0.5


def _scaled(q, k, *, power):
    return (q * k).sum(-1) / q.shape[-1] ** power


@pytest.mark.parametrize("learner", [
    lambda q, k: _scaled(q, k, power=SCALE_POWER),   # a lambda using a helper and a global
    functools.partial(_scaled, power=0.5),
    rl.exercises.start_here._scaled_dot_reference,   # a package function, sent by name
], ids=["lambda", "partial", "by name"])
def test_what_a_learner_may_hand_in_reaches_the_worker(learner, capsys, ready):
    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, learner)
    assert verdict, out


def test_a_callable_object_is_graded(capsys, ready):
    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, _CallableAnswer(0.125))
    assert not verdict and "expected" in out  # graded: wrong for d ≠ 64, not a crash


def test_a_notebooks_function_with_its_helpers_and_globals_is_graded(capsys, ready):
    # a notebook defines functions in __main__, which no other process can import: they
    # travel by value, with the helpers, constants and imports they use
    notebook = {"__name__": "__main__"}
    exec(textwrap.dedent("""
        import math
        import torch

        SQRT = math.sqrt

        def dot(q, k):
            return (q * k).sum(-1)

        def scaled_dot(q, k):
            return dot(q, k) / SQRT(q.shape[-1])
    """), notebook)
    assert notebook["scaled_dot"].__module__ == "__main__"
    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, notebook["scaled_dot"])
    assert verdict, out
    notebook["SQRT"] = lambda n: n  # the notebook changed a global: graded as it is now
    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, notebook["scaled_dot"])
    assert not verdict and "you divided by d" in out


_LOCK = threading.Lock()


def test_a_function_that_cannot_be_sent_gets_a_verdict(capsys):
    def uses_a_lock(q, k):
        with _LOCK:
            return _scaled_dot(q, k)

    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, uses_a_lock)
    assert not verdict and "could not send your function to the grader's process" in out
    assert "lock" in out


# --- the clock counts the function, not imports ---------------------------------------------


@pytest.fixture
def slow_module(tmp_path, monkeypatch):
    """A module that takes 1.5 s to import, like transformers on a loaded machine."""
    name = f"rope_lab_slow_{os.getpid()}_{time.monotonic_ns()}"
    (tmp_path / f"{name}.py").write_text("import time\ntime.sleep(1.5)\nVALUE = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


@pytest.mark.slow
def test_the_learners_own_import_does_not_count(slow_module, capsys, short_limit):
    namespace = {}
    exec(textwrap.dedent(f"""
        def scaled_dot(q, k):
            import {slow_module}
            return (q * k).sum(-1) / q.shape[-1] ** 0.5 * {slow_module}.VALUE / 2
    """), namespace)
    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, namespace["scaled_dot"])
    assert verdict, out


def test_an_exercise_preloads_what_its_answers_may_import():
    assert exercises.check_config_inv_freq.preload == ("transformers",)
    assert "transformers" in grading._preload(None, exercises.check_config_inv_freq.preload)


@pytest.mark.slow
def test_what_a_grading_imported_is_imported_before_the_next_workers_clock(slow_module, capsys,
                                                                           short_limit):
    namespace = {"name": slow_module}
    exec(textwrap.dedent("""
        import importlib

        def scaled_dot(q, k):  # an import the code scan cannot see: counted this once
            importlib.import_module(name)
            return (q * k).sum(-1) / q.shape[-1] ** 0.5
    """), namespace)
    grading.TIME_LIMIT_S = 10.0
    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, namespace["scaled_dot"])
    assert verdict, out
    assert slow_module in grading._imported_by_gradings
    assert slow_module in grading._preload(None, ())
    grading._worker.stop(restart=True)  # a fresh worker: it imports the module before the clock
    grading.TIME_LIMIT_S = 1.0
    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, namespace["scaled_dot"])
    assert verdict, out


# --- output ------------------------------------------------------------------------------------


def test_what_the_function_prints_is_shown_before_the_verdict(capsys, ready):
    def chatty(q, k):
        print("debug", tuple(q.shape))
        return _scaled_dot(q, k)

    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, chatty)
    lines = out.splitlines()
    assert verdict and lines[0] == "debug (8,)" and lines[-1].startswith("✔ Exercise 00.1")


def test_the_verdict_speaks_the_notebooks_language(capsys, ready, chinese):
    # the worker speaks the language the notebook chose
    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, lambda q, k: None)
    assert not verdict and "练习 00.1" in out and "return" in out
    assert "your function returned" not in out


# --- what a learner changes does not outlive the grading --------------------------------------


def _meddler(q, k):
    print("worker", os.getpid())
    torch.equal = lambda a, b: True
    torch.Tensor.__eq__ = lambda self, other: True
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(False)
    torch.manual_seed(12345)
    rl.checks = None
    rl.rotate_half = None
    return _scaled_dot(q.float(), k.float())


def _probe(q, k):
    """Right only where nothing of the meddler's is left."""
    print("worker", os.getpid())
    assert not torch.equal(torch.zeros(1), torch.ones(1))
    assert torch.get_default_dtype() == torch.float32 and torch.is_grad_enabled()
    assert rl.checks is not None and rl.rotate_half is not None
    return _scaled_dot(q, k)


def test_what_a_learner_patches_is_put_back(capsys, ready):
    saved = (torch.equal, torch.Tensor.__eq__, rl.checks, rl.rotate_half)
    torch.manual_seed(0)
    rng = torch.get_rng_state()
    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, _meddler)
    assert verdict, out
    first = _worker_pid(out)
    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, _probe)
    assert verdict, out
    assert _worker_pid(out) == first  # the same worker, put back in order
    # and the notebook never saw any of it
    assert (torch.equal, torch.Tensor.__eq__, rl.checks, rl.rotate_half) == saved
    assert torch.get_default_dtype() == torch.float32 and torch.is_grad_enabled()
    assert torch.equal(torch.get_rng_state(), rng)


# --- a GPU (skipped without one) --------------------------------------------------------------

_CUDA_LEARNER = """
import torch
from rope_lab import exercises
{setup}
def scaled_dot(q, k):
    q, k = q.cuda(), k.cuda()
    return ((q * k).sum(-1) / q.shape[-1] ** 0.5).cpu()
assert exercises.check_scaled_dot(scaled_dot)
"""


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("setup", ["", "torch.zeros(1, device='cuda')"],
                         ids=["CUDA not started here", "CUDA started in the notebook"])
def test_a_learner_may_use_the_gpu(setup):
    # the worker is a fresh process: it may start CUDA whatever the notebook has done, and
    # its memory limit leaves CUDA's own mappings alone
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                        os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-c", _CUDA_LEARNER.format(setup=setup)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "✔ Exercise 00.1" in run.stdout
