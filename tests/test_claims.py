"""Every row of the claims inventory points at a real check cell that can fail."""

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from rope_lab.claims import VERDICTS, claims_markdown, load_claims

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
# A cell "asserts something" if it calls assert or a check_* helper that raises on failure.
ASSERTS = re.compile(r"\bassert\b|\bcheck(_\w+)?\(")


def _cells(number: str) -> dict[str, str]:
    (path,) = NOTEBOOKS.glob(f"{number}_*.ipynb")
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return {cell["id"]: "".join(cell["source"]) for cell in notebook["cells"]
            if cell["cell_type"] == "code"}


ROWS = load_claims()


def test_inventory_is_well_formed():
    assert len(ROWS) >= 45
    for row in ROWS:
        assert row["post"] in {"000", "001", "002", "003", "004"}, row
        assert row["verdict"] in VERDICTS, row
        assert row["claim"].strip(), row
        if row["verdict"] != "true" and not row["cell_id"]:
            assert row["condition_or_reason"].strip(), f"untaught claim needs a reason: {row}"
    assert len({row["claim"] for row in ROWS}) == len(ROWS), "duplicate claims"
    assert set(Counter(row["post"] for row in ROWS)) == {"000", "001", "002", "003", "004"}


@pytest.mark.parametrize("row", [r for r in ROWS if r["cell_id"]], ids=lambda r: r["label"][:40])
def test_row_points_at_a_check_cell(row):
    cells = _cells(row["notebook"])
    assert row["cell_id"] in cells, f"no code cell {row['cell_id']} in notebook {row['notebook']}"
    source = cells[row["cell_id"]]
    assert row["label"] in source, f"cell {row['cell_id']} does not contain {row['label']!r}"
    assert ASSERTS.search(source), f"cell {row['cell_id']} asserts nothing"


def test_untaught_rows_give_a_reason():
    for row in ROWS:
        if not row["cell_id"]:
            assert row["condition_or_reason"].strip(), row


def test_the_test_can_fail(tmp_path):
    """A label that is not in the cell, or a cell without an assert, is refused."""
    cells = _cells("04")
    some_id, source = next(iter(cells.items()))
    assert "no such label anywhere" not in source
    assert not ASSERTS.search("x = 1\nprint(x)")


def test_markdown_has_one_line_per_claim():
    table = claims_markdown().splitlines()
    assert len(table) == len(ROWS) + 2


def test_docstring_citations_match_the_sources():
    """Audit fixes: RoFormer's linear-attention section is §3.3; HF 5 no longer uses autocast."""
    import inspect

    import transformers.models.llama.modeling_llama as llama

    import rope_lab.linear_attention
    import rope_lab.precision

    assert "§3.3" in rope_lab.linear_attention.__doc__
    assert "§3.4.2" not in rope_lab.linear_attention.__doc__
    import transformers

    # The docstring says: 4.x disabled autocast around the angle product, 5 casts to float32
    # instead. Hold that to whichever transformers is installed (4.45 and 5.x are tested).
    precision_doc = rope_lab.precision.__doc__
    assert "transformers 4.x disabled autocast" in precision_doc
    assert "transformers 5 instead casts" in precision_doc
    hf_uses_autocast = "autocast" in inspect.getsource(llama.LlamaRotaryEmbedding)
    assert hf_uses_autocast == (int(transformers.__version__.split(".")[0]) < 5)


def test_teaching_notes_state_the_exact_case_of_the_cos_sum():
    text = (NOTEBOOKS / "TEACHING.md").read_text(encoding="utf-8")
    assert "equal pair halves" not in text
    assert "every pair of unit length" in text


def test_the_book_has_a_claims_page(tmp_path):
    pytest.importorskip("nbconvert")
    from rope_lab import book

    try:
        book.build(tmp_path / "book", notebooks=[], run=False, teaching=None, log=lambda _: None)
    except book.MissingBookDependency as missing:
        pytest.skip(str(missing))
    page = (tmp_path / "book" / "claims.html").read_text(encoding="utf-8")
    assert ROWS[0]["claim"] in page
    assert 'href="claims.html"' in (tmp_path / "book" / "index.html").read_text(encoding="utf-8")


def test_contributing_examples_point_at_real_check_cells():
    text = (NOTEBOOKS.parent / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert "a check must be able to fail" in text.lower()
    examples = re.findall(r"\| (dense matrix|sympy|library|Monte Carlo|counterexample) \| "
                          r"(\d\d) · `([^`]+)`", text)
    assert {kind for kind, _, _ in examples} == {"dense matrix", "sympy", "library",
                                                 "Monte Carlo", "counterexample"}
    for _, number, cell_id in examples:
        source = _cells(number).get(cell_id, "")
        assert ASSERTS.search(source), f"CONTRIBUTING names {number} · {cell_id}: no check there"


def _text(number: str) -> str:
    (path,) = NOTEBOOKS.glob(f"{number}_*.ipynb")
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return "\n".join("".join(cell["source"]) for cell in notebook["cells"])


def test_audit_wording_fixes_in_the_notebooks():
    assert "[CLS]" in _text("01") and "Simplified" in _text("01")  # MiniLM demo is simplified
    assert "notebook 09 counts 3" in _text("04")  # the two FLOP conventions are reconciled
    text_06 = _text("06")
    assert "Llama 3.1 reference code" in text_06  # llama3 rope type shipped with Llama 3.1
    assert "The Llama 3 Herd of Models" not in text_06


@pytest.mark.parametrize("number, cell_id, independent", [
    ("04", "3f3a075b", "torch.block_diag(*blocks)"),   # was: zero outside the blocks
    ("02", "cell-41", "512 * 768"),                     # was: the package's own message
])
def test_formerly_vacuous_checks_compare_with_something_independent(number, cell_id, independent):
    source = _cells(number)[cell_id]
    assert independent in source and ASSERTS.search(source)


def test_restated_formulas_are_labelled_as_illustration():
    assert _cells("06")["567ea0d5"].startswith("# Illustration, not an independent check")


def test_the_integer_counterexample_holds_for_any_indexing():
    assert "however positions are\nnumbered" in _text("02")
