"""The course glossary: English terms, the Chinese terms the source posts use, and meanings.

Notebook 00 renders it with :func:`glossary_markdown`; any notebook can print one entry with
:func:`lookup`. In the 简体中文 edition (:mod:`rope_lab.i18n`) the table leads with the course's
Chinese term and adds the source posts' own wording, both from the term table
``rope_lab/data/terms_zh.csv`` (joined on its ``english`` column), and gives each meaning in
Chinese (from the package catalog). The notation column follows the course (m, n positions;
θ_i = base^(−2i/d); d head dim; L sequence length).

Each term names the notebook that introduces it, and :func:`names` lists every way the
notebooks write it (the English name, the short name in brackets, other spellings), so
``tests/test_glossary.py`` can check both that the term is introduced where the glossary says
and that no term the notebooks use is missing.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path

from rope_lab.i18n import N_, _, get_language

TERMS_ZH = Path(__file__).resolve().parent / "data" / "terms_zh.csv"


@dataclass(frozen=True)
class Term:
    english: str
    chinese: str  # as the Chinese source posts write it
    meaning: str  # in English (the Chinese edition shows its translation)
    notebook: str  # where the course introduces it, "NN"
    also: tuple[str, ...] = ()  # other spellings the notebooks use ("KV-cache", "bf16")


GLOSSARY = (
    Term("attention", "注意力",
         N_("softmax(q kᵀ / √d) v: each query mixes the values, weighted by query–key scores."),
         "01"),
    Term("query / key / value", "查询 / 键 / 值",
         N_("The three projections of each token: q asks, k is matched against q, v is mixed."),
         "01", also=("query", "queries")),
    Term("permutation equivariant", "置换等变",
         N_("Reordering the inputs reorders the outputs the same way and changes nothing else."),
         "01", also=("equivariant",)),
    Term("permutation invariant", "置换不变",
         N_("Reordering the inputs leaves the output unchanged."), "01", also=("invariant",)),
    Term("causal mask", "因果掩码",
         N_("Query m may attend only to keys n ≤ m, as in a decoder that writes left to right."),
         "01"),
    Term("token embedding", "词向量",
         N_("The learned vector for a token, before any position information is added."), "01",
         also=("word embedding", "word-embedding")),
    Term("NoPE (no position encoding)", "无位置编码",
         N_("A model with no position encoding at all; with a causal mask it can still infer "
            "positions. Llama 4 drops RoPE in every fourth layer (iRoPE)."), "01",
         also=("iRoPE",)),
    Term("position encoding", "位置编码",
         N_("Any way of telling attention where each token is in the sequence."), "01"),
    Term("absolute position encoding", "绝对位置编码",
         N_("A vector PE(p) that depends on the position p alone, added to the token embedding."),
         "02"),
    Term("learned position embedding", "可学习的位置编码",
         N_("A trained table with one row per position (BERT: 512 × 768); nothing past its last "
            "row."),
         "02", also=("learned positions", "learned table")),
    Term("sinusoidal encoding", "正弦位置编码",
         N_("PE(p)_{2i} = sin(p·ω_i), PE(p)_{2i+1} = cos(p·ω_i), ω_i = base^(−2i/d)."), "02",
         also=("sinusoidal",)),
    Term("signal-to-noise ratio", "信噪比",
         N_("How large the token embedding is next to what is added to it; integer PE drowns it."),
         "02"),
    Term("linear shift map", "线性相关性",
         N_("A fixed matrix W_k with PE(p + k) = W_k PE(p) for every position p."), "02"),
    Term("relative position encoding", "相对位置编码",
         N_("Position enters the score only through the offset m − n between query and key."),
         "03"),
    Term("rotary position embedding (RoPE)", "旋转位置编码",
         N_("Rotate each pair of q and k features by the angle m·θ_i; the score then depends on "
            "m − n only."), "03"),
    Term("rotation matrix", "旋转矩阵",
         N_("[[cos φ, −sin φ], [sin φ, cos φ]]: turns a 2D vector by the angle φ, keeping its "
            "length."),
         "03"),
    Term("complex number", "复数",
         N_("x + iy; multiplying by e^{iφ} rotates it by φ (Euler's formula, 欧拉公式)."), "03"),
    Term("inner product", "内积",
         N_("q · k = Σ q_j k_j: the attention score before scaling."), "03"),
    Term("frequency θ_i", "频率",
         N_("The rotation speed of pair i: θ_i = base^(−2i/d), fast for small i, slow for large "
            "i."),
         "04", also=("frequency", "frequencies")),
    Term("base", "底数 (base)",
         N_("The constant in the speeds base^(−2i/d) of sinusoidal codes and of RoPE (10 000 in "
            "both papers); a larger base slows every pair but the first."), "02"),
    Term("wavelength", "波长",
         N_("λ_i = 2π/θ_i: how many positions pair i needs for one full turn."), "04"),
    Term("layout (interleaved / half)", "交错 / 对半布局",
         N_("Which features form a pair: (2i, 2i + 1) in Meta's LLaMA code (interleaved), (i, i "
            "+ d/2) in Hugging Face's rotate_half (half)."), "04",
         also=("interleaved", "half layout")),
    Term("partial rotary", "部分旋转",
         N_("Only the first r = rotary_dim features of each head rotate (GPT-J, GPT-NeoX, Phi); "
            "the rest carry no position."), "04", also=("partial rotation", "rotary_dim")),
    Term("FLOPs", "浮点运算次数",
         N_("Floating-point operations, one per multiply or add; how the course counts work."),
         "04",
         also=("FLOP", "GFLOP")),
    Term("autocast", "自动混合精度 (autocast)",
         N_("torch.autocast runs matrix products in a 16-bit type and leaves elementwise work in "
            "its input type; libraries keep RoPE's angles in float32 under it."), "04"),
    Term("bfloat16 (bf16)", "bfloat16 半精度",
         N_("A 16-bit float with 8 significant bits: integer positions above 256 are rounded, so "
            "angles m·θ_i are computed in float32."), "04", also=("bf16",)),
    Term("long-range decay", "远程衰减",
         N_("The claim that scores shrink as |m − n| grows; true only for some q and k."), "05"),
    Term("context length", "上下文长度",
         N_("The number of positions L a model reads at once; training fixes one."), "02",
         also=("training length", "trained length")),
    Term("extrapolation", "外推",
         N_("Running a model on positions beyond the length it was trained on."), "06"),
    Term("interpolation", "插值",
         N_("Squeezing new positions into the trained range (position interpolation, NTK, YaRN)."),
         "06"),
    Term("position interpolation (PI)", "线性插值",
         N_("θ_i / s for every pair: s·L positions squeezed into the trained range [0, L)."), "06"),
    Term("NTK-aware scaling", "NTK 插值",
         N_("A larger base, base·s^(d/(d−2)): the fastest pair keeps θ_0, the slowest is divided "
            "by s. Dynamic NTK recomputes it from the current length."), "06",
         also=("NTK", "dynamic NTK")),
    Term("YaRN", "YaRN 缩放",
         N_("Keeps the fast pairs, divides the slow ones by s, ramps in between, and multiplies "
            "cos and sin by 0.1·ln s + 1."), "06"),
    Term("Llama 3 scaling", "Llama 3 缩放",
         N_("rope_type \"llama3\": wavelengths below L/4 kept, above L divided by s, a smooth "
            "blend between."), "06", also=("llama3",)),
    Term("attention factor", "注意力缩放因子",
         N_("The number scaling methods multiply cos and sin by (YaRN: 0.1·ln s + 1); the logits "
            "grow by its square."), "06", also=("attention_factor",)),
    Term("ALiBi", "线性偏置 (ALiBi)",
         N_("No position vector: head h adds −slope_h·(m − n) to the score."), "06"),
    Term("copy task", "复制任务",
         N_("The course's synthetic task: a block of tokens repeats, and the model copies what "
            "followed its last occurrence; it needs no position past the block length."), "06"),
    Term("ablation", "消融实验",
         N_("An experiment that removes one piece (hides far offsets, zeroes table rows) to test "
            "whether a proposed mechanism explains a result."), "06"),
    Term("linear attention", "线性注意力",
         N_("Attention with a kernel feature map instead of softmax, linear in L."), "07"),
    Term("feature map φ", "特征映射",
         N_("The positive function linear attention applies to q and k, here φ(x) = elu(x) + 1."),
         "07", also=("feature map",)),
    Term("recurrent form (RNN)", "循环形式 (RNN)",
         N_("Causal linear attention carries a d × d_v state from token to token, like a "
            "recurrent network."), "07", also=("RNNs",)),
    Term("M-RoPE", "多模态旋转位置编码",
         N_("Multimodal RoPE (Qwen2-VL): each token has (t, h, w), and mrope_section says which "
            "pairs follow which axis."), "08"),
    Term("axial / mixed 2D RoPE", "二维旋转位置编码",
         N_("RoPE for images: axial splits the pairs between x and y, mixed (RoPE-Mixed) learns "
            "a direction per pair."), "08", also=("axial", "RoPE-Mixed")),
    Term("memory-bound", "访存受限",
         N_("Limited by bytes moved, not by arithmetic: RoPE's floor is one copy of q and k."),
         "09"),
    Term("critical dimension", "临界维度",
         N_("Twice the number of pairs that complete a turn within the trained context (Liu et "
            "al. 2023)."), "10"),
    Term("LongRoPE", "LongRoPE 缩放",
         N_("A searched rescale per pair, a short and a long list, switched for the whole "
            "sequence once it passes the original context (Phi-3)."), "10"),
    Term("multi-head latent attention (MLA)", "多头潜在注意力",
         N_("DeepSeek's attention that caches one compressed latent per token; RoPE gets a "
            "separate, decoupled 64-dim query–key part."), "10"),
    Term("p-RoPE (proportional RoPE)", "比例旋转位置编码",
         N_("Only the fastest fraction p of the pairs rotate; the others get θ = 0 (Gemma 4, "
            "Barbero et al. 2024)."), "10"),
    Term("local / global layers", "局部 / 全局层",
         N_("Sliding-window layers that see only recent tokens, with a small base, between "
            "layers that see everything, with a large one (Gemma 3)."), "10",
         also=("local and global layers", "sliding window", "sliding-window")),
    Term("eager attention", "eager 注意力",
         N_("transformers' attention written out in plain PyTorch "
            "(attn_implementation=\"eager\"), which takes any mask and returns the weights."),
            "11"),
    Term("KV cache", "KV 缓存",
         N_("The keys and values of past tokens, kept so decoding computes only the new token; "
            "its keys are stored already rotated."), "11", also=("KV-cache",)),
    Term("varlen attention", "变长注意力",
         N_("Flash attention over packed documents without a mask: it reads where each document "
            "starts from the positions."), "11", also=("varlen",)),
    Term("packed sequences", "序列打包",
         N_("Several documents in one training row; positions restart and a block mask keeps "
            "them apart."), "11", also=("packing", "packed")),
    Term("grouped-query attention (GQA)", "分组查询注意力",
         N_("Several query heads share one key/value head; K is rotated once per shared head."),
         "11"),
    Term("nats", "奈特 (nat)",
         N_("The unit of a loss measured with the natural logarithm; a uniform guess over V "
            "tokens costs ln V nats."), "12"),
    Term("passkey retrieval", "密钥检索",
         N_("Needles planted at random depths in filler text must be recalled at the end; unlike "
            "copying, it needs positions past L."), "12", also=("retrieval",)),
    Term("seed spread", "随机种子范围",
         N_("The range of a result over training seeds; a difference is stated only when the "
            "ranges of two schemes do not overlap."), "12"),
)


def names(term: Term) -> tuple[str, ...]:
    """Every way the notebooks write ``term``: its English name, the short name in brackets and
    ``term.also``."""
    main, _, bracket = term.english.partition(" (")
    found = [main] + ([bracket.rstrip(")")] if bracket else []) + list(term.also)
    return tuple(dict.fromkeys(found))


def lookup(word: str) -> Term:
    """The entry whose English or Chinese term contains ``word`` (case-insensitive)."""
    if not isinstance(word, str) or not word.strip():
        raise ValueError(f"word must be a non-empty string, got {word!r}")
    needle = word.strip().lower()
    exact = [t for t in GLOSSARY if needle in (t.english.lower(), t.chinese)
             or needle in (name.lower() for name in names(t))]
    matches = exact or [t for t in GLOSSARY if needle in t.english.lower() or needle in t.chinese]
    if not matches:
        raise KeyError(f"{word!r} is not in the glossary; its terms are "
                       f"{[t.english for t in GLOSSARY]}")
    return matches[0]


def _escape(text: str) -> str:
    # | ends a cell; _ and * would pair up into italics (PE(p)_{2i} … ω_i)
    return text.replace("|", "\\|").replace("_", "\\_").replace("*", "\\*")


@functools.cache
def _term_table() -> dict[str, dict[str, str]]:
    """The term table's rows by their English term (read once, when first shown)."""
    with TERMS_ZH.open(encoding="utf-8", newline="") as file:
        return {row["english"]: row for row in csv.DictReader(file)}


