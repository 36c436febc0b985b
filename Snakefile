# sparselen: "The Role of Sparsity for Length Generalization in Transformers" (ICML 2025),
# reproduced. `snakemake` (its default profile: profiles/default) builds every figure and table
# and the report; see README.md.
from snakemake.utils import min_version

import sparselen.estimate.eta
import sparselen.interface.config
import sparselen.report.terminal

min_version("9.0")

# One line per finished training, the time left priced by the estimate, the verdicts at the end
# (sparselen/report/terminal.py).
sparselen.report.terminal.install(workflow, price=sparselen.estimate.eta.rule_seconds)


# A config file is complete: config.yaml is the configuration when no --configfile is
# given, and is not merged under one that is (files listed after the first are overlays).
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


include: "workflow/rules/common.smk"


# A slice runs when the config has its section.
for name in sparselen.interface.config.SLICES:
    if name in config:

        include: f"workflow/rules/{name}.smk"


include: "workflow/rules/rounds.smk"
include: "workflow/rules/report.smk"


# Trainings keep their checkpoints until every job is recorded (sparselen/training/resumable.py): a job
# killed after its outputs but before Snakemake records it resumes at its last step.
onsuccess:
    import sparselen.training.resumable

    sparselen.training.resumable.clean("results")
    sparselen.report.terminal.finish()


rule all:
    default_target: True
    input:
        [getattr(rules, f"fig_{name}").input for name in REPORT_SLICES],
        rules.report.input,
