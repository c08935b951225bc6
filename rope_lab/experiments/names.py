"""What a reader calls each model of the experiments (notebooks 06 and 12), in one place.

The results files, the checks and the figures name a model by its key (``"rope+yarn"``,
``"partial-25"``); a reader sees its name, in the course's language. Every printed line,
verdict and figure of the two notebooks takes the name from here (:func:`variant_name`), so
that one model has one name in English and one in Chinese.

``NAMES`` holds the full name; ``SHORT_NAMES`` the label at a line's end in a panel whose
title already says the family ("RoPE stretched, zero-shot": PI, NTK …).
"""

from __future__ import annotations

from rope_lab.i18n import N_, gettext

# key in the results → the name a reader sees (English; marked for the catalog)
NAMES = {
    "none": N_("no position (NoPE)"),
    "learned": N_("learned positions"),
    "sinusoidal": N_("sinusoidal"),
    "alibi": "ALiBi",
    "rope": "RoPE",
    "rope+linear": N_("RoPE + PI (zero-shot)"),
    "rope+ntk": N_("RoPE + NTK"),
    "rope+dynamic": N_("RoPE + dynamic NTK"),
    "rope+yarn": N_("RoPE + YaRN"),
    "rope-5e5": N_("RoPE, base 5e5"),
    "p-rope-0.75": "p-RoPE 0.75",
    "p-rope-0.25": "p-RoPE 0.25",
    "partial-25": N_("partial rotary 25%"),
    "nope-hybrid": N_("RoPE + NoPE layer"),
    "local-global": N_("local/global"),
    "local-global-1e4": N_("local/global, one base"),
    # the ablations of notebook 12 (section 5)
    "rope+window": N_("RoPE, offsets < L only"),
    "rope+linear@L": N_("RoPE + PI at length L"),
    "alibi+window": N_("ALiBi, offsets < L only"),
    "learned+zeroed": N_("learned, rows ≥ L zeroed"),
    "learned+redrawn": N_("learned, rows ≥ L redrawn"),
}

# the label at a line's end, where the panel's title names the family
SHORT_NAMES = {
    **NAMES,
    "none": "NoPE",
    "learned": N_("learned"),
    "rope+linear": N_("PI"),
    "rope+ntk": N_("NTK"),
    "rope+dynamic": N_("dyn. NTK"),
    "rope+yarn": "YaRN",
    "rope-5e5": "5e5",
    "p-rope-0.75": "p = 0.75",
    "p-rope-0.25": "p = 0.25",
    "partial-25": N_("25% turn"),
    "nope-hybrid": N_("NoPE layer"),
    "local-global": N_("global 10⁶"),
    "local-global-1e4": N_("global 10⁴"),
}


def variant_name(variant: str) -> str:
    """The name of the experiments' model ``variant`` (a key of the results) in the course's
    language; a key this table does not know is shown as it is."""
    return gettext(NAMES.get(variant, variant))


def short_name(variant: str) -> str:
    """:func:`variant_name`, shortened for a line's end (:data:`SHORT_NAMES`)."""
    return gettext(SHORT_NAMES.get(variant, variant))
