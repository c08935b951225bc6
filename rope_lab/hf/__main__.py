"""``python -m rope_lab.hf CONFIG_JSON [--plot PNG]``: inspect a model's RoPE offline.

Reads a downloaded ``config.json`` (no network, no transformers) and prints, per layer type,
the rotary dims out of the head dim, the base, the rope type and its parameters, the
attention factor, the wavelength range, the critical dimension (pairs that turn fully
within the trained context), the context the frequencies were scaled for, NoPE layers, and
warnings for what transformers would ignore or guess. ``--plot`` writes the wavelength
spectrum against the context lengths. Bad input gets one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path


def _load(path: str) -> dict:
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"CONFIG_JSON {path!r} is not a file; expected a config.json")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"CONFIG_JSON {path!r} is not JSON ({error}); expected a "
                         f"config.json") from None
    if not isinstance(data, dict):
        raise ValueError(f"CONFIG_JSON {path!r} holds a JSON {type(data).__name__}; expected "
                         f"an object (a config.json)")
    return data


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rope_lab.hf",
        description="Inspect the RoPE of a Hugging Face config.json, offline.")
    parser.add_argument("config", metavar="CONFIG_JSON", help="path to a config.json")
    parser.add_argument("--plot", metavar="PNG",
                        help="write the wavelength spectrum against the contexts to PNG")
    args = parser.parse_args(argv)
    from rope_lab.hf import report

    try:
        config = _load(args.config)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the report lists them itself
            text = report.format_report(config, name=Path(args.config).name)
            if args.plot:
                from rope_lab.plots import real_models

                figure = real_models.config_spectrum(config, title=Path(args.config).name)
                figure.savefig(args.plot)
    except (ValueError, TypeError, KeyError, OSError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(f"error: {message}", file=sys.stderr)
        return 2
    print(text)
    if args.plot:
        print(f"\nwrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
