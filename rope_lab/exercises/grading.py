"""What every grader shares: calling the learner safely, reading its answer, the verdict.

A grader (``check_*``) is a plain function that builds its test cases, calls the learner's
function through a :class:`Learner` and raises :class:`Wrong` with one line of feedback at
the first mistake. The :func:`grader` decorator turns that into a printed ✔/✘ verdict and a
:class:`Verdict` (true when passed), so no mistake of the learner's can end in a traceback
from the grader:

- on Linux the whole grading runs in a forked child process (:func:`isolation`): a function
  that never returns, even one that holds the GIL in C code (``sum(itertools.repeat(1))``),
  is stopped at the time limit (:data:`TIME_LIMIT_S`, all calls together), and whatever the
  function changes (``torch.equal``, the default dtype, the notebook's variables) ends with
  the child; what it prints is shown in the notebook. Elsewhere (macOS, Windows, or once the
  notebook has started CUDA) it runs in this process on a thread: the grader saves and puts
  back what a function can change, but cannot stop one that never returns;
- modules the exercise or the learner's code imports are imported before the clock starts;
- the learner gets deep copies of the inputs, and the reference is computed after it returns;
- each grader adds random cases drawn from a fresh seed (``os.urandom``, never torch's global
  generator, so the notebook's own seeded numbers do not move); a failure names the seed;
- a package function the exercise text forbids raises while the learner's code runs.

The graders are a learning aid, not an exam: they catch honest mistakes and name them. Code
that sets out to fool them (reading the grader's variables, patching what it calls) runs with
the grader's own rights and can; nothing here pretends otherwise.
"""

from __future__ import annotations

import contextlib
import copy
import dis
import functools
import importlib
import importlib.util
import inspect
import io
import json
import math
import numbers
import os
import queue
import selectors
import signal
import sys
import threading
import time
import traceback
import types
import warnings

import torch

from rope_lab.i18n import N_, _
from rope_lab.i18n.errors import translate_error

# The time one grader gives the learner's function in total, all its calls together.
TIME_LIMIT_S = 10.0

# exercise id ("05.1") → passed? Titles and the last feedback are kept for summary().
_results: dict[str, bool] = {}
_titles: dict[str, str] = {}
_feedback: dict[str, str] = {}


class Wrong(Exception):
    """Raised inside a grader with the one line of feedback for the learner.

    ``crashed``: the learner's function raised (the feedback names the exception), as
    opposed to a wrong answer, a forbidden shortcut or a function not written yet: a grader
    that adds to a crash's feedback tests this, never the words (they are translated).
    """

    def __init__(self, message: str, *, crashed: bool = False):
        super().__init__(message)
        self.crashed = crashed


class Verdict:
    """What a grader returns: true when the exercise passed.

    Its line is already printed, so a notebook cell that ends with the grader shows nothing
    more (a bare ``False`` under the ✘ line read like a second message).
    """

    __slots__ = ("exercise", "title", "passed", "feedback")

    def __init__(self, exercise: str, title: str, passed: bool, feedback: str):
        self.exercise, self.title, self.passed, self.feedback = exercise, title, passed, feedback

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return f"Verdict(exercise={self.exercise!r}, passed={self.passed})"

    def _ipython_display_(self) -> None:
        """Nothing: the verdict line above says it all."""


def report(exercise: str, title: str, failure: str | None) -> Verdict:
    """Record and print the verdict for one exercise. ``failure`` None means passed."""
    if failure is not None:
        failure = " ".join(str(failure).split())  # one line, whatever the message held
    passed = failure is None
    _results[exercise] = passed
    _titles[exercise] = title
    _feedback[exercise] = failure or ""
    if passed:
        print(_("✔ Exercise {exercise} ({title}): passed").format(exercise=exercise,
                                                                  title=_(title)))
    else:
        print(_("✘ Exercise {exercise} ({title}): {failure}").format(
            exercise=exercise, title=_(title), failure=failure))
    return Verdict(exercise, title, passed, failure or "")


def _notebook_title(number: str) -> str:
    from rope_lab.course import NOTEBOOKS

    titles = {n.filename[:2]: n.title for n in NOTEBOOKS}  # in the catalog: translations.catalogs
    if number not in titles:
        return _("notebook {number}").format(number=number)
    return _("notebook {number}: {title}").format(number=number, title=_(titles[number]))


