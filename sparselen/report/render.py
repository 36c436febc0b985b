"""The reproduction report: one Markdown document (and a self-contained HTML copy) that opens
with the answer, a table of the paper's claims (each with its verdict, the one number behind
it and what would decide it, in a few words), then what each shipped config decides, each
experiment's figure (with its caption) and its results laid out as the paper lays them out,
how each claim was decided (its full line, gates and fits included), the hyperparameters, the
compute and the provenance of the run.

The HTML comes from a small Markdown subset converter below (headings, paragraphs, lists,
pipe tables, code blocks, images inlined as data URIs, <details> blocks, verdicts in colour)
rather than a new dependency.
"""

from __future__ import annotations

import base64
import html
import importlib
import os
import re
import socket
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from sparselen.presentation.layout import grid, hms
from sparselen.report.answer import COLORS, NOT_DECIDABLE, NOT_RUN, STATES, counts_line, under_powered
from sparselen.report.claims import fmt_value
from sparselen.report.framing import CRITERIA, SOURCES, TAGS, glossary_section, quote_line
from sparselen.runtime import io
from sparselen.runtime.provenance import provenance
from sparselen.statistics.verdicts import FAILS, HOLDS, NOT_NEEDED, UNSTABLE

REPORT_WIDTH_PX = 1100  # the report's text column (CSS px): a wider figure is shown scaled down to it
TITLE = "Reproduction report: The Role of Sparsity for Length Generalization in Transformers"
SECTIONS = {  # slice -> heading
    "parity": "Sparse parity",
    "ppc": "Position coupling and PPC",
    "language": "Natural language",
    "theory": "Theory, made runnable",
}
# What each section stands for in the paper (its figures' numbers and values were not available to us).
PAPER_FIGURES = {
    "parity": "the paper's sparse parity figure: accuracy against length, one curve per k_test, for each K_train "
              "(the first figure; the heatmap after it writes each cell's mean over all seeds as a number)",
    "ppc": "the paper's position coupling and PPC results: exact match against input size, per position scheme",
    "language": "the paper's natural-language results: how much of the long-context benefit a few far tokens "
                "recover, and the gain of short-context training at long context",
    "theory": "no figure of the paper: the theorem's bound, measured on our runnable model of it",
}
NOT_COMPARED = "The paper's own numbers were not available, so this section is not compared with them."
# Each slice's module with its figures' captions (CAPTIONS) and its results in the paper's
# layout (paper_tables: its table.csv -> Markdown lines).
PRESENTATION = {"parity": "sparselen.parity.report", "ppc": "sparselen.ppc.report",
                "language": "sparselen.language.figures", "theory": "sparselen.theory.report"}
READING = ("**holds** / **does not hold**: the 95% interval over training seeds (documents, for L1 and L2) lies "
           "wholly on the claim's side of its threshold / wholly on the other side; a claim holds when every group "
           "that could be tested holds (the verdict says on how many), and does not hold on the group it names. "
           "**inconclusive**: it straddles the threshold, the verdict changes under resampling of the seeds, or "
           f"nothing fit well enough to be tested. **{NOT_DECIDABLE}**: inconclusive because this config's design "
           "cannot decide the claim (too few seeds, sizes or tasks). The number is the tested statistic on the group "
           "the verdict rests on, with its 95% interval and the side the claim needs; the fits and gates behind it "
           "are in \"How each claim was decided\".")
DECIDES = ("What the design of each shipped config decides, before any result (`sparselen/report/decides.py`, from "
           "each claim's design and power checks).")


def slice_of(path) -> str:
    """``results/figures/language_length.png`` -> language; ``results/ppc/table.md`` -> ppc."""
    p = Path(path)
    name = p.stem if p.parent.name == "figures" else p.parent.name
    return next((s for s in SECTIONS if name == s or name.startswith(s + "_")), name)


