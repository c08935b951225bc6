"""git's notebook clean filter as one long-running process (git's filter protocol, version 2).

`make notebook-filter` sets ``filter.nbstripout.process`` to this script with the same
nbstripout options as ``filter.nbstripout.clean``. git then starts it once per command and
hands it every notebook to clean, instead of starting ``python -m nbstripout`` once per
notebook (about 1.7 s each: Python, nbformat and jsonschema load every time).

That matters most in a fresh clone: git checks out every file in the same second as it
writes its index, so every entry is "racily clean" and the first command that writes the
index (the first ``git status``, or the lab's post-save hook) cleans all 54 notebooks to
be sure. With one process per notebook that took 1 min 43 s here; with this script, one
start and a few milliseconds per notebook.

What a notebook becomes is exactly what the ``clean`` command makes of it: each one goes
through nbstripout's own command line (:func:`nbstripout.main`), with this script's
arguments, in this process. git versions before 2.11 ignore ``process`` and run ``clean``.

The protocol: https://git-scm.com/docs/gitattributes#_long_running_filter_process
"""

from __future__ import annotations

import io
import sys
from typing import BinaryIO

MAX_PACKET_DATA = 65516  # pkt-line: 4 hex digits of length (65520 at most) + data
FLUSH = b"0000"


def read_packet(stream: BinaryIO) -> bytes | None:
    """One pkt-line's data; None for a flush packet. EOFError at the end of the input."""
    header = stream.read(4)
    if not header:
        raise EOFError
    if len(header) < 4:
        raise ValueError(f"git sent a truncated pkt-line header: {header!r}")
    length = int(header, 16)
    if length == 0:
        return None
    data = stream.read(length - 4)
    if len(data) != length - 4:
        raise ValueError(f"git sent a truncated pkt-line: {length - 4} bytes announced, "
                         f"{len(data)} read")
    return data


def read_list(stream: BinaryIO) -> list[bytes]:
    """Packets up to the next flush packet."""
    packets = []
    while (packet := read_packet(stream)) is not None:
        packets.append(packet)
    return packets


def write_packets(stream: BinaryIO, packets: list[bytes]) -> None:
    """``packets`` as pkt-lines, then a flush packet."""
    for packet in packets:
        stream.write(b"%04x" % (len(packet) + 4) + packet)
    stream.write(FLUSH)
    stream.flush()


def write_content(stream: BinaryIO, content: bytes) -> None:
    write_packets(stream, [content[start:start + MAX_PACKET_DATA]
                           for start in range(0, len(content), MAX_PACKET_DATA)])


def text_lines(packets: list[bytes]) -> list[str]:
    return [packet.decode("utf-8").rstrip("\n") for packet in packets]


class _Captured(io.BytesIO):
    """What nbstripout writes: its TextIOWrapper closes the buffer when collected."""

    def close(self) -> None:
        pass


class _Stream:
    """A stand-in for sys.stdin or sys.stdout: nbstripout reads and writes ``.buffer``."""

    def __init__(self, buffer: BinaryIO):
        self.buffer = buffer


def clean(content: bytes, arguments: list[str]) -> bytes:
    """``content`` through ``nbstripout ARGUMENTS`` (stdin to stdout), in this process."""
    # nbformat imports jsonschema, whose format checkers import rfc3987_syntax when it is
    # installed (jupyter-events requires it): about 1 s building parsers, two thirds of this
    # process's start, for the "iri" formats, which nbformat never checks (it validates
    # with no format checker). jsonschema skips a checker whose module cannot be imported.
    sys.modules.setdefault("rfc3987_syntax", None)
    from nbstripout import main

    output = _Captured()
    saved = sys.argv, sys.stdin, sys.stdout
    sys.argv = ["nbstripout", *arguments]
    sys.stdin, sys.stdout = _Stream(io.BytesIO(content)), _Stream(output)
    try:
        main()
    except SystemExit as stop:
        if stop.code not in (None, 0):
            raise RuntimeError(f"nbstripout exited with {stop.code}") from None
    finally:
        sys.argv, sys.stdin, sys.stdout = saved
    return output.getvalue()


def serve(arguments: list[str], stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Answer git until it closes the pipe."""
    hello = text_lines(read_list(stdin))
    if hello[:1] != ["git-filter-client"] or "version=2" not in hello[1:]:
        raise SystemExit(f"git_notebook_filter: not git's filter protocol version 2: {hello}")
    write_packets(stdout, [b"git-filter-server\n", b"version=2\n"])
    offered = text_lines(read_list(stdin))
    if "capability=clean" not in offered:
        raise SystemExit(f"git_notebook_filter: git does not offer to clean: {offered}")
    write_packets(stdout, [b"capability=clean\n"])
    while True:
        try:
            header = dict(line.split("=", 1) for line in text_lines(read_list(stdin)))
        except EOFError:
            return
        content = b"".join(read_list(stdin))
        if header.get("command") != "clean":
            write_packets(stdout, [b"status=error\n"])
            continue
        try:
            cleaned = clean(content, arguments)
        except Exception as error:  # git reports the file and keeps its content as it is
            print(f"git_notebook_filter: could not clean {header.get('pathname')}: {error}",
                  file=sys.stderr)
            write_packets(stdout, [b"status=error\n"])
            continue
        write_packets(stdout, [b"status=success\n"])
        write_content(stdout, cleaned)
        write_packets(stdout, [])  # the status stays "success"


def main() -> None:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # anything printed by accident must not reach git's pipe
    serve(sys.argv[1:], stdin, stdout)


if __name__ == "__main__":
    main()
