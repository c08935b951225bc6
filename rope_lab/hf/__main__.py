"""``python -m rope_lab.hf CONFIG_JSON [--plot PNG] [--strict]``: inspect a model's RoPE offline.

Reads a downloaded ``config.json`` (no network, no transformers) and prints, first, warnings
for what transformers would ignore or guess and for the rule used where transformers does not
know the model type; then per layer type the rotary dims out of the head dim, the base, the
rope type and its parameters, the attention factor, the wavelength range, the critical
dimension (pairs that turn fully within the trained context), the context the frequencies were
scaled for, and NoPE layers. ``--plot`` writes the wavelength spectrum against the context
lengths to a ``.png`` file.

Exit status: 0, or 1 with ``--strict`` when there is a warning (for scripts and CI); bad input
(not JSON, malformed numbers, no RoPE, an unwritable ``--plot``) gets one line on stderr and
status 2, never a traceback. Every string that comes from the config is printed with terminal
control characters escaped, so a crafted file cannot move the cursor or retitle the window.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

from rope_lab import _atomic
from rope_lab.hf.report import printable


def _load(path: str) -> dict:
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"CONFIG_JSON {path!r} is not a file; expected a config.json")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"CONFIG_JSON {path!r} is not JSON ({error}); expected a "
                         f"config.json") from None
    except RecursionError:
        raise ValueError(f"CONFIG_JSON {path!r} is nested too deeply to read; expected a "
                         f"config.json") from None
    if not isinstance(data, dict):
        raise ValueError(f"CONFIG_JSON {path!r} holds a JSON {type(data).__name__}; expected "
                         f"an object (a config.json)")
    return data


def _plot_path(value: str) -> Path:
    """The --plot file, checked before anything is computed or printed."""
    path = Path(value)
    if path.is_dir():
        raise ValueError(f"--plot {value!r} is a folder; expected a file name such as "
                         f"{str(path / 'rope.png')!r}")
    if path.suffix.lower() != ".png":
        raise ValueError(f"--plot must name a .png file, got {value!r} (matplotlib would write "
                         f"{value + '.png'!r} instead); expected e.g. {value + '.png'!r}")
    if not path.parent.is_dir():
        raise ValueError(f"--plot {value!r}: its folder {str(path.parent)!r} does not exist")
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rope_lab.hf",
        description="Inspect the RoPE of a Hugging Face config.json, offline.")
    parser.add_argument("config", metavar="CONFIG_JSON", help="path to a config.json")
    parser.add_argument("--plot", metavar="PNG",
                        help="write the wavelength spectrum against the contexts to PNG")
    parser.add_argument("--strict", action="store_true",
                        help="exit with status 1 when there is any warning")
    args = parser.parse_args(argv)
    from rope_lab.hf import report

    try:
        plot = _plot_path(args.plot) if args.plot else None
        config = _load(args.config)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the report lists them itself
            text = report.format_report(config, name=Path(args.config).name)
            notes = report.all_warnings(config)
            if plot is not None:
                from rope_lab.plots import real_models

                figure = real_models.config_spectrum(config, title=Path(args.config).name)
                with _atomic.writing(plot) as handle:
                    figure.savefig(handle, format="png")
    except (ValueError, TypeError, KeyError, OSError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(printable(f"error: {message}").replace("\n", " "), file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - a config this module did not foresee
        print(printable(f"error: could not read {args.config!r}: {type(error).__name__}: "
                        f"{error}").replace("\n", " "), file=sys.stderr)
        return 2
    print(printable(text))
    if plot is not None:
        print(printable(f"\nwrote {plot}"))
    return 1 if args.strict and notes else 0


if __name__ == "__main__":
    sys.exit(main())
