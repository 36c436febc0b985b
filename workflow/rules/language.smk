# Natural language (docs/reconstruction.md, "Natural language"): corpus -> tokenizer -> tokens
# -> train per (context, run, seed) -> loss by position per run; the reference
# (long-context) model -> sparse-dependency analysis per seed -> every run's losses on the
# analysed tokens -> tables -> figures.
import sparselen.language.tables
import sparselen.interface.variants

LANG = config["language"]
LANG_CTX = LANG["contexts"]
# Data-parallel processes per node and nodes per language model (torchrun, started by the
# training job).
LANG_PROCS = LANG["parallel"]["processes"]
LANG_NODES = LANG["parallel"]["nodes"]
# Minutes of a language training or analysis (None: resources.runtime).
LANG_RUNTIME = config["resources"].get("language_runtime")
# Minutes of a language model's loss by position: the level after its training in its
# submission.
LANG_EVAL_RUNTIME = 30
# Minutes of the tokenization (over LANG_TOKENS_THREADS threads; a killed job resumes at its
# last chunk).
LANG_TOKENS_RUNTIME = config["resources"]["tokens_runtime"]
LANG_TOKENS_THREADS = LANG["tokens_threads"]
# The analysis of each seed in parts by token range, one job each, merged after.
LANG_PARTS = LANG["analysis_parts"]
LANG_DIR = "results/language"
LANG_RUN = f"{LANG_DIR}/ctx{{context}}/{{run}}/seed{{seed}}"
LANG_RUNS = [
    f"{LANG_DIR}/ctx{LANG_CTX[size]}/{run}/seed{seed}"
    for size in ("short", "long")
    for run in LANG["schemes"][size]
    for seed in training_seeds(LANG)
]
LANG_REF_RUN = (
    f"{LANG_DIR}/ctx{LANG_CTX['long']}/{LANG['schemes']['long'][0]}/seed{{seed}}"
)
LANG_ANALYSIS = f"{LANG_DIR}/analysis/seed{{seed}}"
LANG_ANALYSIS_PART = f"{LANG_ANALYSIS}/part{{part}}"
RUN_TABLES["language"] = {
    "deps": expand(f"{LANG_ANALYSIS}/dependency.csv", seed=training_seeds(LANG)),
    "transfer": [f"{run}/analysed_token_losses.csv" for run in LANG_RUNS],
    "position": [f"{run}/loss_by_position.csv" for run in LANG_RUNS],
    "screen": expand(f"{LANG_ANALYSIS}/screen.csv", seed=training_seeds(LANG)),
    "planted": expand(f"{LANG_ANALYSIS}/planted.csv", seed=training_seeds(LANG)),
    "induction": [f"{run}/induction.csv" for run in LANG_RUNS],
    "screen_losses": [f"{run}/screen_losses.csv" for run in LANG_RUNS],
}
# The chain corpus -> tokens -> reference model -> analysis is the DAG's longest (`sparselen
# estimate` prints it): its jobs go first, so it does not run alone at the end of a run, and
# the reference trainings and the analysis that reads them before the other trainings.
LANG_PRIORITY = 1
LANG_CHAIN_PRIORITY = LANG_PRIORITY + 1


rule language_corpus:
    output:
        train=f"{LANG_DIR}/corpus/train.jsonl",
        eval=f"{LANG_DIR}/corpus/eval.jsonl",
        summary=f"{LANG_DIR}/corpus_summary.json",
    log:
        "logs/language/corpus.log",
    benchmark:
        "results/benchmarks/language/corpus.tsv"
    priority: LANG_PRIORITY
    group:
        GROUP_DATA
    conda:
        ENV
    params:
        corpus={k: v for k, v in LANG["corpus"].items() if k != "token_files"},
    script:
        JOB


rule language_tokenizer:
    input:
        train=rules.language_corpus.output.train,
    output:
        tokenizer=f"{LANG_DIR}/tokenizer.json",
    log:
        "logs/language/tokenizer.log",
    benchmark:
        "results/benchmarks/language/tokenizer.tsv"
    priority: LANG_PRIORITY
    group:
        GROUP_DATA
    conda:
        ENV
    resources:
        # BPE training counts the corpus' distinct words: its memory grows with the corpus
        mem_mb=config["resources"]["mem_mb"],
    params:
        tokenizer=LANG["tokenizer"],
    script:
        JOB


