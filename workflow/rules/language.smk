# Natural language (SPEC.md section 5): corpus -> tokenizer -> tokens -> train per
# (context, scheme, seed) -> loss by position per run; the reference (long-context) model
# -> sparse-dependency analysis per seed -> every run's losses on the analysed tokens
# -> tables -> figures.
LANG = config["language"]
LANG_CTX = LANG["contexts"]
LANG_REF = {"context": LANG_CTX["long"], "scheme": LANG["schemes"]["long"][0]}
LANG_RUNS = [
    f"results/language/ctx{LANG_CTX[size]}/{scheme}/seed{seed}"
    for size in ("short", "long")
    for scheme in LANG["schemes"][size]
    for seed in LANG["seeds"]
]
LANG_ANALYSIS = "results/language/analysis/seed{seed}"


rule language_corpus:
    output:
        corpus="results/language/corpus.json",
        summary="results/language/corpus_summary.json",
    log:
        "logs/language/corpus.log",
    benchmark:
        "results/benchmarks/language/corpus.tsv"
    group:
        GROUP_DATA
    conda:
        "../../envs/sparselen.yaml"
    params:
        cfg=as_arg(LANG["corpus"]),
    shell:
        "python -m sparselen language corpus --config {params.cfg} --out {output.corpus}"
        " --summary {output.summary} 2> {log}"


rule language_tokenizer:
    input:
        rules.language_corpus.output.corpus,
    output:
        "results/language/tokenizer.json",
    log:
        "logs/language/tokenizer.log",
    benchmark:
        "results/benchmarks/language/tokenizer.tsv"
    group:
        GROUP_DATA
    conda:
        "../../envs/sparselen.yaml"
    params:
        cfg=as_arg(LANG["tokenizer"]),
    shell:
        "python -m sparselen language tokenizer --config {params.cfg} --corpus {input}"
        " --out {output} 2> {log}"


rule language_tokens:
    input:
        corpus=rules.language_corpus.output.corpus,
        tokenizer=rules.language_tokenizer.output[0],
    output:
        "results/language/tokens.pt",
    log:
        "logs/language/tokens.log",
    benchmark:
        "results/benchmarks/language/tokens.tsv"
    group:
        GROUP_DATA
    conda:
        "../../envs/sparselen.yaml"
    shell:
        "python -m sparselen language tokens --corpus {input.corpus} --tokenizer {input.tokenizer}"
        " --out {output} 2> {log}"


rule language_train:
    input:
        rules.language_tokens.output[0],
    output:
        model="results/language/ctx{ctx}/{scheme}/seed{seed}/model.pt",
        log_csv="results/language/ctx{ctx}/{scheme}/seed{seed}/train_log.csv",
        summary="results/language/ctx{ctx}/{scheme}/seed{seed}/train_summary.json",
    log:
        "logs/language/train/ctx{ctx}_{scheme}_seed{seed}.log",
    benchmark:
        "results/benchmarks/language/train/ctx{ctx}_{scheme}_seed{seed}.tsv"
    group:
        GROUP_MODEL
    conda:
        "../../envs/sparselen.yaml"
    threads: RUNTIME["threads"]
    resources:
        **job_resources(),
    params:
        cfg=as_arg(
            {k: LANG[k] for k in ("model", "pose", "train")}
            | {"compile": config["compile"]}
        ),
        checkpoint="results/language/ctx{ctx}/{scheme}/seed{seed}/checkpoint.pt",
        device=RUNTIME["device"],
    shell:
        "python -m sparselen language train --config {params.cfg} --tokens {input}"
        " --context {wildcards.ctx} --scheme {wildcards.scheme} --seed {wildcards.seed}"
        " --model {output.model} --log-csv {output.log_csv} --summary {output.summary}"
        " --checkpoint {params.checkpoint} --device {params.device} --threads {threads} 2> {log}"


rule language_loss_by_position:
    input:
        model="results/language/ctx{ctx}/{scheme}/seed{seed}/model.pt",
        tokens=rules.language_tokens.output[0],
    output:
        "results/language/ctx{ctx}/{scheme}/seed{seed}/loss_by_position.csv",
    log:
        "logs/language/loss_by_position/ctx{ctx}_{scheme}_seed{seed}.log",
    benchmark:
        "results/benchmarks/language/loss_by_position/ctx{ctx}_{scheme}_seed{seed}.tsv"
    group:
        GROUP_MODEL
    conda:
        "../../envs/sparselen.yaml"
    threads: RUNTIME["threads"]
    resources:
        **job_resources(runtime=30),
    params:
        cfg=as_arg(LANG["eval"]),
        device=RUNTIME["device"],
    shell:
        "python -m sparselen language loss-by-position --config {params.cfg} --model {input.model}"
        " --tokens {input.tokens} --out {output} --device {params.device} --threads {threads} 2> {log}"


