"""The reproduction report (issue 7): claims checked against the measured tables
(``claims``), hyperparameter tables from the config actually run (``hyperparams``), the
compute ledger and run-time estimate (``ledger``), and the Markdown/HTML document that puts
them together with the provenance (``render``)."""
