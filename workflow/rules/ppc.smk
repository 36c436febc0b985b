# Position coupling and PPC (docs/reconstruction.md, "Position coupling and PPC"): evaluation
# set per task -> train and evaluate per (task, run, seed), or per (task, run) and chunk of
# ppc.stack seeds -> table -> figure.
import sparselen.ppc.runs
import sparselen.ppc.samples
import sparselen.ppc.seeds_figure
import sparselen.ppc.tasks

PPC = config["ppc"]
PPC_DIR = "results/ppc"
PPC_RUN = f"{PPC_DIR}/{{task}}/{{run}}/seed{{seed}}"
PPC_RUNS = [
    (
        PPC_RUN.format(task=task, run=run, seed=seed),
        sparselen.ppc.runs.task_seeds(PPC, task),
        seed,
        {"task": task, "run": run},
    )
    for task in PPC["tasks"]
    for run in sparselen.ppc.runs.task_schemes(PPC, task)
    for seed in training_seeds({"seeds": sparselen.ppc.runs.task_seeds(PPC, task)})
]

RUN_TABLES["ppc"] = run_tables("ppc", PPC_RUNS, {"evals": "{run}/eval.csv"})


wildcard_constraints:
    task="|".join(PPC["tasks"]),


rule ppc_eval_data:
    output:
        eval_set=f"{PPC_DIR}/{{task}}/eval_set.pt",
    log:
        "logs/ppc/eval_data/{task}.log",
    benchmark:
        "results/benchmarks/ppc/eval_data/{task}.tsv"
    group:
        GROUP_DATA
    conda:
        ENV
    params:
        sampler=lambda w: sparselen.ppc.tasks.sampler_params(PPC[w.task]),
        sizes=lambda w: PPC[w.task]["eval_sizes"],
        train_sizes=lambda w: PPC[w.task]["train_sizes"],
        eval=PPC["eval"],
        format=sparselen.ppc.samples.FORMAT,
    script:
        JOB


# What a PPC run's training depends on, the same for every seed of a (task, run): the params
# of its rule, and of a stack rule (ppc.stack > 1) that trains several of its seeds.
PPC_TRAIN = dict(
    model=PPC["model"],
    variant=lambda w: PPC["variants"].get(w.run),
    pose=ppc_pose,
    train=PPC["train"],
    task_config=lambda w: sparselen.ppc.runs.run_task_config(PPC, w.task),
    max_position_id=PPC["max_position_id"],
    random_offset=PPC["random_offset"],
    id_embedding=PPC["id_embedding"],
    position_loss_weight=PPC["position_loss_weight"],
)


# What a PPC run's evaluation depends on beyond its model and the evaluation set.
PPC_EVALUATE = dict(batch_size=PPC["eval"]["batch_size"])


PPC_CHUNKS = ppc_stacks()


for train_rule in stack_rules(
    "ppc_train",
    PPC["stack"],
    PPC_CHUNKS,
    train_outputs(PPC_RUN),
    "logs/ppc/train/{task}_{run}_seed{seed}.log",
    "results/benchmarks/ppc/train/{task}_{run}_seed{seed}.tsv",
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
        wildcard_constraints:
            **train_rule.constraints,
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
                params=PPC_TRAIN,
                reserve=EVAL_RUNTIME,
            ),
        params:
            **PPC_TRAIN,
            **train_rule.extra_params,
            checkpoint=train_checkpoint,
        script:
            JOB


for eval_rule in stack_rules(
    "ppc_evaluate",
    PPC["stack"],
    PPC_CHUNKS,
    {"eval": f"{PPC_RUN}/eval.csv"},
    "logs/ppc/evaluate/{task}_{run}_seed{seed}.log",
    "results/benchmarks/ppc/evaluate/{task}_{run}_seed{seed}.tsv",
    inputs={
        "model": f"{PPC_RUN}/model.pt",
        "eval_set": rules.ppc_eval_data.output.eval_set,
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
        wildcard_constraints:
            **eval_rule.constraints,
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
                params=PPC_EVALUATE,
            ),
        params:
            **eval_rule.extra_params,
            **PPC_EVALUATE,
        script:
            JOB


rule ppc_table:
    input:
        evals=RUN_TABLES["ppc"]["evals"],
        cap=round_cap("ppc"),
    output:
        csv=f"{PPC_DIR}/table.csv",
        md=f"{PPC_DIR}/table.md",
        seeds=f"{PPC_DIR}/largest_size_per_seed.csv",
    log:
        "logs/ppc/table.log",
    benchmark:
        "results/benchmarks/ppc/table.tsv"
    group:
        GROUP_AGGREGATE
    conda:
        ENV
    params:
        code=TABLE_CODE,
        train_sizes={task: PPC[task]["train_sizes"] for task in PPC["tasks"]},
    script:
        JOB


rule ppc_figure:
    input:
        table=rules.ppc_table.output.csv,
        seeds=rules.ppc_table.output.seeds,
    output:
        png=report(
            "results/figures/ppc.png",
            caption="../report/ppc.rst",
            category="Position coupling and PPC",
        ),
        pdf="results/figures/ppc.pdf",
        seeds_png=report(
            "results/figures/ppc_seeds.png",
            caption="../report/ppc_seeds.rst",
            category="Position coupling and PPC",
        ),
        seeds_pdf="results/figures/ppc_seeds.pdf",
    log:
        "logs/ppc/figure.log",
    benchmark:
        "results/benchmarks/ppc/figure.tsv"
    group:
        GROUP_AGGREGATE
    conda:
        ENV
    params:
        train_max_sizes={task: PPC[task]["train_sizes"][1] for task in PPC["tasks"]},
        roles=sparselen.ppc.seeds_figure.task_roles(PPC),
    script:
        JOB


rule fig_ppc:
    input:
        round_cap("ppc"),
        rules.ppc_figure.output,
        rules.ppc_table.output,
