# The theory, made runnable (SPEC.md section 6; docs/theory.md): one job per
# (model, distribution, k, seed) trains on lengths <= L and evaluates up to Lbar -> table
# of errors and slopes -> figure.
THEORY = config["theory"]
THEORY_RUNS = expand(
    "results/theory/sfa/{dist}/k{k}/seed{seed}",
    dist=THEORY["distributions"],
    k=THEORY["k"],
    seed=THEORY["seeds"],
) + expand(
    "results/theory/gpt/{dist}/k{k}/seed{seed}",
    dist=THEORY["distributions"],
    k=THEORY["gpt"]["k"],
    seed=THEORY["seeds"],
)
THEORY_SHARED = {key: THEORY[key] for key in ("task", "train", "eval")}


rule theory_run_sfa:
    output:
        model="results/theory/sfa/{dist}/k{k}/seed{seed}/model.pt",
        log_csv="results/theory/sfa/{dist}/k{k}/seed{seed}/train_log.csv",
        eval_csv="results/theory/sfa/{dist}/k{k}/seed{seed}/eval.csv",
        summary="results/theory/sfa/{dist}/k{k}/seed{seed}/train_summary.json",
    log:
        "logs/theory/sfa/{dist}_k{k}_seed{seed}.log",
    benchmark:
        "results/benchmarks/theory/sfa/{dist}_k{k}_seed{seed}.tsv"
    wildcard_constraints:
        dist="local|nonlocal|coupled",
    group:
        GROUP_DATA
    conda:
        "../../envs/sparselen.yaml"
    threads: RUNTIME["threads"]
    params:
        cfg=as_arg(THEORY_SHARED | {"sfa": THEORY["sfa"]}),
    shell:
        "python -m sparselen theory run --config {params.cfg} --model sfa --distribution {wildcards.dist}"
        " --k {wildcards.k} --seed {wildcards.seed} --out-model {output.model} --log-csv {output.log_csv}"
        " --eval-csv {output.eval_csv} --summary {output.summary} --device cpu --threads {threads} 2> {log}"


rule theory_run_gpt:
    output:
        model="results/theory/gpt/{dist}/k{k}/seed{seed}/model.pt",
        log_csv="results/theory/gpt/{dist}/k{k}/seed{seed}/train_log.csv",
        eval_csv="results/theory/gpt/{dist}/k{k}/seed{seed}/eval.csv",
        summary="results/theory/gpt/{dist}/k{k}/seed{seed}/train_summary.json",
    log:
        "logs/theory/gpt/{dist}_k{k}_seed{seed}.log",
    benchmark:
        "results/benchmarks/theory/gpt/{dist}_k{k}_seed{seed}.tsv"
    wildcard_constraints:
        dist="local|nonlocal|coupled",
    group:
        GROUP_MODEL
    conda:
        "../../envs/sparselen.yaml"
    threads: RUNTIME["threads"]
    resources:
        **job_resources(runtime=60),
    params:
        cfg=as_arg(
            THEORY_SHARED
            | {"gpt": {key: v for key, v in THEORY["gpt"].items() if key != "k"}}
            | {"compile": config["compile"]}
        ),
        checkpoint="results/theory/gpt/{dist}/k{k}/seed{seed}/checkpoint.pt",
        device=RUNTIME["device"],
    shell:
        "python -m sparselen theory run --config {params.cfg} --model gpt --distribution {wildcards.dist}"
        " --k {wildcards.k} --seed {wildcards.seed} --out-model {output.model} --log-csv {output.log_csv}"
        " --eval-csv {output.eval_csv} --summary {output.summary} --checkpoint {params.checkpoint} --device {params.device}"
        " --threads {threads} 2> {log}"


rule theory_table:
    input:
        expand("{run}/eval.csv", run=THEORY_RUNS),
    output:
        csv="results/theory/table.csv",
        md="results/theory/table.md",
        slopes_csv="results/theory/slopes.csv",
        slopes_md="results/theory/slopes.md",
    log:
        "logs/theory/table.log",
    benchmark:
        "results/benchmarks/theory/table.tsv"
    group:
        GROUP_AGGREGATE
    conda:
        "../../envs/sparselen.yaml"
    params:
        floor=THEORY["floor"],
    shell:
        "python -m sparselen theory table --inputs {input} --csv {output.csv} --md {output.md}"
        " --slopes-csv {output.slopes_csv} --slopes-md {output.slopes_md} --floor {params.floor} 2> {log}"


rule theory_figure:
    input:
        rules.theory_table.output.csv,
    output:
        png=report(
            "results/figures/theory.png",
            caption="../report/theory.rst",
            category="Theory",
        ),
        pdf="results/figures/theory.pdf",
    log:
        "logs/theory/figure.log",
    benchmark:
        "results/benchmarks/theory/figure.tsv"
    group:
        GROUP_AGGREGATE
    conda:
        "../../envs/sparselen.yaml"
    params:
        train_max_length=THEORY["train"]["lengths"][1],
        floor=THEORY["floor"],
    shell:
        "python -m sparselen theory figure --table {input} --train-max-length {params.train_max_length}"
        " --floor {params.floor} --png {output.png} --pdf {output.pdf} 2> {log}"


rule fig_theory:
    input:
        rules.theory_figure.output,
        rules.theory_table.output,
