# Configuration checks (before any job starts) and what every slice's rules share.

from pathlib import Path
from types import SimpleNamespace

import snakemake.io
import snakemake.iocontainers
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

import sparselen.estimate.limits
import sparselen.estimate.packing
import sparselen.interface.config
import sparselen.interface.rounds
import sparselen.jobs.checks
import sparselen.report.claims
import sparselen.report.decides
import sparselen.report.registration
import sparselen.report.rounds
import sparselen.runtime.provenance
import sparselen.statistics.power
import sparselen.training.resumable
from sparselen.nn.model import POSITION_SCHEMES

SCHEMA = "../schemas/config.schema.yaml"
CONFIG_SOURCE = ", ".join(map(str, workflow.configfiles)) or "config.yaml"

try:
    validate(config, SCHEMA)
except WorkflowError:
    problems = sparselen.interface.config.schema_errors(
        config, workflow.source_path(SCHEMA)
    )
    raise WorkflowError(
        f"invalid configuration (from {CONFIG_SOURCE}):\n  " + "\n  ".join(problems)
    ) from None
try:
    sparselen.jobs.checks.check(config, CONFIG_SOURCE)
except ValueError as e:
    raise WorkflowError(str(e)) from None


# Every rule runs the package function named like the rule (sparselen/jobs/dispatch.py) in this
# environment (used with --software-deployment-method conda; docs/cluster.md, "SLURM").
JOB = "../scripts/job.py"
ENV = "../../envs/sparselen.yaml"
THREADS = config["threads"]


wildcard_constraints:
    seed=r"\d+",
    K_train=r"\d+",
    k=r"\d+",
    context=r"\d+",
    # a run name: a position scheme or a <slice>.variants entry (sparselen/interface/variants.py)
    run="|".join(
        [
            *POSITION_SCHEMES,
            *config.get("ppc", {}).get("variants", {}),
            *config.get("language", {}).get("variants", {}),
        ]
    ),


def training_seeds(section):
    """A slice's training seeds, shifted by config seed_offset."""
    return [seed + config["seed_offset"] for seed in section["seeds"]]


# Per slice, its per-run tables by name (the files of every training run that its table rules
# aggregate): each slice's rules file fills in its entry; the claims read the names their
# slice's claims module declares (sparselen/<slice>/claims.py READS), and the report lists the
# provenance of every file here.
RUN_TABLES = {}
# Per slice whose seeds come in rounds (sparselen/interface/rounds.py): its runs, each with its
# seed list, seed, wildcards and per-run tables (workflow/rules/rounds.smk reads them).
ROUND_RUNS = {}


def run_tables(name, runs, tables):
    """A slice's per-run tables by name (its RUN_TABLES entry): ``runs`` its runs as (directory,
    the seed list the run's seed is of, the seed, the run's wildcards), ``tables`` table name ->
    file pattern on {run}. Without rounds, every run's files; with ``<name>.rounds``, an input
    function of the runs the rounds trained (``rounded_runs``)."""
    entries = [
        SimpleNamespace(
            seeds=seeds,
            seed=seed,
            wildcards=wildcards,
            files={t: pattern.format(run=run) for t, pattern in tables.items()},
        )
        for run, seeds, seed, wildcards in runs
    ]
    if sparselen.interface.rounds.of(config[name]) is None:
        return {t: [e.files[t] for e in entries] for t in tables}
    ROUND_RUNS[name] = entries
    return {t: rounded_files(name, t) for t in tables}


def round_cap(name):
    """The file of the cap a rounded slice's tables are made under (rule report_rounds_cap), or
    none without rounds."""
    rounds = sparselen.interface.rounds.of(config[name])
    return [f"results/rounds/{name}/cap{rounds.max}.json"] if rounds else []


def rounded_files(name, table):
    """Input function: the files ``table`` of every run the slice's rounds trained
    (workflow/rules/rounds.smk)."""

    def files(wildcards):
        return [e.files[table] for e in rounded_runs(name, last_round(name))]

    return files


