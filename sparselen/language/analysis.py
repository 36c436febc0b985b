"""The sparse-dependency analysis of one model, and the per-token losses that relate it to
length generalization; each returns tidy tables (one row per token and method/k). The analysis
keeps its stages and per-token greedy searches in a ``Progress`` (``sparselen.language.progress``),
so that a job killed at its time limit goes on where it stopped."""

from __future__ import annotations

import sys

import pandas as pd
import torch
from tqdm import tqdm

from sparselen.language.controls import null_contexts, planted_contexts
from sparselen.language.data import contexts, sample_positions
from sparselen.language.dependency import greedy, selector_ranking
from sparselen.language.evaluate import last_token_loss, subset_loss
from sparselen.language.progress import Progress
from sparselen.runtime.rng import generator

PLANTED_COLUMNS = ("distance", "source_first")  # the planted control's dependency rows only


def context_losses(model, docs, positions, lengths, batch_size: int, device) -> dict[int, torch.Tensor]:
    """Loss of each target given its previous ``length`` tokens (plain ids 0..length-1)."""
    out = {}
    for length in lengths:
        ctx, tgt = contexts(docs, positions, length)
        out[length] = last_token_loss(model, ctx, torch.arange(length).expand_as(ctx), tgt, batch_size, device)
    return out


def screen(model, docs, cfg: dict, short: int, long: int, device) -> pd.DataFrame:
    """``cfg`` = language.analysis. L_short, L_long and the benefit of ``candidates`` random
    evaluation tokens; ``analysed`` marks the first ``tokens`` with benefit >= min_benefit."""
    positions = sample_positions(docs, long, cfg["candidates"], generator("language-analysis", cfg["seed"]))
    ctx, tgt = contexts(docs, positions, long)
    l_short, l_long = short_long_losses(model, ctx, tgt, short, cfg["batch_size"], device)
    df = pd.DataFrame({"doc": [d for d, _ in positions], "t": [t for _, t in positions], "target": tgt.numpy(),
                       "L_short": l_short.numpy(), "L_long": l_long.numpy()})
    df["benefit"] = df["L_short"] - df["L_long"]
    real = df["benefit"] >= cfg["min_benefit"]
    df["analysed"] = real & (real.cumsum() <= cfg["tokens"])
    return df


def short_long_losses(model, ctx: torch.Tensor, tgt: torch.Tensor, short: int, batch_size: int,
                      device) -> tuple[torch.Tensor, torch.Tensor]:
    """(L_short, L_long) of each context's target: its last ``short`` tokens at their original
    ids, and the whole context."""
    l_long = last_token_loss(model, ctx, torch.arange(ctx.shape[1]).expand_as(ctx), tgt, batch_size, device)
    l_short = subset_loss(model, ctx, tgt, torch.zeros(len(ctx), 0, dtype=torch.long), short, batch_size, device)
    return l_short, l_long


def dependency_rows(rows: list[dict], tokens: pd.DataFrame, cols: list[str], short: int, long: int) -> pd.DataFrame:
    """L_k rows (keyed by token index ``i``) joined to their tokens' ``cols``, with the share of
    the benefit recovered and the size of the far context."""
    df = pd.DataFrame(rows).merge(tokens[cols], left_on="i", right_index=True)
    df["recovered"] = (df["L_short"] - df["L_k"]) / (df["L_short"] - df["L_long"])
    df["far_tokens"] = long - short
    return df.drop(columns="i")


def greedy_rows(model, ctx: torch.Tensor, tgt: torch.Tensor, short: int, ks: list[int], method: str,
                batch_size: int, device, progress: Progress | None = None,
                first: int = 0) -> tuple[list[dict], list[list[int]]]:
    """Greedy L_k rows (keyed by token index ``i``, from ``first``) for each context, and the
    chosen far indices; ``distances`` lists the chosen tokens' distances from the target in
    choice order. Each token's search is kept in ``progress`` under ``method`` (a resumed search
    skips the tokens already searched)."""
    progress = Progress() if progress is None else progress
    searches = progress.tokens(method)  # (chosen, losses) per token searched before
    bar = {"desc": method, "file": sys.stderr, "mininterval": 1.0 if sys.stderr.isatty() else 30.0}
    for i in tqdm(range(len(searches), len(ctx)), initial=len(searches), total=len(ctx), **bar):
        searches.append(greedy(model, ctx[i], int(tgt[i]), short, max(ks), batch_size, device))
        progress.add_token(method, searches[-1])
    long, rows, sets = ctx.shape[1], [], []
    for i, (chosen, losses) in enumerate(searches):
        sets.append(chosen)
        for k in ks:
            rows.append({"i": first + i, "method": method, "k": k, "L_k": losses[k - 1], "overlap": 1.0,
                         "distances": " ".join(str(long - c) for c in chosen[:k])})
    return rows, sets