def summary(prefix: str | int = "") -> dict[str, bool]:
    """Print which exercises passed in this session, grouped by notebook, ready to paste.

    ``prefix`` picks exercises by id: ``"05"`` or ``5`` for notebook 05, ``""`` for all.
    A failed exercise shows its last feedback line, so a post asking for help says what
    went wrong. Returns exercise id → passed.
    """
    if isinstance(prefix, int):
        prefix = f"{prefix:02d}."
    chosen = {k: v for k, v in sorted(_results.items()) if k.startswith(prefix)}
    if not chosen:
        print(_("No exercises graded yet in this session for {prefix}. Run the exercise cells "
                "(each calls a check_… function), then summary() again.").format(
                    prefix=repr(prefix)) if prefix else
              _("No exercises graded yet in this session. Run the exercise cells (each calls "
                "a check_… function), then summary() again."))
        return chosen
    from rope_lab._version import __version__

    lines = [_("rope_lab {version} exercises, torch {torch}").format(
        version=__version__, torch=torch.__version__)]
    by_notebook: dict[str, list[str]] = {}
    for exercise in chosen:
        by_notebook.setdefault(exercise.split(".")[0], []).append(exercise)
    for number, exercises in by_notebook.items():
        passed = sum(chosen[e] for e in exercises)
        lines.append(_("{notebook} ({passed} of {count} passed)").format(
            notebook=_notebook_title(number), passed=passed, count=len(exercises)))
        for exercise in exercises:
            mark = "✔" if chosen[exercise] else "✘"
            title = _titles.get(exercise, "")
            line = f"  {mark} {exercise} {_(title) if title else ''}".rstrip()
            if not chosen[exercise] and _feedback.get(exercise):
                line += _(": {feedback}").format(feedback=_feedback[exercise])
            lines.append(line)
    if len(by_notebook) > 1:
        lines.append(_("total: {passed} of {count} passed").format(passed=sum(chosen.values()),
                                                                    count=len(chosen)))
    print("\n".join(lines))
    return chosen


def fresh_seed() -> int:
    """A seed for this grading only: from the OS, so torch's global generator is untouched."""
    return int.from_bytes(os.urandom(4), "little")


# --- how a grading runs ----------------------------------------------------------------------

# "auto": in a forked child process where that is safe (Linux, CUDA not started in this
# process), else in this process on a thread. "fork" or "thread" force one of the two.
ISOLATION = "auto"
_ISOLATIONS = ("auto", "fork", "thread")


def isolation() -> str:
    """How the next grading runs: ``"fork"`` (a child process that can be stopped) or
    ``"thread"`` (this process; a function that never returns keeps running)."""
    if ISOLATION not in _ISOLATIONS:
        raise ValueError(f"grading.ISOLATION must be one of {_ISOLATIONS}, got {ISOLATION!r}")
    if ISOLATION != "auto":
        return ISOLATION if hasattr(os, "fork") else "thread"
    # macOS has fork, but its system libraries may crash in a forked child of a process with
    # threads (why Python's multiprocessing spawns there); Windows has no fork. A child of a
    # process that started CUDA cannot use CUDA, and a learner's answer may use the GPU.
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return "thread"
    if torch.cuda.is_initialized():
        return "thread"
    return "fork"


def _why_not_stopped() -> str:
    if not hasattr(os, "fork") or not sys.platform.startswith("linux"):
        return _("on {platform} the grader cannot stop it").format(platform=sys.platform)
    if torch.cuda.is_initialized():
        return _("this notebook has started CUDA, so the grader ran it in this process and "
                 "cannot stop it")
    return _("the grader ran it in this process (grading.ISOLATION) and cannot stop it")


def _timeout_message(limit: float, inputs: str | None, *, stopped: bool) -> str:
    """``inputs``: those of the call still running, or None when the time ran out between
    the learner's calls (in the grader's own work: a busy machine, not the learner's loop)."""
    again = _("raise exercises.grading.TIME_LIMIT_S (now {limit:g}) and run the cell "
              "again").format(limit=TIME_LIMIT_S)
    if inputs is None:
        return _("the grading had not finished after {limit:g} s, but your function was not "
                 "what was running (every call to it had returned): the machine is probably "
                 "busy; {again}").format(limit=limit, again=again)
    message = _("your function had not finished after {limit:g} s, all its calls together "
                "(it was running on inputs ({inputs})). A loop that never ends, work that "
                "grows too fast with the input, or a busy machine each do this; if yours is "
                "just slow, {again}").format(limit=limit, inputs=inputs, again=again)
    if not stopped:
        message += _(". It may still be running: {why}; if the notebook stays busy, restart "
                     "the kernel").format(why=_why_not_stopped())
    return message


def _imported_names(code, depth: int = 0) -> set[str]:
    """Modules a function's code imports (``import x.y``, ``from x import y``), nested code
    included."""
    names = set()
    for instruction in dis.get_instructions(code):
        if instruction.opname == "IMPORT_NAME" and isinstance(instruction.argval, str):
            names.add(instruction.argval)
    if depth < 3:
        for constant in code.co_consts:
            if isinstance(constant, types.CodeType):
                names |= _imported_names(constant, depth + 1)
    return names


