"""Every row of the claims inventory points at a real check cell that can fail."""

import ast
import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

from rope_lab.claims import VERDICTS, claims_markdown, counts, load_claims
from rope_lab.course import notebook_files

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
# The five source posts (not part of the repository): NNN_*.txt, one claim anchor per line.
# The posts are not part of the course: they sit in shared/seeds beside the repository in
# the developers' checkouts (ROPE_LAB_SEEDS points elsewhere); without them the test skips.
SEEDS = Path(os.environ.get("ROPE_LAB_SEEDS",
                            Path(__file__).resolve().parents[2] / "shared" / "seeds"))
# A cell "asserts something" if it calls assert or a check_* helper that raises on failure.
ASSERTS = re.compile(r"\bassert\b|\bcheck(_\w+)?\(")


def _cells(number: str) -> dict[str, str]:
    (path,) = notebook_files(NOTEBOOKS, f"{number}_*.ipynb")
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return {cell["id"]: "".join(cell["source"]) for cell in notebook["cells"]
            if cell["cell_type"] == "code"}


ROWS = load_claims()


def test_inventory_is_well_formed():
    assert len(ROWS) > 50  # the issue: "there are more than 50"
    for row in ROWS:
        assert row["post"] in {"000", "001", "002", "003", "004"}, row
        assert row["verdict"] in VERDICTS, row
        assert row["claim"].strip(), row
        assert row["line"].isdigit() and int(row["line"]) >= 1, f"no post line: {row}"
        assert 0 < len(row["anchor"]) <= 60 and row["anchor"] == row["anchor"].strip(), row
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


# --- a check that cannot fail -------------------------------------------------------------
# The rule: the condition a row's check tests (the argument of rl.check, both sides of
# rl.check_close, or an assert), traced back through the assignments of its own cell, must
# reach something computed: a call into the package or a library, or a value made in an
# earlier cell. A condition built from literals and builtins alone (2 * len(range(d // 2 + 1))
# == d + 2) is decided when the cell is written; no change to any code can make it fail. And
# check_close must not compare an expression with itself.

SAFE_BUILTINS = {"abs", "all", "any", "bool", "dict", "divmod", "enumerate", "float", "int",
                 "len", "list", "max", "min", "pow", "range", "reversed", "round", "set",
                 "sorted", "str", "sum", "tuple", "zip"}


def _check_nodes(tree, source, label):
    """The rl.check / rl.check_close calls and asserts whose source holds ``label``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", None))
            if name in ("check", "check_close") and label in ast.get_source_segment(source, node):
                found.append((name, node))
        elif isinstance(node, ast.Assert) and label in ast.get_source_segment(source, node):
            found.append(("assert", node))
    return found


def _bindings(tree) -> dict:
    """name → the expressions assigned to it in the cell (None: a def or an import, opaque)."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            values = [node.value]
        elif isinstance(node, (ast.For, ast.comprehension)):
            targets, values = [node.target], [node.iter]
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.setdefault(node.name, []).append(None)
            continue
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound.setdefault((alias.asname or alias.name).split(".")[0], []).append(None)
            continue
        else:
            continue
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    bound.setdefault(name.id, []).extend(values)
    return bound


def _computed(expression, bound, seen=frozenset()) -> bool:
    """Does ``expression`` depend on anything but literals and builtins?"""
    for node in ast.walk(expression):
        if isinstance(node, ast.Attribute):
            return True  # rl.…, torch.…, a method of a computed value
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name)
                                               and node.func.id in SAFE_BUILTINS | set(bound)):
            return True
        if isinstance(node, ast.Name) and node.id not in seen:
            if node.id not in bound:
                if node.id in SAFE_BUILTINS:
                    continue
                return True  # made in an earlier cell
            if any(value is None or _computed(value, bound, seen | {node.id})
                   for value in bound[node.id]):
                return True
    return False


def cannot_fail(source: str, label: str) -> list[str]:
    """Why the check of ``label`` in ``source`` cannot fail (empty: it can)."""
    tree = ast.parse(source)
    checks = _check_nodes(tree, source, label)
    if not checks:
        return [f"{label!r} is not inside an rl.check, rl.check_close or assert"]
    bound, reasons = _bindings(tree), []
    for kind, node in checks:
        tested = ([node.test] if kind == "assert" else node.args[1:2] if kind == "check"
                  else node.args[1:3])
        if not any(_computed(expression, bound) for expression in tested):
            reasons.append(f"{kind} at line {node.lineno} tests only literals and builtins")
        if kind == "check_close" and len(tested) == 2 and ast.dump(tested[0]) == ast.dump(
                tested[1]):
            reasons.append(f"check_close at line {node.lineno} compares a value with itself")
    return reasons