def train_outputs(run):
    """The files of one training run under the directory `run` (sparselen.interface.run.RunFiles)."""
    return {
        "model": f"{run}/model.pt",
        "log_csv": f"{run}/train_log.csv",
        "summary": f"{run}/train_summary.json",
    }


def train_checkpoint(wildcards, output):
    """Param checkpoint of a training rule: the resume file beside each run's model file (a
    list for a stack rule). A function of the outputs is a derived param, which Snakemake's
    params trigger does not compare: a run's recorded params are the same whether it trained
    alone or in a stack (docs/gpu.md, "Stacks in the workflow")."""
    models = output.model
    one = isinstance(models, str)
    paths = [
        str(Path(m).parent / sparselen.training.resumable.CHECKPOINT)
        for m in ([models] if one else models)
    ]
    return paths[0] if one else paths


# Scheduler resources and groups (SLURM profile, local-gpus profile; docs/cluster.md,
# "Submissions"). A rule that trains or evaluates a model declares
#     group: GROUP_MODEL
#     resources: **job_resources(runtime=MINUTES)
# so one submission trains a model and runs its evaluations on the same GPU. A GROUP_MODEL rule
# must read one model only (plus data/aggregate outputs): one that reads two models' outputs
# joins both chains into one submission that asks for all their GPUs at once. Seconds-long
# CPU rules declare `group: GROUP_DATA` (evaluation sets and other inputs that need no model)
# or `group: GROUP_AGGREGATE` (tables, figures); the theory slice's idealized-model runs,
# CPU training of seconds to minutes, declare `group: GROUP_CPU_TRAIN`. Groups only matter
# on a cluster.
GROUP_MODEL = "model"
GROUP_DATA = "data"
GROUP_CPU_TRAIN = "cpu_train"
GROUP_AGGREGATE = "aggregate"

# Packing (sparselen/estimate/packing.py; docs/gpu.md "Packing"): the small models' groups (parity, PPC,
# theory GPT runs: rules with `group: GROUP_PACKED_MODEL` and `job_resources(packed=True)`)
# share GPUs, JOBS_PER_GPU of them each. Each such job holds one of a GPU's JOBS_PER_GPU
# `gpu_slots`, a pool of JOBS_PER_GPU per GPU: per submission under SLURM (scope local), where
# group-components packed_model puts several model groups into one submission that asks for one
# GPU (`gres`: a string, which Snakemake does not add up over a group's jobs), the slot pool
# letting JOBS_PER_GPU of them run side by side and stacking the rest; and the `gpu` GPUs of a
# machine locally (local-gpus profile), where each job claims its slot (sparselen/runtime/gpu_slots.py).
JOBS_PER_GPU = sparselen.estimate.packing.jobs_per_gpu(config)
GROUP_PACKED_MODEL = "packed_model" if JOBS_PER_GPU > 1 else GROUP_MODEL
if JOBS_PER_GPU > 1:
    workflow.register_resource(
        "gpu_slots", JOBS_PER_GPU * (workflow.global_resources.get("gpu").value or 1)
    )


resource_scopes:
    gpu_slots="local",


# Time limits (docs/gpu.md, "Time limits"): a job asks for its rule's minutes (config
# resources.runtime unless the rule names its own), a stack job for resources.runtime_margin
# times its predicted time (sparselen/estimate/limits.py: the estimate's price of the same job
# on the GPU resources.runtime_gpu names); attempt a asks for a times that; no attempt asks for
# more than resources.max_runtime, the partition's maximum. A job killed at its limit resumes
# from its checkpoints in the next attempt. EVAL_RUNTIME: minutes of a small model's evaluation
# of one run (parity, PPC), the level after its training in a packed submission.
EVAL_RUNTIME = 10


def capped(minutes, reserve=0):
    """Resource runtime: ``minutes`` times the attempt, at most resources.max_runtime less
    ``reserve`` times the attempt (the minutes of the jobs after it in its submission, whose
    limits SLURM adds to its own)."""
    return lambda wildcards, attempt: sparselen.estimate.limits.attempt_minutes(
        config, minutes, attempt, reserve
    )


