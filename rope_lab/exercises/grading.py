"""What every grader shares: calling the learner safely, reading its answer, the verdict.

A grader (``check_*``) is a plain function that builds its test cases, calls the learner's
function through a :class:`Learner` and raises :class:`Wrong` with one line of feedback at
the first mistake. The :func:`grader` decorator turns that into a printed ✔/✘ verdict and a
:class:`Verdict` (true when passed), so no mistake of the learner's can end in a traceback
from the grader:

- the whole grading runs in another process, the same way on every platform: a worker
  spawned once per notebook and reused (:mod:`rope_lab.exercises.worker`). The learner's
  function travels there by value (cloudpickle: a function defined in a notebook has no
  module to be imported from), with the globals it uses. A function that never returns,
  even one that holds the GIL in C code (``sum(itertools.repeat(1))``), is stopped at the
  time limit (:data:`TIME_LIMIT_S`, all calls together) with the processes it started;
  ``os._exit`` or a crash ends the worker, not the notebook; on Linux a huge allocation
  fails inside the learner's call (:data:`MEMORY_LIMIT_BYTES`); what the function changes
  (``torch.equal``, the default dtype, the package's names) is put back in the worker and
  never reaches the notebook; what it prints is shown in the notebook;
- modules the exercise or the learner's code imports are imported before the clock starts;
- the learner gets deep copies of the inputs, and the reference is computed after it returns;
- each grader adds random cases drawn from a fresh seed (``os.urandom``, never torch's global
  generator, so the notebook's own seeded numbers do not move); a failure names the seed;
- a package function the exercise text forbids raises while the learner's code runs;
- a value that is close but not within the tolerance says by how much and what to change
  (a float16 answer, a float32 one where float64 is needed).

The graders are a learning aid, not an exam: they catch honest mistakes and name them. Code
that sets out to fool them (reading the grader's variables, patching what it calls) runs in
the grader's process with the grader's own rights and can; nothing here pretends otherwise.
"""

from __future__ import annotations

import contextlib
import copy
import dis
import functools
import importlib
import inspect
import math
import numbers
import os
import pickle
import signal
import sys
import threading
import traceback
import types

import torch

from rope_lab.exercises.worker import SETUP_LIMIT_S, Worker, WorkerError, memory_limited
from rope_lab.i18n import N_, _, get_language, using_language
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


# --- where a grading runs ---------------------------------------------------------------------

# The memory one grading may take beyond what the worker holds when it starts (Linux without an
# NVIDIA GPU; see rope_lab.exercises.worker). An honest answer to any exercise needs a few MB.
MEMORY_LIMIT_BYTES = 2 * 10**9

# the notebook's worker process, started at the first grading (or in the background when a
# notebook kernel imports rope_lab.exercises) and reused
_worker = Worker()
# modules gradings imported on first use (sympy, by torch), imported by the next fresh worker
# before its clock starts
_imported_by_gradings: set[str] = set()


def start_worker() -> None:
    """Start the grader's worker process in the background, so the first check does not wait
    for its imports (a notebook kernel does this when it imports ``rope_lab.exercises``)."""
    with contextlib.suppress(WorkerError):
        _worker.start()


def _timeout_message(limit: float, inputs: str | None) -> str:
    """``inputs``: those of the call still running, or None when the time ran out between
    the learner's calls (in the grader's own work: a busy machine, not the learner's loop)."""
    again = _("raise exercises.grading.TIME_LIMIT_S (now {limit:g}) and run the cell "
              "again").format(limit=TIME_LIMIT_S)
    if inputs is None:
        return _("the grading had not finished after {limit:g} s, but your function was not "
                 "what was running (every call to it had returned): the machine is probably "
                 "busy; {again}").format(limit=limit, again=again)
    return _("your function had not finished after {limit:g} s, all its calls together "
             "(it was running on inputs ({inputs})). A loop that never ends, work that "
             "grows too fast with the input, or a busy machine each do this; if yours is "
             "just slow, {again}").format(limit=limit, inputs=inputs, again=again)


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


