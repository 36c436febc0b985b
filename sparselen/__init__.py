"""sparselen: a reproduction of "The Role of Sparsity for Length Generalization in
Transformers" (Golowich et al., ICML 2025) as a Snakemake pipeline over a small PyTorch package."""

__version__ = "0.1.0"
