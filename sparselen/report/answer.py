"""The answer in plain words: for each claim its state (holds, does not hold, inconclusive, not
decidable on this config, not run) and one line saying what decided it: the measured number
with its unit and what it means, or why nothing could be measured.

"Not decidable on this config" is an inconclusive verdict on a config whose design cannot
decide the claim (its ``design`` check names what is missing, e.g. too few seeds for a stable
verdict): the line says which shipped config can. The criteria, groups, intervals and
stability stay in the report's details; this module only words the claims table's rows: the
cells of the report's answer table, each at most ``WORDS`` words (``verdict_words``,
``number``, ``to_decide``), the full line of a claim's details (``answer``) and the terminal's,
at most ``BRIEF`` characters with its reason never cut (``brief``). A claim nothing could test
names the gates that bind before what the config's design lacks: adding the seeds the design
asks for does not lift a gate.

What a config's design can do for a claim (``reach``) is the same word in every document: the
answer table, the terminal's closing line and the table of what each shipped config decides
(``sparselen.report.decides``).
"""

from __future__ import annotations

import re
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


YES, BY_SEED_SET, NO = "yes", "by seed set", "no"
# Below this power a design short of its target still can hold, but on fewer than 1 seed set in
# 20: such a config is said not to decide the claim. At or above it (C1 on the default), a claim
# holds on some seed sets and is not decidable on others, and every document says so.
SOME_POWER = 0.05


def reach(design: str, power: float | None) -> str:
    """Whether a config's design decides a claim (``design``: what it lacks, "" when nothing;
    ``power``: at the effect it is sized at, None where it has none): ``YES``,
    ``BY_SEED_SET`` (under-powered, yet a verdict is not rare) or ``NO``."""
    if not design:
        return YES
    return BY_SEED_SET if power is not None and pd.notna(power) and power >= SOME_POWER else NO


def short_design(design: str) -> str:
    """A design's reason without the power (a table shows it beside) and the asides that name
    config keys (a parenthesis with a ";"): what fits a table cell."""
    return re.sub(r" \((\d+% power|[^()]*;[^()]*)\)", "", str(design or "")).strip()


WORDS = 20  # the most words of a cell of the report's answer table


