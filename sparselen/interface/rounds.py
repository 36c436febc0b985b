"""Seeds in rounds: a slice whose config section has ``rounds: {size, max}`` trains its seed
list ``size`` seeds at a time, in the list's order, for at most ``max`` rounds (the last takes
what the list has left, at most ``size``); after each round
every claim that reads the slice is decided on the seeds so far, and the next round trains only
what an undecided claim reads (``sparselen.report.rounds``). Without ``rounds`` every seed is
one round. Raising ``max`` (and the seed list with it) only adds rounds: a round's seeds are
fixed by its position in the list.

The bounds by betting the claims decide on are valid at every number of seeds at once
(``sparselen.statistics.betting``), so stopping at the first round that decides keeps their
error rates."""

from __future__ import annotations

import copy
from dataclasses import dataclass

ROUNDED_SLICES = ("parity", "ppc")  # the slices whose seeds may come in rounds


@dataclass(frozen=True)
class Rounds:
    """``size`` seeds a round, at most ``max`` rounds."""

    size: int
    max: int

    def seeds(self, seeds: list, r: int) -> list:
        """The seeds of round ``r`` (0-based) of the slice's list ``seeds``."""
        return list(seeds[r * self.size:(r + 1) * self.size])

    def through(self, seeds: list, r: int) -> list:
        """The seeds of rounds 0..``r``."""
        return list(seeds[:(r + 1) * self.size])


def of(section: dict) -> Rounds | None:
    """A slice section's rounds (None: every seed in one round)."""
    spec = section.get("rounds")
    return Rounds(int(spec["size"]), int(spec["max"])) if spec else None


def errors(name: str, section: dict, seed_lists: dict[str, list]) -> list[str]:
    """What is wrong with ``<name>.rounds`` given the slice's seed lists (``seed_lists``: where
    each list is set, e.g. ``ppc.seeds`` or ``ppc.copy_repeat.seeds`` -> the list): each list
    has seeds for every round (the last may be short) and none beyond them, and a round is whole
    stacks."""
    rounds = of(section)
    if rounds is None:
        return []
    out = []
    for where, seeds in seed_lists.items():
        if len(seeds) <= rounds.size * (rounds.max - 1):
            out.append(f"{name}.rounds = {{size: {rounds.size}, max: {rounds.max}}} needs more than "
                       f"{rounds.size * (rounds.max - 1)} seeds (a seed at least in its last round), but {where} lists "
                       f"{len(seeds)}: list more seeds or lower rounds.max")
        elif len(seeds) > rounds.size * rounds.max:
            out.append(f"{where} lists {len(seeds)} seeds, more than {name}.rounds = {{size: {rounds.size}, max: "
                       f"{rounds.max}}} trains ({rounds.size * rounds.max}): list the cap's seeds (a claim's power is "
                       "counted on the list) or raise rounds.max")
    stack = min(int(section.get("stack", 1)), len(section["seeds"]))  # no stack is longer than the list
    if rounds.size % stack:
        out.append(f"{name}.rounds.size = {rounds.size} is not a multiple of {name}.stack = {stack}: a round must be "
                   "whole stacks (a stack's seeds train as one job)")
    return out


def seed_lists(name: str, section: dict) -> dict[str, list]:
    """Where each of a slice's seed lists is set (``<name>.seeds``, and a PPC task's own) -> the list."""
    lists = {f"{name}.seeds": section["seeds"]}
    for key, value in section.items():
        if isinstance(value, dict) and isinstance(value.get("seeds"), list):
            lists[f"{name}.{key}.seeds"] = value["seeds"]
    return lists


def _with_lists(section: dict, seeds) -> dict:
    """``section`` with each of its seed lists (its own, a PPC task's) replaced by ``seeds(list)``."""
    out = {**section, "seeds": seeds(section["seeds"])}
    for where in seed_lists("", section):
        key = where.split(".")[1]
        if key != "seeds":
            out[key] = {**section[key], "seeds": seeds(section[key]["seeds"])}
    return out


def with_seeds(section: dict, n: int) -> dict:
    """``section`` with each of its seed lists (its own, a PPC task's) as ``n`` seeds: what its
    design would be with seeds to spare (``sparselen.report.rounds``: a claim that no number of
    seeds lets the design decide is settled at once)."""
    return _with_lists(section, lambda _: list(range(n)))


def rounded(config: dict) -> dict[str, Rounds]:
    """The config's slices that train in rounds, with theirs."""
    return {name: r for name in ROUNDED_SLICES if isinstance(config.get(name), dict)
            and (r := of(config[name])) is not None}


def section_through(section: dict, r: int) -> dict:
    """A slice's ``section`` with its seed lists (its own, a PPC task's) cut to rounds
    0..``r`` and without ``rounds``: the section a plan of those rounds alone reads."""
    rounds = of(section)
    cut = _with_lists(section, lambda seeds: rounds.through(seeds, r))
    return {k: copy.deepcopy(v) for k, v in cut.items() if k != "rounds"}


def through(config: dict, r: int) -> dict:
    """``config`` with every rounded slice cut to rounds 0..``r`` (at most its last)."""
    return {**config, **{name: section_through(config[name], min(r, rd.max - 1))
                         for name, rd in rounded(config).items()}}


def at_cap(config: dict) -> dict:
    """``config`` with every rounded slice at its cap, without ``rounds``: every round's jobs."""
    return through(config, max(r.max for r in rounded(config).values()) - 1)
