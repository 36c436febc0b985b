"""What each ``report_*`` job computes, for ``sparselen estimate``: one function per step, named
like it (rule ``report_claims`` -> ``claims``), taking the DAG's job (rule, typed wildcards,
params) and the validated config."""

from __future__ import annotations

from sparselen.nn.flops import Work, aggregate


def claims(job, config) -> Work:
    """The language claims' document bootstrap (``report.bootstrap`` replicates) and their
    stability check (its first resamples of the documents, a bootstrap each; more only where a
    share is within Monte Carlo error of the line); the seed-level claims' t intervals cost
    next to nothing."""
    # imported here, when a claims job is priced: the stability check's resampling sizes
    from sparselen.statistics.verdicts import DOCUMENT_DRAWS, STABILITY_BOOT

    replicates = job.params.report["bootstrap"] + DOCUMENT_DRAWS[0] * STABILITY_BOOT
    return aggregate().unit("claims_replicate", replicates)


hyperparams = ledger = render = rounds = rounds_cap = aggregate  # rounds: a few hundred tests of a slice's claims
