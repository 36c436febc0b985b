"""C2's designs, read from the shipped configs: every config that runs C2's tasks runs it on
both of the paper's PPC tasks, each tested far enough beyond its training sizes that a model
without coupled ids has lengths to fail at (docs/reconstruction.md, "Position coupling and PPC")."""

import pytest
from conftest import ROOT

from sparselen.interface.config import load
from sparselen.ppc import claims as ppc_claims
from sparselen.ppc.tasks import task_kind

SHIPPED = {"config.yaml": "config.yaml", "cpu-extended.yaml": "configs/cpu-extended.yaml",
           "paper.yaml": "configs/paper.yaml"}
# The least ratio of the largest evaluated size to the longest training size, per paper task:
# the paper's parity grid tests to 10x; variable assignment to 3x on CPU, where max_position_id
# 160 holds programs of at most 26 lines (paper.yaml: 4x, to the 64 variables of the vocabulary).
TESTED_TO = {"parity_scratchpad": 10, "variable_assignment": 3}
C2 = next(c for c in ppc_claims.CLAIMS if c.id == "C2")


def c2_tasks(section: dict) -> dict:
    """The task sections C2 is decided on, with their facts."""
    facts = ppc_claims.facts(section)["tasks"]
    return {t: f for t, f in facts.items()
            if f["ids_depend_on_input"] and not f["control"] and f["origin"] == "paper"}


@pytest.fixture(scope="module")
def deciding():
    """The configs that run C2's tasks (whether their seeds give the power to decide it aside)."""
    configs = {name: load([ROOT / path])["ppc"] for name, path in SHIPPED.items()}
    return {name: p for name, p in configs.items() if c2_tasks(p)}


def test_cpu_extended_and_paper_run_c2s_tasks_and_paper_decides_it(deciding):
    assert set(deciding) == {"cpu-extended.yaml", "paper.yaml"}
    assert not C2.design(deciding["paper.yaml"])
    assert "seeds" in C2.design(deciding["cpu-extended.yaml"])  # runs the designs, short of the power


@pytest.mark.parametrize("name", ["cpu-extended.yaml", "paper.yaml"])
def test_c2_is_decided_on_both_paper_tasks_tested_far_enough(deciding, name):
    p = deciding[name]
    tasks = c2_tasks(p)
    assert sorted(task_kind(t) for t in tasks) == ["parity_scratchpad", "variable_assignment"], name
    for task, f in tasks.items():
        lo, hi = p[task]["train_sizes"]
        assert max(p[task]["eval_sizes"]) / hi >= TESTED_TO[task_kind(task)], (name, task)
        assert f["tested_to"] == max(p[task]["eval_sizes"]) / hi  # what C2's verdict line states
        assert any(lo <= size <= hi for size in p[task]["eval_sizes"])  # the fit gate has sizes to read
    parity = p["parity_scratchpad"]
    # at k = 1 the one marked bit, and the end, are found by content: order must matter
    assert not parity["dense"] and parity["k"][1] >= 2
    # variable assignment's C2 form copies constants of several digits (one digit: its control)
    assert p["variable_assignment_digits"]["value_digits"][1] >= 2


def test_c2_rows_name_the_form_and_how_far_it_was_tested(deciding):
    """The row C2's verdict line cites says which form of the paper's task was run and to how
    many times its longest training size: from the config's facts."""
    from sparselen.calibration.tables import ppc_runs
    from sparselen.statistics.verdicts import Settings

    facts = ppc_claims.facts(deciding["paper.yaml"])
    runs = ppc_runs(lambda task, scheme, size: 0.99 if size <= 4 else {"nope": 0.0, "pose": 0.1}.get(scheme, 0.95),
                    tasks=("parity_scratchpad",))
    rows = ppc_claims.ppc_predicts_ids({"evals": runs}, Settings(n_boot=50, seed=0, facts=facts))
    assert [r.group for r in rows if not r.control] == [
        "parity_scratchpad (parity with a scratchpad, k 1-4 [paper's task, our format], tested to 10x the longest "
        "training size)"]