def words(text: str, n: int = WORDS) -> str:
    """``text`` cut to at most ``n`` words, at its last clause boundary in the second half,
    marked with "..."."""
    parts = str(text).split()
    if len(parts) <= n:
        return " ".join(parts)
    cut = " ".join(parts[:n - 1])
    at = max(cut.rfind("; "), cut.rfind(", "))
    return (cut[:at] if at > len(cut) // 2 else cut).rstrip(" ,;:") + " ..."


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


# Per claim: the tested statistic in a few words and the side the claim needs ({t}, {tp} as in
# MEASURES): the answer table's number.
NUMBERS: dict[str, tuple[str, str]] = {
    "P1": ("Spearman's rho, accuracy against k_test", "< 0"),
    "P2": ("margin kept at k_test = K_train", "> {t:.0%}"),
    "P3": ("Spearman's rho, fall rate against k_test", "> 0"),
    "C1": ("coupled - best baseline, exact-match points", "> 0"),
    "C2": ("ppc - best baseline, exact-match points", "> 0"),
    "T1": ("coupled - local law, accuracy points", "> -{tp:.0f}"),
    "T2": ("growth exponent b of the log loss", "< {t:g}"),
    "L1": ("median share of the benefit recovered", ">= {t:.0%}"),
    "L2": ("sparse - dense gain over the benefit", "> 0"),
}
# The claims whose statistic lies in [-1, 1] (a difference of accuracies, a rank correlation, a
# margin kept): an interval from -1 to +1 says nothing, and is written so.
BOUNDED = ("P1", "P2", "P3", "C1", "C2", "T1")
SAYS_NOTHING = "too few fitted runs to say anything"


def _fmt(claim: str) -> Callable[[float], str]:
    return MEASURES.get(claim, (lambda x: f"{x:.3g}", "", ""))[0]


def says_nothing(claim: str, r) -> bool:
    """The interval spans every value the statistic can take."""
    return claim in BOUNDED and pd.notna(r.ci_low) and r.ci_low <= -1 + 1e-9 and r.ci_high >= 1 - 1e-9


def interval(claim: str, r) -> str:
    """"95% interval -0.90 to -0.70", or what an interval over the whole range means ("" when
    none was computed)."""
    if pd.isna(r.ci_low):
        return ""
    fmt = _fmt(claim)
    if says_nothing(claim, r):
        return f"95% interval {fmt(r.ci_low)} to {fmt(r.ci_high)}, every possible value: {SAYS_NOTHING}"
    return f"95% interval {fmt(r.ci_low)} to {fmt(r.ci_high)}"


def measured(claim: str, r, units: str) -> str:
    """What a tested group's value says, with its interval, group, units and meaning."""
    fmt, phrase, meaning = MEASURES.get(claim, (lambda x: f"{x:.3g}", "measured {v}", ""))
    t = _thresholds().get(claim, float("nan"))
    where = [interval(claim, r)] if pd.notna(r.ci_low) else []
    where += [str(r.group)] if r.group not in ("-", "") else []
    text = f"{phrase.format(v=fmt(r.value), t=t)} ({', '.join([*where, units])})"
    return text + (f": {meaning.format(t=t, tp=100 * t)}" if meaning else "")


def _where(decidable_on: str) -> str:
    """"run configs/paper.yaml (power 85%)": the shipped configs that can decide the claim, each
    with its power (``report.decides.deciders``); what each decides is the table of
    ``report.decides``, not repeated on every line."""
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


# ----------------------------------------------------------------------------- the answer table


def _power(head) -> float | None:
    p = getattr(head, "power", None)
    return None if p is None or pd.isna(p) else float(p)


def under_powered(head) -> str:
    """"design under-powered: 42% power" for a claim decided on a config whose design is short
    of what it needs (another seed set may leave it undecided); "" otherwise."""
    design = head.design if isinstance(getattr(head, "design", None), str) else ""
    if not design or head.state not in (HOLDS, FAILS):
        return ""
    p = _power(head)
    return f"design under-powered: {p:.0%} power" if p is not None else f"design short: {short_design(design)}"


FIT_GATE = re.compile(r"\bfit")


def _missed(untested: pd.DataFrame) -> str:
    """"4 missed the fit gate" (a reason about runs that did not fit), "1 not tested" (another gate)."""
    fit = sum(bool(FIT_GATE.search(str(r.reason))) for r in untested.itertuples())
    parts = [f"{fit} missed the fit gate" if fit else "", f"{len(untested) - fit} not tested" if len(untested) > fit
             else ""]
    return ", ".join(filter(None, parts))


def groups_words(verdict: str, groups: pd.DataFrame) -> str:
    """On which of its groups a verdict rests: "on 1 of 5 groups; 4 missed the fit gate" for
    a claim that holds (every tested group holds), "on K_train=4" for one that does not (the
    group that decided it); "" for a claim of one group, or for another verdict."""
    mine = groups[~groups["control"].astype(bool)]
    tested = mine[mine["tested"].astype(bool)]
    if verdict == HOLDS and len(mine) > 1:
        if len(tested) == len(mine):
            return f"on all {len(mine)} groups"
        return f"on {len(tested)} of {len(mine)} groups; {_missed(mine[~mine['tested'].astype(bool)])}"
    if verdict == FAILS:
        failed = tested[tested["verdict"] == FAILS]
        if failed.empty:
            return ""
        more = f" ({len(failed)} of {len(mine)} groups do not hold)" if len(failed) > 1 else ""
        return f"on {failed['group'].iloc[0]}{more}" if failed["group"].iloc[0] not in ("-", "") else more.strip(" ()")
    return ""


def _cause(head, groups: pd.DataFrame) -> str:
    """Why a claim is inconclusive, in a few words."""
    if untested(groups):
        return "no group could be tested (the gates: below)"
    if head.decided != head.verdict:
        return f"{head.decided} here, but {head.stability:.0%} of seed resamples give another verdict"
    r = deciding(groups, head.decided)
    where = f" on {r.group}" if r is not None and r.group not in ("-", "") else ""
    return f"the interval includes the threshold{where}"


def verdict_words(head, groups: pd.DataFrame) -> str:
    """The answer table's verdict: the state, on which groups it rests, and the design's power
    where it is short of its target ("holds on 1 of 5 groups; 4 missed the fit gate")."""
    if head.state == NOT_RUN:
        return NOT_RUN
    if head.state == NOT_DECIDABLE:
        return words(f"{NOT_DECIDABLE}: {short_design(head.design)}")
    said = head.state
    if head.state in (HOLDS, FAILS):
        said = " ".join(filter(None, [said, groups_words(head.state, groups)]))
    else:
        said = f"{said}: {_cause(head, groups)}"
    return words("; ".join(filter(None, [said, under_powered(head)])))


def number(head, groups: pd.DataFrame) -> str:
    """The one number behind the verdict: the tested statistic on the group it rests on, with
    its 95% interval and the side the claim needs; "none" where nothing could be tested."""
    if head.state == NOT_RUN:
        return ""
    r = deciding(groups, head.decided)
    if r is None:
        return "none: no group passed its gates"
    label, need = NUMBERS.get(head.claim, ("measured", ""))
    t = _thresholds().get(head.claim, float("nan"))
    fmt = _fmt(head.claim)
    spread = ("any value: " + SAYS_NOTHING) if says_nothing(head.claim, r) else (
        f"{fmt(r.ci_low)}, {fmt(r.ci_high)}" if pd.notna(r.ci_low) else "")
    where = "; ".join(filter(None, [f"needs {need.format(t=t, tp=100 * t)}" if need else "",
                                    str(r.group) if r.group not in ("-", "") else ""]))
    return words(f"{label} {fmt(r.value)}" + (f" [{spread}]" if spread else "") + (f" ({where})" if where else ""))


def to_decide(head) -> str:
    """What would decide the claim: the shipped configs that can (with their power) where this
    one cannot or is under-powered; what would resolve an inconclusive verdict; "decided" where
    the design had its power."""
    if head.state == NOT_RUN:
        return "a config that runs this slice (every shipped one does)"
    where = _where(getattr(head, "decidable_on", ""))
    if head.state == NOT_DECIDABLE:
        return words(where)
    if under_powered(head):
        return words(f"decided on this seed set; {short_design(head.design)}")
    if head.state == INCONCLUSIVE:
        resolve = getattr(head, "resolve", "")
        return words(resolve if isinstance(resolve, str) and resolve else "more seeds or evaluation samples")
    st = getattr(head, "stability", None)
    return "decided" + (f": {st:.1%} of seed resamples give another verdict" if st is not None and pd.notna(st) else "")


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


def brief(head, groups: pd.DataFrame, numbers: str | None = None) -> str:
    """The verdict's reason for the terminal: first the reason, never cut (the design and its
    power for a claim this config cannot decide or decides short of its power; on which groups
    a verdict rests; why it is inconclusive), then its details (the gates that kept groups
    untested; the absolute ``numbers`` of ``report.headline``, else the measured value) cut to
    fill ``BRIEF`` characters."""
    if head.state == NOT_RUN:
        return clip(head.reason)
    r = deciding(groups, head.decided)
    p = _power(head)
    value = numbers or (f"measured: {_value(head.claim, r)}" if r is not None else "")
    gates = f"not tested: {binding}" if (binding := untested(groups)) else ""
    if head.state == NOT_DECIDABLE:
        lead = short_design(head.design) + (f" ({p:.0%} power)" if p is not None else "")
        rest = gates or value
    elif head.state == INCONCLUSIVE:
        lead = "; ".join(filter(None, [_cause(head, groups), under_powered(head)]))
        rest = gates or value
    else:
        lead = "; ".join(filter(None, [groups_words(head.state, groups), under_powered(head)]))
        rest = numbers or (_value(head.claim, r) if r is not None else head.reason)
    return _lead_then(lead, rest)


def _lead_then(lead: str, rest: str) -> str:
    """``lead`` whole, then ``rest`` cut to what is left of ``BRIEF`` (left out when too little is)."""
    if not lead:
        return clip(rest)
    room = BRIEF - len(lead) - 2
    return f"{lead}; {clip(rest, room)}" if rest and room >= 30 else lead


def _value(claim: str, r) -> str:
    """A tested group's value in its claim's words, with its interval."""
    fmt, phrase, _ = MEASURES.get(claim, (lambda x: f"{x:.3g}", "measured {v}", ""))
    where = f" ({interval(claim, r)})" if pd.notna(r.ci_low) else ""
    return phrase.format(v=fmt(r.value), t=_thresholds().get(claim, float("nan"))) + where


def counts_line(heads: pd.DataFrame) -> str:
    """"2 hold, 5 not decidable on this config. By design this config decides L1, L2, T2; C1 on
    some seed sets (42% power); not P1, ...": the states, then what the design can do for each
    claim that ran (``reach``), as the table of what each shipped config decides says it."""
    n = heads["state"].value_counts()
    names = {HOLDS: ("holds", "hold"), FAILS: ("does not hold", "do not hold")}
    parts = []
    for s in STATES:
        if n.get(s):
            one, many = names.get(s, (s, s))
            parts.append(f"{n[s]} {one if n[s] == 1 else many}")
    return ", ".join(parts) + ". " + design_line(heads)


def design_line(heads: pd.DataFrame) -> str:
    """What this config's design decides, claim by claim (the claims of slices that ran)."""
    ran = [h for h in heads.itertuples() if h.state != NOT_RUN]
    by = {YES: [], BY_SEED_SET: [], NO: []}
    for h in ran:
        design = h.design if isinstance(getattr(h, "design", None), str) else ""
        by[reach(design, _power(h))].append(h)
    said = [f"decides {', '.join(h.claim for h in by[YES])}" if by[YES] else "decides none of the claims"]
    if by[BY_SEED_SET]:
        said.append(", ".join(f"{h.claim} ({_power(h):.0%} power)" for h in by[BY_SEED_SET])
                    + " on some seed sets only")
    if by[NO]:
        said.append(f"not {', '.join(h.claim for h in by[NO])}")
    return f"By design this config {'; '.join(said)}." if ran else ""
