"""How a grading runs: stopped on time, nothing leaked, nothing aborted, nothing slow to import.

On Linux each grading runs in a forked child (``grading.isolation() == "fork"``); elsewhere,
and in these tests when ``grading.ISOLATION = "thread"``, it runs in this process on a
thread. The tests hold each promise in the mode that makes it.
"""

from __future__ import annotations

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
from rope_lab.exercises import grading

FORK = pytest.mark.skipif(grading.isolation() != "fork",
                          reason="graders run in a forked child on Linux only")


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
def short_limit(monkeypatch):
    monkeypatch.setattr(grading, "TIME_LIMIT_S", 1.0)


# --- a loop that holds the GIL ----------------------------------------------------------------


@pytest.mark.slow
@FORK
def test_a_loop_that_holds_the_gil_is_stopped(capsys, short_limit):
    # sum over an endless iterator runs in C and never lets another thread in: no thread,
    # no signal handler, no Jupyter interrupt can stop it; killing the child does
    verdict, out, err, elapsed = _grade(capsys, exercises.check_scaled_dot,
                                        lambda q, k: sum(itertools.repeat(1)))
    assert not verdict and elapsed < 4, (out, elapsed)
    assert "had not finished after 1 s" in out and "busy machine" in out
    assert "(it was running on inputs (tensor of shape (8,), tensor of shape (8,)))" in out
    assert "may still be running" not in out  # it was stopped
    assert out.count("\n") == 1 and not err


@pytest.mark.slow
def test_in_this_process_the_timeout_says_it_could_not_stop_it(capsys, short_limit,
                                                                 monkeypatch):
    monkeypatch.setattr(grading, "ISOLATION", "thread")
    release = threading.Event()
    try:
        verdict, out, _, elapsed = _grade(capsys, exercises.check_scaled_dot,
                                          lambda q, k: release.wait(30))
    finally:
        release.set()
    assert not verdict and elapsed < 3
    assert "had not finished after 1 s" in out and "It may still be running" in out


@pytest.mark.slow
@FORK
def test_the_timeout_stops_the_child_and_leaves_no_process(capsys, short_limit, monkeypatch):
    children = []
    fork = os.fork

    def recording_fork():
        pid = fork()
        if pid:
            children.append(pid)
        return pid

    monkeypatch.setattr(grading.os, "fork", recording_fork)
    verdict, *_ = _grade(capsys, exercises.check_scaled_dot, lambda q, k: time.sleep(60))
    assert not verdict and len(children) == 1
    with pytest.raises(ChildProcessError):  # killed and reaped: no zombie left
        os.waitpid(children[0], os.WNOHANG)


@FORK
def test_an_interrupt_while_waiting_stops_the_child(monkeypatch):
    children = []
    fork = os.fork

    def recording_fork():
        pid = fork()
        if pid:
            children.append(pid)
            # the interrupt comes while the parent waits for this child: timed from the fork,
            # not from the call (on a loaded machine the fork can come later than 0.5 s)
            threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        return pid

    monkeypatch.setattr(grading.os, "fork", recording_fork)
    # Python's own SIGINT handler, as in a notebook kernel: a process started in the
    # background of a non-interactive shell inherits SIGINT ignored and never gets one
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    start = time.perf_counter()
    try:
        with pytest.raises(KeyboardInterrupt):  # the interrupt reaches the notebook, as always
            exercises.check_scaled_dot(lambda q, k: time.sleep(60))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.perf_counter() - start < 5
    with pytest.raises(ChildProcessError):
        os.waitpid(children[0], os.WNOHANG)


@FORK
def test_a_child_that_dies_gets_a_verdict(capsys):
    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, lambda q, k: os._exit(3))
    assert not verdict and "ended without an answer" in out and "exit status 3" in out
    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot,
                              lambda q, k: os.kill(os.getpid(), signal.SIGKILL))
    assert not verdict and "killed by SIGKILL" in out


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
@pytest.mark.parametrize("isolation", ["fork", "thread"])
def test_the_learners_own_import_does_not_count(isolation, slow_module, capsys, short_limit,
                                                 monkeypatch):
    monkeypatch.setattr(grading, "ISOLATION", isolation)
    namespace = {}
    exec(textwrap.dedent(f"""
        def scaled_dot(q, k):
            import {slow_module}
            return (q * k).sum(-1) / q.shape[-1] ** 0.5 * {slow_module}.VALUE / 2
    """), namespace)
    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, namespace["scaled_dot"])
    assert verdict, out


