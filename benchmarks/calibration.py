"""Calibration of the claims' tests: per claim and shipped config, how often the claim's own code
(gates and stability included) says "holds" where it is false, "does not hold" where it is true,
and the power (a decided, correct "holds") where it is true, on tables whose truth is known
(``sparselen.calibration.scenarios``), at each config's seeds, evaluation samples and analysed
tokens. Not ``benchmarks/calibrate.py``, which measures this machine for ``sparselen estimate``.

    .venv/bin/python benchmarks/calibration.py --replicates 100 --power-replicates 20 [--claims L2 C1 C2] [--csv out.csv]
    .venv/bin/python benchmarks/calibration.py --no-effect --replicates 100 --write sparselen/calibration/false_holds.json

``--no-effect`` runs only the scenarios where the claim is false (what the verdict lines' rates
need; minutes, as the stability check runs only on a false "holds"); ``--write`` writes their
counts as the package's data file (``sparselen.statistics.rates``). ``--kinds certifying`` runs
only the nulls at each tested condition's threshold (``sparselen.calibration.thresholds``),
``--kinds developed-on`` only the counterexamples the criteria were developed on (both by
default). Every false-claim row counts its "holds" both with the stability rule and by the
intervals alone; ``--no-stability`` skips the rule (every rate then of the intervals alone).
Configs can run in separate processes, each with ``--csv``, and be written together:

    .venv/bin/python benchmarks/calibration.py --no-effect --configs paper.yaml --csv paper.csv
    .venv/bin/python benchmarks/calibration.py --tables-from *.csv --write sparselen/calibration/false_holds.json

``--rounds`` calibrates seeds in rounds (``sparselen.calibration.sequential``): the slice of
each claim run (parity or PPC; by default the claims of those slices) trains its seeds in the
config's own rounds (``--rounds SIZE MAX``: SIZE seeds a round, at most MAX rounds), the claim
decided after each and stopped at the first decided round; a table per claim gives the false "holds" (with their one-sided 95% upper bound)
or the power, the mean seeds per seed list and rounds, and the cap:

    .venv/bin/python benchmarks/calibration.py --claims C1 --configs config.yaml --rounds --csv c1.csv
    .venv/bin/python benchmarks/calibration.py --claims C1 --configs config.yaml --rounds 5 4

Each rate is printed with its Monte Carlo standard error (at 0 or 1: 3/R, the 95% one-sided
bound). Draws where the claim is false are cheap (the stability check runs only on a decided
"holds"); where it is true, every decided verdict is checked for stability, about 15-30 s a draw
at 10 seeds or 2,000 tokens on one CPU core, hence fewer of them.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import pandas as pd

from sparselen.calibration import CERTIFYING, FALSE, KINDS, claim_of, false_holds, monte_carlo_error, run, sizes_of
from sparselen.calibration.sequential import rounded_slice, run_rounds
from sparselen.calibration.thresholds import catalog
from sparselen.interface.config import load
from sparselen.interface.rounds import ROUNDED_SLICES, Rounds, of
from sparselen.report import claims as cl
from sparselen.statistics.rates import upper_bound
from sparselen.statistics.stats import Resampling

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {"config.yaml": "config.yaml", "cpu-extended.yaml": "configs/cpu-extended.yaml",
           "paper.yaml": "configs/paper.yaml"}


def cell(rate: float, replicates: int) -> str:
    """A rate with its Monte Carlo error: ± its standard error, or at 0 and 1 the 95% bound."""
    error = monte_carlo_error(rate, replicates)
    if rate == 0:
        return f"0% (< {error:.0%})"
    if rate == 1:
        return f"100% (> {1 - error:.0%})"
    return f"{rate:.0%} ± {error:.0%}"


def table(rows: pd.DataFrame) -> str:
    """One markdown table per claim: a row per scenario, a column per config."""
    out = []
    for claim, g in rows.groupby("claim", sort=False):
        configs = list(dict.fromkeys(g["config"]))
        out += [f"**{claim}**", "", "| scenario | truth | rate | " + " | ".join(configs) + " |",
                "| --- | --- | --- |" + " --- |" * len(configs)]
        for name, s in g.groupby("scenario", sort=False):
            by = s.set_index("config")
            truth = s["truth"].iloc[0]
            kinds = [("false holds", "holds")] if truth == FALSE else [("false does not hold", "does not hold"),
                                                                       ("power", "holds")]
            for label, column in kinds:
                cells = [cell(by.loc[c, column], by.loc[c, "replicates"]) if c in by.index else "" for c in configs]
                out.append(f"| {name} | {truth} | {label} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def bounded(holds: int, replicates: int) -> str:
    """"3/100 (≤ 8%)": a count of false "holds" and its one-sided 95% upper bound."""
    return f"{holds}/{replicates} (≤ {upper_bound(holds, replicates):.1%})"


def certifying_table(rows: pd.DataFrame) -> str:
    """The certifying nulls: a row per claim, condition and form, a column per config, each cell
    the false "holds" with the stability rule, then by the intervals alone, each with its
    one-sided 95% upper bound."""
    rows = rows[rows["kind"] == CERTIFYING] if "kind" in rows else rows.iloc[:0]
    configs = list(dict.fromkeys(rows["config"]))
    out = ["| claim | condition at its threshold | null form | " + " | ".join(configs) + " |",
           "| --- | --- | --- |" + " --- |" * len(configs)]
    for (claim, condition, form), g in rows.groupby(["claim", "condition", "form"], sort=False):
        by = g.set_index("config")
        cells = []
        for c in configs:
            if c not in by.index:
                cells.append("")
                continue
            r, n = by.loc[c], int(by.loc[c, "replicates"])
            with_rule = bounded(round(r["holds"] * n), n) if r.get("stability", True) else "not run"
            cells.append(f"{with_rule} · {bounded(round(r['holds_interval'] * n), n)}")
        out.append(f"| {claim} | {condition} | {form} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def rounds_table(rows: pd.DataFrame) -> str:
    """Seeds in rounds: one markdown table per claim, a row per scenario and config."""
    out = []
    for claim, g in rows.groupby("claim", sort=False):
        out += [f"**{claim}**", "",
                "| scenario | truth | config | rounds | false holds or power | expected seeds | max seeds | mean rounds |",
                "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in g.to_dict("records"):
            n = int(r["replicates"])
            rate = (f"false holds {bounded(round(r['holds'] * n), n)}" if r["truth"] == FALSE
                    else f"power {cell(r['holds'], n)}")
            out.append(f"| {r['scenario']} | {r['truth']} | {r['config']} | {r['round size']} x {r['max rounds']} | "
                       f"{rate} | {r['expected seeds']:.1f} | {r['max seeds']} | {r['mean rounds']:.2f} |")
        out.append("")
    return "\n".join(out)


def claims_in_rounds(ap, claims: list | None) -> list:
    """The claims ``--rounds`` runs: ``claims``, each of a slice whose seeds train in rounds (by
    default every claim of those slices)."""
    if claims is None:
        return [c.id for c in cl.CLAIMS if c.slice in ROUNDED_SLICES]
    for c in claims:
        try:
            rounded_slice(c)
        except StopIteration:
            ap.error(f"--rounds: no claim {c}")
        except ValueError as e:
            ap.error(f"--rounds: {e}")
    return claims


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicates", type=int, default=100, help="draws per scenario where the claim is false")
    ap.add_argument("--power-replicates", type=int, default=20, help="draws per scenario where the claim is true")
    ap.add_argument("--no-effect", action="store_true", help="only the scenarios where the claim is false")
    ap.add_argument("--write", default=None, help="write the false holds as the package's data file (with --no-effect)")
    ap.add_argument("--claims", nargs="*", default=None)
    ap.add_argument("--configs", nargs="*", default=list(CONFIGS))
    ap.add_argument("--n-boot", type=int, default=None, help="bootstrap replicates (default: the config's report's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--csv", default=None, help="also write the rates here, a row per scenario and config")
    ap.add_argument("--tables-from", nargs="*", default=None,
                    help="print the tables of earlier runs' CSVs (and --write them) and exit")
    ap.add_argument("--kinds", nargs="*", default=list(KINDS), choices=KINDS,
                    help="the scenarios' kinds: developed-on (the criteria's counterexamples), certifying (the nulls "
                         "at the thresholds)")
    ap.add_argument("--no-stability", action="store_true", help="the intervals alone, without the stability rule")
    ap.add_argument("--rounds", nargs="*", type=int, default=None, metavar="SIZE MAX",
                    help="seeds in rounds, each claim stopped at its first decided round (parity and PPC claims): "
                         "each config's own rounds of the claim's slice, or SIZE seeds a round, at most MAX rounds")
    a = ap.parse_args()
    if a.rounds is not None:
        if a.write or a.tables_from:
            ap.error("--rounds prints and --csv writes its own table: without --write or --tables-from")
        if len(a.rounds) not in (0, 2) or min(a.rounds, default=1) < 1:
            ap.error("--rounds [SIZE MAX]: none (each config's own rounds) or both, each at least 1")
        a.claims = claims_in_rounds(ap, a.claims)
    if a.write and not (a.no_effect or a.tables_from):
        ap.error("--write records the scenarios where the claim is false: add --no-effect")
    if a.tables_from:
        rows = pd.concat([pd.read_csv(f) for f in a.tables_from]).drop_duplicates(["claim", "config", "scenario"])
        rows = rows.fillna({"kind": "developed-on", "condition": "", "form": ""})
        print(table(rows))
        print(certifying_table(rows))
        if a.write:
            order = rows["config"].map(list(CONFIGS).index)
            rows = rows.assign(_order=order).sort_values("_order", kind="stable").drop(columns="_order")
            # the one command that gives these counts (each entry's draws are seeded by its seed,
            # claim, scenario and config only)
            command = shlex.join([".venv/bin/python", "benchmarks/calibration.py", "--no-effect", "--replicates",
                                  str(int(rows["replicates"].max())), "--write", a.write])
            write(a, rows.to_dict("records"), sorted(set(rows["config"]), key=list(CONFIGS).index), command)
        return
    paper = load([ROOT / CONFIGS["paper.yaml"]])
    rows = []
    for name in a.configs:
        cfg = load([ROOT / CONFIGS[name]])
        sizes = sizes_of(name, cfg, paper)
        res = resampling(cfg, a.n_boot)
        for sc in [s for s in catalog(a.claims, a.kinds) if not a.no_effect or s.truth == FALSE]:
            start = time.time()
            reps = a.replicates if sc.truth == FALSE else a.power_replicates
            if a.rounds is not None:
                rounds = Rounds(*a.rounds) if a.rounds else of(cfg[claim_of(sc.claim).slice])
                if rounds is None:
                    print(f"{name} {sc.claim}: skipped, {claim_of(sc.claim).slice}'s seeds train in one round "
                          "(--rounds SIZE MAX to calibrate rounds there)", flush=True)
                    continue
                row = run_rounds(sc, sizes, rounds, reps, res, a.seed)
                said = f"{row['expected seeds']:.1f} seeds of {row['max seeds']}"
            else:
                row = run(sc, sizes, reps, res, a.seed, stability=not a.no_stability)
                said = f"intervals alone {row['holds_interval']:.0%}"
            rows.append(row | {"seconds": round(time.time() - start, 1)})
            print(f"{name} {sc.claim} {sc.truth}: holds {row['holds']:.0%}, does not hold {row['does not hold']:.0%} "
                  f"of {reps}, {said} ({rows[-1]['seconds']} s): {sc.name}", flush=True)
            if a.csv:
                pd.DataFrame(rows).to_csv(a.csv, index=False)
    print()
    if a.rounds is not None:
        print(rounds_table(pd.DataFrame(rows)))
        return
    print(table(pd.DataFrame(rows)))
    print(certifying_table(pd.DataFrame(rows)))
    if a.write:
        write(a, rows, a.configs)


def resampling(cfg: dict, n_boot: int | None) -> Resampling:
    report = cfg["report"]
    return Resampling(n_boot=n_boot or report["bootstrap"], seed=report["seed"], level=report["level"])


def write(a, rows: list, names: list, command: str | None = None) -> None:
    """The package's data file from ``rows``, of configs ``names`` (``command``: what made them,
    by default this one)."""
    if a.no_stability or not all(r.get("stability", True) for r in rows):
        sys.exit("--write records what the report says, the stability rule applied: run without --no-stability")
    configs = {name: load([ROOT / CONFIGS[name]]) for name in names}
    n_boot = {name: resampling(cfg, a.n_boot).n_boot for name, cfg in configs.items()}
    command = command or shlex.join([".venv/bin/python", "benchmarks/calibration.py", *sys.argv[1:]])
    false_holds.write(Path(a.write), rows, configs, command, n_boot, a.seed)
    print(f"wrote {a.write}")


if __name__ == "__main__":
    main()
