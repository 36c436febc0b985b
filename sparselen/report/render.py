"""The reproduction report: one Markdown document (and a self-contained HTML copy) that says,
claim by claim, what the paper says, what this run measured and whether they agree, followed
by each experiment's figure and table, the hyperparameter tables, the compute ledger and the
provenance of the run (listed once).

The HTML comes from a small Markdown subset converter below (headings, paragraphs, lists,
pipe tables, code blocks, images inlined as data URIs) rather than a new dependency.
"""

from __future__ import annotations

import base64
import html
import os
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from sparselen import io
from sparselen.provenance import provenance
from sparselen.report.claims import evidence
from sparselen.tables import markdown

TITLE = "Reproduction report: The Role of Sparsity for Length Generalization in Transformers"
SECTIONS = {  # slice -> heading
    "parity": "Sparse parity",
    "ppc": "Position coupling and PPC",
    "language": "Natural language",
    "theory": "Theory, made runnable",
}


def slice_of(path) -> str:
    """``results/figures/language_length.png`` -> language; ``results/ppc/table.md`` -> ppc."""
    p = Path(path)
    name = p.stem if p.parent.name == "figures" else p.parent.name
    return next((s for s in SECTIONS if name == s or name.startswith(s + "_")), name)


def md_table(df: pd.DataFrame) -> str:
    return markdown(df, ".3g")


def _stability(h) -> str:
    if pd.isna(h.stability):
        return h.resampled
    return f"{h.stability:.0%} differ ({h.resampled})"


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def claims_section(claims: pd.DataFrame, out_dir: Path) -> list[str]:
    """The summary table (one row per claim), then each claim in detail."""
    heads = claims[claims["group"] == "all"]
    rows = []
    for h in heads.itertuples():
        figure = out_dir.parent / "figures" / f"{h.figure}.png"
        run = h.verdict != "not run"
        rows.append({"claim": f"{h.claim}: {h.statement}", "verdict": f"**{h.verdict}**",
                     "groups tested": _text(h.groups_tested), "why": h.reason,
                     "measured (95% interval)": evidence(claims[claims["claim"] == h.claim]),
                     "stability": _stability(h) if run else "",
                     "decidable on (shipped configs)": _text(h.decidable_on) or "none",
                     "evidence": f"[{figure.name}]({os.path.relpath(figure, out_dir)})"})
    counts = Counter(heads["verdict"])
    criteria = claims["criteria"].iloc[0] if "criteria" in claims else "not recorded"
    lines = ["## Claims", "",
             "Each claim of the paper tested on this run's tables (`docs/reconstruction.md`, \"Claims\", says how each "
             "criterion follows from the paper's words and which criteria were revised after results had been seen; "
             f"the criteria's code is `sparselen/<slice>/claims.py`, version `{criteria}`). Verdicts: holds, does not "
             "hold, or inconclusive with the reason, decided over the groups that could be tested; only models that fit "
             "their training distribution count as evidence; intervals are over training seeds (documents, for the "
             "language claims); stability is the share of resamples of the seeds (documents) whose verdict differs. "
             "\"Decidable on\" names the shipped configurations whose design can decide the claim: an inconclusive "
             "verdict on a config not named there is inconclusive by design. "
             + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())) + ".", "",
             md_table(pd.DataFrame(rows)), "", "### The claims in detail", ""]
    for h in heads.itertuples():
        groups = claims[(claims["claim"] == h.claim) & (claims["group"] != "all")]
        lines += [f"**{h.claim}: {h.statement}** The paper: \"{h.quote}\"", "", f"Criterion: {h.criterion}", "",
                  f"Verdict: **{h.verdict}**. {h.reason}" + (f" To resolve: {h.resolve}." if _text(h.resolve) else ""),
                  ""]
        if len(groups):
            shown = groups.assign(role=np.where(groups["control"].astype(bool), "control",
                                                np.where(groups["tested"].astype(bool), "tested", "not tested")))
            lines += [md_table(shown[["group", "role", "value", "ci_low", "ci_high", "verdict", "reason"]]), ""]
    return lines