def selector_rows(model, ctx: torch.Tensor, tgt: torch.Tensor, short: int, cfg: dict, greedy_sets: list[list[int]],
                  device, span: tuple[int, int] | None = None) -> list[dict]:
    """L_k rows of each cheap selector (``cfg`` = language.analysis) and the share of its k
    tokens that greedy also chose, for the tokens ``span`` (lo, hi) of ``ctx`` (all when None;
    ``greedy_sets`` are theirs). The selectors run in batches of ``selector_batch_size`` when
    given (the saliency pass has a backward pass), their L_k in ``batch_size``; the random
    selector draws for every token, so that a span ranks as the whole does."""
    rows, ks, bs = [], sorted(cfg["k"]), cfg["batch_size"]
    lo, hi = span or (0, len(ctx))
    for name in cfg["selectors"]:
        if name == "random":
            ranking = selector_ranking(name, model, ctx, tgt, short, bs, device, cfg["seed"])[lo:hi]
        else:
            ranking = selector_ranking(name, model, ctx[lo:hi], tgt[lo:hi], short, cfg.get("selector_batch_size", bs),
                                       device, cfg["seed"])
        for k in ks:
            loss = subset_loss(model, ctx[lo:hi], tgt[lo:hi], ranking[:, :k], short, bs, device)
            for i in range(hi - lo):
                overlap = len(set(ranking[i, :k].tolist()) & set(greedy_sets[i][:k])) / k
                rows.append({"i": lo + i, "method": name, "k": k, "L_k": float(loss[i]), "overlap": overlap,
                             "distances": ""})
    return rows


