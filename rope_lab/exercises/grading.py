"""What every grader shares: calling the learner safely, reading its answer, the verdict.

A grader (``check_*``) is a plain function that builds its test cases, calls the learner's
function through a :class:`Learner` and raises :class:`Wrong` with one line of feedback at
the first mistake. The :func:`grader` decorator turns that into a printed ✔/✘ verdict and
True/False, so no mistake of the learner's can end in a traceback from the grader:

- the learner gets deep copies of the inputs, so the reference is computed from untouched ones;
- every call runs in a daemon thread against one deadline per grader (:data:`TIME_LIMIT_S`):
  a function that never returns costs the notebook that long, then the verdict comes;
- each grader adds random cases drawn from a fresh seed (``os.urandom``, never torch's global
  generator, so the notebook's own seeded numbers do not move); a failure names the seed;
- a package function the exercise text forbids raises while the learner's code runs.
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
import numbers
import os
import queue
import sys
import threading
import time
import traceback

import torch

# The time one grader gives the learner's function in total, all its calls together.
TIME_LIMIT_S = 10.0

# exercise id ("05.1") → passed? Titles and the last feedback are kept for summary().
_results: dict[str, bool] = {}
_titles: dict[str, str] = {}
_feedback: dict[str, str] = {}


class Wrong(Exception):
    """Raised inside a grader with the one line of feedback for the learner."""


def report(exercise: str, title: str, failure: str | None) -> bool:
    """Record and print the verdict for one exercise. ``failure`` None means passed."""
    if failure is not None:
        failure = " ".join(str(failure).split())  # one line, whatever the message held
    passed = failure is None
    _results[exercise] = passed
    _titles[exercise] = title
    _feedback[exercise] = failure or ""
    if passed:
        print(f"✔ Exercise {exercise} ({title}): passed")
    else:
        print(f"✘ Exercise {exercise} ({title}): {failure}")
    return passed


def _notebook_title(number: str) -> str:
    from rope_lab.course import NOTEBOOKS

    titles = {n.filename[:2]: n.title for n in NOTEBOOKS}
    return f"notebook {number}: {titles[number]}" if number in titles else f"notebook {number}"


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
        print("No exercises graded yet in this session"
              + (f" for {prefix!r}." if prefix else ".")
              + " Run the exercise cells (each calls a check_… function), then summary() again.")
        return chosen
    from rope_lab import __version__

    lines = [f"rope_lab {__version__} exercises, torch {torch.__version__}"]
    by_notebook: dict[str, list[str]] = {}
    for exercise in chosen:
        by_notebook.setdefault(exercise.split(".")[0], []).append(exercise)
    for number, exercises in by_notebook.items():
        passed = sum(chosen[e] for e in exercises)
        lines.append(f"{_notebook_title(number)} ({passed} of {len(exercises)} passed)")
        for exercise in exercises:
            mark = "✔" if chosen[exercise] else "✘"
            line = f"  {mark} {exercise} {_titles.get(exercise, '')}".rstrip()
            if not chosen[exercise] and _feedback.get(exercise):
                line += f": {_feedback[exercise]}"
            lines.append(line)
    if len(by_notebook) > 1:
        lines.append(f"total: {sum(chosen.values())} of {len(chosen)} passed")
    print("\n".join(lines))
    return chosen


def fresh_seed() -> int:
    """A seed for this grading only: from the OS, so torch's global generator is untouched."""
    return int.from_bytes(os.urandom(4), "little")


# --- calling the learner ---------------------------------------------------------------------


class ForbiddenShortcut(RuntimeError):
    """Raised by a package function the exercise asks the learner not to call."""


def _describe_crash(error: BaseException, function) -> str:
    if isinstance(error, NotImplementedError):
        return "not attempted yet (the function raises NotImplementedError)"
    if isinstance(error, ForbiddenShortcut):
        return str(error)
    frames = traceback.extract_tb(error.__traceback__)
    code = getattr(function, "__code__", None)
    own = [f for f in frames if code is not None and f.filename == code.co_filename]
    where = (own or frames)[-1] if frames else None
    message = (str(error).strip().splitlines() or [""])[0][:200]
    line = f" (line {where.lineno})" if where is not None else ""
    return f"your function raised {type(error).__name__}: {message}{line}"


def _short(value) -> str:
    """An argument as the feedback shows it: tensors by shape, the rest by a short repr."""
    if isinstance(value, torch.Tensor):
        if value.numel() <= 4:
            return repr(value.tolist())
        return f"tensor of shape {tuple(value.shape)}"
    if isinstance(value, float):
        return f"{value:g}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "…"


