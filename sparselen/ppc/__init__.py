"""Position coupling and Predictive Position Coupling (docs/reconstruction.md, "Position
coupling and PPC"): tasks, generation-based evaluation, tables and figure, and the steps the
workflow's ``ppc_*`` rules run."""
