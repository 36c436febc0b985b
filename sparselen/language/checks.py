"""Cross-key checks of the ``language`` section (the schema has checked each key alone).
Whether corpus paths exist is checked by the corpus job, the first of the slice (the
paper-scale config names C4 shards that only exist where it runs)."""

from __future__ import annotations

from sparselen.interface import variants
from sparselen.interface.config import model_errors
from sparselen.nn.olmo import POSITION_SCHEMES  # a language model's schemes, GPT-NeoX or OLMo


def config_errors(p: dict) -> list[str]:
    out = []
    short, long = p["contexts"]["short"], p["contexts"]["long"]
    if short >= long:
        out.append(f"language.contexts = {p['contexts']}: short must be below long")
    a = p["analysis"]
    if max(a["k"]) > long - short:
        out.append(f"language.analysis.k = {a['k']}: k cannot exceed the far context long - short = {long - short}")
    out += control_errors(a, short, long)
    if p["eval"]["length"] < long:
        out.append(f"language.eval.length = {p['eval']['length']}: must reach the long context ({long})")
    names = [*p["schemes"]["short"], *p["schemes"]["long"]]
    out += variants.variant_errors("language", p, names, POSITION_SCHEMES, p["model"])
    schemes = {variants.run_scheme(p, name) for name in names}
    target = p["pose"].get("target_length")
    if "pose" in schemes and (target is None or target < p["eval"]["length"]):
        out.append(f"language.pose.target_length = {target}: must be at least language.eval.length "
                   f"({p['eval']['length']}) when a pose model is trained")
    if p["train"]["batch_tokens"] < long:
        out.append(f"language.train.batch_tokens = {p['train']['batch_tokens']}: below one long-context row ({long})")
    out += model_errors("language.model", p["model"])
    par = p.get("parallel", {})
    procs, nodes = par.get("processes", 1), par.get("nodes", 1)
    micro = p.get("micro_batch_tokens", 0)
    for size, ctx in p["contexts"].items():
        rows = p["train"]["batch_tokens"] // ctx
        if rows % (procs * nodes):
            out.append(f"language.parallel: processes = {procs} x nodes = {nodes}: the {size} context's {rows} "
                       f"rows per step (batch_tokens // {ctx}) do not split evenly among them")
        elif micro:
            per_process, micro_rows = rows // (procs * nodes), micro // ctx
            if micro_rows < 1:
                out.append(f"language.micro_batch_tokens = {micro}: below one {size}-context row ({ctx} tokens)")
            elif micro_rows < per_process and per_process % micro_rows:
                out.append(f"language.micro_batch_tokens = {micro}: its {micro_rows} rows of the {size} context "
                           f"({ctx} tokens) must divide the {per_process} rows per step and process "
                           f"(language.train.batch_tokens // {ctx} over {procs * nodes} process(es))")
    c = p["corpus"]
    t = c["token_files"]
    if c["source"] == "token_files":
        out += [f"language.corpus.token_files.{split} = []: source 'token_files' needs OLMo token files "
                f"(files, directories or glob patterns)" for split in ("train", "eval") if not t[split]]
    elif t["train"] or t["eval"]:
        out.append("language.corpus.token_files: only read with language.corpus.source = token_files")
    if c["source"] == "files" and not c["paths"]:
        out.append("language.corpus.paths = []: source 'files' needs .txt, .jsonl or .json.gz files or directories")
    elif c["source"] != "files" and c["paths"]:
        out.append(f"language.corpus.paths = {c['paths']}: only read with language.corpus.source = files")
    return out


def control_errors(a: dict, short: int, long: int) -> list[str]:
    """The planted repeats must fit in the long context, and the induction probe's second copy
    must be out of the short window's reach."""
    out, pl, ind = [], a["planted"], a["induction"]
    top = long + 1 - pl["span"]
    if any(d > top for d in pl["distances"]):
        out.append(f"language.analysis.planted.distances = {pl['distances']}: at most long + 1 - span = {top}")
    filler = long - ind["prefix"] - 2 * ind["span"]
    if filler < 1 or ind["span"] + filler <= short:
        out.append(f"language.analysis.induction: prefix {ind['prefix']} + 2 x span {ind['span']} must leave filler in "
                   f"the long context ({long}) with span + filler > the short context ({short})")
    return out
