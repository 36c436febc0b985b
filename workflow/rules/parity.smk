# Sparse parity (docs/reconstruction.md, "Sparse parity"): evaluation set -> train per
# (K_train, seed) -> evaluate per (K_train, seed) -> table -> figure.
PARITY = config["parity"]
PARITY_DIR = "results/parity"
PARITY_RUN = f"{PARITY_DIR}/K{{K_train}}/seed{{seed}}"
PARITY_RUNS = expand(PARITY_RUN, K_train=PARITY["K_train"], seed=training_seeds(PARITY))
RUN_TABLES["parity"] = {"evals": expand("{run}/eval.csv", run=PARITY_RUNS)}


rule parity_eval_data:
    output:
        eval_set=f"{PARITY_DIR}/eval_set.pt",
    log:
        "logs/parity/eval_data.log",
    benchmark:
        "results/benchmarks/parity/eval_data.tsv"
    group:
        GROUP_DATA
    conda:
        ENV
    params:
        eval=PARITY["eval"],
    script:
        JOB


rule parity_train:
    output:
        **train_outputs(PARITY_RUN),
    log:
        "logs/parity/train/K{K_train}_seed{seed}.log",
    benchmark:
        "results/benchmarks/parity/train/K{K_train}_seed{seed}.tsv"
    group:
        GROUP_PACKED_MODEL
    conda:
        ENV
    threads: THREADS
    resources:
        **job_resources(packed=True),
    params:
        model=PARITY["model"],
        scheme=PARITY["scheme"],
        pose=PARITY["pose"],
        train=PARITY["train"],
        checkpoint=f"{PARITY_RUN}/checkpoint.pt",
    script:
        JOB


rule parity_evaluate:
    input:
        model=f"{PARITY_RUN}/model.pt",
        eval_set=rules.parity_eval_data.output.eval_set,
    output:
        eval=f"{PARITY_RUN}/eval.csv",
    log:
        "logs/parity/evaluate/K{K_train}_seed{seed}.log",
    benchmark:
        "results/benchmarks/parity/evaluate/K{K_train}_seed{seed}.tsv"
    group:
        GROUP_PACKED_MODEL
    conda:
        ENV
    threads: THREADS
    resources:
        **job_resources(runtime=10, packed=True),
    params:
        batch_tokens=PARITY["eval"]["batch_tokens"],
    script:
        JOB


rule parity_table:
    input:
        evals=RUN_TABLES["parity"]["evals"],
    output:
        csv=f"{PARITY_DIR}/table.csv",
        md=f"{PARITY_DIR}/table.md",
    log:
        "logs/parity/table.log",
    benchmark:
        "results/benchmarks/parity/table.tsv"
    group:
        GROUP_AGGREGATE
    conda:
        ENV
    params:
        code=TABLE_CODE,
        facts=sparselen.report.claims.slice_claims("parity").facts(PARITY),
    script:
        JOB


rule parity_figure:
    input:
        table=rules.parity_table.output.csv,
    output:
        png=report(
            "results/figures/parity.png",
            caption="../report/parity.rst",
            category="Sparse parity",
        ),
        pdf="results/figures/parity.pdf",
    log:
        "logs/parity/figure.log",
    benchmark:
        "results/benchmarks/parity/figure.tsv"
    group:
        GROUP_AGGREGATE
    conda:
        ENV
    params:
        facts=sparselen.report.claims.slice_claims("parity").facts(PARITY),
    script:
        JOB


rule fig_parity:
    input:
        rules.parity_figure.output,
        rules.parity_table.output,