def _preload(function, modules: tuple[str, ...]) -> None:
    """Import, before the clock starts, what the exercise and the learner's code import, so a
    correct answer's first ``import transformers`` (seconds) never counts against its time.

    A module that does not import is left for the learner's call to report.
    """
    wanted = set(modules)
    code = getattr(function, "__code__", None)
    if isinstance(code, types.CodeType):
        wanted |= _imported_names(code)
    for name in sorted(wanted):
        if name in sys.modules or name.startswith("."):
            continue
        try:
            if importlib.util.find_spec(name.split(".")[0]) is not None:
                importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the learner's own call reports it, with its line
            continue


class _Capture(io.TextIOBase):
    """A child's stdout or stderr, kept (up to a limit) to print in the notebook."""

    LIMIT = 20_000

    def __init__(self):
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        text = str(text)
        room = self.LIMIT - self.size
        self.parts.append(text[:max(room, 0)])
        self.size += min(len(text), max(room, 0))
        self.dropped += max(len(text) - max(room, 0), 0)
        return len(text)

    def text(self) -> str:
        more = ("\n" + _("… ({count} more characters not shown)").format(count=self.dropped)
                + "\n") if self.dropped else ""
        return "".join(self.parts) + more


def _send(fd: int, message: dict) -> None:
    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def _child(work, read_end: int, write_end: int):
    """The forked child: run ``work``, send its result, never return (``os._exit``)."""
    status = 0
    try:
        os.close(read_end)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt is the parent's to handle
        # The parent's OpenMP pool did not survive the fork: GNU OpenMP hangs in a child that
        # starts a parallel region, so torch runs single-threaded here.
        torch.set_num_threads(1)
        out, err = _Capture(), _Capture()
        sys.stdout, sys.stderr = out, err
        before = set(sys.modules)
        result = work(lambda inputs: _send(write_end, {"running": inputs}))
        imported = sorted(name for name in set(sys.modules) - before
                          if sys.modules.get(name) is not None)
        _send(write_end, {"result": result, "out": out.text(), "err": err.text(),
                          "imported": imported})
    except BaseException:  # noqa: BLE001 - a grader's own bug: reported, never a hang
        try:
            _send(write_end, {"grader_error": traceback.format_exc(limit=-3)})
        except BaseException:  # noqa: BLE001
            status = 70
    finally:
        os._exit(status)


def _in_child(work, limit: float) -> dict:
    """Run ``work(progress)`` in a forked child, at most ``limit`` seconds.

    ``progress(inputs)`` in the child reports the inputs of the learner's call starting,
    ``progress(None)`` its return. Returns the child's last message: ``{"result": …, "out": …,
    "err": …}`` when it finished, ``{"timeout": True, "running": inputs}`` when it was
    stopped, or ``{"died": status, "running": inputs}`` when it ended without answering (a
    crash in compiled code, ``os._exit``, the out-of-memory killer). No child outlives the
    wait, also when it is interrupted; one that answered is reaped at the next grading.
    """
    _reap_finished()
    read_end, write_end = os.pipe()
    try:
        with warnings.catch_warnings():  # Python ≥ 3.12 warns about fork in a threaded process
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError as error:
        os.close(read_end)
        os.close(write_end)
        raise _NoFork(str(error)) from error
    if pid == 0:
        _child(work, read_end, write_end)
    os.close(write_end)
    deadline = time.monotonic() + limit
    running: str | None = None
    reply: dict | None = None
    pending = b""
    reaped = False
    waiting = selectors.DefaultSelector()  # not select.select: a busy kernel's fds pass 1024
    waiting.register(read_end, selectors.EVENT_READ)
    try:
        while reply is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not waiting.select(remaining):
                os.kill(pid, signal.SIGKILL)
                reply = {"timeout": True}
                break
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                message = json.loads(line)
                if "running" in message:
                    running = message["running"]
                else:
                    reply = message
        if reply is not None and "timeout" not in reply:
            # It answered and is in os._exit: tearing down a copy of this process takes tens
            # of milliseconds, which the notebook need not wait for.
            _exiting.append(pid)
        else:
            status = os.waitpid(pid, 0)[1]
            if reply is None:
                reply = {"died": status}
        reaped = True
        reply.setdefault("running", running)
        return reply
    finally:
        waiting.close()
        os.close(read_end)
        if not reaped:  # interrupted while waiting: stop the child, leave no zombie
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


class _NoFork(Exception):
    """os.fork failed: the grading runs in this process instead."""


# children that answered and were exiting when the grading returned, reaped at the next one
_exiting: list[int] = []


def _reap_finished() -> None:
    for pid in list(_exiting):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere (a SIGCHLD handler)
            done = pid
        if done:
            _exiting.remove(pid)


