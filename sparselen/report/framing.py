"""What a reader needs before the numbers: whose task each verdict rests on (the paper's, ours,
or our runnable model of the theory), where each quoted sentence of the paper comes from, what
the reconstruction was built from, how far the criteria were set after results were seen, and
the few terms the verdict lines use.

The tag is derived from what was run (the slice, and for PPC the origin each task module
declares), so a config that runs the paper's tasks is tagged as such without a hand edit.
"""

from __future__ import annotations

import pandas as pd

PAPER_TASK, OUR_TASK, OUR_MODEL = "paper's task", "our task", "our model of the theory"
SLICE_TAGS = {"parity": PAPER_TASK, "language": PAPER_TASK, "theory": OUR_MODEL}

# Where each claim's quoted words come from (docs/reconstruction.md, "Claims", quotes each one).
QUOTE_SOURCES = {"P1": "abstract", "P2": "reproducibility card", "P3": "abstract", "C1": "abstract",
                 "C2": "abstract", "L1": "authors' rebuttal", "L2": "abstract", "T1": "a reviewer's summary",
                 "T2": "authors' rebuttal"}

HISTORY = "../../docs/reconstruction.md#history-of-the-criteria"  # from results/report/
SOURCES = ("No code was released with the paper, and its appendices (the tables of hyperparameters, the task "
           "formats, the coupling of each task) were not available: the reconstruction was built from the "
           "abstract, a reproducibility card quoting the paper's experiment setup, and the OpenReview reviews with "
           "the authors' rebuttals (`docs/reconstruction.md`). The paper's own numbers were not available either, "
           "so no figure below is compared with the paper's.")
CRITERIA_AFTER_RESULTS = (8, 9)  # claims whose criterion was revised after results were seen, of all claims
CRITERIA = (f"The criteria are not all pre-registered: {CRITERIA_AFTER_RESULTS[0]} of the "
            f"{CRITERIA_AFTER_RESULTS[1]} claims' criteria were set or revised after results had been seen (only "
            f"L1's threshold preceded every result of its claim); [History of the criteria]({HISTORY}) says which, "
            "after which results.")
TAGS = (f"Each verdict is tagged with what it rests on: **[{PAPER_TASK}]** a task the paper runs, **[{OUR_TASK}]** "
        f"a task of ours, not one the paper reports, **[{OUR_MODEL}]** the "
        "planted-correlation tasks and idealized model we built to make the theory runnable (`docs/theory.md`).")

GLOSSARY = (
    ("exact match", "the whole answer right, token for token (PPC tasks)"),
    ("size", "what a PPC task's input size counts (string length, operand digits, program lines)"),
    ("K_train, k_test", "sparse parity: the largest sparsity trained on, the sparsity of an evaluated cell"),
    ("L, Lbar", "theory: the training length and an evaluated length; Lbar/L is how many times longer"),
    ("local, non-local, coupled law", "theory: where the planted tokens sit (close together, spread out, spread "
                                      "out with coupled position ids)"),
    ("SFA, GPT", "theory: the idealized sparse functional attention model, and a small transformer"),
    ("C", "theory: the constant the bound loss(Lbar) <= C (Lbar/L)^2 loss(L) needs; 1/4 at 2L is a loss that "
          "did not grow"),
    ("retained margin", "(accuracy - chance) / (in-distribution accuracy - chance): 1 is nothing lost, 0 is chance"),
    ("fit", "a run accurate (>= 0.9) on its training lengths; only fitted runs count as evidence"),
    ("seeds that counted", "the training runs that fit and entered the interval"),
    ("L_short, L_long, L_k", "language: a token's loss with the short context, the long one, and the short one "
                             "plus k chosen far tokens"),
)


def task_origin(group: str) -> str:
    """A PPC group's task (its name's first word) as its module declares it: paper or ours."""
    from sparselen.ppc.tasks import task_module

    try:
        return task_module(str(group).split()[0]).ORIGIN
    except (KeyError, IndexError, ValueError):  # "-": no task ran
        return ""


def tag(slice_name: str, groups: pd.DataFrame) -> str:
    """What a claim's verdict rests on. PPC: the tasks of its deciding groups (tested ones,
    controls aside; all non-control groups when none was tested); the paper's when none names one."""
    if slice_name != "ppc":
        return SLICE_TAGS.get(slice_name, OUR_TASK)
    deciding = groups[~groups["control"].astype(bool)]
    tested = deciding[deciding["tested"].astype(bool)]
    origins = {task_origin(g) for g in (tested if len(tested) else deciding)["group"]} - {""}
    return OUR_TASK if origins == {"ours"} else PAPER_TASK


def quote_line(claim: str, quote: str) -> str:
    """The paper's words with the source they were taken from."""
    return f"The paper ({QUOTE_SOURCES.get(claim, 'source not recorded')}): \"{quote}\""


def glossary_section() -> list[str]:
    return ["## Glossary", "", *(f"- **{term}**: {meaning}" for term, meaning in GLOSSARY), ""]
