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

from pathlib import Path

from sparselen.report import claims as cl
from sparselen.runtime import io
from sparselen.statistics.stats import Resampling
from sparselen.statistics.verdicts import FAILS, HOLDS, Settings, combine

DECIDED = (HOLDS, FAILS)


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
            out[cid] = (f"undecided after {last['round'] + 1} rounds, the cap ({n} seeds): more rounds "
                        "(rounds.max) with more seeds listed")
    return out