def stack_runtime(stack_rule, params, runs):
    """Resource runtime of stack rule ``stack_rule`` of ``runs`` runs whose runs' rule has
    ``params`` (values, or functions of the wildcards): its predicted time's limit per attempt.
    """

    def minutes(wildcards, attempt):
        values = {k: v(wildcards) if callable(v) else v for k, v in params.items()}
        return sparselen.estimate.limits.stack_limit(
            config, stack_rule, dict(wildcards.items()), values, runs, attempt
        )

    return minutes


def job_cpus(gpus, shared, threads=THREADS):
    """CPUs per process of a job: its torch threads; a job holding a whole GPU at least
    resources.gpu_job_cpus, so the process that launches the GPU's kernels and a stack's batch
    worker (sparselen/training/stacked.py) each have a core."""
    if gpus and not shared:
        return max(threads, config["resources"]["gpu_job_cpus"])
    return threads


def job_resources(
    runtime=None,
    mem_mb=None,
    gpu=True,
    processes=1,
    nodes=1,
    packed=False,
    runs=1,
    stack_rule=None,
    params=None,
    reserve=0,
    threads=None,
):
    """Resources of a training/evaluation job: wall time in minutes (config resources.runtime
    unless given) times the attempt, so a retry after a time-out asks for more, at most
    resources.max_runtime; memory; CPUs (``job_cpus``: config threads unless the rule's own
    `threads` are given); and `gpu` only when config gpus_per_job
    > 0 (and `gpu`), so the same rules run on CPU-only partitions. `processes`: a job training
    one model in several data-parallel processes (language.parallel) asks for that many times
    of each, per node. `nodes` > 1: SLURM gives the job that many nodes, one task each, GPUs per
    node; `mpi` makes the executor run the job in the batch script (not in a one-task step), so
    the job's own `srun` can start a torchrun on every node (sparselen/training/distributed.py).
    `packed`: a small model's job, which holds one slot of a shared GPU when JOBS_PER_GPU > 1
    (see above) and asks for resources.packed_mem_mb of host memory (unset: the job's memory);
    every GPU job then learns JOBS_PER_GPU (`jobs_per_gpu`), so a whole-GPU job claims all
    slots. A stack job (`stack_rule` not packed: a whole GPU) of `runs` runs, whose runs' rule
    has `params`, is limited by its predicted time (``stack_runtime``). `reserve`: minutes per
    attempt of the jobs after it in its group's submission (``capped``).
    """
    minutes = runtime or config["resources"]["runtime"]
    gpus = config["gpus_per_job"] * processes if gpu else 0
    shared = packed and JOBS_PER_GPU > 1
    res = {
        "runtime": (
            stack_runtime(stack_rule, params or {}, runs)
            if stack_rule and not packed
            else capped(minutes, reserve)
        ),
        "mem_mb": (mem_mb or config["resources"]["mem_mb"]) * processes,
        "cpus_per_task": job_cpus(gpus, shared, threads or THREADS) * processes,
    }
    if gpus and JOBS_PER_GPU > 1:
        res["jobs_per_gpu"] = JOBS_PER_GPU
    if shared and gpus:
        res |= {"gres": "gpu:1", "gpu_slots": 1}
        res["mem_mb"] = config["resources"].get("packed_mem_mb") or res["mem_mb"]
    elif nodes > 1:
        per_node = f" --gpus-per-node={gpus}" if gpus else ""
        res |= {
            "nodes": nodes,
            "tasks": nodes,
            "mpi": "srun",
            "slurm_extra": f"--ntasks-per-node=1{per_node}",
        }
    elif gpus:
        res["gpu"] = gpus
    return res


