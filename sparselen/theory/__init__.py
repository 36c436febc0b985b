"""The paper's theory as code (docs/theory.md): ``task`` samples k-sparse planted correlation
distributions, ``sfa`` is the sparse functional attention class, ``evaluate`` measures a
model's error at Lbar, ``report`` tables and draws it, and ``jobs`` are the steps the
workflow's ``theory_*`` rules run."""
