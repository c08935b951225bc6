"""Where a grading runs: one spawned worker process, the same on every platform.

A learner's function never runs in the notebook's own process. The first grading starts a
*worker*: a fresh Python (``sys.executable``, never a fork of the notebook) that imports
torch and the graders once and then serves gradings one after another, so a check costs
tens of milliseconds, not the seconds of an import. A notebook kernel starts its worker in
the background when it imports ``rope_lab.exercises``; elsewhere the first check starts it.

Each grading sends a job (the grader and the learner's function, pickled by
:mod:`rope_lab.exercises.grading`) and waits for its reply, never longer than its limit:

- a function that never returns, even one that holds the GIL in C code
  (``sum(itertools.repeat(1))``), is stopped at the limit: the worker's whole process group
  (the worker and every process the learner started) is killed, and a fresh worker starts
  in the background for the next grading;
- ``os._exit``, a crash in compiled code or the out-of-memory killer end the worker, not the
  notebook; the reply names the exit status or signal, and the group is killed too, so a
  process the learner forked does not outlive the grading;
- on Linux a grading may take at most ``memory`` bytes of new memory (``RLIMIT_DATA``): a
  huge allocation fails inside the learner's own call, where the grader can name it. Not
  where an NVIDIA GPU is present: CUDA's driver maps its own host memory, and a limit it
  does not expect could fail a learner's GPU code (untested on a GPU); there the kernel's
  out-of-memory killer ends the worker instead, and the reply says so;
- a grading that leaves a thread or a child process running retires the worker (the next
  one starts fresh); what a grading changes inside the worker is the job's to put back.

The worker ignores the notebook's interrupt (the notebook stops it instead), dies with the
notebook (Linux: ``PR_SET_PDEATHSIG``; everywhere: when its pipe closes while it waits, and
at the notebook's exit; a job that outlives a dead notebook ends at a C watchdog's deadline,
:func:`faulthandler.dump_traceback_later`), and writes whatever compiled code prints to the
notebook's stderr.

The protocol: the notebook writes length-prefixed pickles to the worker's stdin (the worker
trusts the notebook); the worker writes JSON lines to its stdout (the notebook does not
unpickle anything a learner's code could have written).
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import importlib
import io
import json
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback

from rope_lab.i18n import _

# Start-up and set-up (imports, unpickling the learner's function) before a grading's clock
# starts: generous, since the first import of torch (and transformers, for 10.x) from a cold
# disk can take tens of seconds on a laptop. The learner's own code does not run in it.
SETUP_LIMIT_S = 120.0

# The worker's first line of Python: take the notebook's sys.path, then serve.
_BOOT = ("import json, os, sys; sys.path[:] = json.loads(os.environ.pop('ROPE_LAB_WORKER_PATH'));"
         " from rope_lab.exercises.worker import serve; serve()")
_HEADER = struct.Struct("!Q")
_POLL_S = 0.05  # how often a waiting notebook looks whether the worker is still alive
# how long after its limits a job ends itself if the notebook died without stopping it
ORPHAN_MARGIN_S = 60.0


class Worker:
    """One worker process, seen from the notebook: :meth:`start` it, :meth:`run` jobs in it,
    :meth:`stop` it. One job at a time: a second thread's :meth:`run` waits for the first."""

    def __init__(self):
        self._lock = threading.RLock()
        self._process: subprocess.Popen | None = None
        self._messages: queue.SimpleQueue | None = None
        self._reader: threading.Thread | None = None
        self._ready = False
        self._owner = os.getpid()
        self.pid: int | None = None

    # --- life --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker in the background (returns at once); nothing if it is running."""
        if self._owner != os.getpid():  # this is a forked copy of the notebook: not ours
            self._process, self._messages, self._reader = None, None, None
            self._owner = os.getpid()
        if self._process is not None and self._process.poll() is None:
            return
        self.stop(restart=False)
        if not sys.executable:
            raise WorkerError(_("this Python does not know its own executable "
                                "(sys.executable is empty), so it cannot start the grader's "
                                "process"))
        environment = {**os.environ, "ROPE_LAB_WORKER_PATH": json.dumps(_search_path()),
                       "ROPE_LAB_WORKER_PARENT": str(os.getpid())}
        if threading.current_thread() is threading.main_thread():
            # PR_SET_PDEATHSIG fires when the *thread* that started the child ends
            environment["ROPE_LAB_WORKER_DIE_WITH_PARENT"] = "1"
        options: dict = {}
        if os.name == "posix":
            options["start_new_session"] = True  # its own process group, to kill as one
        else:
            options["creationflags"] = (subprocess.CREATE_NEW_PROCESS_GROUP
                                        | getattr(subprocess, "CREATE_NO_WINDOW", 0))
        try:
            process = subprocess.Popen([sys.executable, "-c", _BOOT], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, env=environment,
                                       cwd=os.getcwd(), close_fds=True, **options)
        except OSError as error:
            raise WorkerError(_("could not start the grader's process ({error})").format(
                error=error)) from error
        messages: queue.SimpleQueue = queue.SimpleQueue()
        reader = threading.Thread(target=_read_messages, args=(process.stdout, messages),
                                  name="rope_lab grader reader", daemon=True)
        reader.start()
        self._process, self._messages, self._reader = process, messages, reader
        self._ready, self.pid = False, process.pid
        _running.add(self)

    def stop(self, *, restart: bool = False) -> bool:
        """Kill the worker and every process in its group; True if another process than the
        worker itself was still running (the learner had started it). ``restart``: start a
        fresh worker in the background at once."""
        process, others = self._process, False
        if process is not None and self._owner == os.getpid():
            others = _kill_group(process)
            with contextlib.suppress(OSError):
                process.stdin.close()
            with contextlib.suppress(OSError):
                process.stdout.close()
            if self._reader is not None:
                self._reader.join(timeout=1.0)
        self._process, self._messages, self._reader, self._ready = None, None, None, False
        _running.discard(self)
        if restart:
            with contextlib.suppress(WorkerError):
                self.start()
        return others

    @property
    def ready(self) -> bool:
        """Whether the worker has started and waits for a job (False while one runs)."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            self._drain_ready()
            return self._ready
        finally:
            self._lock.release()

    # --- one job -----------------------------------------------------------------------------

    def run(self, job: str, arguments: dict, *, limit: float, memory: int | None = None,
            preload: tuple[str, ...] = (), setup_limit: float | None = None) -> dict:
        """Run ``job`` ("module:function") in the worker on ``arguments``, at most ``limit``
        seconds once it has started, and return its reply.

        The job is called as ``job(arguments, send)`` after the modules in ``preload`` are
        imported; it calls ``send({"started": True})`` when the clock should start and may
        call ``send({"running": text})`` to say what runs now. Replies:

        - ``{"result": …, "out": …, "err": …, "imported": […]}``: it finished (``result`` is
          what the job returned; out and err what it printed);
        - ``{"timeout": True, "phase": "setup" | "job", "running": …}``: stopped at the limit
          (``running``: the last text it sent, or None);
        - ``{"died": status, "running": …, "others": bool}``: the worker ended without a reply
          (``status``: the exit code, negative for a signal; ``others``: processes it had
          started were stopped too);
        - ``{"failed": text}``: the worker could not start or the job itself failed (a
          grader's bug, a traceback's last lines).
        """
        with self._lock:
            return self._run(job, arguments, limit=limit, memory=memory, preload=preload,
                             setup_limit=SETUP_LIMIT_S if setup_limit is None else setup_limit)

    def _run(self, job, arguments, *, limit, memory, preload, setup_limit) -> dict:
        try:
            self.start()
        except WorkerError as error:
            return {"failed": str(error)}
        request = {"job": job, "arguments": arguments, "path": _search_path(),
                   "cwd": os.getcwd(), "preload": list(preload), "memory": memory,
                   "deadline": setup_limit + limit + ORPHAN_MARGIN_S}
        deadline = time.monotonic() + setup_limit
        phase, running = "setup", None
        try:
            while not self._ready:
                message = self._next(deadline)
                if isinstance(message, dict) and "boot_error" in message:
                    self.stop(restart=False)
                    return {"failed": message["boot_error"]}
                if not isinstance(message, dict):
                    return self._ended(message, phase, running)
            try:
                data = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
                self._process.stdin.write(_HEADER.pack(len(data)) + data)
                self._process.stdin.flush()
            except (OSError, ValueError):  # it died while we wrote
                return self._ended(_DIED, phase, running)
            while True:
                message = self._next(deadline)
                if not isinstance(message, dict):
                    return self._ended(message, phase, running)
                if "started" in message:
                    phase, deadline = "job", time.monotonic() + limit
                elif "running" in message:
                    running = message["running"]
                elif "done" in message:
                    reply = message["done"]
                    if not reply.pop("clean", False):
                        self.stop(restart=True)
                    return reply
        except BaseException:  # an interrupt while waiting: the worker goes, the notebook stays
            self.stop(restart=True)
            raise

    def _next(self, deadline: float):
        """The worker's next message, or _TIMEOUT at the deadline, or _DIED."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return _TIMEOUT
            try:
                message = self._messages.get(timeout=min(remaining, _POLL_S))
            except queue.Empty:
                if self._process.poll() is None:
                    continue
                # dead, maybe with a grandchild holding the pipe open (no end of file then):
                # what it sent before it died still counts, in order
                try:
                    message = self._messages.get_nowait()
                except queue.Empty:
                    return _DIED
                if message is None:
                    return _DIED
            if message is None:  # end of file: it is gone or going
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._process.wait(timeout=1.0)
                return _DIED
            if "ready" in message:
                self._ready = True
            return message

    def _drain_ready(self) -> None:
        if self._ready or self._messages is None:
            return
        with contextlib.suppress(queue.Empty):
            while not self._ready:
                message = self._messages.get_nowait()
                if message is None:
                    return
                if "ready" in message:
                    self._ready = True
                elif "boot_error" in message:
                    self._messages.put(message)  # for run() to report
                    return

    def _ended(self, how, phase: str, running) -> dict:
        if how is _TIMEOUT:
            self.stop(restart=True)
            return {"timeout": True, "phase": phase, "running": running}
        process = self._process
        status = process.poll() if process is not None else None
        others = self.stop(restart=True)  # kills it too if it closed its pipe and lives on
        if status is None and process is not None:
            status = process.returncode
        return {"died": status, "running": running, "others": others, "phase": phase}