def md_table(df: pd.DataFrame) -> str:
    """A pipe table without padding (the Markdown stays small): floats to 3 significant digits,
    missing values blank."""
    def cell(v) -> str:
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return ""
        return f"{v:.3g}" if isinstance(v, (float, np.floating)) else str(v).replace("|", "/")

    return grid(list(map(str, df.columns)), [[cell(v) for v in row] for row in df.itertuples(index=False)])


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def presentation(name: str):
    return importlib.import_module(PRESENTATION[name])


# ----------------------------------------------------------------------------- the answer


ANSWER_COLUMNS = ("claim", "verdict", "the number behind it", "what would decide it")


def answer_section(claims: pd.DataFrame) -> list[str]:
    """One row per claim: the claim, its verdict (its state coloured in the HTML), the one number
    behind it with its interval, and what would decide it, each a few words
    (``sparselen.report.answer``); then the counts and what this config's design decides."""
    heads = claims[claims["group"] == "all"]
    rows = [[cell.replace("|", "/") for cell in (f"**{h.claim}** {_tag(h)}{h.statement}", _verdict_cell(h),
                                                 _text(getattr(h, "number", "")), _text(getattr(h, "to_decide", "")))]
            for h in heads.itertuples()]
    return ["## The answer", "", grid(list(ANSWER_COLUMNS), rows), "", counts_line(heads), "", TAGS, "", READING, ""]


def _verdict_cell(head) -> str:
    """The state in bold (coloured in the HTML), then what the answer adds to it."""
    said = _text(getattr(head, "said", "")) or head.state
    rest = said[len(head.state):] if said.startswith(head.state) else f": {said}"
    return f"**{head.state}**{rest}"


def decides_section(decides) -> list[str]:
    """What each shipped config's design decides (``report_claims``'s table), where it was written."""
    if decides is None or not Path(decides).exists():
        return []
    return ["## What each shipped config decides", "", DECIDES, "", Path(decides).read_text().strip(), ""]


def _tag(head) -> str:
    tag = getattr(head, "tag", None)
    return f"[{tag}] " if isinstance(tag, str) and tag else ""


def scope_lines(claims: pd.DataFrame) -> list[str]:
    """What this run decided and on what, what it could not decide, then the sources the
    reconstruction rests on, how far its criteria came after results and whether they are those
    registered for paper.yaml (first, where they are not)."""
    heads = claims[claims["group"] == "all"]
    decided = heads[heads["state"].isin([HOLDS, FAILS])]
    undecidable = heads[heads["state"] == NOT_DECIDABLE]
    said = (", ".join(f"{h.claim} {_tag(h).strip()}" for h in decided.itertuples()) if len(decided)
            else "none of the claims")
    lines = [f"This run decided {said}."]
    short = [f"{h.claim} ({under_powered(h)})" for h in decided.itertuples() if under_powered(h)]
    if short:
        lines.append(f"Its design is short of the power it needs for {', '.join(short)}: another seed set may "
                     "leave it undecided.")
    if len(undecidable):
        lines.append(f"By its design it cannot decide {', '.join(undecidable['claim'])}: \"What each shipped config "
                     "decides\" names the configs that can.")
    registered = str(heads["registration"].iloc[0]) if "registration" in heads and len(heads) else ""
    if registered.startswith("**"):  # criteria that differ from the registration come first
        return [registered, "", " ".join(lines), "", SOURCES, "", CRITERIA, ""]
    return [" ".join(lines), "", SOURCES, "", " ".join(filter(None, [CRITERIA, registered])), ""]


