"""Experiments the notebooks plot from stored results and can re-run.

``python -m rope_lab.experiments.extrapolation`` — position encodings past the training
length (notebook 06).
"""
