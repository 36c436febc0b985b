"""The commands a user runs by hand: ``sparselen estimate | pilot | gpu-check | export-hf |
clean-checkpoints``.
The workflow's steps run through ``sparselen.interface.job``, not through this CLI."""

from __future__ import annotations

import argparse
import logging
import sys


def cpu_profile_file(choice: str) -> str | None:
    """The CPU profile file ``--cpu-profile`` names: ``auto``, this machine's measured profile
    (measured now the first time, then cached: ``sparselen.estimate.machine``); ``builtin``, none
    (the development machine's built-in profile); else the file given."""
    if choice == "builtin":
        return None
    if choice == "auto":
        from sparselen.estimate.machine import cached_path, measure_cpu_profile

        measure_cpu_profile()
        return str(cached_path())
    return choice


def estimate(args) -> int:
    """Exit status 1 when a job cannot succeed as configured (over its device's memory, or no
    attempt finishes it): the tables are printed first, the errors last, on stderr."""
    from functools import partial

    from sparselen.estimate import profiles, rounds, tables
    from sparselen.estimate.dag import workflow_jobs
    from sparselen.estimate.plan import plan
    from sparselen.interface.config import load
    from sparselen.interface.rounds import at_cap, rounded
    from sparselen.runtime import io

    given = load(args.configfile)
    cfg = at_cap(given) if rounded(given) else given  # the tables price every round (the cap)
    jobs = plan(cfg, workflow_jobs(args.configfile))
    if args.calibrate:
        from sparselen.estimate.calibrate import calibrate

        prof = calibrate()
        io.write_text(args.calibrate, prof.to_json() + "\n")
        print(f"wrote {args.calibrate}: {prof.name}, {prof.peak_flops / 1e9:.1f} GFLOP/s, d0 {prof.width_half:g}")
        args.cpu_profile = args.calibrate
    cpu_profile = cpu_profile_file(args.cpu_profile)
    gpu, cpu = profiles.resolve(args.gpu, args.utilization, cpu_profile, compile=bool(cfg.get("compile")),
                                cpu_memory_gb=args.cpu_memory)
    if gpu is not None and not cfg.get("gpus_per_job"):
        print("note: gpus_per_job is 0 in this config: every job runs on the CPU profile")
    out = tables.report(cfg, jobs, gpu, cpu, args.retries,
                        dp_efficiency=args.dp_efficiency or tables.DP_EFFICIENCY,
                        gpus_available=tuple(args.gpus_available), cores=args.cores)
    if rounded(given):  # seeds in rounds: what they are likely to cost, and at most
        rounds.report(given, partial(rounds.price, gpu=gpu, cpu=cpu, retries=args.retries,
                                   dp_efficiency=args.dp_efficiency, gpus_available=tuple(args.gpus_available),
                                   cores=args.cores))
    if args.jobs_csv:
        io.write_csv(out["jobs"], args.jobs_csv)
    if args.compare:
        cmp = tables.compare(out["jobs"], args.compare)
        by_slice, by_rule = tables.comparison_tables(cmp)
        print(f"\nPredicted vs measured seconds per job (wall time; {args.compare}; {len(cmp)} jobs):\n")
        print(by_slice.to_markdown(index=False, floatfmt=".3g"))
        print()
        print(by_rule.to_markdown(index=False, floatfmt=".3g"))
        print("\n" + tables.comparison_words(by_slice, cpu.name))
    from sparselen.estimate.next_step import next_step

    print("\n" + next_step(args.configfile, args.gpu, cfg, out))
    return 1 if out["errors"] else 0


def pilot(args) -> None:
    from sparselen.estimate.pilot import pilot as run_pilot

    run_pilot(args.configfile, args.steps, args.out, args.peak_tflops)


def gpu_check(args) -> int:
    """Exit status 1 when no training step was measured (no profile written)."""
    from sparselen.estimate.gpu_check import gpu_check as run_check

    result = run_check(args.configfile, args.out, args.budget, args.steps, tuple(args.blocks), args.plan,
                       args.plan_only)
    return 0 if result["profile"] is not None or args.plan_only else 1


def export_hf(args) -> None:
    from sparselen.training.hf_export import export_hf

    print(export_hf(args.model, args.dir, args.tokenizer))


def clean_checkpoints(args) -> None:
    from sparselen.training.resumable import clean

    for path in clean(args.root, dry_run=args.dry_run):
        print(path)


DESCRIPTION = ("Commands to run by hand beside the workflow (make run or snakemake runs the experiments): "
               "estimate a config's compute before launching it, measure its model shapes on your own device "
               "(pilot, or gpu-check within minutes), export a trained model to transformers, remove the checkpoints "
               "of finished trainings.")