def _sentence(text: str) -> str:
    text = str(text).strip()
    return (text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")) if text else ""


def details_section(claims: pd.DataFrame) -> list[str]:
    """How each claim was decided: the figure that shows the evidence (the document lies in
    results/report), the paper's words, the criterion, each group's value with its interval,
    verdict and reason (each reason once), the stability and what would resolve it."""
    criteria = claims["criteria"].iloc[0] if "criteria" in claims else "not recorded"
    lines = ["## How each claim was decided", "",
             "`docs/reconstruction.md`, \"Claims\", says how each criterion follows from the paper's words; the "
             f"criteria's code is `sparselen/<slice>/claims.py` (version `{criteria}`). Only models that fit their "
             "training distribution count as evidence.", ""]
    for h in claims[claims["group"] == "all"].itertuples():
        groups = claims[(claims["claim"] == h.claim) & (claims["group"] != "all")]
        lines += [f"### {h.claim}: {h.statement}", "",
                  f"**{h.state}**; the evidence: [{h.figure}.png](../figures/{h.figure}.png)", "",
                  *([_sentence(h.answer), ""] if h.state != NOT_RUN and _text(h.answer) else []),
                  "<details><summary>The paper's words, the criterion, each group</summary>", "",
                  quote_line(h.claim, h.quote), "", f"Criterion: {h.criterion}", ""]
        if h.state == NOT_RUN or groups.empty:
            lines += [f"{_sentence(h.reason)}", "", "</details>", ""]
            continue
        lines += [md_table(_group_rows(groups)), ""]
        notes = []
        if h.state == NOT_DECIDABLE:
            notes.append(f"This config cannot decide it: {h.design}.")
        elif groups["tested"].astype(bool).any() and pd.notna(h.stability):
            overturned = (f": more than {UNSTABLE:.0%}, so the claim is inconclusive" if h.decided != h.verdict
                          else "")
            notes.append(f"Stability: the verdict ({h.decided}) changes in {h.stability:.0%} of the resamples "
                         f"({h.resampled}){overturned}.")
        elif groups["tested"].astype(bool).any() and h.resampled == NOT_NEEDED:
            notes.append(f"Stability: {h.resampled}.")
        if _text(getattr(h, "rounds", "")):
            notes.append(f"Rounds: {h.rounds}.")
        if _text(h.resolve) and h.verdict != HOLDS:
            notes.append(f"To resolve: {h.resolve}.")
        lines += ([" ".join(notes), ""] if notes else []) + ["</details>", ""]
    return lines


def _group_rows(groups: pd.DataFrame) -> pd.DataFrame:
    verdict = [("control: " if r.control else "") + (r.verdict if r.tested else "not tested")
               for r in groups.itertuples()]
    return pd.DataFrame({"group": groups["group"].to_numpy(),
                         "value [95% interval]": [fmt_value(r) for r in groups.itertuples()],
                         "verdict": verdict, "reason": groups["reason"].fillna("").to_numpy()})


# ----------------------------------------------------------------------------- the experiments


def figure_caption(module, stem: str, main_csv) -> str:
    """A figure's caption written from what ran (the slice's ``caption(stem, table)`` on its main
    table, where it has one), else its fixed caption."""
    if hasattr(module, "caption") and main_csv is not None:
        return module.caption(stem, pd.read_csv(main_csv))
    return module.CAPTIONS.get(stem, stem)


def slice_section(name: str, figures: list[str], tables: list[str], claims: pd.DataFrame, out_dir: Path) -> list[str]:
    lines = [f"## {SECTIONS.get(name, name)}", ""]
    if not figures and not tables:
        return lines + ["**not run**: this slice is not part of the workflow or its tables are missing.", ""]
    module = presentation(name)
    if name in PAPER_FIGURES:
        lines += [f"Stands for {PAPER_FIGURES[name]}. {NOT_COMPARED}", ""]
    main = next((t for t in tables if Path(t).name == "table.csv"), None)
    for fig in figures:
        lines += [f"![{Path(fig).stem}]({os.path.relpath(fig, out_dir)})", "",
                  f"*{figure_caption(module, Path(fig).stem, main)}*", ""]
    if main is not None:
        lines += module.paper_tables(pd.read_csv(main)) + [""]
    mine = claims[(claims["slice"] == name) & (claims["group"] == "all")]
    if len(mine):
        lines += ["Claims on this experiment: " + "; ".join(f"{h.claim} **{h.state}**" for h in mine.itertuples())
                  + " (how each was decided: below).", ""]
    mds = [t for t in tables if t.endswith(".md")]
    lines += ["All tables, with intervals and provenance: "
              + ", ".join(f"[{Path(t).name}]({os.path.relpath(t, out_dir)})" for t in mds), ""]
    return lines


# ----------------------------------------------------------------------------- hyperparameters


def hyperparams_section(csvs, out_dir: Path) -> list[str]:
    """Per experiment, the values the paper states beside this run's, then a link to the full table."""
    lines = ["## Hyperparameters", "",
             "The values the paper states, beside this run's (the analogue of the paper's Tables 1-4; "
             "`docs/reconstruction.md` gives the source of each). Every other value is our reconstruction or a "
             "compute-sized choice: the full tables list them.", ""]
    for path in csvs:
        t = pd.read_csv(path, keep_default_na=False)
        name = Path(path).stem
        stated = t[t["paper"] != ""]
        lines += [f"### {SECTIONS.get(name, name)}", ""]
        if len(stated):
            lines += [md_table(stated[["parameter", "paper", "value", "source"]].rename(columns={"value": "this run"})),
                      ""]
        md = Path(path).with_suffix(".md")
        lines += [f"{len(stated)} values stated by the paper ({int((t['tag'] == '[paper]').sum())} of them as run), "
                  f"{len(t) - len(stated)} of ours: [{md.name}]({os.path.relpath(md, out_dir)}).", ""]
    return lines


# ----------------------------------------------------------------------------- compute


def ledger_section(per_figure: pd.DataFrame, rules_csv, out_dir: Path) -> list[str]:
    t = per_figure.rename(columns={"slice": "experiment"})
    shown = pd.DataFrame({
        "experiment": t["experiment"], "jobs": t["jobs"],
        "wall time": t["wall_s"].map(_hms), "longest job": t["max_job_wall_s"].map(_hms),
        "CPU time": t["cpu_s"].map(_hms), "peak memory": t["peak_rss_mb"].map(_mb),
        "evaluation / training": t["eval_share"].map(lambda x: "" if pd.isna(x) else f"{x:.0%}")})
    return ["## Compute", "",
            "Every job of this run, summed per experiment (h:mm:ss; jobs run in parallel, so the sum exceeds the "
            "run's own wall time). CPU time is Snakemake's last sample of each job, taken every 30 s, so it can miss "
            "up to 30 s per job. `sparselen estimate --configfile X` predicts these times before a launch; "
            "`--compare results/benchmarks` sets its prediction against them. Per rule: "
            f"[{Path(rules_csv).name}]({os.path.relpath(rules_csv, out_dir)}).", "",
            md_table(shown), ""]


def _hms(seconds) -> str:
    return "" if pd.isna(seconds) else hms(float(seconds))


def _mb(mb) -> str:
    return "" if pd.isna(mb) else (f"{mb / 1024:.1f} GB" if mb >= 1024 else f"{mb:.0f} MB")


# ----------------------------------------------------------------------------- provenance


def _slice_dir(path: Path) -> str:
    parts = path.parts
    return parts[parts.index("results") + 1] if "results" in parts[:-1] else parts[0]


def _hardware_line(summary: dict, key: str) -> str:
    """CPU model, torch's CPU kernel level and the GPU with its driver, from a run's provenance."""
    h = summary.get(key) or {}
    cpu, gpu = h.get("cpu") or {}, h.get("gpu")
    line = f"{cpu.get('model')} ({cpu.get('torch_capability')})" if cpu else "not recorded"
    return line + (f"; {gpu.get('name')}, driver {gpu.get('driver')}" if gpu else "")


def _short(commit: str) -> str:
    """A commit as its first 12 hex digits, keeping a ``-dirty`` mark."""
    head, dirty, _ = commit.partition("-dirty")
    return head[:12] + dirty


def provenance_section(run_files) -> list[str]:
    """Seeds, devices, commits and versions of the training runs behind the tables (the
    ``train_summary.json`` beside each per-run file), listed once; config hashes and package
    versions folded away."""
    found = sorted({Path(f).parent / "train_summary.json" for f in run_files})
    summaries = [(p, io.read_json(p)) for p in found if p.exists()]
    now = provenance(None, None)
    lines = ["## Provenance", "", f"Report rendered with git commit `{_short(str(now['git_commit']))}`, versions "
             + ", ".join(f"{k} {v}" for k, v in now["versions"].items() if v) + ".", ""]
    if not summaries:
        return lines + ["No training summaries found.", ""]
    rows, hashes = [], []
    for sl in sorted({_slice_dir(p) for p, _ in summaries}):
        mine = [s for p, s in summaries if _slice_dir(p) == sl]

        def values(key, pick=lambda s, k: s.get(k)):
            return sorted({str(pick(s, key)) for s in mine})

        seen = values("config_hash")
        hashes.append(f"- {sl}: " + ", ".join(f"`{h}`" for h in seen))
        rows.append({"experiment": sl, "runs": len(mine), "config hashes": len(seen),
                     "seeds": ", ".join(sorted(values("seed"), key=lambda s: (len(s), s))),
                     "device": ", ".join(values("device_name")), "git commit": ", ".join(sorted({_short(c) for c in values("git_commit")})),
                     "torch": ", ".join(values("torch", lambda s, k: s.get("versions", {}).get(k))),
                     "hardware": "; ".join(values("hardware", _hardware_line))})
    versions = Counter(io.json_dumps(s.get("versions", {})) for _, s in summaries)
    return lines + [md_table(pd.DataFrame(rows)), "",
                    "<details><summary>Config hashes of the training runs</summary>", "", *hashes, "", "</details>", "",
                    f"<details><summary>Package versions of the training runs ({len(versions)} distinct "
                    "set(s))</summary>", "", "```json", *versions.keys(), "```", "", "</details>", ""]


# ----------------------------------------------------------------------------- the document


def run_span(benchmarks: Path, now: float | None = None) -> float | None:
    """Seconds from the start of the earliest job whose benchmark file is under ``benchmarks``
    (its file's time less its own wall time) to ``now``; None without benchmark files."""
    starts = []
    for path in Path(benchmarks).rglob("*.tsv"):
        wall = pd.to_numeric(pd.read_csv(path, sep="\t").get("s"), errors="coerce")
        starts.append(path.stat().st_mtime - float(np.nansum(wall)) if wall is not None else path.stat().st_mtime)
    now = time.time() if now is None else now
    return now - min(starts) if starts else None


def run_line(benchmarks: Path) -> str:
    """When and where the report was rendered, and the wall time of the jobs behind it."""
    span = run_span(benchmarks)
    wall = (f"its jobs ran over {hms(span)} of wall time (from the first job's start to this report; a run "
            "resumed later counts the pause)") if span is not None else "no job's wall time was recorded"
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return f"Rendered {when} on host `{socket.gethostname()}`; {wall}."


def build(claims_csv, hyperparam_csvs, rules_csv, figures_csv, figures, tables, run_files, out_md,
          decides=None) -> str:
    """The report's Markdown, written to ``out_md`` (``decides``: the table of what each shipped
    config decides, ``report_claims``'s; absent, the report goes without it)."""
    out_dir = Path(out_md).parent
    claims = pd.read_csv(claims_csv)
    lines = [f"# {TITLE}", "",
             "Golowich, Jelassi, Brandfonbrener, Kakade, Malach, ICML 2025 (arXiv 2502.16792). Every number below "
             "was computed by this run.", "", run_line(out_dir.parent / "benchmarks"), "", *scope_lines(claims)]
    lines += answer_section(claims)
    lines += decides_section(decides)
    for name in SECTIONS:
        lines += slice_section(name, [f for f in figures if slice_of(f) == name],
                               [t for t in tables if slice_of(t) == name], claims, out_dir)
    lines += details_section(claims)
    lines += glossary_section()
    lines += hyperparams_section(hyperparam_csvs, out_dir)
    lines += ledger_section(pd.read_csv(figures_csv), rules_csv, out_dir)
    lines += provenance_section(run_files)
    text = "\n".join(lines)
    io.write_text(out_md, text)
    return text


# ----------------------------------------------------------------------------- Markdown -> HTML

STATE_CLASS = {s: "v" + str(i) for i, s in enumerate(STATES)}


def _inline(text: str, base: Path) -> str:
    text = html.escape(text, quote=False)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)

    def strong(m):
        word = html.unescape(m.group(1))
        cls = f' class="verdict {STATE_CLASS[word]}"' if word in STATE_CLASS else ""
        return f"<strong{cls}>{m.group(1)}</strong>"

    text = re.sub(r"\*\*([^*]+)\*\*", strong, text)
    text = re.sub(r"(?<![*\w])\*([^*]+)\*(?![*\w])", r"<em>\1</em>", text)

    def image(m):
        src = base / m.group(2)
        if src.exists():
            data = base64.b64encode(src.read_bytes()).decode()
            return f'<img alt="{m.group(1)}" src="data:image/png;base64,{data}">'
        return f'<img alt="{m.group(1)}" src="{m.group(2)}">'

    text = re.sub(r"!\[([^\]]*)\]\(([^)]+)\)", image, text)
    return re.sub(r"\[([^\]]+)\]\(([^)]+)\)", r'<a href="\2">\1</a>', text)


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def _anchor(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


RAW_HTML = re.compile(r"</?(details|summary)\b")


def to_html(md: str, base=".") -> str:
    """The Markdown subset ``build`` writes, as one HTML page (images inlined from ``base``)."""
    base, out, lines, i = Path(base), [], md.split("\n"), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            j = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
            out.append("<pre>" + html.escape("\n".join(lines[i + 1:j])) + "</pre>")
            i = j + 1
        elif RAW_HTML.match(line):
            out.append(line)
            i += 1
        elif m := re.match(r"(#+) (.*)", line):
            n = len(m.group(1))
            out.append(f'<h{n} id="{_anchor(m.group(2))}">{_inline(m.group(2), base)}</h{n}>')
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
            while j < len(lines) and lines[j].strip() and not re.match(r"(#+ |\||- |```|</?(details|summary))",
                                                                          lines[j]):
                j += 1
            text = " ".join(lines[i:j])
            tag = "figure" if text.startswith("![") else "p"
            out.append(f"<{tag}>" + _inline(text, base) + f"</{tag}>")
            i = j
        else:
            i += 1
    colors = "".join(f".{cls}{{background:{COLORS[s]}}}" for s, cls in STATE_CLASS.items())
    style = ("body{font-family:sans-serif;font-size:16px;line-height:1.45;max-width:" + f"{REPORT_WIDTH_PX}px"
             ";margin:auto;padding:1em}table{border-collapse:collapse;margin:.5em 0}"
             "td,th{border:1px solid #ccc;padding:.2em .5em;vertical-align:top;font-size:14px}"
             "pre{background:#f4f4f4;padding:.5em;overflow:auto;font-size:13px}figure{margin:1em 0 .2em}"
             "figure img{max-width:100%}figure+p{font-size:14px;color:#333;margin-top:0}"
             ".verdict{color:#fff;padding:0 .35em;border-radius:3px;white-space:nowrap}" + colors
             + "li{margin:.3em 0}summary{cursor:pointer}")
    return (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><meta name='viewport' "
            f"content='width=device-width, initial-scale=1'><title>{html.escape(TITLE)}</title>"
            f"<style>{style}</style></head><body>\n" + "\n".join(out) + "\n</body></html>\n")

