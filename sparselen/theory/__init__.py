"""The paper's theory as code (SPEC.md section 6; docs/theory.md): ``planted`` samples k-sparse
planted correlation distributions, ``sfa`` is the sparse functional attention class, and
``experiment`` trains it (and a GPT-NeoX) on short lengths and measures the error at longer ones."""