def positive_int(text: str) -> int:
    """An argument that must be a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default where it has one (not for flags, nor where its absence means
    something the help says)."""

    def _get_help_string(self, action):
        if action.default in (None, [], False) or isinstance(action, argparse._VersionAction):
            return action.help
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    from sparselen import __version__

    parser = argparse.ArgumentParser(prog="sparselen", description=DESCRIPTION, formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"sparselen {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".",
                              formatter_class=HelpFormatter)

    s = command("estimate", "a config's compute and peak memory per slice and job from FLOP counts, shapes and a "
                "device profile; exits 1 when a job cannot succeed as configured")
    s.add_argument("--configfile", nargs="+", default=[],
                   help="config files as given to snakemake --configfile (without it: the checkout's config.yaml)")
    s.add_argument("--gpu", default=None, help="model jobs on this GPU (h100, h200, a100, l40s, a10, l4, ...) or "
                   "a profile JSON; needs gpus_per_job > 0 in the config (configs/paper.yaml); without it every job "
                   "runs on the CPU profile")
    s.add_argument("--utilization", type=float, default=0.4, help="assumed fraction of the GPU's bf16 peak")
    s.add_argument("--cpu-profile", default="auto", help="CPU profile: auto, this machine's, measured the first time "
                   "(about 2 minutes) and cached under .cache/sparselen/; builtin, the development machine's; or a "
                   "profile JSON (benchmarks/calibrate.py, --calibrate)")
    s.add_argument("--cpu-memory", type=float, default=None, metavar="GIB",
                   help="memory of the CPU jobs' machine in GiB (default: the CPU profile's, else this machine's)")
    s.add_argument("--retries", type=int, default=2, help="the SLURM profile's retries")
    s.add_argument("--gpus-available", type=positive_int, nargs="+", default=[8, 64], metavar="N",
                   help="GPU counts for which the campaign's wall clock on a cluster is printed")
    s.add_argument("--cores", type=positive_int, default=None, metavar="N",
                   help="cores of the machine a local (CPU) run uses for its wall clock (default: this machine's)")
    s.add_argument("--dp-efficiency", type=float, default=None,
                   help="assumed data-parallel efficiency of a language model trained on several devices "
                        "(language.parallel): its wall time is one device's over devices x this (default: 0.9)")
    s.add_argument("--compare", default=None, metavar="BENCHMARKS",
                   help="also print the predicted against the measured wall time of each job, from a finished run's "
                        "results/benchmarks")
    s.add_argument("--jobs-csv", default=None, help="write the per-job estimate here")
    s.add_argument("--calibrate", default=None, metavar="OUT",
                   help="measure this machine's CPU profile, write it to OUT (JSON) and use it")
    s.set_defaults(func=estimate)
    s = command("pilot", "before a campaign: a few hundred steps of each distinct model shape of a config on the "
                "device its jobs will use; prints step time, tokens/s, MFU, peak memory and whether the loss fell, "
                "and writes a device profile for `sparselen estimate --gpu`")
    s.add_argument("--configfile", nargs="+", default=[],
                   help="config files as given to snakemake --configfile (without it: the checkout's config.yaml)")
    s.add_argument("--steps", type=positive_int, default=300, help="training steps per shape (the first of its run)")
    s.add_argument("--out", default="pilot_profile.json", help="the device profile to write (JSON)")
    s.add_argument("--peak-tflops", type=float, default=None,
                   help="the device's peak TFLOP/s for MFU (default: config peak_tflops, else a GPU's datasheet "
                        "bf16 peak by its name)")
    s.set_defaults(func=pilot)
    from sparselen.estimate.gpu_check import NAMES

    s = command("gpu-check", "the GPU check before a campaign, in at most --budget seconds on one GPU: a few timed "
                "steps of the job of each block of the config's GPU-hours, largest first (stacks, the language "
                "model's step, the analysis' passes, the SFA on 1 and 16 threads); rows to OUT/gpu_check.csv as "
                "each block ends, and a device profile (OUT/profile.json) for `sparselen estimate --gpu`")
    s.add_argument("--configfile", nargs="+", default=[],
                   help="config files as given to snakemake --configfile (without it: the checkout's config.yaml)")
    s.add_argument("--out", default="results/gpu_check", help="the directory of the plan, the rows and the profile")
    s.add_argument("--budget", type=float, default=480.0, help="seconds for the whole check, planning included")
    s.add_argument("--steps", type=positive_int, default=20, help="timed steps per block, after its warm-up")
    s.add_argument("--blocks", nargs="+", choices=NAMES, default=list(NAMES), metavar="BLOCK",
                   help=f"the blocks to run (of {', '.join(NAMES)})")
    s.add_argument("--plan-only", action="store_true",
                   help="write the check's plan (OUT/plan.pkl: Snakemake's DAG priced by the estimate) and stop")
    s.add_argument("--plan", default=None, metavar="FILE",
                   help="run a plan written by --plan-only instead of the config's: on a GPU machine whose Python has "
                        "torch but not Snakemake (--configfile is then not read)")
    s.set_defaults(func=gpu_check)
    s = command("export-hf", "write a trained model as a transformers GPTNeoXForCausalLM directory")
    s.add_argument("model", help="a model file written by training (model.pt)")
    s.add_argument("dir", help="output directory")
    s.add_argument("--tokenizer", default=None, help="tokenizer.json to include (language models)")
    s.set_defaults(func=export_hf)
    s = command("clean-checkpoints", "remove the checkpoints of finished trainings (the workflow does this when "
                "it succeeds)")
    s.add_argument("--root", default="results", help="the directory searched for checkpoints")
    s.add_argument("-n", "--dry-run", action="store_true", help="list the checkpoints without removing them")
    s.set_defaults(func=clean_checkpoints)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        from snakemake_interface_common.exceptions import WorkflowError
    except ImportError:  # a GPU check run from its plan, where the workflow's packages are not installed
        WorkflowError = ()
    try:
        status = args.func(args)
    except WorkflowError as e:  # an invalid config: the schema's message, not a traceback
        files = " ".join(getattr(args, "configfile", None) or []) or "config.yaml"
        print(f"sparselen {args.command} ({files}): {e}", file=sys.stderr)
        return 2
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
