# The theory, made runnable (docs/theory.md): one job per (model, distribution, k, seed), or
# per (distribution, k) and chunk of theory.stack (GPT) or theory.sfa_stack (SFA) seeds,
# trains on lengths <= L and evaluates up to Lbar -> table of errors and slopes -> figure.
import sparselen.theory
import sparselen.theory.memory

THEORY = config["theory"]
THEORY_DIR = "results/theory"
THEORY_SFA_RUN = f"{THEORY_DIR}/sfa/{{distribution}}/k{{k}}/seed{{seed}}"
THEORY_GPT_RUN = f"{THEORY_DIR}/gpt/{{distribution}}/k{{k}}/seed{{seed}}"
# The SFA runs' seeds: theory.sfa_seeds, else theory.seeds (sparselen.theory.sfa_seeds).
THEORY_SFA_SEEDS = training_seeds({"seeds": sparselen.theory.sfa_seeds(THEORY)})
THEORY_RUNS = expand(
    THEORY_SFA_RUN,
    distribution=THEORY["distributions"],
    k=THEORY["k"],
    seed=THEORY_SFA_SEEDS,
) + expand(
    THEORY_GPT_RUN,
    distribution=THEORY["distributions"],
    k=THEORY["gpt"]["k"],
    seed=training_seeds(THEORY),
)
RUN_TABLES["theory"] = {"evals": expand("{run}/eval.csv", run=THEORY_RUNS)}
THEORY_SHARED = {key: THEORY[key] for key in ("task", "train", "eval")}
# Torch threads of each SFA run (a runtime knob, no param: changing it reruns nothing).
THEORY_SFA_THREADS = THEORY["sfa_threads"] or THREADS


wildcard_constraints:
    distribution="local|nonlocal|coupled",


# What a GPT run depends on, the same for every seed of a (distribution, k): the params of its
# rule, and of a stack rule (theory.stack > 1) that trains several of its seeds.
THEORY_GPT = dict(**THEORY_SHARED, gpt=theory_gpt)
THEORY_GPT_OUTPUTS = train_outputs(THEORY_GPT_RUN) | {
    "eval": f"{THEORY_GPT_RUN}/eval.csv"
}


for train_rule in stack_rules(
    "theory_run_gpt",
    THEORY["stack"],
    [(seeds, {}) for seeds in seed_chunks(training_seeds(THEORY), THEORY["stack"])],
    THEORY_GPT_OUTPUTS,
    "logs/theory/gpt/{distribution}_k{k}_seed{seed}.log",
    "results/benchmarks/theory/gpt/{distribution}_k{k}_seed{seed}.tsv",
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
                runtime=60,
                packed=train_rule.packed,
                runs=train_rule.runs,
                stack_rule=train_rule.name,
                params=THEORY_GPT,
            ),
        params:
            **THEORY_GPT,
            **train_rule.extra_params,
            checkpoint=train_checkpoint,
        script:
            JOB


# The SFA runs: one job per (distribution, k, seed), or with theory.sfa_stack > 1 per chunk
# of that many seeds, run one after another in one process (still a CPU job of the group
# cpu_train, its time sfa_runtime per run).
THEORY_SFA_OUTPUTS = train_outputs(THEORY_SFA_RUN) | {
    "eval": f"{THEORY_SFA_RUN}/eval.csv"
}


for sfa_rule in stack_rules(
    "theory_run_sfa",
    THEORY["sfa_stack"],
    [(seeds, {}) for seeds in seed_chunks(THEORY_SFA_SEEDS, THEORY["sfa_stack"])],
    THEORY_SFA_OUTPUTS,
    "logs/theory/sfa/{distribution}_k{k}_seed{seed}.log",
    "results/benchmarks/theory/sfa/{distribution}_k{k}_seed{seed}.tsv",
):

    rule:
        name:
            sfa_rule.name
        output:
            **sfa_rule.output,
        log:
            sfa_rule.log,
        benchmark:
            sfa_rule.benchmark
        # the longest single jobs of paper.yaml (the nonlocal law at k = 4, hours on a CPU): the
        # DAG's critical chain (`sparselen estimate`), so they start first
        priority: 1
        group:
            GROUP_CPU_TRAIN
        conda:
            ENV
        threads: THEORY_SFA_THREADS
        resources:
            # memory: from about 1 GB to tens of GB by law and k (sparselen/theory/memory.py)
            **job_resources(
                runtime=config["resources"]["sfa_runtime"] * sfa_rule.runs,
                gpu=False,
                threads=THEORY_SFA_THREADS,
            )
            | {
                "mem_mb": lambda w: sparselen.theory.memory.sfa_mem_mb(
                    {**THEORY_SHARED, "sfa": THEORY["sfa"]}, w.distribution, int(w.k)
                )
            },
        params:
            **THEORY_SHARED,
            **sfa_rule.extra_params,
            sfa=THEORY["sfa"],
        script:
            JOB


rule theory_table:
    input:
        evals=RUN_TABLES["theory"]["evals"],
    output:
        csv=f"{THEORY_DIR}/table.csv",
        md=f"{THEORY_DIR}/table.md",
        slopes_csv=f"{THEORY_DIR}/slopes.csv",
        slopes_md=f"{THEORY_DIR}/slopes.md",
    log:
        "logs/theory/table.log",
    benchmark:
        "results/benchmarks/theory/table.tsv"
    group:
        GROUP_AGGREGATE
    conda:
        ENV
    params:
        code=TABLE_CODE,
        floor=THEORY["floor"],
    script:
        JOB


rule theory_figure:
    input:
        evals=RUN_TABLES["theory"]["evals"],
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
        ENV
    params:
        train_max_length=THEORY["train"]["lengths"][1],
        floor=THEORY["floor"],
    script:
        JOB


rule fig_theory:
    input:
        rules.theory_figure.output,
        rules.theory_table.output,
