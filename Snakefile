# sparselen: "The Role of Sparsity for Length Generalization in Transformers" (ICML 2025),
# reproduced. `snakemake --cores all` builds every figure and table; see README.md.
import os

from snakemake.utils import min_version

min_version("9.0")


configfile: os.path.join(workflow.basedir, "config.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/parity.smk"
include: "workflow/rules/language.smk"
include: "workflow/rules/ppc.smk"
include: "workflow/rules/theory.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        rules.fig_parity.input,
        rules.fig_language.input,
        rules.fig_ppc.input,
        rules.fig_theory.input,
        rules.report.input,