# Stacks (a slice's runtime knob `stack`; docs/gpu.md, "Stacks in the workflow"): with
# stack: N > 1, a slice has one training rule and one evaluation rule per chunk of N
# consecutive seeds instead of its per-(cell, seed) rules. A stack rule keeps the cell's
# wildcards, names each of its runs' files at its per-run path, passes its runs' rule's params
# plus the derived `stack_seeds`, and is named `<runs' rule>_stack<i>` (sparselen.jobs runs it
# through sparselen.jobs.stacks.run_stack: a training stack as one model, an evaluation stack one
# run after another in one process). A training stack is no part of a run's identity: what
# Snakemake records per output file (params, input files, code, software environment) is the
# same either way. An evaluation stack reads its runs' models, so its outputs' recorded input
# files differ from a per-run evaluation's: changing `stack` reruns evaluations (seconds of a
# GPU per run), never a training. Code is the rule's source line of `script:`'s argument,
# indentation included: each slice defines its rules of a step, per-run or stacks, in one loop
# over `stack_rules`, so that line is one line.
def stack_rules(rule, stack, chunks, files, log, benchmark, inputs=None):
    """A slice's rules of one step: its per-run rule ``rule`` (wildcard seed; outputs
    ``files``, per-run inputs ``inputs``, log and benchmark patterns ``log``, ``benchmark``)
    when its ``stack`` is 1, else one stack rule per (seeds, wildcard constraints) of
    ``chunks`` (its seeds' ``seed_chunks``; the constraints limit a chunk to the cells whose
    seeds it is a chunk of), whose patterns with ``{seed}`` list the chunk's runs' files.
    """
    inputs = inputs or {}
    if stack == 1:
        return [
            SimpleNamespace(
                name=rule,
                input=inputs,
                output=files,
                log=log,
                benchmark=benchmark,
                group=GROUP_PACKED_MODEL,
                runs=1,
                packed=True,
                extra_params={},
                constraints={},
            )
        ]

    def per_run(patterns, seeds):
        return {
            name: (
                expand(path, seed=seeds, allow_missing=True)
                if "{seed}" in path
                else path
            )
            for name, path in patterns.items()
        }

    return [
        SimpleNamespace(
            name=f"{rule}_stack{i}",
            input=per_run(inputs, seeds),
            output=per_run(files, seeds),
            log=stack_name(log, seeds),
            benchmark=stack_name(benchmark, seeds),
            group=None,  # one submission on a whole GPU, never behind packed jobs
            runs=len(seeds),
            packed=False,
            extra_params={"stack_seeds": stack_seeds(seeds)},
            constraints=constraints,
        )
        for i, (seeds, constraints) in enumerate(chunks)
    ]


def seed_chunks(seeds, stack):
    """``seeds`` in consecutive chunks of ``stack``: the runs of each stack job."""
    return [list(seeds[i : i + stack]) for i in range(0, len(seeds), stack)]


def stack_seeds(seeds):
    """Param stack_seeds of a stack rule, its runs' seeds in the order of its outputs: derived
    (a function of the outputs), so the params trigger compares only the runs' rule's params.
    """
    return lambda wildcards, output: list(seeds)


def stack_name(pattern, seeds):
    """A stack job's log or benchmark file: the per-run ``pattern``'s, with the chunk's first
    and last seed for ``seed{seed}``."""
    return pattern.replace("seed{seed}", f"seeds{seeds[0]}-{seeds[-1]}")


# The report (workflow/rules/report.smk) reads the slices the config runs. Input functions
# run after every include, so they see every slice's rules.
REPORT = config["report"]
REPORT_SLICES = [name for name in sparselen.interface.config.SLICES if name in config]


def source_hash(*modules):
    """The sources of ``modules`` as a params value: editing a criterion or a statistic reruns
    the jobs that compute with it (Snakemake's code trigger sees only the rule's script).
    """
    return sparselen.training.resumable.source_fingerprint(*modules)


# What the slices' tables compute with (a change reruns them).
TABLE_CODE = source_hash("statistics/stats.py", "presentation/tables.py")
# The criteria's version: the claims' sources (their criteria, the verdict machinery, the
# statistics, token sparsity) and their description in docs/reconstruction.md.
CLAIMS_SOURCES = source_hash(
    "statistics/verdicts.py",
    "statistics/stats.py",
    "report/claims.py",
    "language/sparsity.py",
    *(f"{name}/claims.py" for name in sparselen.interface.config.SLICES),
    "../docs/reconstruction.md",
)
# The shipped configurations: the report says which of them can decide each claim.
SHIPPED_CONFIGS = [
    str(sparselen.interface.config.ROOT / path)
    for path in sparselen.report.decides.SHIPPED.values()
]


