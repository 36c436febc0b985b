"""The answer in plain words: for each claim its state (holds, does not hold, inconclusive, not
decidable on this config, not run) and one line saying what decided it: the measured number
with its unit and what it means, or why nothing could be measured.

"Not decidable on this config" is an inconclusive verdict on a config whose design cannot
decide the claim (its ``design`` check names what is missing, e.g. too few seeds for a stable
verdict): the line says which shipped config can. The criteria, groups, intervals and
stability stay in the report's details; this module only words the claims table's rows: the
report's line (``answer``) and the terminal's, at most ``BRIEF`` characters (``brief``). A claim
nothing could test names the gates that bind before what the config's design lacks: adding the
seeds the design asks for does not lift a gate.
"""

from __future__ import annotations

from typing import Callable

import pandas as pd

from sparselen.statistics.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_RUN

NOT_DECIDABLE = "not decidable on this config"
STATES = (HOLDS, FAILS, INCONCLUSIVE, NOT_DECIDABLE, NOT_RUN)
COLORS = {HOLDS: "#1a7f37", FAILS: "#cf222e", INCONCLUSIVE: "#9a6700", NOT_DECIDABLE: "#57606a",
          NOT_RUN: "#57606a"}  # the report's verdict colours (green, red, amber, grey)


def state(verdict: str, design: str) -> str:
    """An inconclusive verdict on a config whose design cannot decide the claim is its own state."""
    return NOT_DECIDABLE if verdict == INCONCLUSIVE and design else verdict


def _points(x: float) -> str:
    return f"{100 * x:+.0f}"


def _share(x: float) -> str:
    return f"{x:.0%}"


def _signed(x: float) -> str:
    return f"{x:+.2f}"


def _thresholds() -> dict:
    """The criteria's thresholds, from the claims modules (read when a line is worded)."""
    from sparselen.language import claims as language
    from sparselen.parity import claims as parity
    from sparselen.ppc import claims as ppc
    from sparselen.theory import claims as theory

    return {"P2": parity.RETAINED, "C2": ppc.ORACLE_TOLERANCE, "T1": theory.NONINFERIORITY,
            "T2": theory.GROWTH_EXPONENT, "L1": language.MIN_RECOVERED}


# Per claim: (how its value is written, what the value is: a phrase with {v} = the value and
# {t} = the criterion's threshold, what it means: {t}, or {tp} = the threshold in points).
MEASURES: dict[str, tuple[Callable[[float], str], str, str]] = {
    "P1": (_signed, "the margin above chance kept at the longest length against k_test has Spearman's rho {v}",
           "below 0, the sparser the task, the better it generalizes"),
    "P2": (_share, "{v} of the accuracy margin above chance at k_test = K_train is kept at the longest length",
           "the claim needs more than {t:.0%}"),
    "P3": (_signed, "the rate at which accuracy falls with length has Spearman's rho {v} against k_test",
           "above 0, denser tasks fall faster"),
    "C1": (_points, "coupled position ids score {v} points of exact match over the best baseline at the largest "
                    "size tested", ""),
    "C2": (_points, "Predictive Position Coupling scores {v} points of exact match over the best baseline at the "
                    "largest size tested", "it must also come within {tp:.0f} points of oracle coupling"),
    "T1": (_points, "at the longest length tested, the coupled law's accuracy is {v} points from the local law's",
           "the claim allows down to -{tp:.0f} points"),
    "T2": (_signed, "the log loss grows like (Lbar/L)^b with a fitted exponent b = {v}",
           "the claim needs b below {t:g}"),
    "L1": (_share, "the largest greedy k recovers a median {v} of the long-context benefit",
           "the claim needs at least {t:.0%}"),
    "L2": (_signed, "tokens with sparse dependency gain {v} more (normalised) from the long context than dense ones",
           ""),
}


def measured(claim: str, r, units: str) -> str:
    """What a tested group's value says, with its interval, group, units and meaning."""
    fmt, phrase, meaning = MEASURES.get(claim, (lambda x: f"{x:.3g}", "measured {v}", ""))
    t = _thresholds().get(claim, float("nan"))
    where = [f"95% interval {fmt(r.ci_low)} to {fmt(r.ci_high)}"] if pd.notna(r.ci_low) else []
    where += [str(r.group)] if r.group not in ("-", "") else []
    text = f"{phrase.format(v=fmt(r.value), t=t)} ({', '.join([*where, units])})"
    return text + (f": {meaning.format(t=t, tp=100 * t)}" if meaning else "")


def _where(decidable_on: str) -> str:
    """"run configs/paper.yaml (power 85% ...; decides P1, ...)": the shipped configs that can
    decide the claim, each with what ``report.claims.deciders`` says of it."""
    names = [m.strip() for n in str(decidable_on or "").split(" | ")
             for m in (n.split(",") if "(" not in n else [n]) if m.strip()]
    paths = [n if n.startswith("config.yaml") else f"configs/{n}" for n in names]
    if not paths:
        return "no shipped config can decide it"
    return "run " + (" or ".join(paths) if len(paths) < 3 else ", ".join(paths[:-1]) + " or " + paths[-1])


