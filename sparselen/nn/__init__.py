"""The models layer: the GPT-NeoX decoder with its position schemes (``model``), OLMo
(``olmo``), which decoder a config builds (``architectures``), stacked runs as one batched model
(``stacked_model``), PoSE ids (``positions``), the batch format (``batch``), and the arithmetic
of a pass: its FLOPs (``flops``) and its peak memory (``memory``).

May import: ``statistics``, ``runtime``.
"""