rule language_tokens:
    input:
        train=rules.language_corpus.output.train,
        eval=rules.language_corpus.output.eval,
        tokenizer=rules.language_tokenizer.output.tokenizer,
    output:
        tokens=f"{LANG_DIR}/tokens/tokens.json",
        train=f"{LANG_DIR}/tokens/train.npy",
        eval=f"{LANG_DIR}/tokens/eval.npy",
    log:
        "logs/language/tokens.log",
    benchmark:
        "results/benchmarks/language/tokens.tsv"
    priority: LANG_PRIORITY
    group:
        GROUP_DATA
    conda:
        ENV
    threads: LANG_TOKENS_THREADS
    resources:
        runtime=capped(LANG_TOKENS_RUNTIME),
    script:
        JOB


rule language_token_files:
    input:
        language_token_file_inputs,
    output:
        tokens=f"{LANG_DIR}/tokens.json",
    log:
        "logs/language/token_files.log",
    benchmark:
        "results/benchmarks/language/token_files.tsv"
    priority: LANG_PRIORITY
    group:
        GROUP_DATA
    conda:
        ENV
    params:
        token_files=LANG["corpus"]["token_files"],
    script:
        JOB


# The token ids every model step reads: tokenized here, or the config's OLMo token files.
LANG_TOKENS = (
    rules.language_token_files.output.tokens
    if LANG["corpus"]["source"] == "token_files"
    else rules.language_tokens.output.tokens
)


rule language_train:
    input:
        tokens=LANG_TOKENS,
    output:
        **train_outputs(LANG_RUN),
    log:
        "logs/language/train/ctx{context}_{run}_seed{seed}.log",
    benchmark:
        "results/benchmarks/language/train/ctx{context}_{run}_seed{seed}.tsv"
    priority:
        lambda w: (
            LANG_CHAIN_PRIORITY
            if LANG_RUN.format(**dict(w.items())) == LANG_REF_RUN.format(seed=w.seed)
            else LANG_PRIORITY
        )
    group:
        GROUP_MODEL
    conda:
        ENV
    threads: THREADS * LANG_PROCS
    resources:
        **job_resources(
            LANG_RUNTIME,
            processes=LANG_PROCS,
            nodes=LANG_NODES,
            reserve=LANG_EVAL_RUNTIME,
        ),
    params:
        model=lambda w: sparselen.interface.variants.run_model(
            LANG["model"], LANG, w.run
        ),
        scheme=lambda w: sparselen.interface.variants.run_scheme(LANG, w.run),
        pose=LANG["pose"],
        train=LANG["train"],
        checkpoint=f"{LANG_RUN}/checkpoint.pt",
    script:
        JOB


rule language_loss_by_position:
    input:
        model=f"{LANG_RUN}/model.pt",
        tokens=LANG_TOKENS,
    output:
        losses=f"{LANG_RUN}/loss_by_position.csv",
    log:
        "logs/language/loss_by_position/ctx{context}_{run}_seed{seed}.log",
    benchmark:
        "results/benchmarks/language/loss_by_position/ctx{context}_{run}_seed{seed}.tsv"
    group:
        GROUP_MODEL
    conda:
        ENV
    threads: THREADS
    resources:
        **job_resources(runtime=LANG_EVAL_RUNTIME),
    params:
        eval=LANG["eval"],
    script:
        JOB


rule language_analyze:
    input:
        model=f"{LANG_REF_RUN}/model.pt",
        tokens=LANG_TOKENS,
    output:
        screen=f"{LANG_ANALYSIS_PART}/screen.csv",
        deps=f"{LANG_ANALYSIS_PART}/dependency.csv",
        planted=f"{LANG_ANALYSIS_PART}/planted.csv",
    log:
        "logs/language/analyze/seed{seed}_part{part}.log",
    benchmark:
        "results/benchmarks/language/analyze/seed{seed}_part{part}.tsv"
    wildcard_constraints:
        part=r"\d+",
    priority: LANG_CHAIN_PRIORITY
    conda:
        ENV
    threads: THREADS
    resources:
        **job_resources(LANG_RUNTIME),
    params:
        analysis=LANG["analysis"],
        contexts=LANG_CTX,
        parts=LANG_PARTS,
    script:
        JOB