def _death(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        name = signal.Signals(number).name if number in signal.Signals._value2member_map_ \
            else str(number)
        why = _(" (out of memory?)") if number == signal.SIGKILL else ""
        return _("killed by {signal}{why}").format(signal=name, why=why)
    return _("exit status {status}").format(status=os.WEXITSTATUS(status))


# --- calling the learner ---------------------------------------------------------------------


class ForbiddenShortcut(RuntimeError):
    """Raised by a package function the exercise asks the learner not to call."""


def _describe_crash(error: BaseException, function) -> str:
    if isinstance(error, NotImplementedError):
        return _("not attempted yet (the function raises NotImplementedError)")
    if isinstance(error, ForbiddenShortcut):
        return str(error)
    frames = traceback.extract_tb(error.__traceback__)
    code = getattr(function, "__code__", None)
    own = [f for f in frames if code is not None and f.filename == code.co_filename]
    where = (own or frames)[-1] if frames else None
    message = (str(error).strip().splitlines() or [""])[0][:200]
    translated = translate_error(str(error).strip())  # the package's refusals, in Chinese too
    if translated is not None:
        message = f"{translated.splitlines()[0]} " + _("(in English: {message})").format(
            message=message)
    line = _(" (line {number})").format(number=where.lineno) if where is not None else ""
    return _("your function raised {error}: {message}{line}").format(
        error=type(error).__name__, message=message, line=line)


def _short(value) -> str:
    """An argument as the feedback shows it: tensors by shape, the rest by a short repr."""
    if isinstance(value, torch.Tensor):
        if value.numel() <= 4:
            return repr(value.tolist())
        return _("tensor of shape {shape}").format(shape=tuple(value.shape))
    if isinstance(value, float):
        return f"{value:g}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "…"


class _Forbidden:
    """While active, the listed package functions raise when the learner's code calls them.

    The stand-ins replace every binding a learner can reach (``rl.f``, ``rope_lab.module.f``,
    a name imported into the notebook) and raise only while the learner's function runs (on
    the thread running it), and only when called from outside the package, so the grader's
    reference and the package's own internals keep working.
    """

    def __init__(self, exercise: str, names: tuple[str, ...], function):
        self.exercise, self.names, self.function = exercise, names, function
        self.learner_thread: int | None = None
        self.used: str | None = None
        self._patches: list[tuple[dict, str, object]] = []

    def _stand_in(self, original, shown: str):
        forbidden = self

        @functools.wraps(original)
        def stand_in(*args, **kwargs):
            caller = sys._getframe(1).f_globals.get("__name__", "")
            inside_package = caller == "rope_lab" or caller.startswith("rope_lab.")
            if threading.get_ident() == forbidden.learner_thread and not inside_package:
                forbidden.used = _("exercise {exercise} asks you to write this without "
                                   "{function}").format(exercise=forbidden.exercise,
                                                        function=shown)
                raise ForbiddenShortcut(forbidden.used)
            return original(*args, **kwargs)

        return stand_in

    def __enter__(self):
        if not self.names:
            return self
        import rope_lab

        stand_ins = {}
        for name in self.names:
            module_name, attribute = name.rsplit(".", 1)
            original = getattr(sys.modules[module_name], attribute)
            shown = (f"rope_lab.{attribute}" if getattr(rope_lab, attribute, None) is original
                     else name)
            if self.function is original:  # handed the package's function itself
                self.used = _("exercise {exercise} asks you to write this without "
                              "{function}").format(exercise=self.exercise, function=shown)
            stand_ins[id(original)] = self._stand_in(original, shown)
        namespaces = [vars(m) for key, m in list(sys.modules.items())
                      if key.startswith("rope_lab") and m is not None]
        namespaces.append(getattr(self.function, "__globals__", {}))
        for namespace in namespaces:
            for key, value in list(namespace.items()):
                if id(value) in stand_ins:
                    self._patches.append((namespace, key, value))
                    namespace[key] = stand_ins[id(value)]
        return self

    def __exit__(self, *exc):
        for namespace, key, original in reversed(self._patches):
            namespace[key] = original
        self._patches.clear()
        return False


class _SessionState:
    """What a learner's function can change for the whole session, saved and put back.

    Needed only when a grading runs in this process (a forked child's changes end with it):
    functions patched into torch, ``torch.Tensor``, ``torch.nn.functional``, ``math`` or the
    package (``torch.equal = …``, ``rl.checks = …``), the default dtype and device, grad mode,
    deterministic algorithms, the thread count and the global random generators. Names the
    learner added are left alone (a lazily imported submodule is one).
    """

    def __init__(self):
        import random

        self.namespaces = [(module, dict(vars(module))) for module in self._modules()]
        self.tensor_type = dict(vars(torch.Tensor))
        self.dtype, self.grad = torch.get_default_dtype(), torch.is_grad_enabled()
        self.device = torch.get_default_device()
        self.deterministic = torch.are_deterministic_algorithms_enabled()
        self.threads = torch.get_num_threads()
        self.torch_rng = torch.get_rng_state()
        self.python_rng = random.getstate()
        numpy = sys.modules.get("numpy")
        self.numpy_rng = numpy.random.get_state() if numpy is not None else None

    @staticmethod
    def _modules():
        return [torch, torch.nn.functional, torch.linalg, torch.fft, math] + [
            module for name, module in list(sys.modules.items())
            if (name == "rope_lab" or name.startswith("rope_lab.")) and module is not None]

    def restore(self) -> None:
        import random

        for module, saved in self.namespaces:
            namespace = vars(module)
            for key, value in saved.items():
                if namespace.get(key, _MISSING) is not value:
                    namespace[key] = value
        for key in set(vars(torch.Tensor)) - set(self.tensor_type):  # a method patched in
            with contextlib.suppress(AttributeError, TypeError):
                delattr(torch.Tensor, key)
        for key, value in self.tensor_type.items():
            if vars(torch.Tensor).get(key, _MISSING) is not value:
                with contextlib.suppress(AttributeError, TypeError):
                    setattr(torch.Tensor, key, value)
        if torch.get_default_dtype() != self.dtype:
            torch.set_default_dtype(self.dtype)
        if torch.get_default_device() != self.device:
            torch.set_default_device(self.device if self.device.type != "cpu" else None)
        if torch.is_grad_enabled() != self.grad:
            torch.set_grad_enabled(self.grad)
        if torch.are_deterministic_algorithms_enabled() != self.deterministic:
            torch.use_deterministic_algorithms(self.deterministic)
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        torch.set_rng_state(self.torch_rng)
        random.setstate(self.python_rng)
        numpy = sys.modules.get("numpy")
        if self.numpy_rng is not None and numpy is not None:
            numpy.random.set_state(self.numpy_rng)


_MISSING = object()


class Learner:
    """The learner's function as a grader calls it: on copies, within the time limit.

    ``learner(*args)`` returns the answer, or raises :class:`Wrong` with the feedback for a
    crash or a forbidden shortcut. ``learner.random`` is set by the grader once its random
    cases start, so a failure there names the seed.

    In a forked child (``threaded=False``) the calls run directly and ``progress`` hears the
    inputs of each call before it starts: the parent enforces the time limit and names those
    inputs if it has to stop the child. In this process (``threaded=True``) all calls run one
    after another on one worker thread, and the grader waits for each against a single
    deadline: a function that never returns costs :data:`TIME_LIMIT_S` once and the notebook
    goes on, but that thread cannot be stopped.
    """

    def __init__(self, function, exercise: str, *, forbidden: tuple[str, ...] = (),
                 time_limit: float, threaded: bool = True, progress=None):
        self.function, self.exercise = function, exercise
        self.time_limit = time_limit
        self.deadline = time.monotonic() + time_limit
        self.random = False
        self.threaded, self.progress = threaded, progress
        self._guard = _Forbidden(exercise, forbidden, function)
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._stuck = False

    def __call__(self, *args):
        return self.map([args])[0]

    def map(self, calls: list[tuple]) -> list:
        """Answers to several calls, run one after another."""
        calls = copy.deepcopy(list(calls))  # the grader's own inputs stay untouched
        answers: list = []
        crash: list[tuple[tuple, BaseException]] = []
        if self.threaded:
            self._map_on_worker(calls, answers, crash)
        else:
            self._run(calls, answers, crash)
        if self._guard.used is not None:
            raise Wrong(self._guard.used)
        if crash:
            args, error = crash[0]
            message = _describe_crash(error, self.function)
            crashed = not isinstance(error, (NotImplementedError, ForbiddenShortcut))
            if crashed:
                message += _(", on inputs ({inputs})").format(
                    inputs=", ".join(_short(a) for a in args))
            raise Wrong(message, crashed=crashed)
        return answers

    def _run(self, calls, answers, crash):
        self._guard.learner_thread = threading.get_ident()
        try:
            for args in calls:
                if self.progress is not None:
                    self.progress(self._inputs([args], 0))
                try:
                    answers.append(self.function(*args))
                except BaseException as error:  # the learner's bug, reported, not raised
                    crash.append((args, error))
                    break
                finally:
                    if self.progress is not None:
                        self.progress(None)  # returned: time from here on is the grader's
        finally:
            self._guard.learner_thread = None

    def _map_on_worker(self, calls, answers, crash):
        done = threading.Event()
        if not self._stuck:
            if self._worker is None:
                self._worker = threading.Thread(target=self._serve, daemon=True,
                                                name=f"rope_lab exercise {self.exercise}")
                self._worker.start()
            self._jobs.put((calls, answers, crash, done))
        remaining = self.deadline - time.monotonic()
        if self._stuck or remaining <= 0 or not done.wait(remaining):
            self._stuck = True
            raise Wrong(_timeout_message(self.time_limit, self._inputs(calls, len(answers)),
                                         stopped=False))

    def _serve(self):
        while (job := self._jobs.get()) is not None:
            calls, answers, crash, done = job
            self._run(calls, answers, crash)
            done.set()

    def __enter__(self):
        self._guard.__enter__()
        return self

    def __exit__(self, *exc):
        self._guard.__exit__(*exc)
        if self._worker is not None:
            self._jobs.put(None)  # a worker that is not stuck ends here …
            if not self._stuck:
                # … and is joined: a thread still unwinding when the interpreter exits can
                # abort it ("terminate called without an active exception")
                self._worker.join()
        return False

    @staticmethod
    def _inputs(calls, done: int) -> str:
        args = calls[min(done, len(calls) - 1)] if calls else ()
        return ", ".join(_short(a) for a in args)


def call_learner(function, *args):
    """One call as a grader makes it, in this process: ``(answer, None)`` or
    ``(None, feedback)``."""
    learner = Learner(function, "", time_limit=TIME_LIMIT_S)
    try:
        with learner:
            return learner(*args), None
    except Wrong as wrong:
        return None, str(wrong)


def _verdict(check, learner: Learner, seed: int) -> str | None:
    """Run one grading: None when it passed, else the one line of feedback."""
    generator = torch.Generator().manual_seed(int(seed))
    try:
        with learner:
            check(learner, generator)
        failure = None
    except Wrong as wrong:
        failure = str(wrong)
    except Exception as error:  # an answer no grader foresaw: still one line
        failure = _("could not check your answer ({error}: {message})").format(
            error=type(error).__name__, message=(str(error).splitlines() or [""])[0][:160])
    if failure is not None and learner.random:
        failure += _(" [random inputs: {grader}(…, seed={seed}) repeats them]").format(
            grader=check.__name__, seed=seed)
    return failure


def _grade_in_child(check, function, exercise, forbidden, limit, seed) -> str | None:
    """The whole grading in a forked child: the learner's answers are read and compared
    there, so only the feedback (a string) and the printed text come back; nothing the
    learner returned has to be pickled, and nothing it changed outlives the child."""
    def work(progress):
        learner = Learner(function, exercise, forbidden=forbidden, time_limit=limit,
                          threaded=False, progress=progress)
        return _verdict(check, learner, seed)

    reply = _in_child(work, limit)
    # What the grading imported lazily (torch imports sympy on its first broadcast_shapes,
    # seconds) died with the child: import it here, outside any clock, so the next child has it.
    for name in reply.get("imported", ()):
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    if reply.get("out"):
        sys.stdout.write(reply["out"])
    if reply.get("err"):
        sys.stderr.write(reply["err"])
    if "result" in reply:
        return reply["result"]
    if reply.get("timeout"):
        return _timeout_message(limit, reply["running"], stopped=True)
    if "grader_error" in reply:
        last = reply["grader_error"].strip().splitlines()[-1]
        return _("could not check your answer (the grader failed: {error})").format(
            error=last[:160])
    where = (_(" on inputs ({inputs})").format(inputs=reply["running"])
             if reply["running"] is not None else "")
    return _("the process running your function ended without an answer{where}: {death}. A "
             "crash in compiled code, os._exit or running out of memory each do this").format(
                 where=where, death=_death(reply["died"]))


def _grade_in_process(check, function, exercise, forbidden, limit, seed) -> str | None:
    state = _SessionState()
    try:
        learner = Learner(function, exercise, forbidden=forbidden, time_limit=limit)
        return _verdict(check, learner, seed)
    finally:
        state.restore()


def grader(exercise: str, title: str, *, forbidden: tuple[str, ...] = (),
           time_factor: float = 1.0, preload: tuple[str, ...] = ()):
    """Turn ``check(learner, seed)`` (raises :class:`Wrong`) into a printed verdict.

    ``forbidden``: dotted names of package functions the exercise text rules out.
    ``time_factor`` scales :data:`TIME_LIMIT_S` for an exercise whose honest answer is slow.
    ``preload``: modules a correct answer may import (``"transformers"``), imported before the
    clock starts.
    """
    def decorate(check):
        parameter = next(iter(inspect.signature(check).parameters))
        signature = inspect.Signature([
            inspect.Parameter(parameter, inspect.Parameter.POSITIONAL_OR_KEYWORD),
            inspect.Parameter("seed", inspect.Parameter.KEYWORD_ONLY, default=None)])

        @functools.wraps(check)
        def run(*args, **kwargs) -> Verdict:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as error:
                raise TypeError(f"{check.__name__}{signature}: {error}") from None
            function, seed = bound.arguments[parameter], bound.arguments.get("seed")
            if not callable(function):
                raise TypeError(f"{check.__name__}({parameter}): {parameter} must be your "
                                f"function (a callable), got {type(function).__name__} "
                                f"{_short(function)}")
            if seed is None:
                seed = fresh_seed()
            elif not isinstance(seed, numbers.Integral) or isinstance(seed, bool):
                raise TypeError(f"{check.__name__}: seed must be an int, got {seed!r}")
            _preload(function, preload)
            arguments = (check, function, exercise, forbidden, TIME_LIMIT_S * time_factor,
                         int(seed))
            try:
                failure = (_grade_in_child(*arguments) if isolation() == "fork"
                           else _grade_in_process(*arguments))
            except _NoFork:  # no process to spare (EAGAIN, ENOMEM): grade here instead
                failure = _grade_in_process(*arguments)
            return report(exercise, title, failure)

        run.__signature__ = signature  # what a learner sees; show_source still finds check
        run.exercise, run.title, run.preload = exercise, title, preload
        return run

    return decorate


# --- reading the answer ----------------------------------------------------------------------

_TYPE_HINTS = {type(None): N_("None (did you forget `return`?)")}


def _kind_of(answer) -> str:
    if answer is None:
        return _(_TYPE_HINTS[type(None)])
    if isinstance(answer, str):
        return _("a str {text}").format(text=repr(answer[:30]))
    return _("a {type}").format(type=type(answer).__name__)


def context(what: str) -> str:
    """``what`` (the inputs a message is about) as the start of a message, or nothing."""
    return _("{what}: ").format(what=what) if what else ""


def answer_tensor(answer, what: str, *, kind: str = "float", shape=None) -> torch.Tensor:
    """The learner's answer as a CPU tensor, or :class:`Wrong` saying why it is not one.

    ``kind`` "float", "int" or "real" (either): what the values must be. Rejects, each with
    one line: the wrong type (None, str, list, dict, …), complex, bool, the wrong number
    kind, the wrong shape, NaN and inf. numpy arrays are accepted; a plain number only when
    ``shape`` is ().
    """
    prefix = context(what)
    if isinstance(answer, torch.Tensor):
        tensor = answer.detach()
    elif _is_numpy_array(answer):
        try:
            tensor = torch.as_tensor(answer)
        except (TypeError, ValueError, RuntimeError):
            raise Wrong(prefix + _("your function returned a numpy array of {dtype}; return a "
                                   "torch tensor").format(dtype=answer.dtype)) from None
    elif shape == () and isinstance(answer, numbers.Number) and not isinstance(answer, bool):
        tensor = torch.tensor(answer)
    else:
        raise Wrong(prefix + (_("your function returned {kind}; return a torch tensor")
                              if shape is None else
                              _("your function returned {kind}; return a torch tensor of shape "
                                "{shape}")).format(kind=_kind_of(answer), shape=tuple(shape or ())))
    if tensor.layout != torch.strided:
        tensor = tensor.to_dense()
    tensor = _signed(tensor.cpu(), prefix)
    if tensor.is_complex():
        raise Wrong(prefix + _("your function returned a complex tensor ({dtype}); return a real "
                               "one (.real, or torch.view_as_real for the (real, imaginary) "
                               "pairs)").format(dtype=tensor.dtype))
    if tensor.dtype == torch.bool:
        raise Wrong(prefix + (_("your function returned a bool tensor; return numbers")
                              if kind == "float" else
                              _("your function returned a bool tensor; return integer indices")))
    if tensor.numel() == 0 and kind != "real":
        # no values to be wrong: torch.tensor([]) is float32, np.array([]) float64
        tensor = tensor.to(torch.float64 if kind == "float" else torch.int64)
    if kind == "real":
        pass
    elif kind == "float" and not tensor.is_floating_point():
        raise Wrong(prefix + _("your function returned integers ({dtype}); the answer needs "
                               "floating-point values (float32 or float64)").format(
                                   dtype=tensor.dtype))
    if kind == "int" and tensor.is_floating_point():
        raise Wrong(prefix + _("return an integer tensor (torch.long), got dtype {dtype}").format(
            dtype=tensor.dtype))
    if shape is not None and tuple(tensor.shape) != tuple(shape):
        raise Wrong(prefix + _("expected shape {expected}, got {shape}").format(
            expected=tuple(shape), shape=tuple(tensor.shape)))
    if tensor.is_floating_point():
        for bad, test in (("NaN", torch.isnan), ("inf", torch.isinf)):
            where = torch.nonzero(test(tensor))
            if len(where):
                index = tuple(int(i) for i in where[0])
                raise Wrong(prefix + (_("your answer contains {value} at index {index}") if index
                                      else _("your answer contains {value}")).format(
                                          value=bad, index=index))
    return tensor


_UNSIGNED = tuple(getattr(torch, name) for name in ("uint16", "uint32", "uint64")
                  if hasattr(torch, name))


def _signed(tensor: torch.Tensor, prefix: str) -> torch.Tensor:
    """uint16/32/64 as int64: torch does little arithmetic on them (no promotion, no max),
    and right values in an unsigned type are right values."""
    if tensor.dtype not in _UNSIGNED:
        return tensor
    if tensor.numel() and bool((tensor.double() >= 2.0**63).any()):
        raise Wrong(prefix + _("your answer ({dtype}) holds values of 2^63 or more; did a "
                               "negative number wrap around?").format(dtype=tensor.dtype))
    return tensor.to(torch.int64)


def _is_numpy_array(value) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, (numpy.ndarray, numpy.generic))


