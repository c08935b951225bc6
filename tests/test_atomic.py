"""One way to write a file (rope_lab._atomic): whole or not at all, and nothing else writes."""

import ast
import os
import resource
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rope_lab import _atomic

ROOT = Path(__file__).resolve().parents[1]
ATOMIC = ROOT / "rope_lab" / "_atomic.py"


# --- the writer ---------------------------------------------------------------------------------

WRITER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("atomic", sys.argv[1])
atomic = importlib.util.module_from_spec(spec)
spec.loader.exec_module(atomic)
path, naive = sys.argv[2], sys.argv[3] == "naive"
texts = [("[" + ", ".join([str(k)] * 300_000) + "]\\n") for k in (1, 2)]
print("ready", flush=True)
while True:
    for text in texts:
        if naive:
            open(path, "w").write(text)
        else:
            atomic.write_text(path, text)
"""


def _kill_writers(path, naive, delays):
    """Start a writer that rewrites ``path`` in a loop, SIGKILL it after each delay, and
    return what the file held after each kill."""
    seen = []
    for delay in delays:
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(ATOMIC), str(path),
                                   "naive" if naive else "atomic"], stdout=subprocess.PIPE)
        try:
            assert writer.stdout.readline() == b"ready\n"
            time.sleep(delay)
        finally:
            writer.kill()
            writer.wait()
        seen.append(path.read_text())
    return seen


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_writer_killed_at_any_point_leaves_a_whole_file(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("[0]\n")
    whole = {"[0]\n", *(("[" + ", ".join([str(k)] * 300_000) + "]\n") for k in (1, 2))}
    delays = [0.0, 0.001, 0.003, 0.007, *(0.01 + 0.013 * i for i in range(21))]
    seen = _kill_writers(path, False, delays)
    assert all(text in whole for text in seen), [len(t) for t in seen if t not in whole]
    assert len(set(seen)) > 1  # the kills did land at different points of the loop
    # a kill may leave a hidden temporary beside it, never anything else
    assert {p.name for p in tmp_path.iterdir()} - {"results.json"} <= {
        p.name for p in tmp_path.glob(".results.json.*.tmp")}
    # the same kills against a plain write_text tear the file: the check can fail
    control = _kill_writers(tmp_path / "naive.json", True, delays[4:12])
    assert any(text not in whole for text in control)


def test_a_failed_replace_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    path.write_text("old")

    def fails(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fails)
    with pytest.raises(OSError, match="disk full"):
        _atomic.write_text(path, "new")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_full_disk_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    path.write_text("old")

    def no_space(descriptor):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(OSError, match="No space"):
        with _atomic.writing(path) as handle:
            handle.write(b"new")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.json"]


# A process under a file-size limit must not write bytecode: Python's .pyc writer takes a
# short write for a whole one and leaves a truncated .pyc ("marshal data too short") that
# breaks every later import of that module (make's PYTHONPYCACHEPREFIX shares them).
NO_BYTECODE = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


SIZE_LIMITED = """
import importlib.util, resource, sys
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
spec = importlib.util.spec_from_file_location("atomic", sys.argv[3])
_atomic = importlib.util.module_from_spec(spec)
spec.loader.exec_module(_atomic)
try:
    _atomic.write_bytes(sys.argv[1], b"x" * 100_000)
except OSError as error:
    print(error.strerror)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_file_size_limit_leaves_the_old_file(tmp_path):
    """`ulimit -f` (RLIMIT_FSIZE): Python ignores SIGXFSZ, so the write fails with EFBIG."""
    path = tmp_path / "catalog.po"
    path.write_bytes(b"old" * 1000)
    done = subprocess.run([sys.executable, "-c", SIZE_LIMITED, str(path), "40000", str(ATOMIC)],
                          capture_output=True, text=True, check=True, env=NO_BYTECODE)
    assert done.stdout.strip() == "File too large"
    assert path.read_bytes() == b"old" * 1000 and [p.name for p in tmp_path.iterdir()] == [
        "catalog.po"]