def slice_section(name: str, figures: list[str], tables: list[str], claims: pd.DataFrame, out_dir: Path) -> list[str]:
    lines = [f"## {SECTIONS.get(name, name)}", ""]
    if not figures and not tables:
        return lines + ["**not run**: this slice is not part of the workflow or its tables are missing.", ""]
    for fig in figures:
        lines += [f"![{Path(fig).stem}]({os.path.relpath(fig, out_dir)})", ""]
    lines += ["Tables: " + ", ".join(f"[{Path(t).name}]({os.path.relpath(t, out_dir)})" for t in tables), ""]
    mine = claims[(claims["slice"] == name) & (claims["group"] != "all")]
    if len(mine):
        detail = mine[["claim", "group", "value", "ci_low", "ci_high", "verdict", "reason"]]
        lines += ["Claims measured on this slice:", "", md_table(detail), ""]
    return lines


def _slice_dir(path: Path) -> str:
    parts = path.parts
    return parts[parts.index("results") + 1] if "results" in parts[:-1] else parts[0]


def _hardware_line(summary: dict, key: str) -> str:
    """CPU model, torch's CPU kernel level and the GPU with its driver, from a run's provenance."""
    h = summary.get(key) or {}
    cpu, gpu = h.get("cpu") or {}, h.get("gpu")
    line = f"{cpu.get('model')} ({cpu.get('torch_capability')})" if cpu else "not recorded"
    return line + (f"; {gpu.get('name')}, driver {gpu.get('driver')}" if gpu else "")


def provenance_section(run_files) -> list[str]:
    """Config hashes, seeds, versions, devices and commits of the training runs behind the
    tables (the ``train_summary.json`` beside each per-run file), listed once."""
    found = sorted({Path(f).parent / "train_summary.json" for f in run_files})
    summaries = [(p, io.read_json(p)) for p in found if p.exists()]
    now = provenance(None, None)
    lines = ["## Provenance", "", f"Report rendered with git commit `{now['git_commit']}`, versions "
             + ", ".join(f"{k} {v}" for k, v in now["versions"].items() if v) + ".", ""]
    if not summaries:
        return lines + ["No training summaries found.", ""]
    rows = []
    for sl in sorted({_slice_dir(p) for p, _ in summaries}):
        mine = [s for p, s in summaries if _slice_dir(p) == sl]

        def values(key, pick=lambda s, k: s.get(k)):
            return ", ".join(sorted({str(pick(s, key)) for s in mine}))

        rows.append({"slice": sl, "runs": len(mine), "config hashes": values("config_hash"),
                     "seeds": values("seed"), "device": values("device_name"), "git commit": values("git_commit"),
                     "torch": values("torch", lambda s, k: s.get("versions", {}).get(k)),
                     "hardware": values("hardware", _hardware_line)})
    versions = Counter(io.json_dumps(s.get("versions", {})) for _, s in summaries)
    lines += [md_table(pd.DataFrame(rows)), ""]
    lines += [f"Package versions of the training runs ({len(versions)} distinct set(s)):", "",
              "```json", *versions.keys(), "```", ""]
    return lines


def ledger_section(per_figure: pd.DataFrame, per_rule: pd.DataFrame) -> list[str]:
    return ["## Compute ledger", "",
            "From the `benchmark:` files of this DAG's slice jobs (wall time and CPU time in seconds, peak resident memory in MB; "
            "jobs run in parallel, so wall times add up to more than the elapsed time). Wall time is each job's full "
            "time; CPU time is Snakemake's last sample of it (taken every 30 s once a job has run 15 s), so it can miss "
            "up to 30 s per job. Before launching a "
            "config, `sparselen estimate --configfile X` predicts every job's time from FLOP counts and a device "
            "profile; `--compare results/benchmarks` sets it against these measurements. `eval_share`: wall time of a "
            "slice's model evaluations over that of its trainings.", "",
            "Per figure (slice):", "", md_table(per_figure), "", "Per rule:", "", md_table(per_rule), ""]


