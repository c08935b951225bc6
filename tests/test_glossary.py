"""The glossary: complete, bilingual, rendered as a table, searchable."""

import json
import re
from pathlib import Path

import pytest

from rope_lab import course, glossary
from rope_lab.course import notebook_files

# The Chinese terms the source posts use, which the brief promises to explain.
SOURCE_TERMS = ("旋转位置编码", "远程衰减", "外推", "绝对位置编码", "相对位置编码", "插值")


def test_source_terms_are_all_there():
    chinese = " ".join(term.chinese for term in glossary.GLOSSARY)
    for word in SOURCE_TERMS:
        assert word in chinese, word


def test_entries_are_well_formed():
    numbers = {notebook.filename[:2] for notebook in course.NOTEBOOKS}
    english = [term.english for term in glossary.GLOSSARY]
    assert len(english) == len(set(english))
    for term in glossary.GLOSSARY:
        assert re.search(r"[\u4e00-\u9fff]", term.chinese), term
        assert term.notebook in numbers, term
        assert term.meaning.endswith("."), term


def test_markdown_has_one_row_per_term_in_course_order():
    text = glossary.glossary_markdown()
    rows = text.splitlines()
    assert rows[0].startswith("| English | 中文 |") and len(rows) == len(glossary.GLOSSARY) + 2
    notebooks = [row.rsplit("|", 2)[1].strip() for row in rows[2:]]
    assert notebooks == sorted(notebooks)
    # a "|" inside a meaning is escaped, so every row still has exactly four cells
    assert all(re.sub(r"\\\|", "", row).count("|") == 5 for row in rows)
    assert "\\|m − n\\|" in text


def test_lookup_by_english_or_chinese():
    assert glossary.lookup("extrapolation").chinese == "外推"
    assert glossary.lookup("旋转位置编码").english.startswith("rotary")
    assert glossary.lookup("RoPE").chinese == "旋转位置编码"
    with pytest.raises(KeyError, match="'warp drive' is not in the glossary"):
        glossary.lookup("warp drive")
    with pytest.raises(ValueError, match="non-empty string"):
        glossary.lookup("  ")


def test_markdown_renders_subscripts_literally_not_as_italics():
    """Unescaped, `PE(p)_{2i} = sin(p·ω_i)` pairs its underscores into italics (seen in
    the book); rendered with the book's Markdown renderer (nbconvert's mistune) it must
    keep them."""
    mistune = pytest.importorskip("mistune")

    html = mistune.html(glossary.glossary_markdown())
    assert "<em>" not in html
    assert "PE(p)_{2i} = sin(p·ω_i)" in html


# --- every term the notebooks use is in the glossary, with the notebook that introduces it ---

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

# Terms a notebook uses before the one that introduces them, on purpose: a pointer ahead
# ("notebook 12's p-RoPE models"), a reading list, or the same word for the sinusoidal codes.
FORWARD_REFERENCES = {
    "rotary position embedding (RoPE)": {"02"},  # 02 names what 03 derives
    "frequency θ_i": {"02"},  # 02: the sinusoidal frequencies ω_i
    "long-range decay": {"02"},  # 02 checks a post's claim for sinusoidal codes; 05 teaches
    "NTK-aware scaling": {"05"},  # 05's further reading points at notebook 06
    "YaRN": {"05"},
    "Llama 3 scaling": {"05"},
    "p-RoPE (proportional RoPE)": {"06"},  # 06 points at notebook 12's p-RoPE models
    "passkey retrieval": {"06"},  # 06 points at notebook 12's retrieval task
}