@pytest.mark.parametrize("row", [r for r in ROWS if r["cell_id"]], ids=lambda r: r["label"][:40])
def test_row_check_can_fail(row):
    source = _cells(row["notebook"])[row["cell_id"]]
    assert not cannot_fail(source, row["label"]), (
        f"{row['notebook']} · {row['cell_id']}: {cannot_fail(source, row['label'])}")


def test_the_cannot_fail_rule_catches_tautologies():
    # the check the fact-check found (04 · claims-04-shape before the fix): holds for every d
    tautology = """d_shape = 8
blocks_to_half = len(range(0, d_shape // 2 + 1))
rl.check(f"θ_0 … θ_(d/2) would be {blocks_to_half} blocks", 2 * blocks_to_half == d_shape + 2)"""
    assert cannot_fail(tautology, "would be")
    assert cannot_fail("x = rl.inv_freq(8)\nrl.check_close('same', x, x, atol=0)", "same")
    assert cannot_fail("rl.check('always', True)", "always")
    assert cannot_fail("print('not a check')", "not a check")
    # …and passes checks that compare with something computed
    assert not cannot_fail("rl.check('sympy', sp.simplify(a - b) == 0)", "sympy")
    assert not cannot_fail("m = torch.ones(3)\nrl.check('package', m.sum() == 3)", "package")
    assert not cannot_fail("rl.check('earlier cell', loss[1] < 0.3)", "earlier cell")


# The fact-check's four checks that missed their claim, each now pointing at the evidence.
@pytest.mark.parametrize("claim, evidence", [
    ("Linear attention runs in O(n)", "count_flops"),  # the cost, not an equality of outputs
    ("RoPE has long-range decay", "far_mean < near_mean / 2"),  # the decay, by sampling
    ("Σcos((m−n)θ_i) is an upper bound", "exceeds the 'bound'"),  # a counterexample
    ("The naive rotation matrix has blocks", "torch.atan2"),  # the blocks read off R_Θ,m
    ("Token m gets the angles", "by_hand"),
])
def test_the_fact_checked_rows_cite_their_evidence(claim, evidence):
    (row,) = [r for r in ROWS if r["claim"].startswith(claim)]
    assert evidence in _cells(row["notebook"])[row["cell_id"]], row


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
    """Audit fixes: RoFormer's linear-attention section is §3.3; which transformers releases
    wrapped the angle product in autocast, held to the installed one."""
    import inspect

    import transformers.models.llama.modeling_llama as llama
    from packaging.version import Version

    import rope_lab.linear_attention
    import rope_lab.precision

    assert "§3.3" in rope_lab.linear_attention.__doc__
    assert "§3.4.2" not in rope_lab.linear_attention.__doc__
    import transformers

    # The docstring says: releases up to 5.18 disabled autocast around the angle product, 5.19
    # on cast to float32 instead (5.18's and 5.19's LlamaRotaryEmbedding, read from their
    # wheels). Every release pyproject.toml allows falls on one side of that line.
    precision_doc = " ".join(rope_lab.precision.__doc__.split())
    assert "transformers up to 5.18 disabled autocast" in precision_doc
    assert "from 5.19 on it casts" in precision_doc
    hf_uses_autocast = "autocast" in inspect.getsource(llama.LlamaRotaryEmbedding)
    assert hf_uses_autocast == (Version(transformers.__version__) < Version("5.19")), \
        transformers.__version__


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
    (path,) = notebook_files(NOTEBOOKS, f"{number}_*.ipynb")
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return "\n".join("".join(cell["source"]) for cell in notebook["cells"])


def test_audit_wording_fixes_in_the_notebooks():
    assert "[CLS]" in _text("01") and "Simplified" in _text("01")  # MiniLM demo is simplified
    assert "notebook 09 counts 3" in _text("04")  # the two FLOP conventions are reconciled
    assert "Notebook 04 counts 3.5" in _text("09")  # … in both notebooks
    assert "published = {" not in _text("05")  # no unverified "published" base table
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


def _post_lines(post: str) -> list[str]:
    (path,) = SEEDS.glob(f"{post}_*.txt")
    return path.read_text(encoding="utf-8").splitlines()