def test_permissions_are_kept_and_a_symlink_stays_a_symlink(tmp_path):
    path = tmp_path / "page.html"
    path.write_text("old")
    path.chmod(0o640)
    _atomic.write_text(path, "new")
    assert path.read_text() == "new" and stat.S_IMODE(path.stat().st_mode) == 0o640
    link = tmp_path / "link.html"
    link.symlink_to(path)
    _atomic.write_text(link, "through the link")
    assert link.is_symlink() and path.read_text() == "through the link"
    fresh = tmp_path / "fresh.txt"
    umask = os.umask(0o027)
    try:
        _atomic.write_text(fresh, "x")
    finally:
        os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o640  # 0666 less the umask, not mkstemp's 0600


def test_write_new_never_replaces(tmp_path):
    path = tmp_path / "r.json"
    _atomic.write_new(path, "first")
    with pytest.raises(FileExistsError):
        _atomic.write_new(path, "second")
    assert path.read_text() == "first" and len(list(tmp_path.iterdir())) == 1


def test_replace_all_changes_every_file_or_none(tmp_path, monkeypatch):
    a, b, c = (tmp_path / name for name in ("a.po", "b.po", "c.po"))
    for path in (a, b, c):
        path.write_text("old " + path.name)
    # the second file cannot be staged (its folder is gone): nothing changes
    with pytest.raises(OSError):
        _atomic.replace_all({a: "new a", tmp_path / "missing" / "b.po": "new b", c: "new c"})
    assert [p.read_text() for p in (a, b, c)] == ["old a.po", "old b.po", "old c.po"]
    # the third rename fails: the first two get their old content back
    real, calls = os.replace, []

    def third_fails(source, target):
        calls.append(target)
        if len(calls) == 3:
            raise OSError("the third rename fails")
        return real(source, target)

    monkeypatch.setattr(os, "replace", third_fails)
    with pytest.raises(OSError, match="third"):
        _atomic.replace_all({a: "new a", b: "new b", c: "new c"})
    monkeypatch.setattr(os, "replace", real)
    assert [p.read_text() for p in (a, b, c)] == ["old a.po", "old b.po", "old c.po"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.po", "b.po", "c.po"]
    assert _atomic.replace_all({a: "new a", b: b"new b"}) == [a, b]
    assert [p.read_text() for p in (a, b, c)] == ["new a", "new b", "old c.po"]


# --- nothing else writes --------------------------------------------------------------------------

# Files that write by another way, and why.
EXEMPT = {
    # The C kernel's private cache: the compiler writes the library into a 0700 folder of
    # its own, and the failure record is created with O_EXCL | O_NOFOLLOW at mode 0600, then
    # renamed into place (already whole or not at all, with checks against other users that
    # a writer keeping the old file's mode does not make).
    "rope_lab/_ckernel.py",
    "rope_lab/_atomic.py",
}
# Functions that create a file that holds nothing: a lock.
LOCKS = {("rope_lab/experiments/_files.py", "locked")}

_MODE_LETTERS = set("wax+")
_FORBIDDEN_ATTRIBUTES = {
    "write_text", "write_bytes", "touch", "to_csv", "to_json", "tofile", "to_file",
    "savez", "savez_compressed", "savetxt",
}
_SHUTIL_WRITES = {"copy", "copy2", "copyfile", "copytree", "move", "make_archive"}
_OS_WRITES = {"rename", "renames", "replace", "link", "symlink", "truncate"}
_TEMPFILES = {"NamedTemporaryFile", "mkstemp", "TemporaryFile", "SpooledTemporaryFile"}
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}