def claims_inputs(wildcards):
    """Per slice that runs, the per-run tables its claims read (its claims module's READS), as
    input `<slice>_<table>` (files `all` builds anyway: no extra jobs)."""
    tables = {
        f"{name}_{table}": files_of(RUN_TABLES[name][table], wildcards)
        for name in REPORT_SLICES
        for table in sparselen.report.claims.slice_claims(name).READS
    }
    return {
        **tables,
        "shipped": SHIPPED_CONFIGS,
        "registration": str(sparselen.report.registration.FILE),
        "rounds": final_decisions(),
    }


def files_of(files, wildcards):
    """A RUN_TABLES entry's files: the list, or what its input function gives."""
    return files(wildcards) if callable(files) else files


def claims_facts():
    """Per slice that runs, the facts of its experiments its claims need (its claims module's
    facts of the config section)."""
    return {
        name: sparselen.report.claims.slice_claims(name).facts(config[name])
        for name in REPORT_SLICES
    }


def claims_design_gaps():
    """Per claim of a slice that runs, what this config's design lacks to decide it ("" when
    nothing): the report words such a claim "not decidable on this config"."""
    return sparselen.report.claims.design_gaps(
        {name: config[name] for name in REPORT_SLICES}
    )


def claims_error_rates():
    """Per claim of a slice that runs, its error rates at this config's sizes: false "holds"
    in the calibration, power at the effect it is sized at (the end of its verdict line).
    """
    return sparselen.report.claims.error_rates(
        {name: config[name] for name in REPORT_SLICES}
    )


def slice_outputs(wildcards):
    """Every figure and table of the slices the config runs."""
    return [f for name in REPORT_SLICES for f in getattr(rules, f"fig_{name}").input]


def dag_benchmarks(wildcards):
    """The benchmark files of the jobs behind every slice output, found the way Snakemake finds
    producers (the job that writes each file, then that job's inputs): the ledger counts this
    DAG's jobs, never files a run of another configuration left in results/benchmarks.
    """
    final_decisions()  # waits on the rounds' checkpoints in the order the rule's input does
    pending, seen, found = [str(f) for f in slice_outputs(wildcards)], set(), set()
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        producer = next((r for r in workflow.rules if r.is_producer(path)), None)
        if producer is None:
            continue
        values = producer.get_wildcards(path)
        if producer.benchmark:
            found.add(str(producer.expand_benchmark(values)))
        for item in producer.input:
            if callable(item):
                item = item(snakemake.iocontainers.Wildcards(fromdict=values))
            for f in [item] if isinstance(item, str) else item:
                pending.append(snakemake.io.apply_wildcards(str(f), values))
    return sorted(found)


def language_token_file_inputs(wildcards):
    """The pre-tokenized corpus's files (inputs, so a changed file reruns the check)."""
    from sparselen.language.token_files import token_paths

    spec = LANG["corpus"]["token_files"]
    try:
        return [str(f) for split in ("train", "eval") for f in token_paths(spec[split])]
    except FileNotFoundError as e:
        raise WorkflowError(
            f"language.corpus.token_files (from {CONFIG_SOURCE}): {e}"
        ) from None


def run_files(wildcards):
    """The per-run files behind each slice's tables (for the provenance section)."""
    return [
        f
        for name in REPORT_SLICES
        for files in RUN_TABLES[name].values()
        for f in files_of(files, wildcards)
    ]


def ppc_pose(wildcards):
    """ppc.pose for a run of the pose scheme, else None (a PoSE change retrains pose runs only)."""
    from sparselen.interface.variants import run_scheme

    ppc = config["ppc"]
    return ppc.get("pose") if run_scheme(ppc, wildcards.run) == "pose" else None