rule language_analyze:
    input:
        model=f"results/language/ctx{LANG_REF['context']}/{LANG_REF['scheme']}/seed{{seed}}/model.pt",
        tokens=rules.language_tokens.output[0],
    output:
        screen=f"{LANG_ANALYSIS}/screen.csv",
        deps=f"{LANG_ANALYSIS}/dependency.csv",
    log:
        "logs/language/analyze/seed{seed}.log",
    benchmark:
        "results/benchmarks/language/analyze/seed{seed}.tsv"
    conda:
        "../../envs/sparselen.yaml"
    threads: RUNTIME["threads"]
    resources:
        **job_resources(),
    params:
        cfg=as_arg({"analysis": LANG["analysis"], "contexts": LANG_CTX}),
        device=RUNTIME["device"],
    shell:
        "python -m sparselen language analyze --config {params.cfg} --model {input.model}"
        " --tokens {input.tokens} --screen {output.screen} --deps {output.deps}"
        " --device {params.device} --threads {threads} 2> {log}"


rule language_transfer:
    input:
        model="results/language/ctx{ctx}/{scheme}/seed{seed}/model.pt",
        tokens=rules.language_tokens.output[0],
        screen=f"{LANG_ANALYSIS}/screen.csv",
    output:
        "results/language/ctx{ctx}/{scheme}/seed{seed}/analysed_token_losses.csv",
    log:
        "logs/language/transfer/ctx{ctx}_{scheme}_seed{seed}.log",
    benchmark:
        "results/benchmarks/language/transfer/ctx{ctx}_{scheme}_seed{seed}.tsv"
    conda:
        "../../envs/sparselen.yaml"
    threads: RUNTIME["threads"]
    resources:
        **job_resources(runtime=30),
    params:
        cfg=as_arg({"contexts": LANG_CTX, "batch_size": LANG["analysis"]["batch_size"]}),
        device=RUNTIME["device"],
    shell:
        "python -m sparselen language transfer --config {params.cfg} --model {input.model}"
        " --tokens {input.tokens} --screen {input.screen} --out {output}"
        " --device {params.device} --threads {threads} 2> {log}"


rule language_tables:
    input:
        deps=expand(f"{LANG_ANALYSIS}/dependency.csv", seed=LANG["seeds"]),
        transfer=[f"{run}/analysed_token_losses.csv" for run in LANG_RUNS],
        position=[f"{run}/loss_by_position.csv" for run in LANG_RUNS],
    output:
        table_csv="results/language/table.csv",
        table_md="results/language/table.md",
        generalization_csv="results/language/generalization.csv",
        generalization_md="results/language/generalization.md",
        position_csv="results/language/loss_by_position.csv",
    log:
        "logs/language/tables.log",
    benchmark:
        "results/benchmarks/language/tables.tsv"
    group:
        GROUP_AGGREGATE
    conda:
        "../../envs/sparselen.yaml"
    params:
        cfg=as_arg(LANG["analysis"]),
    shell:
        "python -m sparselen language tables --config {params.cfg} --deps {input.deps}"
        " --transfer {input.transfer} --position {input.position}"
        " --table-csv {output.table_csv} --table-md {output.table_md}"
        " --generalization-csv {output.generalization_csv}"
        " --generalization-md {output.generalization_md}"
        " --position-csv {output.position_csv} 2> {log}"


rule language_figures:
    input:
        table=rules.language_tables.output.table_csv,
        generalization=rules.language_tables.output.generalization_csv,
        position=rules.language_tables.output.position_csv,
        screen=expand(f"{LANG_ANALYSIS}/screen.csv", seed=LANG["seeds"]),
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
        "../../envs/sparselen.yaml"
    params:
        cfg=as_arg(
            {"contexts": LANG_CTX, "min_benefit": LANG["analysis"]["min_benefit"]}
        ),
    shell:
        "python -m sparselen language figures --config {params.cfg} --table {input.table}"
        " --generalization {input.generalization} --position {input.position}"
        " --screen {input.screen} --sparsity-png {output.sparsity_png}"
        " --sparsity-pdf {output.sparsity_pdf} --length-png {output.length_png}"
        " --length-pdf {output.length_pdf} 2> {log}"


rule fig_language:
    input:
        rules.language_figures.output,
        rules.language_tables.output,