def _dotted(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return _dotted(node.func) + "()"
    return "?"


def _is_mode(value) -> bool:
    return (isinstance(value, ast.Constant) and isinstance(value.value, str)
            and set(value.value) <= set("rwxabtU+") and bool(set(value.value) & _MODE_LETTERS))


class _Writes(ast.NodeVisitor):
    """Write paths of one module that do not go through rope_lab._atomic."""

    def __init__(self, name: str):
        self.name, self.found, self.function = name, [], "<module>"
        self.handles: set[str] = {"sys.stdout", "sys.stderr"}

    def _flag(self, node, what):
        if (self.name, self.function) not in LOCKS:
            self.found.append(f"{self.name}:{node.lineno}: {what}")

    def visit_FunctionDef(self, node):
        outer, self.function = self.function, node.name
        self.generic_visit(node)
        self.function = outer

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_With(self, node):
        for item in node.items:
            call = item.context_expr
            if (isinstance(call, ast.Call) and _dotted(call.func).split(".")[-1] == "writing"
                    and isinstance(item.optional_vars, ast.Name)):
                self.handles.add(item.optional_vars.id)
        self.generic_visit(node)

    def visit_Assign(self, node):
        if isinstance(node.value, ast.Call) and _dotted(node.value.func).split(".")[-1] in (
                "BytesIO", "StringIO"):
            self.handles |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        self.generic_visit(node)

    def _safe(self, node) -> bool:
        return (_dotted(node) in self.handles
                or isinstance(node, ast.Call) and _dotted(node.func).split(".")[-1] in (
                    "BytesIO", "StringIO"))

    def visit_Call(self, node):
        name = _dotted(node.func)
        last = name.split(".")[-1]
        if name.split(".")[0] == "_atomic" or name.startswith("rope_lab._atomic."):
            self.generic_visit(node)
            return
        args, keywords = node.args, {k.arg: k.value for k in node.keywords}
        if name in ("open", "io.open", "codecs.open"):
            mode = args[1] if len(args) > 1 else keywords.get("mode")
            if mode is not None and (_is_mode(mode) or not isinstance(mode, ast.Constant)):
                self._flag(node, f"{name}(..., mode) writes")
        elif name == "os.open":
            flags = {n.attr for n in ast.walk(args[1]) if isinstance(n, ast.Attribute)} if len(
                args) > 1 else set()
            if flags & _WRITE_FLAGS:
                self._flag(node, f"os.open with {sorted(flags & _WRITE_FLAGS)}")
        elif last in ("open", "fdopen"):
            modes = [*args[:2], keywords.get("mode")]
            if any(m is not None and _is_mode(m) for m in modes):
                self._flag(node, f"{name}(mode) writes")
        elif last in _FORBIDDEN_ATTRIBUTES:
            self._flag(node, f"{name}()")
        elif name.startswith("shutil.") and last in _SHUTIL_WRITES:
            copy_function = keywords.get("copy_function")
            if not (last == "copytree" and copy_function is not None
                    and _dotted(copy_function).endswith("_atomic.copy_file")):
                self._flag(node, f"{name}()")
        elif name.startswith("os.") and last in _OS_WRITES:
            self._flag(node, f"{name}()")
        elif name.startswith("tempfile.") and last in _TEMPFILES:
            self._flag(node, f"{name}() creates a file")
        elif last == "savefig":
            if not (args and self._safe(args[0])) and not self._safe(keywords.get("fname")):
                self._flag(node, f"{name}() to a path")
        elif last in ("dump", "write_po", "write_mo") or name in ("nbformat.write",):
            target = (args[0] if last in ("write_po", "write_mo")
                      else args[1] if len(args) > 1 else keywords.get("fp"))
            if target is not None and not self._safe(target):
                self._flag(node, f"{name}() to a file")
        elif last == "save" and (args or keywords):
            if not any(self._safe(a) for a in [*args, *keywords.values()]):
                self._flag(node, f"{name}() to a path")
        self.generic_visit(node)


def write_paths(source: str, name: str = "<snippet>") -> list[str]:
    finder = _Writes(name)
    finder.visit(ast.parse(source))
    return finder.found


def _sources() -> list[Path]:
    return sorted([*(ROOT / "rope_lab").rglob("*.py"), *(ROOT / "scripts").glob("*.py")])


def test_every_file_is_written_through_the_one_writer():
    found = []
    for path in _sources():
        name = path.relative_to(ROOT).as_posix()
        if name not in EXEMPT:
            found += write_paths(path.read_text(encoding="utf-8"), name)
    assert not found, ("write files with rope_lab._atomic (write_text, write_bytes, writing, "
                       "copy_file, replace_all), whole or not at all:\n" + "\n".join(found))


@pytest.mark.parametrize("snippet", [
    "open(path, 'w').write(text)",
    "open(path, mode='ab')",
    "open(path, chosen_mode)",
    "Path(path).open('w', encoding='utf-8')",
    "path.write_text(text)",
    "path.write_bytes(data)",
    "shutil.copy2(font, out / font.name)",
    "shutil.copytree(a, b)",
    "os.replace(temporary, path)",
    "os.open(path, os.O_WRONLY | os.O_CREAT)",
    "figure.savefig('plot.png')",
    "json.dump(data, handle)",
    "with open(path) as handle:\n    json.dump(data, handle)",
    "nbformat.write(nb, path)",
    "font.save(CJK_FONT)",
    "torch.save(state, path)",
    "tempfile.NamedTemporaryFile('w', delete=False)",
    "gzip.open(path, 'wb')",
])
def test_the_check_finds_each_way_of_writing(snippet):
    assert len(write_paths(snippet)) == 1, snippet


@pytest.mark.parametrize("snippet", [
    "open(path).read()",
    "open(path, 'rb')",
    "path.open(encoding='utf-8')",
    "os.open(path, os.O_RDONLY)",
    "with _atomic.writing(path) as handle:\n    figure.savefig(handle, format='png')",
    "with _atomic.writing(path) as handle:\n    font.save(handle)",
    "buffer = io.BytesIO()\nwrite_po(buffer, catalog)\nfigure.savefig(buffer)",
    "shutil.copytree(a, b, copy_function=_atomic.copy_file)",
    "ast.dump(tree)",
    "record.save()",
    "_atomic.write_text(path, text)",
])
def test_the_check_lets_the_writer_and_reads_pass(snippet):
    assert write_paths(textwrap.dedent(snippet)) == [], snippet


# --- the commands that write, under a file-size limit -------------------------------------------

def _limited(limit: int):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply



def _copy_for_translations(tmp_path: Path) -> Path:
    """The notebooks, their catalogs and the package, where `update` can write."""
    import shutil

    clone = tmp_path / "repo"
    shutil.copytree(ROOT / "notebooks", clone / "notebooks",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copytree(ROOT / "rope_lab", clone / "rope_lab",
                    ignore=shutil.ignore_patterns("__pycache__", "*.json", "*.otf", "*.gz"))
    return clone


UPDATE = """
import sys
from pathlib import Path
from rope_lab.translations import catalogs
try:
    catalogs.update(Path(sys.argv[1]))
except OSError as error:
    print("refused:", error.strerror)
"""


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_update_under_a_file_size_limit_keeps_every_catalog(tmp_path):
    """Issue 35: `python -m rope_lab.translations update` under a 40 KB limit cut 04's catalog from
    76 KB to 40 KB, losing a translator's uncommitted entries."""
    import json

    clone = _copy_for_translations(tmp_path)
    catalog = (clone / "notebooks" / "locale" / "zh_CN" / "LC_MESSAGES"
               / "04_rope_in_d_dimensions.po")
    # a translator's entry, not committed yet (the new paragraph below, translated)
    catalog.write_bytes(catalog.read_bytes() + '\nmsgid "A new paragraph the catalog does not '
                        'have yet."\nmsgstr "目录里还没有的新段落。"\n'.encode())
    before = {path: path.read_bytes() for path in catalog.parent.glob("*.po")}
    assert len(before[catalog]) > 40_000
    notebook = clone / "notebooks" / "04_rope_in_d_dimensions.ipynb"
    data = json.loads(notebook.read_text(encoding="utf-8"))
    data["cells"].append({"cell_type": "markdown", "id": "new-cell", "metadata": {},
                          "source": ["A new paragraph the catalog does not have yet."]})
    notebook.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", UPDATE, str(clone)], capture_output=True,
                          text=True, preexec_fn=_limited(40_000), cwd=ROOT, env=NO_BYTECODE)
    assert "refused: File too large" in done.stdout, done.stdout + done.stderr
    assert {path: path.read_bytes() for path in catalog.parent.glob("*.po")} == before
    assert not list(catalog.parent.glob(".*.tmp"))


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_the_font_script_under_a_file_size_limit_keeps_the_font(tmp_path):
    """Issue 35: scripts/cjk_font.py under a 64 KB limit left the committed font broken.
    The shipped subset stands in for the full Noto font (it has every character needed)."""
    from rope_lab.book import CJK_FONT

    out = tmp_path / "cjk-subset.otf"
    out.write_bytes(CJK_FONT.read_bytes())
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "cjk_font.py"), "--font",
                           str(CJK_FONT), "--out", str(out)], capture_output=True, text=True,
                          preexec_fn=_limited(64 * 1024), env=NO_BYTECODE)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "File too large" in done.stderr, done.stderr
    assert out.read_bytes() == CJK_FONT.read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == [out.name]