def answer_number(answer, what: str, *, integer: bool = False) -> float | int:
    """The learner's answer as one finite real number, or :class:`Wrong` saying why not.

    Accepts Python and numpy numbers and one-element real tensors. ``integer``: the value
    must be whole (2.0 is read as 2).
    """
    prefix = context(what)
    value = answer
    if isinstance(value, torch.Tensor) or _is_numpy_array(value):
        tensor = torch.as_tensor(value) if not isinstance(value, torch.Tensor) else value
        tensor = _signed(tensor.detach().cpu(), prefix)
        if tensor.numel() != 1:
            raise Wrong(prefix + _("return one number, got a {type} of shape {shape}").format(
                type=type(value).__name__, shape=tuple(tensor.shape)))
        if tensor.is_complex():
            raise Wrong(prefix + _("return a real number, got a complex {type}").format(
                type=type(value).__name__))
        if tensor.dtype == torch.bool:
            raise Wrong(prefix + _("return a number, got a bool {type}").format(
                type=type(value).__name__))
        value = tensor.reshape(()).item()
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        raise Wrong(prefix + _("return a number, got {kind}").format(kind=_kind_of(value)))
    if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real):
        raise Wrong(prefix + _("return a real number, got {value} (a complex number; keep its "
                               "real part, .real)").format(value=repr(value)))
    if isinstance(value, numbers.Integral):
        value = int(value)
    else:  # float, Fraction, Decimal (a Number, not registered as Real), numpy floats
        try:
            value = float(value)
        except (TypeError, ValueError, OverflowError) as error:
            raise Wrong(prefix + _("could not read your {type} {value} as a number "
                                   "({error})").format(type=type(value).__name__,
                                                       value=repr(value), error=error)) from None
    if isinstance(value, float) and math.isnan(value):
        raise Wrong(prefix + _("your function returned NaN"))
    if isinstance(value, float) and math.isinf(value):
        raise Wrong(prefix + _("your function returned {value}").format(value=value))
    if integer:
        if isinstance(value, float) and not value.is_integer():
            raise Wrong(prefix + _("expected a whole number, got {value}").format(
                value=repr(value)))
        return int(value)
    return value


