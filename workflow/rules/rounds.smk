# Seeds in rounds (sparselen/interface/rounds.py; docs/reconstruction.md, "Seeds in rounds"):
# round 0 trains each run of the first rounds.size seeds; a checkpoint decides every claim that
# reads the slice on the runs so far; round r + 1 trains the next seeds of the runs an undecided
# claim reads, until every claim is decided or rounds.max rounds ran. The decisions are files
# (results/rounds/<slice>/round<r>.json); the slice's tables read the runs of every round.
import sparselen.report.rounds
import sparselen.statistics.power

ROUNDS = {name: sparselen.interface.rounds.of(config[name]) for name in ROUND_RUNS}


checkpoint report_rounds:
    input:
        unpack(lambda w: round_inputs(w.slice, int(w.round))),
    output:
        decision="results/rounds/{slice}/round{round}.json",
    log:
        "logs/rounds/{slice}/round{round}.log",
    benchmark:
        "results/benchmarks/rounds/{slice}/round{round}.tsv"
    wildcard_constraints:
        slice="|".join(ROUND_RUNS) or "-",
        round=r"\d+",
    group:
        GROUP_AGGREGATE
    conda:
        ENV
    params:
        facts=lambda w: sparselen.report.claims.slice_claims(w.slice).facts(
            config[w.slice]
        ),
        gaps=lambda w: round_gaps(w.slice),
        seeds=lambda w: round_seeds(w.slice, int(w.round)),
        report=REPORT,
    script:
        JOB


# The cap the slice's tables were made under, after its last round: a raised rounds.max is a new
# file, which the slice's figure target asks for, so the round it adds is decided and the tables
# are made again (Snakemake does not look past a checkpoint for a table already made).
rule report_rounds_cap:
    input:
        lambda w: slice_decisions(w.slice),
    output:
        cap="results/rounds/{slice}/cap{max}.json",
    log:
        "logs/rounds/{slice}/cap{max}.log",
    wildcard_constraints:
        slice="|".join(ROUND_RUNS) or "-",
        max=r"\d+",
    group:
        GROUP_AGGREGATE
    conda:
        ENV
    script:
        JOB


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
    lists = sparselen.jobs.checks.seed_lists(name, config[name])
    return {where: ROUNDS[name].through(seeds, r) for where, seeds in lists.items()}


def decision(name, r):
    """Round r's decision of the slice (a checkpoint: Snakemake runs it first)."""
    path = checkpoints.report_rounds.get(slice=name, round=str(r)).output.decision
    return sparselen.report.rounds.read(path)


def reads_run(name, open_claims, wildcards):
    """Whether an undecided claim reads a run of these wildcards: a PPC task is read by the
    claim its role names (sparselen.ppc.seeds_figure.task_roles); every parity run by every
    parity claim."""
    if name == "ppc":
        role = sparselen.ppc.seeds_figure.task_roles(config["ppc"])[wildcards["task"]]
        return any(role["role"] == f"decides {claim}" for claim in open_claims)
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