def test_an_exercise_preloads_what_its_answers_may_import():
    pytest.importorskip("transformers")
    assert exercises.check_config_inv_freq.preload == ("transformers",)
    grading._preload(None, exercises.check_config_inv_freq.preload)
    assert "transformers" in sys.modules


@pytest.mark.slow
@FORK
def test_what_a_child_imported_is_imported_here_for_the_next(slow_module, capsys):
    namespace = {"name": slow_module}
    exec(textwrap.dedent("""
        import importlib

        def scaled_dot(q, k):  # an import the code scan cannot see
            importlib.import_module(name)
            return (q * k).sum(-1) / q.shape[-1] ** 0.5
    """), namespace)
    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, namespace["scaled_dot"])
    assert verdict, out
    assert slow_module in sys.modules


# --- OpenMP, CUDA, output ---------------------------------------------------------------------


@pytest.mark.slow
@FORK
def test_parallel_torch_in_the_child_does_not_hang(capsys):
    # GNU OpenMP hangs in a forked child whose parent had started its thread pool, unless the
    # child stays single-threaded: start the pool here, then grade big parallel work there
    x = torch.randn(1500, 1500)
    for _ in range(2):
        float((x @ x).sum() + (x * 2 + 1).exp().sum())

    def heavy(q, k):
        y = torch.randn(1200, 1200)
        float((y @ y).sum() + (y * 2 + 1).exp().sum() + y.cumsum(0).sum())
        return _scaled_dot(q, k)

    for _ in range(3):
        verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, heavy)
        assert verdict, out
    assert torch.get_num_threads() >= 1  # the parent's own setting is untouched


@FORK
def test_a_lock_held_by_a_parent_thread_at_the_fork_does_not_hang_the_child(capsys,
                                                                           monkeypatch):
    # tqdm's monitor thread (started by any progress bar, in a notebook or a test session)
    # takes tqdm's lock every 10 s; a child forked in that moment inherits it locked, with no
    # thread left to release it. 05.3's grader calls decay.minimum_base, which must not touch
    # tqdm for a search too short to show a bar.
    from tqdm.auto import tqdm

    monkeypatch.setattr(grading, "TIME_LIMIT_S", 2.0)
    held, release = threading.Event(), threading.Event()

    def monitor():
        with tqdm.get_lock():
            held.set()
            release.wait(30)

    thread = threading.Thread(target=monitor, daemon=True)
    thread.start()
    held.wait(5)
    try:
        verdict, out, *_ = _grade(capsys, exercises.check_minimum_base, rl.decay.minimum_base,
                                  seed=3)
    finally:
        release.set()
        thread.join()
    assert verdict, out


def test_isolation_falls_back_where_a_fork_is_unsafe(monkeypatch):
    monkeypatch.setattr(grading, "ISOLATION", "auto")
    monkeypatch.setattr(grading.torch.cuda, "is_initialized", lambda: True)
    assert grading.isolation() == "thread"  # a forked child could not use the GPU
    monkeypatch.setattr(grading.torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(grading.sys, "platform", "darwin")
    assert grading.isolation() == "thread"
    monkeypatch.setattr(grading, "ISOLATION", "sometimes")
    with pytest.raises(ValueError, match="grading.ISOLATION must be one of"):
        grading.isolation()


@pytest.mark.parametrize("isolation", ["fork", "thread"])
def test_what_the_function_prints_is_shown_before_the_verdict(isolation, capsys,
                                                               monkeypatch):
    monkeypatch.setattr(grading, "ISOLATION", isolation)

    def chatty(q, k):
        print("debug", tuple(q.shape))
        return _scaled_dot(q, k)

    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, chatty)
    lines = out.splitlines()
    assert verdict and lines[0] == "debug (8,)" and lines[-1].startswith("✔ Exercise 00.1")


