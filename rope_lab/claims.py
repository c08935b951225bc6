"""The claims inventory: every checkable claim of the five source posts and where it is checked.

One row per claim in ``rope_lab/data/claims.csv``:
``post, line, anchor, claim, verdict, condition_or_reason, notebook, cell_id, label``.

- ``post`` + ``line`` + ``anchor``: where the claim is made. ``line`` is the 1-based line of the
  post's text file (``NNN_*.txt`` in the course's source-post folder) and ``anchor`` a short
  verbatim piece of that line, so the attribution can be confirmed mechanically
  (``tests/test_claims.py`` does, wherever the posts are available: set ``ROPE_LAB_SEEDS``).
- ``verdict``: ``true``, ``false``, ``true under a stated condition``, or ``unverifiable``
  (no public source or experiment here can settle it).
- ``notebook`` + ``cell_id``: the code cell that checks the claim. Cell ids survive
  ``nbstripout --keep-id``; ``label`` is a piece of that cell's check message, so a row that
  points at the wrong cell is caught by ``tests/test_claims.py`` even if an id is reused.
- A claim the course does not check has an empty ``cell_id`` and says why in
  ``condition_or_reason``.
"""

from __future__ import annotations

import csv
from importlib import resources

from rope_lab.i18n import N_, _

# The CSV's verdicts (English: code reads them); :func:`_` shows them in the course's language.
VERDICTS = (N_("true"), N_("false"), N_("true under a stated condition"), N_("unverifiable"))


def load_claims() -> list[dict[str, str]]:
    """The inventory as a list of rows (dicts keyed by the CSV header)."""
    text = resources.files("rope_lab").joinpath("data/claims.csv").read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


def counts() -> dict[str, int]:
    """How many claims have each verdict, and how many no check cell (``"not taught"``)."""
    rows = load_claims()
    found = {verdict: sum(row["verdict"] == verdict for row in rows) for verdict in VERDICTS}
    found["not taught"] = sum(not row["cell_id"] for row in rows)
    return found


def summary_markdown() -> str:
    """The inventory by verdict, for notebook 00: how many claims, how many a notebook checks,
    in the course's language (the counts stay in the second column).

    The full table (:func:`claims_markdown`) is a page of the book; 00 shows this summary.
    """
    rows = load_claims()
    header = (_("verdict"), _("claims"), _("checked in a notebook"),
              _("not taught (reason given)"))
    lines = ["| " + " | ".join(header) + " |", "|---|---|---|---|"]
    for verdict in (*VERDICTS, None):
        group = [row for row in rows if verdict is None or row["verdict"] == verdict]
        checked = sum(bool(row["cell_id"]) for row in group)
        # Translators: the summary's last row, every claim whatever its verdict
        name = _(verdict) if verdict else _("**all**")
        lines.append(f"| {name} | {len(group)} | {checked} | {len(group) - checked} |")
    return "\n".join(lines)


def counts_line(counts: dict[str, int]) -> str:
    """``{verdict: how many}`` as one line in the course's language, for a check's detail:
    "80 true, 30 false, …"."""
    # Translators: one verdict's count ("80 true"), then what separates two of them
    item, separator = _("{count} {verdict}"), _(", ")
    return separator.join(item.format(count=count, verdict=_(verdict))
                          for verdict, count in counts.items())


def claims_markdown(check_lines: dict[tuple[str, str], str] | None = None) -> str:
    """The inventory as a Markdown table, for notebook 00 and the book, in the course's
    language: the claims, verdicts and reasons through the package catalog (the Chinese quotes
    of the posts stay as they are), the check line as the notebook prints it. ``check_lines``
    maps (notebook, cell id) to that line in the notebook's language (the book reads the
    notebooks' catalogs, :func:`rope_lab.translations.catalogs.check_lines`); without an entry the
    row shows the English label."""
    header = (_("post"), _("claim"), _("verdict"), _("condition / reason"), _("checked in"))
    lines = ["| " + " | ".join(header) + " |", "|---|---|---|---|---|"]
    # Translators: where a claim is made: the post's number and the line ("000 l. 68")
    line_of = _("{post} l. {line}")
    for row in load_claims():
        # The check's own message is what a reader finds in the notebook (✔ …); the cell id
        # stays in the CSV for the test that ties the two together.
        label = (check_lines or {}).get((row["notebook"], row["cell_id"]), row["label"])
        where = f"{row['notebook']} · ✔ {label}" if row["cell_id"] else "—"
        claim, verdict, reason = row["claim"], row["verdict"], row["condition_or_reason"]
        cells = [line_of.format(post=row["post"], line=row["line"]), _(claim), _(verdict),
                 _(reason) if reason else "", where]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)
