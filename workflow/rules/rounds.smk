# Seeds in rounds (sparselen/interface/rounds.py; docs/reconstruction.md, "Seeds in rounds"):
# round 0 trains each run of the first rounds.size seeds; a checkpoint decides every claim that
# reads the slice on the runs so far; round r + 1 trains the next seeds of the runs an undecided
# claim reads, until every claim is decided or rounds.max rounds ran. The decisions are files
# (results/rounds/<slice>/round<r>.json); the slice's tables read the runs of every round. A
# decision is a submission of its own, not of the aggregation group: the next round's trainings
# wait on it, and the group's other jobs on them.
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
    conda:
        ENV
    script:
        JOB