def deciding(groups: pd.DataFrame, verdict: str):
    """The group whose result the verdict rests on: the first that does not hold when the claim
    does not hold or is inconclusive, else the first tested one."""
    tested = groups[groups["tested"].astype(bool) & ~groups["control"].astype(bool)]
    if verdict == HOLDS:
        return next(tested.itertuples(), None)
    return next((r for r in tested.itertuples() if r.verdict != HOLDS), next(tested.itertuples(), None))


def answer(head, groups: pd.DataFrame, units: str) -> str:
    """The plain line of one claim (``head``: its ``all`` row with ``state``, ``design``,
    ``decidable_on``, ``decided`` (its verdict before the stability check) and ``unit``;
    ``groups``: its group rows)."""
    if head.state == NOT_RUN:
        return head.reason
    if head.state == NOT_DECIDABLE:
        binding = untested(groups)
        design = f"{head.design}: {_where(head.decidable_on)}"
        if binding:
            return f"nothing could be tested: {binding}; by design, {design}"
        r = deciding(groups, head.decided)
        return f"{design}; measured: {measured(head.claim, r, units)}" if r is not None else design
    before = head.decided  # the verdict before the stability check
    r = deciding(groups, before)
    if r is None:  # no group could be tested: the first group's gate says why
        first = next(groups[~groups["control"].astype(bool)].itertuples(), None)
        if first is None:
            return f"nothing could be tested: {head.reason}"
        fix = f". To resolve: {first.resolve}" if isinstance(first.resolve, str) and first.resolve else ""
        return f"nothing could be tested: {first.reason}{fix}"
    text = measured(head.claim, r, units)
    tested, total = (int(x) for x in str(head.groups_tested).split(" of ")) if isinstance(
        head.groups_tested, str) else (1, 1)
    if total > 1:
        text += f"; {tested} of {total} groups tested"
    if before != head.verdict:
        text += f"; but the verdict ({before}) changes in {head.stability:.0%} of resamples of the {head.unit}s"
    return text


def untested(groups: pd.DataFrame) -> str:
    """What kept every deciding group from being tested, group by group ("" when one was tested)."""
    candidates = groups[~groups["control"].astype(bool)]
    if candidates.empty or candidates["tested"].astype(bool).any():
        return ""
    reasons = dict.fromkeys(f"{r.group}: {r.reason}" if r.group not in ("-", "") else str(r.reason)
                            for r in candidates.itertuples())
    return "; ".join(reasons)


BRIEF = 100  # characters of a verdict's reason on the terminal (its line adds an indent)


def clip(text: str, width: int = BRIEF) -> str:
    """``text`` cut at its last clause boundary within ``width`` characters, marked with "..."."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    cut = text[:width - 4]
    for marks in (("; ", " (", ", "), (" ",)):  # a clause boundary in the second half, else any word's
        if (at := max(cut.rfind(m) for m in marks)) > width // 2:
            return cut[:at].rstrip(" ,;:") + " ..."
    return cut + " ..."


def brief(head, groups: pd.DataFrame) -> str:
    """The verdict's reason in at most ``BRIEF`` characters: the measured value with its interval,
    or what kept the claim from being tested (the binding gate first, then the config's design)."""
    if head.state == NOT_RUN:
        return clip(head.reason)
    if (binding := untested(groups)) and head.state in (NOT_DECIDABLE, INCONCLUSIVE):
        return clip(f"not tested: {binding}")
    r = deciding(groups, head.decided)
    if head.state == NOT_DECIDABLE:
        return clip(head.design + (f"; measured: {_value(head.claim, r)}" if r is not None else ""))
    if r is None:
        return clip(head.reason)
    return clip(_value(head.claim, r))


def _value(claim: str, r) -> str:
    """A tested group's value in its claim's words, with its interval."""
    fmt, phrase, _ = MEASURES.get(claim, (lambda x: f"{x:.3g}", "measured {v}", ""))
    interval = f" (95% interval {fmt(r.ci_low)} to {fmt(r.ci_high)})" if pd.notna(r.ci_low) else ""
    return phrase.format(v=fmt(r.value), t=_thresholds().get(claim, float("nan"))) + interval


def counts_line(heads: pd.DataFrame) -> str:
    """"3 hold, 6 not decidable on this config. Not decidable by this config's design: P1, ..."."""
    n = heads["state"].value_counts()
    words = {HOLDS: ("holds", "hold"), FAILS: ("does not hold", "do not hold")}
    parts = []
    for s in STATES:
        if n.get(s):
            one, many = words.get(s, (s, s))
            parts.append(f"{n[s]} {one if n[s] == 1 else many}")
    text = ", ".join(parts) + "."
    if n.get(NOT_DECIDABLE):
        ids = ", ".join(heads.loc[heads["state"] == NOT_DECIDABLE, "claim"])
        text += f" Not decidable by this config's design: {ids}."
    return text
