"""What each ``report_*`` job computes, for ``sparselen estimate``: one function per step, named
like it (rule ``report_claims`` -> ``claims``), taking the DAG's job (rule, typed wildcards,
params) and the validated config."""

from __future__ import annotations

from sparselen.estimate.flops import Work, aggregate


def claims(job, config) -> Work:
    """Every claim's bootstrap (``report.bootstrap`` replicates) and its stability check."""
    # imported here, when a claims job is priced: the stability check's resampling sizes
    from sparselen.verdicts import STABILITY_BOOT, STABILITY_REPLICATES

    replicates = job.params.report["bootstrap"] + STABILITY_REPLICATES * STABILITY_BOOT
    return aggregate().unit("claims_replicate", replicates)


hyperparams = ledger = render = aggregate
