"""Argument groups that several ``sparselen`` subcommands share."""

from __future__ import annotations


def add_runtime_args(parser) -> None:
    """``--device`` and ``--threads``, for every command that runs a model."""
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")


def add_training_output_args(parser) -> None:
    """The files a training command writes (and its resume file)."""
    parser.add_argument("--model", required=True, help="output: trained model file")
    parser.add_argument("--log-csv", required=True, help="output: per-step training log")
    parser.add_argument("--summary", required=True, help="output: training summary JSON")
    parser.add_argument("--checkpoint", required=True, help="resume file (kept until the run finishes)")
