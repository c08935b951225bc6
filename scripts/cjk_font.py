"""Write rope_lab/book_assets/cjk-subset.woff: the Chinese characters the course uses.

The static book (``make book``) must show its Chinese words on a machine with no CJK
system font (Debian's chromium brings none), so the site ships a web font. A whole CJK
font is 16 MB; the course uses a few hundred characters (the claims table quotes the
posts), so this script keeps only those, from Noto Sans CJK SC (SIL Open Font License 1.1,
see cjk-subset.LICENSE.txt).

Run it (``make cjk-font``) after adding Chinese text; ``tests/test_book.py`` fails, naming
the missing characters, until you do. It needs the full font once, from Debian's
``fonts-noto-cjk`` package or at ``--font PATH``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rope_lab.book import CJK_FONT, cjk_characters  # noqa: E402

DEBIAN_FONT = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--font", type=Path, default=DEBIAN_FONT,
                        help=f"Noto Sans CJK .ttc or SC .otf (default {DEBIAN_FONT})")
    args = parser.parse_args(argv)
    if not args.font.exists():
        print(f"cjk_font: {args.font} not found. Install Debian's fonts-noto-cjk "
              "(apt-get install fonts-noto-cjk) or pass --font PATH to a Noto Sans CJK SC "
              "font.", file=sys.stderr)
        return 1
    from fontTools import subset
    from fontTools.ttLib import TTCollection, TTFont

    if args.font.suffix.lower() == ".ttc":
        faces = TTCollection(args.font).fonts
        font = next((f for f in faces if "SC" in f["name"].getDebugName(1)), None)
        if font is None:
            print(f"cjk_font: {args.font} has no SC (simplified Chinese) face", file=sys.stderr)
            return 1
    else:
        font = TTFont(args.font)
    text = "".join(sorted(cjk_characters()))
    options = subset.Options()
    options.flavor = "woff"
    options.name_IDs = ["*"]  # keep the copyright and licence records
    subsetter = subset.Subsetter(options)
    subsetter.populate(text=text)
    subsetter.subset(font)
    font.flavor = "woff"
    font.save(CJK_FONT)
    print(f"cjk_font: {len(text)} characters, {CJK_FONT.stat().st_size / 1024:.0f} KiB "
          f"-> {CJK_FONT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