def _preload(function, modules: tuple[str, ...]) -> tuple[str, ...]:
    """What the worker imports before the clock starts, so a correct answer's first
    ``import transformers`` (seconds) never counts against its time: the exercise's
    ``modules``, the installed modules the learner's code imports, and what earlier gradings
    imported on first use. A learner's own module (a file in the working folder) is left to
    its call: its import is the learner's code.
    """
    wanted = set(modules) | _imported_by_gradings
    code = getattr(function, "__code__", None)
    if isinstance(code, types.CodeType):
        wanted |= {name for name in _imported_names(code) if not name.startswith(".")}
    local = {name.split(".")[0] for name in _local_modules()}
    return tuple(sorted(name for name in wanted if name.split(".")[0] not in local))


def _local_modules() -> list[str]:
    """Imported modules whose file lies in the working folder (a learner's own ``.py``
    files, a test's modules), rope_lab and installed packages aside."""
    here = os.path.join(os.path.abspath(os.getcwd()), "")
    installed = tuple(os.path.join(os.path.abspath(prefix), "") for prefix in
                      {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix})
    package = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")
    found = []
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not isinstance(file, str) or name == "__main__":
            continue
        file = os.path.abspath(file)
        if (file.startswith(here) and not file.startswith(package)
                and not file.startswith(installed) and "site-packages" not in file):
            found.append(name)
    return found


def pickle_function(function) -> bytes:
    """The learner's function as bytes the worker can load: cloudpickle sends a function
    defined in a notebook (``__main__``), a lambda or a closure by value, with the globals
    it uses; the learner's own modules go by value too, so an edited file is graded as the
    notebook runs it. Installed modules (torch, rope_lab) go by name."""
    import cloudpickle

    registered = []
    for name in _local_modules():
        with contextlib.suppress(Exception):
            cloudpickle.register_pickle_by_value(sys.modules[name])
            registered.append(name)
    try:
        return cloudpickle.dumps(function, protocol=pickle.HIGHEST_PROTOCOL)
    finally:
        for name in registered:
            with contextlib.suppress(Exception):
                cloudpickle.unregister_pickle_by_value(sys.modules[name])


def _death(status: int | None) -> str:
    if status is not None and status < 0:  # killed by a signal (subprocess's convention)
        number = -status
        name = (signal.Signals(number).name if number in signal.Signals._value2member_map_
                else str(number))
        why = _(" (out of memory?)") if name == "SIGKILL" else ""
        return _("killed by {signal}{why}").format(signal=name, why=why)
    return _("exit status {status}").format(status=status)


def _reply_feedback(reply: dict, limit: float, *, show_output: bool = True) -> str | None:
    """The worker's reply as the learner's feedback (None: passed); ``show_output``: print
    what the learner's function printed."""
    if show_output and reply.get("out"):
        sys.stdout.write(reply["out"])
    if show_output and reply.get("err"):
        sys.stderr.write(reply["err"])
    for name in reply.get("imported", ()):
        _imported_by_gradings.add(name)
    if "result" in reply:
        return reply["result"]["feedback"]
    if reply.get("timeout"):
        if reply["phase"] == "setup":
            return _("the grader's process was not ready after {limit:g} s (starting Python "
                     "and importing torch): the machine is probably busy; run the cell "
                     "again").format(limit=SETUP_LIMIT_S)
        return _timeout_message(limit, reply["running"])
    if "failed" in reply:
        last = (reply["failed"].strip().splitlines() or [""])[-1]
        return _("could not check your answer (the grader failed: {error})").format(
            error=last[:200])
    where = (_(" on inputs ({inputs})").format(inputs=reply["running"])
             if reply.get("running") is not None else "")
    others = (_("; the processes it had started were stopped too") if reply.get("others")
              else "")
    return _("the process running your function ended without an answer{where}: {death}{others}. "
             "A crash in compiled code, os._exit or running out of memory each do this").format(
                 where=where, death=_death(reply["died"]), others=others)


