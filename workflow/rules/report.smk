# The reproduction report (issue 7): claims checked on the measured tables, hyperparameter
# tables, compute ledger, and the Markdown/HTML report. Its inputs are the tables and figures
# of the slices the workflow defines (input functions run after every include, so the include
# order does not matter); a slice without rules is "not run" in the report. It needs nothing
# beyond what `all` builds, so it never trains anything by itself.
include: "report_common.smk"


rule claims:
    input:
        unpack(claims_inputs),
    output:
        csv=CLAIMS_CSV,
        md="results/report/claims.md",
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
        "../../envs/sparselen.yaml"
    params:
        cfg=as_arg(
            REPORT
            | {"parity_train_max_length": config["parity"]["train"]["lengths"][1]}
        ),
        runs=runs_args,
        criteria=CLAIMS_SOURCE_HASH,
    shell:
        "python -m sparselen report claims --config {params.cfg} {params.runs}"
        " --csv {output.csv} --md {output.md} --html {output.html} 2> {log}"


rule hyperparams:
    output:
        csv="results/report/hyperparams/{experiment}.csv",
        md="results/report/hyperparams/{experiment}.md",
    log:
        "logs/report/hyperparams_{experiment}.log",
    benchmark:
        "results/benchmarks/report/hyperparams/{experiment}.tsv"
    wildcard_constraints:
        experiment="|".join(HYPERPARAM_EXPERIMENTS) or "-",
    group:
        GROUP_AGGREGATE
    conda:
        "../../envs/sparselen.yaml"
    params:
        cfg=lambda wildcards: as_arg(
            {wildcards.experiment: config[wildcards.experiment]}
        ),
    shell:
        "python -m sparselen report hyperparams --config {params.cfg} --experiment {wildcards.experiment}"
        " --csv {output.csv} --md {output.md} 2> {log}"


rule ledger:
    input:
        slice_outputs,
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
        "../../envs/sparselen.yaml"
    shell:
        "python -m sparselen report ledger --benchmarks results/benchmarks"
        " --rules-csv {output.per_rule} --figures-csv {output.per_figure} 2> {log}"


rule reproduction_report:
    input:
        claims=rules.claims.output.csv,
        hyperparams=expand(
            "results/report/hyperparams/{experiment}.md",
            experiment=HYPERPARAM_EXPERIMENTS,
        ),
        ledger_rules=rules.ledger.output.per_rule,
        ledger_figures=rules.ledger.output.per_figure,
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
        "logs/report/reproduction_report.log",
    benchmark:
        "results/benchmarks/report/reproduction_report.tsv"
    group:
        GROUP_AGGREGATE
    conda:
        "../../envs/sparselen.yaml"
    params:
        figures=lambda wildcards, input: [f for f in input.slices if f.endswith(".png")],
        tables=lambda wildcards, input: [
            f for f in input.slices if f.endswith((".md", ".csv"))
        ],
    shell:
        "python -m sparselen report render --claims {input.claims} --hyperparams {input.hyperparams}"
        " --ledger-rules {input.ledger_rules} --ledger-figures {input.ledger_figures}"
        " --figures {params.figures} --tables {params.tables} --runs {input.runs}"
        " --md {output.md} --html {output.html} 2> {log}"


rule report:
    input:
        rules.reproduction_report.output,
        rules.claims.output,
        expand(
            "results/report/hyperparams/{experiment}.{ext}",
            experiment=HYPERPARAM_EXPERIMENTS,
            ext=("csv", "md"),
        ),
