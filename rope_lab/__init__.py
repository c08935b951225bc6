"""rope_lab: the package behind the RoPE course notebooks.

Importing it is cheap: it needs torch, never matplotlib or ipywidgets (those load only
with ``rope_lab.plots`` and ``rope_lab.widgets``).
"""

from rope_lab._ckernel import BackendUnavailable, FastPathWarning
from rope_lab._version import __version__  # noqa: F401 - rope_lab.__version__
from rope_lab.absolute import (
    LearnedPositionalEmbedding,
    binary_pe,
    integer_pe,
    normalized_integer_pe,
    sin_only_pe,
    sinusoidal_pe,
)
from rope_lab.attention import attention, causal_mask
from rope_lab.checks import check, check_close
from rope_lab.implementations import (
    apply_rope_complex,
    apply_rope_dense,
    apply_rope_interleaved,
    apply_rope_rotate_half,
    rotate_half,
)
from rope_lab.rope import (
    RotaryEmbedding,
    apply_rope,
    apply_rope_,
    half_to_interleaved,
    interleaved_to_half,
    inv_freq,
    permute_for_half_layout,
    rope_angles,
    rope_matrix,
    rope_pairs,
)
from rope_lab.utils import default_device, seed_everything, setup_notebook, show_source

__all__ = [
    "BackendUnavailable",
    "FastPathWarning",
    "LearnedPositionalEmbedding",
    "RotaryEmbedding",
    "apply_rope",
    "apply_rope_",
    "apply_rope_complex",
    "apply_rope_dense",
    "apply_rope_interleaved",
    "apply_rope_rotate_half",
    "attention",
    "binary_pe",
    "causal_mask",
    "check",
    "check_close",
    "default_device",
    "half_to_interleaved",
    "integer_pe",
    "interleaved_to_half",
    "inv_freq",
    "normalized_integer_pe",
    "permute_for_half_layout",
    "rope_angles",
    "rope_matrix",
    "rope_pairs",
    "rotate_half",
    "seed_everything",
    "setup_notebook",
    "show_source",
    "sin_only_pe",
    "sinusoidal_pe",
]
