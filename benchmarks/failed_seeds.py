"""Failed seeds: how many failed training seeds a C1 group of n seeds can carry and still decide.

A group like the default's copy_repeat (its sizes and evaluation samples from the config):
oracle coupling at exact match 1.00 at the largest size on every seed but ``f``, where it fails
(``--failed-at``, 0.025: a run of the default's recipe that fit its training sizes and did not
generalize), every baseline fitted and at 0.00. For each seed count and number of failed seeds,
the claim is decided with the claims' own code, as the report does (C1 by bounds by betting,
with no stability rule). A bound by betting reads the seeds in their order, so the failed seeds
are placed first or last in it (``--where``). The default's PPC seed count is chosen from this
table (configs/README.md, "Seed power").

    .venv/bin/python benchmarks/failed_seeds.py --seeds 4 6 8 9 10 --failed 1 2 3 --where first last
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from sparselen.interface import config
from sparselen.ppc.claims import facts
from sparselen.report import claims as cl
from sparselen.statistics.stats import Resampling


def runs(ppc: dict, seeds: int, failed: int, failed_at: float, last: bool = False) -> pd.DataFrame:
    """Per-run evaluation rows of copy_repeat (``ppc``: the config's section): every run fits
    its training sizes; at the largest size the baselines score 0, PPC and oracle coupling 1,
    except oracle coupling on ``failed`` seeds, the first in seed order (``last``: the last);
    the validation samples there score as the test ones."""
    fails = set(range(seeds - failed, seeds) if last else range(failed))
    task, n = ppc["copy_repeat"], ppc["eval"]["n"]
    largest, rows = max(task["eval_sizes"]), []
    for scheme in ppc["schemes"]:
        for seed in range(seeds):
            for size in (*task["train_sizes"], largest):
                if size != largest:
                    acc = 1.0
                elif scheme == "coupled":
                    acc = failed_at if seed in fails else 1.0
                else:
                    acc = 1.0 if scheme == "ppc" else 0.0
                row = {"task": "copy_repeat", "scheme": scheme, "seed": seed, "size": size, "n": n,
                       "correct": round(acc * n), "accuracy": acc}
                rows += [{**row, "split": "test"}] + ([{**row, "split": "validation"}] if size == largest else [])
    return pd.DataFrame(rows)


def decide(cfg: dict, seeds: int, failed: int, failed_at: float, last: bool = False) -> dict:
    """C1's verdict on such a group, as the report of ``cfg`` gives it (``last``: the failed
    seeds last in seed order, else first)."""
    ppc = {**cfg["ppc"], "tasks": ["copy_repeat"]}
    c1 = [c for c in cl.CLAIMS if c.id == "C1"]
    t = cl.check({"ppc": {"evals": runs(ppc, seeds, failed, failed_at, last)}},
                 Resampling(seed=cfg["report"]["seed"]), {"ppc": facts(ppc)}, claims=c1)
    head, group = t[t["group"] == "all"].iloc[0], t[t["group"] == "copy_repeat"].iloc[0]
    return {"seeds": seeds, "failed": failed, "where": "last" if last else "first", "verdict": head["verdict"],
            "coupled - best baseline": f"{group['value']:.2f} [{group['ci_low']:.2f}, {group['ci_high']:.2f}]",
            "unstable": "not applied" if np.isnan(head["stability"]) else f"{head['stability']:.1%}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[4, 6, 8, 9, 10])
    ap.add_argument("--failed", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--failed-at", type=float, default=0.025, help="a failed seed's exact match at the largest size")
    ap.add_argument("--where", nargs="+", choices=["first", "last"], default=["first", "last"],
                    help="the failed seeds' place in seed order")
    ap.add_argument("--configfile", nargs="+", default=["config.yaml"])
    a = ap.parse_args()
    cfg = config.load(a.configfile)
    rows = [decide(cfg, n, f, a.failed_at, where == "last") for f in a.failed for where in a.where
            for n in a.seeds if f < n]
    print(pd.DataFrame(rows).to_markdown(index=False))


if __name__ == "__main__":
    main()