def chinese_terms(term: Term) -> tuple[str, str]:
    """(the course's Chinese term, the source posts' own wording) for ``term``: the term
    table's row for its English term, or for one of :func:`names` (the table keys "NoPE",
    the glossary "NoPE (no position encoding)"); without a row, the glossary's own Chinese
    and no wording."""
    table = _term_table()
    row = next((table[name] for name in (term.english, *names(term)) if name in table), None)
    if row is None:
        return term.chinese, ""
    return row["chinese"], row["seed_wording"]


def terms_markdown() -> str:
    """The Chinese edition's terms, one per concept, as a Markdown table: the English term,
    the course's Chinese term (with the English at its first use where the table asks for
    it), how the source posts write it (post:line), and the forms the edition never uses.
    The table is ``rope_lab/data/terms_zh.csv``; ``tests/test_terms_zh.py`` checks every
    Chinese notebook and the package's messages against it."""
    header = ("English", _("the course writes"), _("the source posts write"), _("never"))
    rows = ["| " + " | ".join(header) + " |", "|---|---|---|---|"]
    for row in _term_table().values():
        wording = row["seed_wording"] + (f" ({row['seed_source']})" if row["seed_source"]
                                         else "")
        never = ", ".join(row["avoid"].split("|")) if row.get("avoid") else ""
        rows.append(f"| {_escape(row['english'])} | {row['first_use'] or row['chinese']} | "
                    f"{_escape(wording) or '—'} | {_escape(never) or '—'} |")
    return "\n".join(rows)


def glossary_markdown(terms=GLOSSARY) -> str:
    """A Markdown table of ``terms``, in course order (English | 中文 | meaning | notebook).

    In the Chinese edition: 术语 (the course's term) | English | the source posts' wording |
    meaning, in Chinese | notebook.
    """
    ordered = sorted(terms, key=lambda t: t.notebook)
    if get_language() == "en":
        rows = ["| English | 中文 | meaning | notebook |", "|---|---|---|---|"]
        for term in ordered:
            rows.append(f"| {_escape(term.english)} | {term.chinese} | {_escape(term.meaning)} "
                        f"| {term.notebook} |")
        return "\n".join(rows)
    rows = ["| " + " | ".join((_("term"), "English", _("the source posts' wording"),
                                _("meaning"), _("notebook"))) + " |", "|---|---|---|---|---|"]
    for term in ordered:
        chinese, wording = chinese_terms(term)
        rows.append(f"| {chinese} | {_escape(term.english)} | {_escape(wording) or '—'} | "
                    f"{_escape(_(term.meaning))} | {term.notebook} |")
    return "\n".join(rows)