def _run_grading(check, function: bytes, exercise: str, forbidden: tuple[str, ...],
                 limit: float, seed: int, preload: tuple[str, ...], *,
                 worker: Worker | None = None, language: str | None = None,
                 show_output: bool = True) -> str | None:
    """One grading in the worker: ``function`` is the learner's function, pickled. Returns
    None (passed) or the feedback, in ``language`` (default: the current one); prints what
    the function printed (``show_output``)."""
    arguments = {"check": _grader_reference(check), "function": function, "exercise": exercise,
                 "forbidden": forbidden, "limit": limit, "seed": seed,
                 "language": language or get_language(), "memory": MEMORY_LIMIT_BYTES}
    reply = (worker or _worker).run("rope_lab.exercises.grading:_grade_job", arguments,
                                    limit=limit, memory=MEMORY_LIMIT_BYTES, preload=preload)
    if language is None:
        return _reply_feedback(reply, limit, show_output=show_output)
    with using_language(language):
        return _reply_feedback(reply, limit, show_output=show_output)


def _grader_reference(check):
    """A module's grader by name (the worker has it imported); another (a test's) pickled."""
    module = sys.modules.get(getattr(check, "__module__", None) or "")
    decorated = getattr(module, getattr(check, "__name__", ""), None)
    if getattr(decorated, "__wrapped__", None) is check:
        return (check.__module__, check.__name__)
    import cloudpickle

    return cloudpickle.dumps(check)


def _load_grader(reference):
    if isinstance(reference, tuple):
        module, name = reference
        return getattr(importlib.import_module(module), name).__wrapped__
    import cloudpickle

    return cloudpickle.loads(reference)


def _grade_job(arguments: dict, send) -> dict:
    """The grading, in the worker: the learner's answers are read and compared there, so
    only the feedback (a string) comes back. What the function changed in the worker is put
    back afterwards; running out of memory retires the worker."""
    import cloudpickle

    from rope_lab.i18n import set_language

    set_language(arguments["language"])
    state = _SessionState()
    try:
        try:
            check = _load_grader(arguments["check"])
            function = cloudpickle.loads(arguments["function"])
        except Exception as error:  # noqa: BLE001 - a module the worker cannot import …
            return {"feedback": _("the grader's process could not load your function "
                                  "({error}: {message})").format(
                                      error=type(error).__name__,
                                      message=(str(error).splitlines() or [""])[0][:160])}
        send({"started": True})
        learner = Learner(function, arguments["exercise"], forbidden=arguments["forbidden"],
                          memory=arguments["memory"],
                          progress=lambda inputs: send({"running": inputs}))
        feedback = _verdict(check, learner, arguments["seed"])
        return {"feedback": feedback, "retire": learner.out_of_memory}
    finally:
        state.restore()


def grade_pickled(check, function: bytes, *, seed: int | None = None,
                  worker: Worker | None = None, language: str | None = None) -> Verdict:
    """Grade a learner's function given as cloudpickle bytes (``python -m rope_lab.exercises
    grade`` gets them from a student's notebook kernel), in ``worker`` (default: this
    process's), in ``language`` (default: the current one); nothing printed or recorded for
    summary(). ``check``: a grader (``exercises.check_axial_rope``). Safe to call from several
    threads with a worker each."""
    seed = fresh_seed() if seed is None else int(seed)
    limit = TIME_LIMIT_S * check.time_factor
    failure = _run_grading(check.__wrapped__, function, check.exercise, check.forbidden,
                           limit, seed, _preload(None, check.preload), worker=worker,
                           language=language, show_output=False)
    if failure is not None:
        failure = " ".join(str(failure).split())
    return Verdict(check.exercise, check.title, failure is None, failure or "")


# --- calling the learner ---------------------------------------------------------------------


class ForbiddenShortcut(RuntimeError):
    """Raised by a package function the exercise asks the learner not to call."""


def _out_of_memory(error: BaseException) -> bool:
    if isinstance(error, MemoryError):
        return True
    text = str(error)
    return isinstance(error, RuntimeError) and ("can't allocate memory" in text
                                                or "out of memory" in text.lower())


