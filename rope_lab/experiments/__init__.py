"""Experiments the notebooks plot from stored results and can re-run.

``python -m rope_lab.experiments.extrapolation`` — position encodings past the training
length (notebook 06).

``python -m rope_lab.experiments.position_schemes`` — eleven schemes (the 2021–2023 encodings
and the RoPE variants of 2024–2026 models), a copy and a retrieval task, three seeds, and the
ablations behind notebook 06's explanations (notebook 12).
"""