@pytest.mark.skipif(not SEEDS.is_dir(), reason="the source posts are not here (set ROPE_LAB_SEEDS)")
def test_every_attribution_is_confirmed_against_the_post_text():
    """Each row's anchor is verbatim on the row's line of its post: the claim is where it says."""
    posts = {post: _post_lines(post) for post in ("000", "001", "002", "003", "004")}
    wrong = [f"{row['post']} l. {row['line']}: {row['anchor']!r}" for row in ROWS
             if int(row["line"]) > len(posts[row["post"]])
             or row["anchor"] not in posts[row["post"]][int(row["line"]) - 1]]
    assert not wrong, f"{len(wrong)} attributions not found on their line: {wrong[:5]}"
    # the confirmation can fail: the same anchor one line off is not found
    row = ROWS[0]
    assert row["anchor"] not in posts[row["post"]][int(row["line"])]


def test_counts_add_up():
    found = counts()
    assert sum(found[v] for v in VERDICTS) == len(ROWS)
    assert found["not taught"] == sum(not row["cell_id"] for row in ROWS)
    assert found["false"] >= 20  # the posts' mistakes the course corrects


def test_every_solutions_notebook_asserts_its_summary():
    """Solutions must fail when a reference solution stops passing, not just print ✘."""
    for path in notebook_files(NOTEBOOKS / "solutions", "*_solutions.ipynb"):
        number = path.name[:2]
        notebook = json.loads(path.read_text(encoding="utf-8"))
        sources = ["".join(cell["source"]) for cell in notebook["cells"]
                   if cell["cell_type"] == "code"]
        assert f'assert all(exercises.summary("{number}").values())' in sources, path.name


def test_learned_table_verdicts_come_from_the_stated_reasons():
    """02's table: learned PE fails 'past training length' because the trained table has no row
    there, and 'fixed pattern' because another run differs; within one run it is fixed."""
    import torch

    from rope_lab import absolute

    one_run = absolute.trained_table(64, seed=0)
    with pytest.raises(IndexError, match="position 127 is outside the learned table"):
        one_run(128, 16)
    same_run = absolute.encoding_properties(one_run, length=64, dim=16)
    assert same_run["fixed pattern"]  # one run, compared with itself: fixed
    assert not same_run["past training length"]  # the missing rows
    other_run = absolute.encoding_properties(one_run, length=64, dim=16,
                                             rerun=absolute.trained_table(64, seed=1))
    assert not other_run["fixed pattern"]
    assert torch.equal(one_run(10, 4), one_run(10, 4))
    # binary's property 3 depends on d: 16 bits reach 2L = 128, 6 bits (64 codes) do not
    def reaches_past(dim):
        return absolute.encoding_properties(absolute.binary_pe, length=64,
                                            dim=dim)["past training length"]

    assert reaches_past(16) and not reaches_past(6)
    with pytest.raises(TypeError, match="rerun must be None or an encode"):
        absolute.encoding_properties(one_run, length=64, dim=16, rerun=3)
    with pytest.raises(TypeError, match="seed must be an int, got 1.5"):
        absolute.trained_table(64, seed=1.5)


def test_transformers_rotary_buffers_are_not_in_state_dict():
    """Library side of notebook 04's persistent=False check (post 003 says they are saved)."""
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    from transformers import LlamaConfig

    config = LlamaConfig(hidden_size=64, num_attention_heads=1, intermediate_size=8,
                         num_hidden_layers=1)
    rotary = llama.LlamaRotaryEmbedding(config=config)
    assert "inv_freq" in dict(rotary.named_buffers())
    assert "inv_freq" not in rotary.state_dict()


def test_qwen3_rotary_inv_freq_is_the_formula_at_its_configured_base():
    """Post 003's statistics come from inv_freq = 1/base^(2i/d): transformers' Qwen3 agrees."""
    import torch

    qwen3 = pytest.importorskip("transformers.models.qwen3.modeling_qwen3")  # transformers ≥ 4.51
    from transformers import Qwen3Config

    config = Qwen3Config(hidden_size=4096, num_attention_heads=32, head_dim=128)
    parameters = getattr(config, "rope_parameters", None) or {}
    base = parameters.get("rope_theta", getattr(config, "rope_theta", None))
    rotary = qwen3.Qwen3RotaryEmbedding(config=config)
    expected = 1.0 / base ** (torch.arange(0, 128, 2, dtype=torch.float64) / 128)
    torch.testing.assert_close(rotary.inv_freq.double(), expected, atol=1e-6, rtol=0)
    assert "inv_freq" not in rotary.state_dict()


def test_minimum_base_chart_draws_no_published_line_when_given_none():
    """Notebook 05 shows only the bases it computes (the paper's table is not copied)."""
    from rope_lab import plots

    figure = plots.minimum_base_chart({1024: 4293.0, 4096: 26952.0}, models=[])
    assert len(figure.axes[0].lines) == 1
    assert all("published" not in text.get_text()
               for text in figure.axes[0].get_legend().get_texts())
