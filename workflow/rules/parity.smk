# Sparse parity (docs/reconstruction.md, "Sparse parity"): evaluation set -> train and
# evaluate per (K_train, seed), or per K_train and chunk of parity.stack seeds -> table ->
# figure.
PARITY = config["parity"]
PARITY_DIR = "results/parity"
PARITY_RUN = f"{PARITY_DIR}/K{{K_train}}/seed{{seed}}"
PARITY_RUNS = [
    (PARITY_RUN.format(K_train=K, seed=seed), PARITY["seeds"], seed, {"K_train": K})
    for K in PARITY["K_train"]
    for seed in training_seeds(PARITY)
]
RUN_TABLES["parity"] = run_tables("parity", PARITY_RUNS, {"evals": "{run}/eval.csv"})


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


# What a parity run's training depends on, the same for every seed of a K_train: the params of
# its rule, and of a stack rule (parity.stack > 1) that trains several of its seeds.
PARITY_TRAIN = dict(
    model=PARITY["model"],
    scheme=PARITY["scheme"],
    pose=PARITY["pose"],
    train=PARITY["train"],
)


# What a parity run's evaluation depends on beyond its model and the evaluation set.
PARITY_EVALUATE = dict(batch_tokens=PARITY["eval"]["batch_tokens"])


PARITY_CHUNKS = [
    (seeds, {}) for seeds in seed_chunks(training_seeds(PARITY), PARITY["stack"])
]


for train_rule in stack_rules(
    "parity_train",
    PARITY["stack"],
    PARITY_CHUNKS,
    train_outputs(PARITY_RUN),
    "logs/parity/train/K{K_train}_seed{seed}.log",
    "results/benchmarks/parity/train/K{K_train}_seed{seed}.tsv",
):

    rule:
        name:
            train_rule.name
        output:
            **train_rule.output,
        log:
            train_rule.log,
        benchmark:
            train_rule.benchmark
        group:
            train_rule.group
        conda:
            ENV
        threads: THREADS
        resources:
            **job_resources(
                packed=train_rule.packed,
                runs=train_rule.runs,
                stack_rule=train_rule.name,
                params=PARITY_TRAIN,
                reserve=EVAL_RUNTIME,
            ),
        params:
            **PARITY_TRAIN,
            **train_rule.extra_params,
            checkpoint=train_checkpoint,
        script:
            JOB


for eval_rule in stack_rules(
    "parity_evaluate",
    PARITY["stack"],
    PARITY_CHUNKS,
    {"eval": f"{PARITY_RUN}/eval.csv"},
    "logs/parity/evaluate/K{K_train}_seed{seed}.log",
    "results/benchmarks/parity/evaluate/K{K_train}_seed{seed}.tsv",
    inputs={
        "model": f"{PARITY_RUN}/model.pt",
        "eval_set": rules.parity_eval_data.output.eval_set,
    },
):

    rule:
        name:
            eval_rule.name
        input:
            **eval_rule.input,
        output:
            **eval_rule.output,
        log:
            eval_rule.log,
        benchmark:
            eval_rule.benchmark
        group:
            eval_rule.group
        conda:
            ENV
        threads: THREADS
        resources:
            **job_resources(
                runtime=EVAL_RUNTIME,
                packed=eval_rule.packed,
                runs=eval_rule.runs,
                stack_rule=eval_rule.name,
                params=PARITY_EVALUATE,
            ),
        params:
            **eval_rule.extra_params,
            **PARITY_EVALUATE,
        script:
            JOB


rule parity_table:
    input:
        evals=RUN_TABLES["parity"]["evals"],
        cap=round_cap("parity"),
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
        evals=RUN_TABLES["parity"]["evals"],
    output:
        png=report(
            "results/figures/parity.png",
            caption="../report/parity.rst",
            category="Sparse parity",
        ),
        pdf="results/figures/parity.pdf",
        heatmap_png=report(
            "results/figures/parity_heatmap.png",
            caption="../report/parity_heatmap.rst",
            category="Sparse parity",
        ),
        heatmap_pdf="results/figures/parity_heatmap.pdf",
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
        round_cap("parity"),
        rules.parity_figure.output,
        rules.parity_table.output,
