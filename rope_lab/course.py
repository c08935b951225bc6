"""The course map and the pieces every notebook shares (kept in one place, tested).

``NOTEBOOKS`` is the single list of notebooks: notebook 00 draws its map from it, the README
lists it, and a test checks that each file exists and begins with :data:`COLAB_CELL`.

:data:`REPOSITORY` is the one place that says where the course is published. The README's
Colab and Binder badges, every notebook's install cell and the book's links are made from
it; ``make set-repository URL=...`` rewrites them all and a test keeps them in step.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# Where the course is published (change it with `make set-repository URL=...`).
REPOSITORY = "https://github.com/rope-lab/rope_lab"
BRANCH = "main"


@dataclass(frozen=True)
class Notebook:
    filename: str
    title: str
    minutes: int
    summary: str


NOTEBOOKS = (
    Notebook("00_start_here.ipynb", "Start here", 10,
             "The course map, how to run it, an environment report and a glossary."),
    Notebook("01_attention_without_position.ipynb", "Attention without position", 20,
             "Self-attention cannot tell word order apart: equivariance and invariance."),
    Notebook("02_absolute_position_encodings.ipynb", "Absolute position encodings", 30,
             "Integer, binary, sinusoidal and learned encodings against five properties."),
    Notebook("03_rope_in_2d.ipynb", "RoPE in two dimensions", 30,
             "Deriving RoPE from complex numbers: the score depends on m − n only."),
    Notebook("04_rope_in_d_dimensions.ipynb", "RoPE in d dimensions", 40,
             "Block-diagonal rotations, four implementations, layouts and precision."),
    Notebook("05_long_range_decay.ipynb", "Long-range decay", 30,
             "What decays with distance, what does not, and how the base sets it."),
    Notebook("06_length_extrapolation.ipynb", "Length extrapolation", 45,
             "Position interpolation, NTK, YaRN, Llama 3 scaling and ALiBi."),
    Notebook("07_rope_and_linear_attention.ipynb", "RoPE with linear attention", 25,
             "Where the rotation goes when attention is linear."),
    Notebook("08_rope_beyond_1d.ipynb", "RoPE beyond one dimension", 30,
             "Axial and mixed RoPE for images, M-RoPE for video."),
    Notebook("09_performance.ipynb", "Performance", 25,
             "RoPE is memory-bound: bytes, FLOPs and measured speed."),
    Notebook("10_rope_in_real_models.ipynb", "RoPE in real models, 2021–2026", 40,
             "Sixteen real configs, GPT-J to Gemma 4, read offline, checked against transformers."),
    Notebook("11_debugging_rope.ipynb", "Debugging RoPE in real code", 45,
             "Eight plumbing bugs in transformers' own model code: found, measured, fixed."),
    Notebook("12_what_2024_2026_changed.ipynb", "What 2024–2026 models changed", 35,
             "p-RoPE, NoPE layers, local/global bases, base 5e5: trained, three seeds, two tasks."),
)

# The first cell of every notebook: installs rope_lab on Colab, does nothing elsewhere. It
# installs from the repository's zip archive over HTTPS, so no git and no credential prompt
# is involved; if that fails (no network, a private or moved repository) it stops the
# notebook with one message that says what to do.
COLAB_CELL = f"""\
# On Google Colab, install the course package first; elsewhere this cell does nothing.
import sys

if "google.colab" in sys.modules:
    import subprocess

    source = "{REPOSITORY}/archive/refs/heads/{BRANCH}.zip"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-input",
                          f"rope_lab[models] @ {{source}}"],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if pip.returncode != 0:
        raise SystemExit(
            f"Could not install rope_lab from {{source}}: "
            f"{{(pip.stderr.strip().splitlines() or ['no message'])[-1]}}\\n"
            "Check that this runtime has internet access (Colab: Runtime > Change runtime "
            "type), and that the address above opens in a browser; if the course moved, "
            "open the notebook from its new repository.")\
"""


def colab_url(filename: str) -> str:
    """The link that opens a notebook of the course in Google Colab."""
    return f"https://colab.research.google.com/github/{REPOSITORY.split('github.com/')[1]}" \
        f"/blob/{BRANCH}/notebooks/{filename}"


def notebook_files(folder: Path, pattern: str = "*.ipynb", *,
                   recursive: bool = False) -> list[Path]:
    """The files of ``folder`` matching ``pattern`` (below it too when ``recursive``), sorted.

    Leaves out what JupyterLab writes next to the course: the copies it keeps in
    ``.ipynb_checkpoints/`` (``00_start_here-checkpoint.ipynb``), the temporary ``.~name``
    files of a save in progress, anything in another hidden folder. Every place that lists
    notebooks (the tests, the book) goes through here, so running the course in JupyterLab
    never adds a notebook to them.
    """
    folder = Path(folder)
    found = folder.rglob(pattern) if recursive else folder.glob(pattern)
    return sorted(path for path in found if path.is_file()
                  and not any(part.startswith(".") for part in path.relative_to(folder).parts))
