"""Sparse parity (docs/reconstruction.md, "Sparse parity"): task, evaluation, tables and
figure, and the steps the workflow's ``parity_*`` rules run."""
