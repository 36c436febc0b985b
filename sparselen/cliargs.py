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


def add_evaluation_args(parser, batch_size: int) -> None:
    """An evaluation command's model, shared evaluation set, output table and runtime."""
    parser.add_argument("--model", required=True)
    parser.add_argument("--eval-set", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch-size", type=int, default=batch_size)
    add_runtime_args(parser)


def add_table_args(parser) -> None:
    """An aggregation command's per-run tables in, CSV and Markdown out."""
    parser.add_argument("--inputs", nargs="+", required=True)
    parser.add_argument("--csv", required=True)
    parser.add_argument("--md", required=True)