def _describe_crash(error: BaseException, function, memory: int | None = None) -> str:
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
    if _out_of_memory(error):
        limit = (_(" (the grader allows {size:.3g} GB per answer)").format(size=memory / 1e9)
                 if memory and memory_limited() else "")
        return _("your function ran out of memory{limit}: {error}: {message}{line}").format(
            limit=limit, error=type(error).__name__, message=message, line=line)
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

    The worker serves one grading after another, so each puts back what its learner changed
    before the next: functions patched into torch, ``torch.Tensor``, ``torch.nn.functional``,
    ``math`` or the package (``torch.equal = …``, ``rl.checks = …``), the default dtype and
    device, grad mode, deterministic algorithms, the thread count and the global random
    generators. Names the learner added are left alone (a lazily imported submodule is one).
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
    """The learner's function as a grader calls it: on copies, one call after another.

    ``learner(*args)`` returns the answer, or raises :class:`Wrong` with the feedback for a
    crash or a forbidden shortcut. ``learner.random`` is set by the grader once its random
    cases start, so a failure there names the seed.

    In the worker process ``progress`` hears the inputs of each call before it starts (and
    None when it returns): the notebook enforces the time limit and names those inputs if
    it has to stop the worker. Without ``progress`` (the tests' fast path over hundreds of
    seeds) the calls simply run here.
    """

    def __init__(self, function, exercise: str, *, forbidden: tuple[str, ...] = (),
                 progress=None, memory: int | None = None):
        self.function, self.exercise = function, exercise
        self.random = False
        self.progress, self.memory = progress, memory
        self.out_of_memory = False
        self._guard = _Forbidden(exercise, forbidden, function)

    def __call__(self, *args):
        return self.map([args])[0]

    def map(self, calls: list[tuple]) -> list:
        """Answers to several calls, run one after another."""
        calls = copy.deepcopy(list(calls))  # the grader's own inputs stay untouched
        answers: list = []
        crash: list[tuple[tuple, BaseException]] = []
        self._run(calls, answers, crash)
        if self._guard.used is not None:
            raise Wrong(self._guard.used)
        if crash:
            args, error = crash[0]
            self.out_of_memory = self.out_of_memory or _out_of_memory(error)
            message = _describe_crash(error, self.function, self.memory)
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
                    self.progress(", ".join(_short(a) for a in args))
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

    def __enter__(self):
        self._guard.__enter__()
        return self

    def __exit__(self, *exc):
        self._guard.__exit__(*exc)
        return False


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


def grader(exercise: str, title: str, *, answer: str, forbidden: tuple[str, ...] = (),
           time_factor: float = 1.0, preload: tuple[str, ...] = ()):
    """Turn ``check(learner, seed)`` (raises :class:`Wrong`) into a printed verdict.

    ``answer``: the name of the function the notebook asks the learner to write (its
    exercise cell defines it and calls the grader with it; a test keeps the two in step):
    how ``python -m rope_lab.exercises grade`` finds the answer in a saved notebook.
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
            try:
                pickled = pickle_function(function)
            except Exception as error:  # noqa: BLE001 - a lock, a generator, an open file …
                failure = _("could not send your function to the grader's process ({error}: "
                            "{message}); a function that uses an open file, a lock or a "
                            "generator from the notebook cannot be sent: create it inside "
                            "the function").format(
                                error=type(error).__name__,
                                message=(str(error).splitlines() or [""])[0][:160])
            else:
                failure = _run_grading(check, pickled, exercise, forbidden,
                                       TIME_LIMIT_S * time_factor, int(seed),
                                       _preload(function, preload))
            return report(exercise, title, failure)

        run.__signature__ = signature  # what a learner sees; show_source still finds check
        run.exercise, run.title, run.preload = exercise, title, preload
        run.forbidden, run.time_factor, run.answer = forbidden, time_factor, answer
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
    element). Never raises on a strange answer: that is one more reason. The values shown
    have the digits that tell them apart; a value that is close (a float16 answer, or off in
    the sixth digit) also says by how much and what to change.
    """
    kind = "float" if expected.is_floating_point() else "int"
    try:
        tensor = answer_tensor(answer, what, kind=kind, shape=expected.shape)
    except Wrong as wrong:
        return str(wrong)
    gap = (tensor.double() - expected.double()).abs()
    atol = torch.as_tensor(atol, dtype=torch.float64)
    bad = torch.nonzero(~(gap <= atol))
    if not len(bad):
        return None
    index = tuple(int(i) for i in bad[0])
    wanted, got = float(expected[index]), float(tensor[index])
    shown_wanted, shown_got = tell_apart(wanted, got)
    message = (_("at index {index} expected {expected}, got {got}") if index
               else _("expected {expected}, got {got}")).format(
                   index=index, expected=shown_wanted, got=shown_got)
    allowed = float(atol.expand_as(gap)[index]) if atol.dim() else float(atol)
    return context(what) + message + precision_note(tensor.dtype, wanted, got, allowed)