def ppc_stacks():
    """Each chunk of ppc.stack consecutive seeds, with the constraint to the tasks whose seeds
    it is a chunk of (a task may have a seed list of its own)."""
    ppc, tasks = config["ppc"], {}
    for task in ppc["tasks"]:
        seeds = training_seeds({"seeds": sparselen.ppc.runs.task_seeds(ppc, task)})
        for chunk in seed_chunks(seeds, ppc["stack"]):
            tasks.setdefault(tuple(chunk), []).append(task)
    return [(list(chunk), {"task": "|".join(names)}) for chunk, names in tasks.items()]


def theory_gpt(wildcards):
    """theory.gpt as the run's law sees it (law_train applied): a change to one law's
    training retrains that law's runs only."""
    from sparselen.theory.runs import law_gpt

    return law_gpt(config["theory"]["gpt"], wildcards.distribution)


# Seeds in rounds (workflow/rules/rounds.smk): what a round trains and what it decided.
def round_gaps(name):
    """What the slice's claims would lack with seeds to spare: a claim no number of seeds lets
    this design decide (no task of its kind, too few samples a cell) is settled in round 0.
    """
    section = sparselen.interface.rounds.with_seeds(
        config[name], sparselen.statistics.power.MAX_SEEDS
    )
    return sparselen.report.claims.design_gaps({name: section})


def round_seeds(name, r):
    """The seeds through round r, per seed list (recorded in the decision)."""
    lists = sparselen.interface.rounds.seed_lists(name, config[name])
    return {where: ROUNDS[name].through(seeds, r) for where, seeds in lists.items()}


def decision(name, r):
    """Round r's decision of the slice (a checkpoint: Snakemake runs it first)."""
    path = checkpoints.report_rounds.get(slice=name, round=str(r)).output.decision
    return sparselen.report.rounds.read(path)


def reads_run(name, open_claims, wildcards):
    """Whether an undecided claim reads a run of these wildcards: a PPC run by the claim its
    task decides, C1 not PPC's own runs (sparselen.ppc.seeds_figure.claims_reading); every
    parity run by every parity claim."""
    if name == "ppc":
        reading = sparselen.ppc.seeds_figure.claims_reading(
            config["ppc"], wildcards["task"], wildcards["run"]
        )
        return bool(reading & set(open_claims))
    return bool(open_claims)


def rounded_runs(name, r):
    """The slice's runs trained in rounds 0..r: every run's first round, then each later
    round's runs that a claim open after the round before reads."""
    rounds = ROUNDS[name]
    runs = [
        e
        for e in ROUND_RUNS[name]
        if e.seed in training_seeds({"seeds": rounds.seeds(e.seeds, 0)})
    ]
    for q in range(1, r + 1):
        open_claims = decision(name, q - 1)["open"]
        runs += [
            e
            for e in ROUND_RUNS[name]
            if e.seed in training_seeds({"seeds": rounds.seeds(e.seeds, q)})
            and reads_run(name, open_claims, e.wildcards)
        ]
    return runs


def last_round(name):
    """The slice's last round: the first whose decision leaves no round due."""
    r = 0
    while sparselen.report.rounds.due(decision(name, r), ROUNDS[name].max):
        r += 1
    return r


def round_inputs(name, r):
    """The per-run tables (by the names the slice's claims READ) of the runs through round r."""
    runs = rounded_runs(name, r)
    return {t: [e.files[t] for e in runs] for t in runs[0].files}


def round_decisions(wildcards):
    """Input function: each rounded slice's decisions, rounds 0..last (the report's, and the
    ledger's, whose walk of the DAG reads them)."""
    return final_decisions()


def slice_decisions(name):
    """The slice's decisions, rounds 0..last (within an input function: it waits on the
    checkpoints)."""
    return [f"results/rounds/{name}/round{r}.json" for r in range(last_round(name) + 1)]


def final_decisions():
    """Each rounded slice's decisions, rounds 0..last."""
    return [f for name in ROUND_RUNS for f in slice_decisions(name)]
