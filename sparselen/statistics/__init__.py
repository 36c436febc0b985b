"""The statistics layer: every interval and resampling primitive (``stats``), bounds by betting
(``betting``), the three-valued verdicts, their groups, controls and stability (``verdicts``),
the power model (``power``) and the reader of the calibration's error rates (``rates``).

May import: ``runtime``.
"""
