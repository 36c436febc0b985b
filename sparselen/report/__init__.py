"""The reproduction report: claims checked against the measured tables (``claims``),
hyperparameter tables from the config actually run (``hyperparams``), the compute ledger
(``ledger``), the Markdown/HTML document that puts them together with the
provenance (``render``), the claims worded for people (``answer``, ``framing``, ``headline``),
what each shipped config decides, the one table every document states (``decides``),
the report jobs' cost (``cost``), the steps the workflow's ``report_*`` rules run (``jobs``),
and what a run prints in the terminal (``terminal``).

The report layer. May import: ``jobs``, the four slices and every layer below them; never
``estimate``, ``calibration`` or ``cli``."""