# --- what a learner changes does not outlive the grading --------------------------------------


def _meddler(q, k):
    torch.equal = lambda a, b: True
    torch.Tensor.__eq__ = lambda self, other: True
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(False)
    torch.manual_seed(12345)
    torch.randn(3)
    rl.checks = None
    rl.rotate_half = None
    return _scaled_dot(q.float(), k.float())


@pytest.mark.parametrize("isolation", ["fork", "thread"])
def test_what_a_learner_patches_is_put_back(isolation, capsys, monkeypatch):
    monkeypatch.setattr(grading, "ISOLATION", isolation)
    saved = (torch.equal, torch.Tensor.__eq__, rl.checks, rl.rotate_half)
    torch.manual_seed(0)
    rng = torch.get_rng_state()
    try:
        verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, _meddler)
        assert verdict, out
        assert (torch.equal, torch.Tensor.__eq__, rl.checks, rl.rotate_half) == saved
        assert torch.get_default_dtype() == torch.float32 and torch.is_grad_enabled()
        assert torch.equal(torch.get_rng_state(), rng)
    finally:  # never leave the test session patched, whatever failed
        torch.equal, torch.Tensor.__eq__, rl.checks, rl.rotate_half = saved
        torch.set_default_dtype(torch.float32)
        torch.set_grad_enabled(True)


def test_in_this_process_the_worker_is_joined(capsys, monkeypatch):
    monkeypatch.setattr(grading, "ISOLATION", "thread")
    verdict, *_ = _grade(capsys, exercises.check_scaled_dot, _scaled_dot)
    assert verdict
    assert not [t for t in threading.enumerate() if t.name.startswith("rope_lab exercise")]


# --- no abort at exit ------------------------------------------------------------------------

_GRADE_AND_EXIT = """
import torch
from rope_lab import exercises
from rope_lab.exercises import grading
grading.ISOLATION = {isolation!r}

def non_positive_normalizer():
    q = torch.zeros(5, 4, dtype=torch.float64)
    q[:, 1] = q[:, 3] = -30.0
    return q, q.clone()

assert exercises.check_non_positive_normalizer(non_positive_normalizer)
"""


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ["fork", "thread"])
def test_fresh_processes_exit_cleanly_after_a_passing_grade(isolation):
    # issue 28: 7 of 47 fresh processes aborted at exit ("terminate called without an active
    # exception", status 134) right after a passing 07.2, its worker thread never joined
    root = str(Path(grading.__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    script = _GRADE_AND_EXIT.format(isolation=isolation)
    runs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        assert "✔ Exercise 07.2" in out and "terminate called" not in err


@pytest.mark.slow
@FORK
def test_a_timeout_in_the_graders_own_work_does_not_blame_the_function(capsys, short_limit,
                                                                        monkeypatch):
    monkeypatch.setattr(exercises.start_here, "_scaled_dot_reference",
                        lambda q, k: time.sleep(60))  # a reference that takes forever
    verdict, out, *_ = _grade(capsys, exercises.check_scaled_dot, _scaled_dot)
    assert not verdict and "every call to it had returned" in out and "busy" in out


# --- a GPU (skipped without one) --------------------------------------------------------------

_CUDA_LEARNER = """
import torch
from rope_lab import exercises
from rope_lab.exercises import grading
{setup}
def scaled_dot(q, k):
    q, k = q.cuda(), k.cuda()
    return ((q * k).sum(-1) / q.shape[-1] ** 0.5).cpu()
print(grading.isolation())
assert exercises.check_scaled_dot(scaled_dot)
"""


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("setup", "isolation"), [("", "fork"),
                                                  ("torch.zeros(1, device='cuda')", "thread")])
def test_a_learner_may_use_the_gpu(setup, isolation):
    # a child of a process that has not started CUDA may start it; once the notebook has,
    # a child could not, so the grading runs in this process
    root = str(Path(grading.__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-c", _CUDA_LEARNER.format(setup=setup)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[0] == isolation and "✔ Exercise 00.1" in run.stdout
