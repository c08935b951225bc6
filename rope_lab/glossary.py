"""The course glossary: English terms, the Chinese terms the source posts use, and meanings.

Notebook 00 renders it with :func:`glossary_markdown`; any notebook can print one entry with
:func:`lookup`. The notation column follows the course (m, n positions; θ_i = base^(−2i/d);
d head dim; L sequence length).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    english: str
    chinese: str  # as the Chinese source posts write it
    meaning: str
    notebook: str  # where the course introduces it, "NN"


GLOSSARY = (
    Term("attention", "注意力",
         "softmax(q kᵀ / √d) v: each query mixes the values, weighted by query–key scores.",
         "01"),
    Term("query / key / value", "查询 / 键 / 值",
         "The three projections of each token: q asks, k is matched against q, v is mixed.",
         "01"),
    Term("permutation equivariant", "置换等变",
         "Reordering the inputs reorders the outputs the same way and changes nothing else.",
         "01"),
    Term("permutation invariant", "置换不变",
         "Reordering the inputs leaves the output unchanged.", "01"),
    Term("causal mask", "因果掩码",
         "Query m may attend only to keys n ≤ m, as in a decoder that writes left to right.",
         "01"),
    Term("token embedding", "词向量",
         "The learned vector for a token, before any position information is added.", "01"),
    Term("position encoding", "位置编码",
         "Any way of telling attention where each token is in the sequence.", "02"),
    Term("absolute position encoding", "绝对位置编码",
         "A vector PE(p) that depends on the position p alone, added to the token embedding.",
         "02"),
    Term("learned position embedding", "可学习的位置编码",
         "A trained table with one row per position (BERT: 512 × 768); nothing past its last row.",
         "02"),
    Term("sinusoidal encoding", "正弦位置编码",
         "PE(p)_{2i} = sin(p·ω_i), PE(p)_{2i+1} = cos(p·ω_i), ω_i = base^(−2i/d).", "02"),
    Term("signal-to-noise ratio", "信噪比",
         "How large the token embedding is next to what is added to it; integer PE drowns it.",
         "02"),
    Term("linear shift map", "线性相关性",
         "A fixed matrix W_k with PE(p + k) = W_k PE(p) for every position p.", "02"),
    Term("relative position encoding", "相对位置编码",
         "Position enters the score only through the offset m − n between query and key.", "03"),
    Term("rotary position embedding (RoPE)", "旋转位置编码",
         "Rotate each pair of q and k features by the angle m·θ_i; the score then depends on "
         "m − n only.", "03"),
    Term("rotation matrix", "旋转矩阵",
         "[[cos φ, −sin φ], [sin φ, cos φ]]: turns a 2D vector by the angle φ, keeping its length.",
         "03"),
    Term("complex number", "复数",
         "x + iy; multiplying by e^{iφ} rotates it by φ (Euler's formula, 欧拉公式).", "03"),
    Term("inner product", "内积",
         "q · k = Σ q_j k_j: the attention score before scaling.", "03"),
    Term("frequency θ_i", "频率",
         "The rotation speed of pair i: θ_i = base^(−2i/d), fast for small i, slow for large i.",
         "04"),
    Term("long-range decay", "远程衰减",
         "The claim that scores shrink as |m − n| grows; true only for some q and k.", "05"),
    Term("context length", "上下文长度",
         "The number of positions L a model reads at once; training fixes one.", "06"),
    Term("extrapolation", "外推",
         "Running a model on positions beyond the length it was trained on.", "06"),
    Term("interpolation", "内插 (插值)",
         "Squeezing new positions into the trained range (position interpolation, NTK, YaRN).",
         "06"),
    Term("linear attention", "线性注意力",
         "Attention with a kernel feature map instead of softmax, linear in L.", "07"),
)


def lookup(word: str) -> Term:
    """The entry whose English or Chinese term contains ``word`` (case-insensitive)."""
    if not isinstance(word, str) or not word.strip():
        raise ValueError(f"word must be a non-empty string, got {word!r}")
    needle = word.strip().lower()
    exact = [t for t in GLOSSARY if needle in (t.english.lower(), t.chinese)]
    matches = exact or [t for t in GLOSSARY if needle in t.english.lower() or needle in t.chinese]
    if not matches:
        raise KeyError(f"{word!r} is not in the glossary; its terms are "
                       f"{[t.english for t in GLOSSARY]}")
    return matches[0]


def glossary_markdown(terms=GLOSSARY) -> str:
    """A Markdown table of ``terms``, in course order (English | 中文 | meaning | notebook)."""
    rows = ["| English | 中文 | meaning | notebook |", "|---|---|---|---|"]

    def escape(text: str) -> str:
        # | ends a cell; _ and * would pair up into italics (PE(p)_{2i} … ω_i)
        return text.replace("|", "\\|").replace("_", "\\_").replace("*", "\\*")

    for term in sorted(terms, key=lambda t: t.notebook):
        rows.append(f"| {escape(term.english)} | {term.chinese} | {escape(term.meaning)} "
                    f"| {term.notebook} |")
    return "\n".join(rows)
