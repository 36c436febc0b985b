# The reproduction report: claims checked on the measured tables, hyperparameter tables,
# compute ledger, and the Markdown/HTML report. Its inputs are the tables and figures of the
# slices the config runs (input functions run after every include, so the include order does
# not matter); a slice that is not run is "not run" in the report. It needs nothing beyond
# what `all` builds, so it never trains anything by itself.
rule report_claims:
    input:
        unpack(claims_inputs),
    output:
        csv="results/report/claims.csv",
        md="results/report/claims.md",
        decides="results/report/decides.md",
        html=report(
            "results/report/claims.html",
            caption="../report/claims.rst",
            category="Reproduction report",
        ),
    log:
        "logs/report/claims.log",
    benchmark:
        "results/benchmarks/report/claims.tsv"
    group:
        GROUP_AGGREGATE
    conda:
        ENV
    params:
        facts=claims_facts(),
        gaps=claims_design_gaps(),
        rates=claims_error_rates(),
        report=REPORT,
        criteria=CLAIMS_SOURCES,
        caps={name: rounds.max for name, rounds in ROUNDS.items()},
    script:
        JOB


rule report_hyperparams:
    output:
        csv="results/report/hyperparams/{experiment}.csv",
        md="results/report/hyperparams/{experiment}.md",
    log:
        "logs/report/hyperparams/{experiment}.log",
    benchmark:
        "results/benchmarks/report/hyperparams/{experiment}.tsv"
    wildcard_constraints:
        experiment="|".join(REPORT_SLICES),
    group:
        GROUP_AGGREGATE
    conda:
        ENV
    params:
        section=lambda wildcards: config[wildcards.experiment],
    script:
        JOB


rule report_ledger:
    input:
        slice_outputs,
        round_decisions,
    output:
        per_rule="results/report/ledger_rules.csv",
        per_figure="results/report/ledger_figures.csv",
    log:
        "logs/report/ledger.log",
    benchmark:
        "results/benchmarks/report/ledger.tsv"
    group:
        GROUP_AGGREGATE
    conda:
        ENV
    params:
        benchmarks="results/benchmarks",
        files=dag_benchmarks,
    script:
        JOB


rule report_render:
    input:
        claims=rules.report_claims.output.csv,
        decides=rules.report_claims.output.decides,
        hyperparams=expand(
            "results/report/hyperparams/{experiment}.csv", experiment=REPORT_SLICES
        ),
        ledger_rules=rules.report_ledger.output.per_rule,
        ledger_figures=rules.report_ledger.output.per_figure,
        slices=slice_outputs,
        runs=run_files,
    output:
        md="results/report/reproduction_report.md",
        html=report(
            "results/report/reproduction_report.html",
            caption="../report/reproduction_report.rst",
            category="Reproduction report",
        ),
    log:
        "logs/report/render.log",
    benchmark:
        "results/benchmarks/report/render.tsv"
    group:
        GROUP_AGGREGATE
    conda:
        ENV
    script:
        JOB


rule report:
    input:
        rules.report_render.output,
        rules.report_claims.output,
        expand(
            "results/report/hyperparams/{experiment}.{ext}",
            experiment=REPORT_SLICES,
            ext=("csv", "md"),
        ),
