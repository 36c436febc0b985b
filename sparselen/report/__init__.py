"""The reproduction report: claims checked against the measured tables (``claims``),
hyperparameter tables from the config actually run (``hyperparams``), the compute ledger
(``ledger``), the Markdown/HTML document that puts them together with the
provenance (``render``), and the steps the workflow's ``report_*`` rules run (``jobs``)."""
