"""A round's decision (``sparselen.interface.rounds``): after each round of a slice's seeds, every
claim that reads the slice is decided on the seeds so far, by its own test, and the decision is
a file in results/ (``results/rounds/<slice>/round<r>.json``) that the workflow reads to know
what the next round trains. A claim stops at the first round whose verdict is "holds" or "does
not hold", or at once where no number of seeds lets the config's design decide it;
the bounds by betting it decides on are valid at every number of seeds, so stopping keeps their
error rates (docs/reconstruction.md, "Seeds in rounds").

The file holds no cap: whether another round is due is the file's open claims and the cap of
the config run (``due``), so raising ``rounds.max`` reruns no decision and only adds rounds."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from sparselen.report import claims as cl
from sparselen.runtime import io
from sparselen.statistics.power import MAX_SEEDS, TARGET
from sparselen.statistics.stats import Resampling
from sparselen.statistics.verdicts import FAILS, HOLDS, Settings, combine, rows_by_unit, units_of

DECIDED = (HOLDS, FAILS)
NEED_DRAWS = 100  # resamples of the seeds so far at each count tried (``seeds_needed``)
NEED_FACTORS = (1.5, 2, 2.5, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32)  # the counts tried: the seeds so far times these


def seeds_needed(claim, tables: dict, settings: Settings, target: float = TARGET) -> int | None:
    """The seeds an undecided claim would need at the spread now measured: the fewest of the
    counts tried (the seeds so far times NEED_FACTORS, at most MAX_SEEDS) at which the claim's
    own test decides ("holds" or "does not hold") on at least ``target`` of NEED_DRAWS draws of
    that many seeds from those run so far (``_drawn``); None when no count
    tried does (an effect at its threshold)."""
    units = units_of(tables, "seed")
    if not units:
        return None
    rows, rng = rows_by_unit(tables, "seed"), np.random.default_rng(settings.seed)
    for n in sorted({math.ceil(len(units) * f) for f in NEED_FACTORS if len(units) * f <= MAX_SEEDS}):
        need, decided = math.ceil(target * NEED_DRAWS), 0
        for i in range(NEED_DRAWS):  # stopped once the count is reached or out of reach
            decided += combine(claim.test(_drawn(tables, rows, rng.choice(units, n)), settings)).verdict in DECIDED
            if decided >= need or decided + NEED_DRAWS - i - 1 < need:
                break
        if decided >= need:
            return n
    return None


def _drawn(tables: dict, rows: dict, draw) -> dict:
    """``tables`` with the seeds of ``draw`` (repeats allowed), the i-th drawn seed renamed i: a
    seed drawn twice counts twice, and the seeds' order, which a bound by betting reads them in,
    is the draw's (random), not one that groups the copies of a seed."""
    out = {}
    for name, t in tables.items():
        parts = [(i, rows[name][u]) for i, u in enumerate(draw) if u in rows[name]]
        picked = t.iloc[np.concatenate([ix for _, ix in parts])].reset_index(drop=True) if parts else t.iloc[:0].copy()
        picked["seed"] = np.concatenate([np.full(len(ix), i) for i, ix in parts]) if parts else picked["seed"]
        out[name] = picked
    return out


def decide(name: str, round_: int, tables: dict, resampling: Resampling, facts: dict, gaps: dict,
           seeds: dict) -> dict:
    """Round ``round_``'s decision of slice ``name`` on its per-run ``tables`` (its claims
    module's READS): per claim its verdict on these seeds, whether it is decided, and why;
    ``gaps``: per claim what the design lacks with seeds to spare ("" for nothing); ``seeds``: the seeds
    through this round, per seed list (recorded)."""
    settings = Settings(resampling.n_boot, resampling.seed, resampling.level, facts)
    claims = {}
    for c in (c for c in cl.CLAIMS if c.slice == name):
        if gaps.get(c.id):
            claims[c.id] = {"verdict": "not decidable on this config", "decided": True, "why": gaps[c.id]}
            continue
        d = combine(c.test(tables, settings))
        claims[c.id] = {"verdict": d.verdict, "decided": d.verdict in DECIDED, "why": d.reason}
        if not claims[c.id]["decided"]:
            claims[c.id]["seeds_needed"] = seeds_needed(c, tables, settings)
    return {"slice": name, "round": round_, "seeds": {k: len(v) for k, v in seeds.items()}, "claims": claims,
            "open": [cid for cid, c in claims.items() if not c["decided"]]}


def write(path, decision: dict) -> None:
    io.write_json(Path(path), decision)


def read(path) -> dict:
    return io.read_json(Path(path))


def due(decision: dict, cap: int) -> bool:
    """Whether another round follows ``decision``'s: a claim is open and the rounds so far are
    fewer than ``cap``."""
    return bool(decision["open"]) and decision["round"] + 1 < cap


def summary(decisions: list[dict], cap: int) -> dict[str, str]:
    """Per claim, in words, how many rounds it took and why it stopped (the slice's decisions of
    rounds 0.. in order)."""
    out = {}
    for cid in decisions[0]["claims"]:
        first = next((d for d in decisions if d["claims"][cid]["decided"]), None)
        last = decisions[-1]
        if first is not None:
            n = sum(first["seeds"].values())
            out[cid] = (f"decided in round {first['round'] + 1} of at most {cap} ({n} seeds): "
                        f"{first['claims'][cid]['verdict']}")
        else:
            n = sum(last["seeds"].values())
            need = last["claims"][cid].get("seeds_needed")
            need = (f"about {need} seeds would decide it at the spread now measured" if need else
                    f"no count up to {MAX_SEEDS} seeds would decide it at the spread now measured")
            out[cid] = (f"undecided after {last['round'] + 1} rounds, the cap ({n} seeds): {need} "
                        f"(its test on {NEED_DRAWS} draws of the seeds run; {TARGET:.0%} decided); more rounds "
                        "(rounds.max) with more seeds listed")
    return out
