"""Write rope_lab/book_assets/cjk-subset.otf: the Chinese font the course ships.

Chinese must render where no CJK system font is installed (Debian's chromium brings none, and
neither do many classroom Linux machines): in the book (``make book``), in JupyterLab as
``make lab`` starts it, and in matplotlib figures. A whole CJK font is 16 MB, so the course
ships a subset of Noto Sans CJK SC (SIL Open Font License 1.1, see cjk-subset.LICENSE.txt):

- the 3755 characters of GB 2312 level 1, the common characters of simplified Chinese
  (enough for the 简体中文 edition's prose without a rebuild for every sentence), and
  GB 2312's CJK punctuation, full-width forms and kana;
- every CJK character the repository's text uses (notebooks, markdown, translation catalogs,
  the package's strings and data): :func:`rope_lab.book.cjk_characters`.

Hinting and the OpenType layout features (vertical forms, the JP/KR/TC variants reached
through ``locl``) are left out: horizontal simplified Chinese needs neither, and they would
double the file. One OpenType file serves all three readers (browsers take OTF, matplotlib
cannot read WOFF).

Run it (``make cjk-font``) after adding Chinese text outside GB 2312 level 1;
``tests/test_book.py`` fails, naming the missing characters, until you do. It needs the full
font once and fontTools (which matplotlib brings): Debian's ``fonts-noto-cjk`` package, or
any Noto Sans CJK .ttc or SC .otf at ``--font PATH``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rope_lab import _atomic  # noqa: E402
from rope_lab.book import CJK_FONT, cjk_characters, is_cjk  # noqa: E402

DEBIAN_FONT = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")


def gb2312(rows: range) -> set[str]:
    """The characters of GB 2312 rows ``rows`` (0xA1 = row 1), decoded by Python's codec."""
    found = set()
    for row in rows:
        for cell in range(0xA1, 0xFF):
            try:
                found.add(bytes([row, cell]).decode("gb2312"))
            except UnicodeDecodeError:  # an unassigned position
                pass
    return found


def common_characters() -> set[str]:
    """GB 2312 level 1 (rows 16-55, 3755 hanzi) and its CJK symbols (rows 1-9)."""
    return gb2312(range(0xB0, 0xD8)) | {ch for ch in gb2312(range(0xA1, 0xAA)) if is_cjk(ch)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--font", type=Path, default=DEBIAN_FONT,
                        help=f"Noto Sans CJK .ttc or SC .otf (default {DEBIAN_FONT})")
    parser.add_argument("--out", type=Path, default=CJK_FONT,
                        help=f"where the subset goes (default {CJK_FONT.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    if not args.font.exists():
        print(f"cjk_font: {args.font} not found. Install Debian's fonts-noto-cjk "
              "(apt-get install fonts-noto-cjk; or, without installing it system-wide, "
              "apt-get download fonts-noto-cjk && dpkg-deb -x fonts-noto-cjk_*.deb noto) "
              "or pass --font PATH to a Noto Sans CJK SC font.", file=sys.stderr)
        return 1
    from fontTools import subset
    from fontTools.ttLib import TTCollection, TTFont

    if args.font.suffix.lower() == ".ttc":
        faces = TTCollection(args.font).fonts
        font = next((f for f in faces if f["name"].getDebugName(1) == "Noto Sans CJK SC"), None)
        if font is None:
            print(f"cjk_font: {args.font} has no Noto Sans CJK SC face", file=sys.stderr)
            return 1
    else:
        font = TTFont(args.font)
    text = "".join(sorted(common_characters() | cjk_characters()))
    options = subset.Options()
    options.name_IDs = ["*"]  # keep the copyright and licence records
    options.hinting = False
    options.layout_features = []
    subsetter = subset.Subsetter(options)
    subsetter.populate(text=text)
    subsetter.subset(font)
    try:  # whole or not at all: a full disk or a size limit leaves the old font as it was
        with _atomic.writing(args.out) as handle:
            font.save(handle)
    except OSError as error:
        print(f"cjk_font: could not write {args.out}: {error.strerror or error}; the previous "
              "font is unchanged", file=sys.stderr)
        return 2
    print(f"cjk_font: {len(text)} characters, {args.out.stat().st_size / 1024:.0f} KiB "
          f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
