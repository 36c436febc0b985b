"""The README's image: current with config.yaml, and compared with a fresh run within seed noise."""

import json
from pathlib import Path

import pandas as pd
import yaml

from sparselen.report import readme_figure as rf

REPO = Path(__file__).parents[2]


def test_the_readmes_image_was_drawn_from_config_yamls_parity_section_and_has_its_table():
    source = json.loads((REPO / rf.SOURCE).read_text())
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    assert source["config"] == rf.drawn_from(config), (
        "config.yaml's parity section changed since the README's image was drawn: `make run`, then "
        "`python -m sparselen.report.readme_figure --write results`")
    table = pd.read_csv(REPO / rf.TABLE)
    p = config["parity"]
    assert sorted(table["K_train"].unique()) == sorted(p["K_train"])
    assert table["n_seeds"].eq(len(p["seeds"])).all()
    assert (REPO / rf.IMAGE).stat().st_size > 10_000


def grid(shift=0.0, half=0.05):
    return pd.DataFrame([{"K_train": 3, "scheme": "pose", "k_test": k, "length": n, "mean": 0.8 + shift,
                          "ci_low": 0.8 + shift - half, "ci_high": 0.8 + shift + half}
                         for k in (1, 2, 3, 4) for n in (10, 20, 40, 80, 160)])


def test_a_run_agrees_within_seed_noise_and_not_beyond_it():
    assert rf.agrees(rf.compare(grid(), grid(0.07)))  # 0.07 < sqrt(2) x 0.05
    assert not rf.agrees(rf.compare(grid(), grid(0.08)))
    one_off = grid()
    one_off.loc[0, "mean"] = 0.2  # one cell of 20 is the share chance leaves outside
    assert rf.agrees(rf.compare(grid(), one_off))
    one_off.loc[1, "mean"] = 0.2
    assert not rf.agrees(rf.compare(grid(), one_off))
    assert not rf.agrees(rf.compare(grid(), grid().iloc[2:]))  # a cell the run lacks does not agree


def test_write_copies_a_runs_figure_and_table_and_check_reads_them(tmp_path, capsys):
    results, repo = tmp_path / "results", tmp_path / "repo"
    for d in (results / "figures", results / "parity", repo / "docs/figures"):
        d.mkdir(parents=True)
    (results / rf.RUN_IMAGE).write_bytes(b"png")
    grid().to_csv(results / rf.RUN_TABLE, index=False)
    (repo / "config.yaml").write_text(yaml.safe_dump({"parity": {"seeds": [0, 1, 2]}, "seed_offset": 0}))
    rf.write(results, repo)
    assert (repo / rf.IMAGE).read_bytes() == b"png"
    assert json.loads((repo / rf.SOURCE).read_text())["config"]["parity"] == {"seeds": [0, 1, 2]}
    assert rf.check(results, repo) == 0
    grid(0.2).to_csv(results / rf.RUN_TABLE, index=False)
    assert rf.check(results, repo) == 1
    assert "20 of 20 cells differ" in capsys.readouterr().out
