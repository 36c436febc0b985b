# Position coupling and PPC (SPEC.md section 4): evaluation data per task -> train per
# (task, scheme, seed) -> evaluate per (task, scheme, seed) -> table -> figure.
PPC = config["ppc"]
PPC_RUNS = expand(
    "results/ppc/{task}/{scheme}/seed{seed}",
    task=PPC["tasks"],
    scheme=PPC["schemes"],
    seed=PPC["seeds"],
)
PPC_TRAIN_KEYS = (
    "model",
    "train",
    "max_position_id",
    "random_offset",
    "id_embedding",
    "position_loss_weight",
)


rule ppc_eval_data:
    output:
        "results/ppc/{task}/eval_set.pt",
    log:
        "logs/ppc/eval_data/{task}.log",
    benchmark:
        "results/benchmarks/ppc/eval_data/{task}.tsv"
    wildcard_constraints:
        task="|".join(PPC["tasks"]),
    group:
        GROUP_DATA
    conda:
        "../../envs/sparselen.yaml"
    params:
        # the task's model overrides do not change its evaluation set
        cfg=lambda w: as_arg(
            {
                "task": {k: v for k, v in PPC[w.task].items() if k != "model"},
                "eval": PPC["eval"],
            }
        ),
    shell:
        "python -m sparselen ppc eval-data --config {params.cfg} --task {wildcards.task}"
        " --out {output} 2> {log}"


rule ppc_train:
    output:
        model="results/ppc/{task}/{scheme}/seed{seed}/model.pt",
        log_csv="results/ppc/{task}/{scheme}/seed{seed}/train_log.csv",
        summary="results/ppc/{task}/{scheme}/seed{seed}/train_summary.json",
    log:
        "logs/ppc/train/{task}_{scheme}_seed{seed}.log",
    benchmark:
        "results/benchmarks/ppc/train/{task}_{scheme}_seed{seed}.tsv"
    wildcard_constraints:
        task="|".join(PPC["tasks"]),
        scheme="|".join(PPC["schemes"]),
        seed=r"\d+",
    group:
        GROUP_MODEL
    conda:
        "../../envs/sparselen.yaml"
    threads: RUNTIME["threads"]
    resources:
        **job_resources(),
    params:
        cfg=lambda w: as_arg(
            {k: PPC[k] for k in PPC_TRAIN_KEYS}
            | {"task": PPC[w.task], "compile": config["compile"]}
        ),
        checkpoint="results/ppc/{task}/{scheme}/seed{seed}/checkpoint.pt",
        device=RUNTIME["device"],
    shell:
        "python -m sparselen ppc train --config {params.cfg} --task {wildcards.task}"
        " --scheme {wildcards.scheme} --seed {wildcards.seed}"
        " --model {output.model} --log-csv {output.log_csv} --summary {output.summary}"
        " --checkpoint {params.checkpoint} --device {params.device} --threads {threads} 2> {log}"


rule ppc_evaluate:
    input:
        model="results/ppc/{task}/{scheme}/seed{seed}/model.pt",
        eval_set="results/ppc/{task}/eval_set.pt",
    output:
        "results/ppc/{task}/{scheme}/seed{seed}/eval.csv",
    log:
        "logs/ppc/evaluate/{task}_{scheme}_seed{seed}.log",
    benchmark:
        "results/benchmarks/ppc/evaluate/{task}_{scheme}_seed{seed}.tsv"
    wildcard_constraints:
        task="|".join(PPC["tasks"]),
        scheme="|".join(PPC["schemes"]),
        seed=r"\d+",
    group:
        GROUP_MODEL
    conda:
        "../../envs/sparselen.yaml"
    threads: RUNTIME["threads"]
    resources:
        **job_resources(runtime=10),
    params:
        batch_size=PPC["eval"]["batch_size"],
        device=RUNTIME["device"],
    shell:
        "python -m sparselen ppc evaluate --model {input.model} --eval-set {input.eval_set}"
        " --out {output} --batch-size {params.batch_size} --device {params.device}"
        " --threads {threads} 2> {log}"


rule ppc_table:
    input:
        expand("{run}/eval.csv", run=PPC_RUNS),
    output:
        csv="results/ppc/table.csv",
        md="results/ppc/table.md",
    log:
        "logs/ppc/table.log",
    benchmark:
        "results/benchmarks/ppc/table.tsv"
    group:
        GROUP_AGGREGATE
    conda:
        "../../envs/sparselen.yaml"
    shell:
        "python -m sparselen ppc table --inputs {input} --csv {output.csv} --md {output.md} 2> {log}"


rule ppc_figure:
    input:
        rules.ppc_table.output.csv,
    output:
        png=report(
            "results/figures/ppc.png",
            caption="../report/ppc.rst",
            category="Position coupling and PPC",
        ),
        pdf="results/figures/ppc.pdf",
    log:
        "logs/ppc/figure.log",
    benchmark:
        "results/benchmarks/ppc/figure.tsv"
    group:
        GROUP_AGGREGATE
    conda:
        "../../envs/sparselen.yaml"
    params:
        train_max_sizes=as_arg({t: PPC[t]["train_sizes"][1] for t in PPC["tasks"]}),
    shell:
        "python -m sparselen ppc figure --table {input} --train-max-sizes {params.train_max_sizes}"
        " --png {output.png} --pdf {output.pdf} 2> {log}"


rule fig_ppc:
    input:
        rules.ppc_figure.output,
        rules.ppc_table.output,