class WorkerError(RuntimeError):
    """The worker process could not be started."""


_TIMEOUT, _DIED = object(), object()
# workers of this process that may be running, stopped at exit
_running: set[Worker] = set()


@atexit.register
def _stop_all() -> None:
    for worker in list(_running):
        with contextlib.suppress(Exception):
            worker.stop(restart=False)


def _search_path() -> list[str]:
    """The notebook's sys.path, with '' (the working folder) spelled out."""
    return [os.path.abspath(entry) if entry in ("", ".") else entry for entry in sys.path
            if isinstance(entry, str)]


def _read_messages(stream, messages: queue.SimpleQueue) -> None:
    """The reader thread: each JSON line the worker writes, then None at end of file."""
    try:
        for line in stream:
            try:
                message = json.loads(line)
            except ValueError:  # not one of ours
                continue
            if isinstance(message, dict):
                messages.put(message)
    except (OSError, ValueError):
        pass
    finally:
        messages.put(None)


def _kill_group(process: subprocess.Popen) -> bool:
    """SIGKILL the worker's process group (every process it or the learner started that
    stayed in it); True if a process other than the worker was in it."""
    others = False
    if os.name == "posix":
        if process.poll() is not None:  # the worker is gone: is anyone left in its group?
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, 0)
                others = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    else:  # Windows: the process tree
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["taskkill", "/F", "/T", "/PID", str(process.pid)],
                           capture_output=True, timeout=10)
        with contextlib.suppress(OSError):
            process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5.0)
    return others