class _Forbidden:
    """While active, the listed package functions raise when the learner's code calls them.

    The stand-ins replace every binding a learner can reach (``rl.f``, ``rope_lab.module.f``,
    a name imported into the notebook) and raise only on the learner's thread, and only when
    called from outside the package, so the grader's reference and the package's own
    internals keep working.
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
                forbidden.used = (f"exercise {forbidden.exercise} asks you to write this "
                                  f"without {shown}")
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
                self.used = f"exercise {self.exercise} asks you to write this without {shown}"
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


class Learner:
    """The learner's function as a grader calls it: on copies, within the time limit.

    ``learner(*args)`` returns the answer, or raises :class:`Wrong` with the feedback for a
    crash, a forbidden shortcut or running out of time. All calls run one after another on
    one daemon thread; the grader waits for each against a single deadline, so a function
    that never returns costs :data:`TIME_LIMIT_S` once, and the notebook goes on (the thread
    cannot be stopped; it ends when the function does). ``learner.random`` is set by the
    grader once its random cases start, so a failure there names the seed.
    """

    def __init__(self, function, exercise: str, *, forbidden: tuple[str, ...] = (),
                 time_limit: float):
        self.function, self.exercise = function, exercise
        self.time_limit = time_limit
        self.deadline = time.monotonic() + time_limit
        self.random = False
        self._guard = _Forbidden(exercise, forbidden, function)
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._stuck = False

    def __call__(self, *args):
        return self.map([args])[0]

    def map(self, calls: list[tuple]) -> list:
        """Answers to several calls, run one after another."""
        calls = copy.deepcopy(list(calls))  # the grader's own inputs stay untouched
        done = threading.Event()
        answers: list = []
        crash: list[tuple[tuple, BaseException]] = []
        if not self._stuck:
            if self._worker is None:
                self._worker = threading.Thread(target=self._serve, daemon=True,
                                                name=f"rope_lab exercise {self.exercise}")
                self._worker.start()
            self._jobs.put((calls, answers, crash, done))
        remaining = self.deadline - time.monotonic()
        if self._stuck or remaining <= 0 or not done.wait(remaining):
            self._stuck = True
            raise Wrong(f"your function took longer than {self.time_limit:g} s in total "
                        f"(still running on inputs ({self._inputs(calls, len(answers))})); "
                        "look for a loop that does not end or work that grows too fast")
        if self._guard.used is not None:
            raise Wrong(self._guard.used)
        if crash:
            args, error = crash[0]
            message = _describe_crash(error, self.function)
            if not isinstance(error, (NotImplementedError, ForbiddenShortcut)):
                message += f", on inputs ({', '.join(_short(a) for a in args)})"
            raise Wrong(message)
        return answers

    def _serve(self):
        self._guard.learner_thread = threading.get_ident()
        while (job := self._jobs.get()) is not None:
            calls, answers, crash, done = job
            for args in calls:
                try:
                    answers.append(self.function(*args))
                except BaseException as error:  # the learner's bug, reported, not raised
                    crash.append((args, error))
                    break
            done.set()

    def __enter__(self):
        self._guard.__enter__()
        return self

    def __exit__(self, *exc):
        self._guard.__exit__(*exc)
        if self._worker is not None:
            self._jobs.put(None)  # a worker that is not stuck ends here
        return False

    @staticmethod
    def _inputs(calls, done: int) -> str:
        args = calls[min(done, len(calls) - 1)] if calls else ()
        return ", ".join(_short(a) for a in args)


def call_learner(function, *args):
    """One call as a grader makes it: ``(answer, None)`` or ``(None, feedback)``."""
    learner = Learner(function, "", time_limit=TIME_LIMIT_S)
    try:
        with learner:
            return learner(*args), None
    except Wrong as wrong:
        return None, str(wrong)


def grader(exercise: str, title: str, *, forbidden: tuple[str, ...] = (),
           time_factor: float = 1.0):
    """Turn ``check(learner, seed)`` (raises :class:`Wrong`) into a printed verdict.

    ``forbidden``: dotted names of package functions the exercise text rules out.
    ``time_factor`` scales :data:`TIME_LIMIT_S` for an exercise whose honest answer is slow.
    """
    def decorate(check):
        parameter = next(iter(inspect.signature(check).parameters))
        signature = inspect.Signature([
            inspect.Parameter(parameter, inspect.Parameter.POSITIONAL_OR_KEYWORD),
            inspect.Parameter("seed", inspect.Parameter.KEYWORD_ONLY, default=None)])

        @functools.wraps(check)
        def run(*args, **kwargs) -> bool:
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
            learner = Learner(function, exercise, forbidden=forbidden,
                              time_limit=TIME_LIMIT_S * time_factor)
            generator = torch.Generator().manual_seed(int(seed))
            try:
                with learner:
                    check(learner, generator)
                failure = None
            except Wrong as wrong:
                failure = str(wrong)
            except Exception as error:  # an answer no grader foresaw: still one line
                failure = (f"could not check your answer ({type(error).__name__}: "
                           f"{(str(error).splitlines() or [''])[0][:160]})")
            if failure is not None and learner.random:
                failure += f" [random inputs: {check.__name__}(…, seed={seed}) repeats them]"
            return report(exercise, title, failure)

        run.__signature__ = signature  # what a learner sees; show_source still finds check
        run.exercise, run.title = exercise, title
        return run

    return decorate


# --- reading the answer ----------------------------------------------------------------------

_TYPE_HINTS = {type(None): "None (did you forget `return`?)"}


def _kind_of(answer) -> str:
    if answer is None:
        return _TYPE_HINTS[type(None)]
    if isinstance(answer, str):
        return f"a str {answer[:30]!r}"
    return f"a {type(answer).__name__}"


def answer_tensor(answer, what: str, *, kind: str = "float", shape=None) -> torch.Tensor:
    """The learner's answer as a CPU tensor, or :class:`Wrong` saying why it is not one.

    ``kind`` "float", "int" or "real" (either): what the values must be. Rejects, each with
    one line: the wrong type (None, str, list, dict, …), complex, bool, the wrong number
    kind, the wrong shape, NaN and inf. numpy arrays are accepted; a plain number only when
    ``shape`` is ().
    """
    prefix = f"{what}: " if what else ""
    if isinstance(answer, torch.Tensor):
        tensor = answer.detach()
    elif _is_numpy_array(answer):
        try:
            tensor = torch.as_tensor(answer)
        except (TypeError, ValueError, RuntimeError):
            raise Wrong(f"{prefix}your function returned a numpy array of "
                        f"{answer.dtype}; return a torch tensor") from None
    elif shape == () and isinstance(answer, numbers.Number) and not isinstance(answer, bool):
        tensor = torch.tensor(answer)
    else:
        raise Wrong(f"{prefix}your function returned {_kind_of(answer)}; return a torch tensor"
                    + (f" of shape {tuple(shape)}" if shape is not None else ""))
    if tensor.layout != torch.strided:
        tensor = tensor.to_dense()
    tensor = tensor.cpu()
    if tensor.is_complex():
        raise Wrong(f"{prefix}your function returned a complex tensor ({tensor.dtype}); return "
                    "a real one (.real, or torch.view_as_real for the (real, imaginary) pairs)")
    if tensor.dtype == torch.bool:
        raise Wrong(f"{prefix}your function returned a bool tensor; return "
                    + ("numbers" if kind == "float" else "integer indices"))
    if kind == "real":
        pass
    elif kind == "float" and not tensor.is_floating_point():
        raise Wrong(f"{prefix}your function returned integers ({tensor.dtype}); the answer "
                    "needs floating-point values (float32 or float64)")
    if kind == "int" and tensor.is_floating_point():
        raise Wrong(f"{prefix}return an integer tensor (torch.long), got dtype {tensor.dtype}")
    if shape is not None and tuple(tensor.shape) != tuple(shape):
        raise Wrong(f"{prefix}expected shape {tuple(shape)}, got {tuple(tensor.shape)}")
    if tensor.is_floating_point():
        for bad, test in (("NaN", torch.isnan), ("inf", torch.isinf)):
            where = torch.nonzero(test(tensor))
            if len(where):
                index = tuple(int(i) for i in where[0])
                at = f" at index {index}" if index else ""
                raise Wrong(f"{prefix}your answer contains {bad}{at}")
    return tensor


def _is_numpy_array(value) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, (numpy.ndarray, numpy.generic))


def answer_number(answer, what: str, *, integer: bool = False) -> float | int:
    """The learner's answer as one finite real number, or :class:`Wrong` saying why not.

    Accepts Python and numpy numbers and one-element real tensors. ``integer``: the value
    must be whole (2.0 is read as 2).
    """
    prefix = f"{what}: " if what else ""
    value = answer
    if isinstance(value, torch.Tensor) or _is_numpy_array(value):
        tensor = torch.as_tensor(value) if not isinstance(value, torch.Tensor) else value
        if tensor.numel() != 1:
            raise Wrong(f"{prefix}return one number, got a {type(value).__name__} of shape "
                        f"{tuple(tensor.shape)}")
        if tensor.is_complex():
            raise Wrong(f"{prefix}return a real number, got a complex {type(value).__name__}")
        if tensor.dtype == torch.bool:
            raise Wrong(f"{prefix}return a number, got a bool {type(value).__name__}")
        value = tensor.reshape(()).item()
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        raise Wrong(f"{prefix}return a number, got {_kind_of(value)}")
    if isinstance(value, complex) or not isinstance(value, numbers.Real):
        raise Wrong(f"{prefix}return a real number, got {value!r} (a complex number; keep "
                    "its real part, .real)")
    value = float(value) if not isinstance(value, numbers.Integral) else int(value)
    if isinstance(value, float) and math.isnan(value):
        raise Wrong(f"{prefix}your function returned NaN")
    if isinstance(value, float) and math.isinf(value):
        raise Wrong(f"{prefix}your function returned {value}")
    if integer:
        if isinstance(value, float) and not value.is_integer():
            raise Wrong(f"{prefix}expected a whole number, got {value!r}")
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
        at = f"at index {index} " if index else ""
        prefix = f"{what}: " if what else ""
        return (f"{prefix}{at}expected {float(expected[index]):.6g}, "
                f"got {float(tensor[index]):.6g}")
    return None


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
