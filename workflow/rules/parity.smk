# Sparse parity (SPEC.md section 3): evaluation data -> train per (K_train, seed)
# -> evaluate per (K_train, seed) -> table -> figure.
PARITY = config["parity"]
PARITY_RUNS = expand(
    "results/parity/K{K}/seed{seed}", K=PARITY["K_train"], seed=PARITY["seeds"]
)


rule parity_eval_data:
    output:
        "results/parity/eval_set.pt",
    log:
        "logs/parity/eval_data.log",
    benchmark:
        "results/benchmarks/parity/eval_data.tsv"
    group:
        GROUP_DATA
    conda:
        "../../envs/sparselen.yaml"
    params:
        cfg=as_arg(PARITY["eval"]),
    shell:
        "python -m sparselen parity eval-data --config {params.cfg} --out {output} 2> {log}"


rule parity_train:
    output:
        model="results/parity/K{K}/seed{seed}/model.pt",
        log_csv="results/parity/K{K}/seed{seed}/train_log.csv",
        summary="results/parity/K{K}/seed{seed}/train_summary.json",
    log:
        "logs/parity/train/K{K}_seed{seed}.log",
    benchmark:
        "results/benchmarks/parity/train/K{K}_seed{seed}.tsv"
    group:
        GROUP_MODEL
    conda:
        "../../envs/sparselen.yaml"
    threads: RUNTIME["threads"]
    resources:
        **job_resources(),
    params:
        cfg=as_arg(
            {k: PARITY[k] for k in ("model", "pose", "train")}
            | {"compile": config["compile"]}
        ),
        checkpoint="results/parity/K{K}/seed{seed}/checkpoint.pt",
        device=RUNTIME["device"],
    shell:
        "python -m sparselen parity train --config {params.cfg} --K {wildcards.K} --seed {wildcards.seed}"
        " --model {output.model} --log-csv {output.log_csv} --summary {output.summary}"
        " --checkpoint {params.checkpoint} --device {params.device} --threads {threads} 2> {log}"


rule parity_evaluate:
    input:
        model="results/parity/K{K}/seed{seed}/model.pt",
        eval_set=rules.parity_eval_data.output[0],
    output:
        "results/parity/K{K}/seed{seed}/eval.csv",
    log:
        "logs/parity/evaluate/K{K}_seed{seed}.log",
    benchmark:
        "results/benchmarks/parity/evaluate/K{K}_seed{seed}.tsv"
    group:
        GROUP_MODEL
    conda:
        "../../envs/sparselen.yaml"
    threads: RUNTIME["threads"]
    resources:
        **job_resources(runtime=10),
    params:
        batch_size=PARITY["eval"]["batch_size"],
        device=RUNTIME["device"],
    shell:
        "python -m sparselen parity evaluate --model {input.model} --eval-set {input.eval_set} --out {output}"
        " --batch-size {params.batch_size} --device {params.device} --threads {threads} 2> {log}"


rule parity_table:
    input:
        expand("{run}/eval.csv", run=PARITY_RUNS),
    output:
        csv="results/parity/table.csv",
        md="results/parity/table.md",
    log:
        "logs/parity/table.log",
    benchmark:
        "results/benchmarks/parity/table.tsv"
    group:
        GROUP_AGGREGATE
    conda:
        "../../envs/sparselen.yaml"
    shell:
        "python -m sparselen parity table --inputs {input} --csv {output.csv} --md {output.md} 2> {log}"


rule parity_figure:
    input:
        rules.parity_table.output.csv,
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
        "../../envs/sparselen.yaml"
    params:
        train_max_length=PARITY["train"]["lengths"][1],
    shell:
        "python -m sparselen parity figure --table {input} --train-max-length {params.train_max_length}"
        " --png {output.png} --pdf {output.pdf} 2> {log}"


rule fig_parity:
    input:
        rules.parity_figure.output,
        rules.parity_table.output,
