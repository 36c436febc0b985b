"""Calibration of the claims' tests: per claim and shipped config, how often the claim's own code
(gates and stability included) says "holds" where it is false, "does not hold" where it is true,
and the power (a decided, correct "holds") where it is true, on tables whose truth is known
(``sparselen.calibration.scenarios``), at each config's seeds, evaluation samples and analysed
tokens. Not ``benchmarks/calibrate.py``, which measures this machine for ``sparselen estimate``.

    .venv/bin/python benchmarks/calibration.py --replicates 100 --power-replicates 20 [--claims L2 C1 C2] [--csv out.csv]
    .venv/bin/python benchmarks/calibration.py --no-effect --replicates 100 --write sparselen/calibration/false_holds.json

``--no-effect`` runs only the scenarios where the claim is false (what the verdict lines' rates
need; minutes, as the stability check runs only on a false "holds"); ``--write`` writes their
counts as the package's data file (``sparselen.statistics.rates``).

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

from sparselen.calibration import FALSE, false_holds, monte_carlo_error, run, sizes_of
from sparselen.calibration.scenarios import scenarios
from sparselen.interface.config import load
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
                cells = [cell(by.loc[c, column], by.loc[c, "replicates"]) for c in configs]
                out.append(f"| {name} | {truth} | {label} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


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
    ap.add_argument("--tables-from", nargs="*", default=None, help="print the tables of earlier runs' CSVs and exit")
    a = ap.parse_args()
    if a.write and not a.no_effect:
        ap.error("--write records the scenarios where the claim is false: add --no-effect")
    if a.tables_from:
        rows = pd.concat([pd.read_csv(f) for f in a.tables_from])
        print(table(rows.drop_duplicates(["claim", "config", "scenario"])))
        return
    paper = load([ROOT / CONFIGS["paper.yaml"]])
    rows, configs, n_boot = [], {}, {}
    for name in a.configs:
        cfg = configs[name] = load([ROOT / CONFIGS[name]])
        sizes = sizes_of(name, cfg, paper)
        report = cfg["report"]
        res = Resampling(n_boot=a.n_boot or report["bootstrap"], seed=report["seed"], level=report["level"])
        n_boot[name] = res.n_boot
        for sc in [s for s in scenarios(a.claims) if not a.no_effect or s.truth == FALSE]:
            start = time.time()
            reps = a.replicates if sc.truth == FALSE else a.power_replicates
            rows.append(run(sc, sizes, reps, res, a.seed) | {"seconds": round(time.time() - start, 1)})
            print(f"{name} {sc.claim} {sc.truth}: holds {rows[-1]['holds']:.0%}, does not hold "
                  f"{rows[-1]['does not hold']:.0%} of {reps} ({rows[-1]['seconds']} s): {sc.name}", flush=True)
            if a.csv:
                pd.DataFrame(rows).to_csv(a.csv, index=False)
    print()
    print(table(pd.DataFrame(rows)))
    if a.write:
        command = shlex.join([".venv/bin/python", "benchmarks/calibration.py", *sys.argv[1:]])
        false_holds.write(Path(a.write), rows, configs, command, n_boot, a.seed)
        print(f"wrote {a.write}")


if __name__ == "__main__":
    main()