# --- inside the worker ------------------------------------------------------------------------


class Capture(io.TextIOBase):
    """What a job prints (its stdout or stderr), kept up to a limit to show in the notebook."""

    LIMIT = 20_000

    def __init__(self):
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        text = str(text)
        room = max(self.LIMIT - self.size, 0)
        self.parts.append(text[:room])
        self.size += min(len(text), room)
        self.dropped += max(len(text) - room, 0)
        return len(text)

    def text(self) -> str:
        more = ("\n" + _("… ({count} more characters not shown)").format(count=self.dropped)
                + "\n") if self.dropped else ""
        return "".join(self.parts) + more


def serve() -> None:
    """The worker's main loop (what :meth:`Worker.start` runs); never returns."""
    requests, replies = os.dup(0), os.dup(1)
    # stdin reads nothing; what compiled code prints to stdout goes to stderr, not into the
    # replies
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    with contextlib.suppress(OSError):  # no stderr (pythonw): stray output is lost instead
        os.dup2(2, 1)
    os.close(null)
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt is the notebook's to handle

    def send(message: dict) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(replies, data):]

    try:
        _warm_up()
    except BaseException:  # noqa: BLE001 - told to the notebook, which shows it
        send({"boot_error": traceback.format_exc(limit=-3)})
        os._exit(70)
    threads = threading.active_count()
    send({"ready": os.getpid()})
    while True:
        request = _receive(requests)
        if request is None:  # the notebook closed the pipe: it is gone
            os._exit(0)
        send({"done": _serve_one(request, send, threads)})