def part_span(n: int, part: int, parts: int, block: int = 1) -> tuple[int, int]:
    """Tokens (lo, hi) of part ``part`` of ``parts`` of ``n``: whole blocks of ``block``
    tokens, as even as they go, so that a part's batches are the whole analysis' batches."""
    blocks = -(-n // block)
    return min(n, block * (blocks * part // parts)), min(n, block * (blocks * (part + 1) // parts))


def last_token_batch(config: dict, batch_size: int) -> int:
    """Rows per last-token-loss forward pass (screen, greedy and selector L_k, transfer):
    ``language.analysis_batch_size`` of the whole ``config`` (a runtime knob, never a param: no
    identity or progress fingerprint holds it), else ``batch_size`` (the params'). A no-grad
    pass that unembeds one position per row fits far more rows than the saliency selector's
    forward and backward or the induction probe's full logits, which keep the params' value."""
    return config.get("language", {}).get("analysis_batch_size", 0) or batch_size


def analysed_span(n: int, part: tuple[int, int], cfg: dict) -> tuple[int, int]:
    """The analysed tokens (lo, hi) of ``part`` (p, parts): whole batches of the selectors'
    rows (``selector_batch_size``, a param), never of the last-token passes' batch
    (``batch_size``: the runtime knob ``language.analysis_batch_size`` where set), so a part
    run later with another value of the knob takes the same tokens."""
    return part_span(n, *part, block=cfg.get("selector_batch_size", cfg["batch_size"]))


def dependency_type(ctx: torch.Tensor, tgt: torch.Tensor, short: int, sets: list[list[int]]) -> pd.DataFrame:
    """Per token: whether the target token occurs in the far context (a copy the model could
    use), and the distance of greedy's first, most influential, far token."""
    long = ctx.shape[1]
    in_far = (ctx[:, :long - short] == tgt[:, None]).any(1)
    return pd.DataFrame({"target_in_far": in_far.numpy(), "top_distance": [long - s[0] for s in sets]})


def sparse_dependency(model, docs, screened: pd.DataFrame, cfg: dict, short: int, long: int,
                      device, progress: Progress | None = None, part: tuple[int, int] = (0, 1)) -> pd.DataFrame:
    """L_k for k in cfg["k"] by greedy and by each cheap selector, on the analysed tokens; with
    ``null_control``, greedy again over another document's far context (method greedy_null).
    ``part`` (p, parts): only the p-th of ``parts`` token ranges (``part_span``); the parts'
    rows, concatenated and put in order (``merge_parts``), are the whole analysis' rows.

    Columns: doc, t, method, k, L_k, L_short, L_long, recovered = (L_short - L_k) /
    (L_short - L_long) (the real benefit, also for the null control), overlap (share of the
    selector's k tokens that greedy also chose), target_in_far, top_distance, far_tokens and,
    for greedy, the distances of the chosen tokens in choice order."""
    progress = Progress() if progress is None else progress
    tokens = screened[screened["analysed"]].reset_index(drop=True)
    positions = list(zip(tokens["doc"], tokens["t"]))
    ctx, tgt = contexts(docs, positions, long)
    ks, bs = sorted(cfg["k"]), cfg["batch_size"]
    lo, hi = analysed_span(len(tokens), part, cfg)
    if lo == hi:
        return pd.DataFrame()
    rows, greedy_sets = greedy_rows(model, ctx[lo:hi], tgt[lo:hi], short, ks, "greedy", bs, device, progress, lo)
    rows += progress.stage("selectors", lambda: selector_rows(model, ctx, tgt, short, cfg, greedy_sets, device,
                                                              (lo, hi)))
    if cfg.get("null_control", True):
        null_ctx, _ = null_contexts(docs, positions, short, long, generator("language-null-control", cfg["seed"]))
        rows += greedy_rows(model, null_ctx[lo:hi], tgt[lo:hi], short, ks, "greedy_null", bs, device, progress, lo)[0]
    tokens = tokens.iloc[lo:hi].join(dependency_type(ctx[lo:hi], tgt[lo:hi], short, greedy_sets).set_index(
        tokens.index[lo:hi]))
    cols = ["doc", "t", "target", "L_short", "L_long", "target_in_far", "top_distance"]
    return dependency_rows(rows, tokens, cols, short, long)


def planted_control(model, docs, cfg: dict, short: int, long: int, device, progress: Progress | None = None,
                    part: tuple[int, int] = (0, 1)) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The positive control (``cfg`` = language.analysis; its ``planted`` section): held-out
    windows with a planted repeat at each distance, screened like real tokens, and greedy on
    those whose copy lies beyond the short window and whose benefit is >= min_benefit.

    Returns (screen: doc, t, distance, beyond, L_short, L_long, benefit, analysed; dependency
    rows as ``sparse_dependency``'s, method greedy_planted, with the planted distance and
    whether greedy's first token is the copy's source). ``part`` (p, parts): greedy on the
    p-th of ``parts`` ranges of those repeats only; the screen is whole in every part."""
    progress = Progress() if progress is None else progress
    p, bs = cfg["planted"], cfg["batch_size"]
    positions = sample_positions(docs, long, p["tokens"], generator("language-planted", cfg["seed"]))
    ctx, tgt, dist = planted_contexts(docs, positions, long, p["span"], p["distances"])
    l_short, l_long = progress.stage("planted_screen", lambda: short_long_losses(model, ctx, tgt, short, bs, device))
    scr = pd.DataFrame({"doc": [d for d, _ in positions], "t": [t for _, t in positions], "target": tgt.numpy(),
                        "distance": dist.numpy(), "L_short": l_short.numpy(), "L_long": l_long.numpy()})
    scr["beyond"] = scr["distance"] > short
    scr["benefit"] = scr["L_short"] - scr["L_long"]
    scr["analysed"] = scr["beyond"] & (scr["benefit"] >= cfg["min_benefit"])
    keep = torch.tensor(scr.index[scr["analysed"]].to_numpy(), dtype=torch.long)
    keep = keep[slice(*part_span(len(keep), *part))]
    rows, sets = greedy_rows(model, ctx[keep], tgt[keep], short, sorted(cfg["k"]), "greedy_planted", bs, device,
                             progress)
    if not rows:
        return scr, pd.DataFrame()
    tokens = scr.loc[keep.numpy()].reset_index(drop=True)
    tokens = tokens.join(dependency_type(ctx[keep], tgt[keep], short, sets))
    tokens["source_first"] = tokens["top_distance"] == tokens["distance"]
    cols = ["doc", "t", "target", "L_short", "L_long", "target_in_far", "top_distance", *PLANTED_COLUMNS]
    return scr, dependency_rows(rows, tokens, cols, short, long)



def merge_parts(parts: list[pd.DataFrame], selectors: list[str], last: tuple[str, ...] = ()) -> pd.DataFrame:
    """The dependency rows of an analysis' parts (in part order) in the order of the whole
    analysis: greedy, each selector (by k, then token), greedy_null, greedy_planted; its
    columns as the whole's: the real tokens', the planted control's own, then ``last``."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame()
    df = pd.concat(parts, ignore_index=True)
    rank = {m: r for r, m in enumerate(["greedy", *selectors, "greedy_null", "greedy_planted"])}
    unknown = set(df["method"]) - set(rank)
    if unknown:
        raise ValueError(f"analysis parts have methods {sorted(unknown)} beyond language.analysis.selectors {selectors}")
    key = df["method"].map(rank) * (1 + df["k"].max()) + df["k"].where(df["method"].isin(selectors), 0)
    own = (*PLANTED_COLUMNS, *last)
    cols = [c for c in df.columns if c not in own] + [c for c in own if c in df.columns]
    return df.iloc[key.argsort(kind="stable")][cols].reset_index(drop=True)