# Capitalised words in the notebooks that are names, not terms: models, people's tools,
# venues, units, file formats. Anything else with two capitals (NoPE, GQA, …) or a capital
# after a lower-case letter (p-RoPE) must be a glossary term: a new one fails the test below.
NOT_TERMS = {
    "acm", "all-minilm-l6-v2", "arxiv", "bert", "bert-family", "ci", "cjk", "cls", "codellama",
    "cpu", "cuda", "db", "deepseek-ai", "deepseek-v2", "deepseek-v3", "deepseekv3attention",
    "eccv", "eleutherai", "flashattention", "gb", "github", "gpt-2", "gpt-j", "gpt-neox",
    "gpt-neox-20b", "gpu", "hf", "hf-style", "html", "iclr", "icml", "ieee", "json",
    "jupyterlab", "layernorm", "llama", "llama-7b-sized", "llama-style", "llama4textconfig",
    "llm", "long-context", "macos", "mb", "mib", "mlp", "nd", "neurips", "numpy", "nvidia",
    "pre-trained",
    "pypi", "pytorch", "qwen-vl", "qwen2-vl", "qwen3-vl", "readme", "rms", "roformer",
    "rope-based", "pure-rope", "vision-language", "vllm", "vs", "wordpiece", "ntk-aware",
}


def _markdown(path: Path) -> str:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    text = "\n".join("".join(cell["source"]) for cell in notebook["cells"]
                     if cell["cell_type"] == "markdown")
    return re.sub(r"https?://\S+", " ", text)


TEXTS = {path.name[:2]: _markdown(path)
         for path in notebook_files(NOTEBOOKS, "[0-9][0-9]_*.ipynb")}


def _mentions(text: str, name: str) -> bool:
    """``name`` as a word (a plural allowed), across line breaks; case matters only for names
    with a capital (RoPE is not rope)."""
    flags = 0 if any(ch.isupper() for ch in name) else re.IGNORECASE
    words = r"\s+".join(re.escape(word) for word in name.split())
    return re.search(rf"(?<![\w-]){words}(?:e?s)?(?!\w)", text, flags) is not None


def _capitalised_words(text: str) -> set[str]:
    """Words with two capitals (NoPE, GQA) or a capital after a lower-case start (p-RoPE),
    outside code spans and maths."""
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$", " ", text, flags=re.S)
    words = re.findall(r"(?<![\w`/.-])([A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*)", text)
    return {word for word in words
            if sum(ch.isupper() for ch in word) >= 2
            or (word[0].islower() and any(ch.isupper() for ch in word[1:]))}


@pytest.mark.parametrize("term", glossary.GLOSSARY, ids=lambda term: term.english)
def test_each_term_is_introduced_where_the_glossary_says(term):
    """Its notebook uses it, and no notebook before it does (00, the course map, previews
    everything; declared forward references aside)."""
    assert any(_mentions(TEXTS[term.notebook], name) for name in glossary.names(term)), (
        f"notebook {term.notebook} never writes {glossary.names(term)}")
    earlier = {number for number, text in TEXTS.items() if "00" < number < term.notebook
               and any(_mentions(text, name) for name in glossary.names(term))}
    assert earlier <= FORWARD_REFERENCES.get(term.english, set()), (
        f"{term.english!r} is glossed as notebook {term.notebook} but notebooks "
        f"{sorted(earlier)} use it first: move it, or declare a forward reference")


def test_no_term_the_notebooks_use_is_missing():
    glossed = {word.lower() for term in glossary.GLOSSARY for name in glossary.names(term)
               for word in _capitalised_words(name)}
    missing = {}
    for number, text in TEXTS.items():
        for word in _capitalised_words(text):
            if word.lower() not in glossed | NOT_TERMS:
                missing.setdefault(word, number)
    assert not missing, ("terms the notebooks use but the glossary lacks (add a Term, or list "
                         f"a name in NOT_TERMS): {missing}")


@pytest.mark.parametrize("term", ["NoPE", "p-RoPE", "MLA", "GQA", "LongRoPE", "KV cache",
                                  "varlen attention", "autocast", "eager attention",
                                  "critical dimension", "attention factor", "nats", "ablation",
                                  "passkey retrieval"])
def test_the_terms_of_notebooks_10_to_12_are_there(term):
    assert glossary.lookup(term).meaning


def test_the_missing_term_check_can_fail():
    """A new acronym in a notebook is caught; a known name is not."""
    found = _capitalised_words("We add QKNorm and a `CodeSpan` and $MathTerm$ to GPT-J.")
    assert found == {"QKNorm", "GPT-J"}
    assert not _mentions("a frequencyshift", "frequency")
    assert _mentions("two causal\nmasks", "causal mask")
    assert _mentions("the relative\nposition encoding", "relative position encoding")