def build(claims_csv, hyperparam_mds, rules_csv, figures_csv, figures, tables, run_files, out_md) -> str:
    out_dir = Path(out_md).parent
    claims = pd.read_csv(claims_csv)
    lines = [f"# {TITLE}", "",
             "Golowich, Jelassi, Brandfonbrener, Kakade, Malach, ICML 2025 (arXiv 2502.16792). The experiments are a "
             "reconstruction (docs/reconstruction.md: [paper] = stated by the paper, [ours] = our reconstruction); no code was "
             "released.", ""]
    lines += claims_section(claims, out_dir)
    for name in SECTIONS:
        lines += slice_section(name, [f for f in figures if slice_of(f) == name],
                               [t for t in tables if slice_of(t) == name], claims, out_dir)
    lines += ["## Hyperparameters (the analogue of the paper's Tables 1-4)", ""]
    for md in hyperparam_mds:
        text = Path(md).read_text().replace("# Hyperparameters:", "### Hyperparameters:", 1)
        lines += [text, ""]
    lines += ledger_section(pd.read_csv(figures_csv), pd.read_csv(rules_csv))
    lines += provenance_section(run_files)
    text = "\n".join(lines)
    io.write_text(out_md, text)
    return text


# ----------------------------------------------------------------------------- Markdown -> HTML

def _inline(text: str, base: Path) -> str:
    text = html.escape(text, quote=False)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)

    def image(m):
        src = base / m.group(2)
        if src.exists():
            data = base64.b64encode(src.read_bytes()).decode()
            return f'<img alt="{m.group(1)}" src="data:image/png;base64,{data}" style="max-width:100%">'
        return f'<img alt="{m.group(1)}" src="{m.group(2)}">'

    text = re.sub(r"!\[([^\]]*)\]\(([^)]+)\)", image, text)
    return re.sub(r"\[([^\]]+)\]\(([^)]+)\)", r'<a href="\2">\1</a>', text)


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def to_html(md: str, base=".") -> str:
    """The Markdown subset ``build`` writes, as one HTML page (images inlined from ``base``)."""
    base, out, lines, i = Path(base), [], md.split("\n"), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            j = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
            out.append("<pre>" + html.escape("\n".join(lines[i + 1:j])) + "</pre>")
            i = j + 1
        elif m := re.match(r"(#+) (.*)", line):
            n = len(m.group(1))
            out.append(f"<h{n}>{_inline(m.group(2), base)}</h{n}>")
            i += 1
        elif line.startswith("|"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            head, body = _cells(lines[i]), [_cells(r) for r in lines[i + 2:j]]
            out.append("<table><tr>" + "".join(f"<th>{_inline(c, base)}</th>" for c in head) + "</tr>"
                       + "".join("<tr>" + "".join(f"<td>{_inline(c, base)}</td>" for c in r) + "</tr>" for r in body)
                       + "</table>")
            i = j
        elif line.startswith("- "):
            j = i
            while j < len(lines) and lines[j].startswith("- "):
                j += 1
            out.append("<ul>" + "".join(f"<li>{_inline(r[2:], base)}</li>" for r in lines[i:j]) + "</ul>")
            i = j
        elif line.strip():
            j = i
            while j < len(lines) and lines[j].strip() and not re.match(r"(#+ |\||- |```)", lines[j]):
                j += 1
            out.append("<p>" + _inline(" ".join(lines[i:j]), base) + "</p>")
            i = j
        else:
            i += 1
    style = ("body{font-family:sans-serif;max-width:70em;margin:auto;padding:1em}table{border-collapse:collapse;"
             "margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;vertical-align:top;font-size:90%}"
             "pre{background:#f4f4f4;padding:.5em;overflow:auto}")
    return (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(TITLE)}</title>"
            f"<style>{style}</style></head><body>\n" + "\n".join(out) + "\n</body></html>\n")