def tell_apart(a: float, b: float) -> tuple[str, str]:
    """``a`` and ``b`` with 6 significant digits, or as many more as it takes for the two to
    differ on the page ("-0.449937" twice says nothing)."""
    for digits in range(6, 18):
        shown = f"{a:.{digits}g}", f"{b:.{digits}g}"
        if shown[0] != shown[1]:
            return shown
    return f"{a!r}", f"{b!r}"


_LOW_PRECISION = {torch.float16: 3, torch.bfloat16: 2}  # significant decimal digits


def precision_note(dtype: torch.dtype | None, expected: float, got: float,
                   allowed: float) -> str:
    """For a value close to the expected one: by how much, and what to change (``dtype``:
    the answer's, None for a plain number). A formula slip is rarely within 1e-5 of the
    right value; rounding in a narrow dtype is."""
    gap = abs(got - expected)
    relative = gap / abs(expected) if expected else math.inf
    if dtype in _LOW_PRECISION and relative <= 1e-2:
        return _(": off by {gap:.2g}; {dtype} keeps about {digits} significant digits, not "
                 "enough here: compute and return float32 or float64").format(
                     gap=gap, dtype=str(dtype).removeprefix("torch."),
                     digits=_LOW_PRECISION[dtype])
    if relative > 1e-5:
        return ""
    if dtype == torch.float32:
        return _(": off by {gap:.2g}, more than float32 rounding allows ({allowed:.2g} here): "
                 "compute in float64").format(gap=gap, allowed=allowed)
    return _(": off by {gap:.2g}, more than rounding allows ({allowed:.2g} here): is a step "
             "done in float32 or float16? compute every step in float64").format(
                 gap=gap, allowed=allowed)


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


# --- how close is close enough ---------------------------------------------------------------

# What float32 rounding allows per unit, with margin and nothing like a real mistake: float32
# angles m·θ_i are off by about |m·θ_i|·2⁻²³ (θ_i and the product each round once), float32
# cos and sin by about 2⁻²⁴, and θ_i = base^(−2i/d) computed in float32 by about 2⁻²³·|ln θ_i|
# relative (measured: at most 1.4 × that over 3000 random (d, base, s), six ways of writing it).
FLOAT32_ROUNDING = 2.0**-21


def rotation_tolerance(angles: torch.Tensor, pair_length: torch.Tensor, *,
                       floor: float = 0.0) -> torch.Tensor:
    """Per pair, how far an honest answer that computes its angles, cos and sin in float32
    (``rl.inv_freq``'s default) can land from the float64 reference: a pair of length r
    turned by an angle a off by ``2⁻²¹·(|a| + 1)`` moves by r times that.

    angles, pair_length: ``(..., d/2)``; returns ``(..., d/2)``, ``floor`` added.
    """
    return floor + FLOAT32_ROUNDING * (angles.abs() + 1) * pair_length


# --- random cases ----------------------------------------------------------------------------


def randint(generator: torch.Generator, low: int, high: int) -> int:
    """A whole number in [low, high], both ends included."""
    return int(torch.randint(low, high + 1, (), generator=generator))


def log_uniform(generator: torch.Generator, low: float, high: float) -> float:
    """A number between low and high, every decade as likely (bases, factors, rates)."""
    u = float(torch.rand((), generator=generator, dtype=torch.float64))
    return float(math.exp(math.log(low) + u * (math.log(high) - math.log(low))))