rule language_analysis_merge:
    input:
        **{
            name: expand(path, part=range(LANG_PARTS), allow_missing=True)
            for name, path in rules.language_analyze.output.items()
        },
    output:
        screen=f"{LANG_ANALYSIS}/screen.csv",
        deps=f"{LANG_ANALYSIS}/dependency.csv",
        planted=f"{LANG_ANALYSIS}/planted.csv",
    log:
        "logs/language/analysis_merge/seed{seed}.log",
    benchmark:
        "results/benchmarks/language/analysis_merge/seed{seed}.tsv"
    priority: LANG_CHAIN_PRIORITY
    conda:
        ENV
    params:
        analysis=LANG["analysis"],
    script:
        JOB


rule language_transfer:
    input:
        model=f"{LANG_RUN}/model.pt",
        tokens=LANG_TOKENS,
        screen=f"{LANG_ANALYSIS}/screen.csv",
    output:
        losses=f"{LANG_RUN}/analysed_token_losses.csv",
        screen_losses=f"{LANG_RUN}/screen_losses.csv",
        induction=f"{LANG_RUN}/induction.csv",
    log:
        "logs/language/transfer/ctx{context}_{run}_seed{seed}.log",
    benchmark:
        "results/benchmarks/language/transfer/ctx{context}_{run}_seed{seed}.tsv"
    conda:
        ENV
    threads: THREADS
    resources:
        **job_resources(runtime=30),
    params:
        contexts=LANG_CTX,
        batch_size=LANG["analysis"]["batch_size"],
        induction=LANG["analysis"]["induction"],
    script:
        JOB


# The tables (sparselen/language/tables.py TABLES), one job each: its named inputs are the
# per-run tables and other tables (`<table>_table`) its registry entry reads, its params the
# language.analysis settings the entry reads.
LANG_TABLES = sparselen.language.tables.TABLES
LANG_TABLE = f"{LANG_DIR}/{{table}}"


rule language_table:
    input:
        **sparselen.language.tables.rule_inputs(
            RUN_TABLES["language"], f"{LANG_TABLE}.csv"
        ),
    output:
        csv=f"{LANG_TABLE}.csv",
        md=f"{LANG_TABLE}.md",
    log:
        "logs/language/table/{table}.log",
    benchmark:
        "results/benchmarks/language/table/{table}.tsv"
    wildcard_constraints:
        table="|".join(LANG_TABLES),
    group:
        GROUP_AGGREGATE
    conda:
        ENV
    params:
        analysis=sparselen.language.tables.rule_settings(LANG["analysis"]),
        code=source_hash(
            "statistics/stats.py",
            "presentation/tables.py",
            "language/sparsity.py",
            "language/tables.py",
        ),
    script:
        JOB


rule language_figures:
    input:
        table=rules.language_table.output.csv.format(table="table"),
        generalization=rules.language_table.output.csv.format(table="generalization"),
        loss_by_position=rules.language_table.output.csv.format(
            table="loss_by_position"
        ),
        screen=RUN_TABLES["language"]["screen"],
        deps=RUN_TABLES["language"]["deps"],
    output:
        sparsity_png=report(
            "results/figures/language_sparsity.png",
            caption="../report/language_sparsity.rst",
            category="Natural language",
        ),
        sparsity_pdf="results/figures/language_sparsity.pdf",
        length_png=report(
            "results/figures/language_length.png",
            caption="../report/language_length.rst",
            category="Natural language",
        ),
        length_pdf="results/figures/language_length.pdf",
    log:
        "logs/language/figures.log",
    benchmark:
        "results/benchmarks/language/figures.tsv"
    group:
        GROUP_AGGREGATE
    conda:
        ENV
    params:
        contexts=LANG_CTX,
        min_benefit=LANG["analysis"]["min_benefit"],
        facts=sparselen.report.claims.slice_claims("language").facts(LANG),
        report=REPORT,
        criteria=CLAIMS_SOURCES,
    script:
        JOB


rule fig_language:
    input:
        rules.language_figures.output,
        expand(rules.language_table.output, table=LANG_TABLES),