def compare(answer, expected: torch.Tensor, *, atol, what: str) -> str | None:
    """None when ``answer`` matches ``expected`` (type, shape, values), else the reason.

    ``atol`` is a number or a tensor that broadcasts against ``expected`` (a tolerance per
    element). Never raises on a strange answer: that is one more reason.
    """
    kind = "float" if expected.is_floating_point() else "int"
    try:
        tensor = answer_tensor(answer, what, kind=kind, shape=expected.shape)
    except Wrong as wrong:
        return str(wrong)
    gap = (tensor.double() - expected.double()).abs()
    atol = torch.as_tensor(atol, dtype=torch.float64)
    bad = torch.nonzero(~(gap <= atol))
    if len(bad):
        index = tuple(int(i) for i in bad[0])
        message = (_("at index {index} expected {expected:.6g}, got {got:.6g}") if index
                   else _("expected {expected:.6g}, got {got:.6g}"))
        return context(what) + message.format(index=index, expected=float(expected[index]),
                                              got=float(tensor[index]))
    return None


def values_differ(answer, expected: torch.Tensor, *, atol) -> bool:
    """True when ``answer`` has the right type and shape but values off ``expected``: the
    case a grader's value hints are for (a test of the answer, never of the feedback's
    words, which are translated)."""
    kind = "float" if expected.is_floating_point() else "int"
    try:
        tensor = answer_tensor(answer, "", kind=kind, shape=expected.shape)
    except Wrong:
        return False
    gap = (tensor.double() - expected.double()).abs()
    return bool((~(gap <= torch.as_tensor(atol, dtype=torch.float64))).any())


def check_answer(answer, expected: torch.Tensor, *, atol, what: str) -> torch.Tensor:
    """Like :func:`compare`, but raises :class:`Wrong`; returns the answer as a tensor."""
    failure = compare(answer, expected, atol=atol, what=what)
    if failure is not None:
        raise Wrong(failure)
    return torch.as_tensor(answer).detach().cpu()


def matches(answer, expected: torch.Tensor, atol) -> bool:
    """Whether the answer equals ``expected``: the test behind each hint."""
    return compare(answer, expected, atol=atol, what="") is None


# --- random cases ----------------------------------------------------------------------------


def randint(generator: torch.Generator, low: int, high: int) -> int:
    """A whole number in [low, high], both ends included."""
    return int(torch.randint(low, high + 1, (), generator=generator))


def log_uniform(generator: torch.Generator, low: float, high: float) -> float:
    """A number between low and high, every decade as likely (bases, factors, rates)."""
    u = float(torch.rand((), generator=generator, dtype=torch.float64))
    return float(math.exp(math.log(low) + u * (math.log(high) - math.log(low))))