def _die_with_parent() -> None:
    parent = int(os.environ.pop("ROPE_LAB_WORKER_PARENT", "0") or 0)
    if os.environ.pop("ROPE_LAB_WORKER_DIE_WITH_PARENT", "") and sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if parent and os.name == "posix" and os.getppid() != parent:
        os._exit(0)  # the notebook died before we could ask to die with it


def _warm_up() -> None:
    """Import what every grading needs, and what torch imports on first use (sympy, on the
    first broadcast: a second), before any clock."""
    importlib.import_module("rope_lab.exercises")
    import torch

    torch.broadcast_shapes((1, 2), (2, 1))
    # One thread: a grading's tensors are small, and OpenMP threads that spin while the
    # notebook (or a class's other kernels) use the cores make it slower, not faster: the
    # honest 05.3 scan took 1.3 s on one thread and 3-9 s on two, on a loaded 2-core machine.
    torch.set_num_threads(1)


def _receive(descriptor: int):
    header = _read_exactly(descriptor, _HEADER.size)
    if header is None:
        return None
    data = _read_exactly(descriptor, _HEADER.unpack(header)[0])
    return None if data is None else pickle.loads(data)


def _read_exactly(descriptor: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(descriptor, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _serve_one(request: dict, send, threads: int) -> dict:
    """One job, its output captured, within the memory limit; the reply, ``clean`` when the
    worker can take the next job."""
    sys.path[:] = request["path"]
    with contextlib.suppress(OSError):
        os.chdir(request["cwd"])
    for name in request["preload"]:
        with contextlib.suppress(Exception):  # a module that does not import is the job's
            importlib.import_module(name)    # to report, with its line
    before = set(sys.modules)
    out, err = Capture(), Capture()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    restore_memory = limit_memory(request["memory"])
    # A self-destruct in C (it needs no GIL): where nothing kills the worker along with a dead
    # notebook (no PR_SET_PDEATHSIG off Linux), a job that never returns still ends. The
    # notebook stops it long before, at its own limit.
    with contextlib.suppress(ValueError, OSError):  # no stderr (pythonw): no watchdog
        faulthandler.dump_traceback_later(request["deadline"], exit=True, file=2)
    try:
        module, _, name = request["job"].partition(":")
        job = getattr(importlib.import_module(module), name)
        reply = {"result": job(request["arguments"], send)}
    except BaseException:  # noqa: BLE001 - a job's own bug: reported, never a hang
        reply = {"failed": traceback.format_exc(limit=-3)}
    finally:
        faulthandler.cancel_dump_traceback_later()
        restore_memory()
        sys.stdout, sys.stderr = saved
    reply["out"], reply["err"] = out.text(), err.text()
    reply["imported"] = sorted(name for name in set(sys.modules) - before
                               if sys.modules.get(name) is not None)
    result = reply.get("result")
    retire = "failed" in reply or (isinstance(result, dict) and result.get("retire"))
    reply["clean"] = not retire and threading.active_count() <= threads and not _children()
    return reply


def _children() -> bool:
    """Whether a process this worker started is still there (running, or a zombie)."""
    if os.name != "posix":
        return False
    try:
        pid, _status = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return False
    return True  # one running (pid 0) or one that ended and was just reaped


def memory_limited() -> bool:
    """Whether a grading's memory is limited here (Linux without an NVIDIA GPU)."""
    return sys.platform.startswith("linux") and not _gpu_present()


def _gpu_present() -> bool:
    """An NVIDIA device node: CUDA may start in this process (checked without starting it)."""
    return any(name.startswith("nvidia") and name[6:].isdigit() for name in os.listdir("/dev"))


def limit_memory(extra: int | None):
    """Allow ``extra`` bytes of new memory from now on (Linux: RLIMIT_DATA counts malloc and
    anonymous mappings); returns the function that lifts the limit again."""
    if not extra or not memory_limited():
        return lambda: None
    import resource

    try:
        with open("/proc/self/status") as status:
            used = next(int(line.split()[1]) * 1024 for line in status
                        if line.startswith("VmData:"))
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        limit = used + int(extra)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    except (OSError, ValueError, StopIteration):
        return lambda: None

    def lift() -> None:
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))

    return lift
