"""The compute estimate: FLOP counts, every job of Snakemake's DAG priced by its slice,
submissions as the SLURM profile forms them, resubmission arithmetic, device profiles and the
command."""

import contextlib
import math
import re
from collections import Counter
from dataclasses import replace

import pytest
import torch
from conftest import ROOT, SMOKE

from sparselen.estimate import calibrate, dag, disk, limits, plan, profiles, schedule, stack_size, tables, timeline
from sparselen.interface.config import load
from sparselen.interface.job import per_run_rule
from sparselen.nn import flops, memory
from sparselen.nn.model import GPTNeoX, ModelConfig

PAPER = (ROOT / "configs/paper.yaml",)


def workflow_jobs(tmp_path_factory, configfile):
    """The config's DAG, built in a scratch directory (as `snakemake -n` there)."""
    with contextlib.chdir(tmp_path_factory.mktemp("dag")):
        return dag.workflow_jobs(configfile)


@pytest.fixture(scope="module")
def smoke_dag(tmp_path_factory):
    return workflow_jobs(tmp_path_factory, SMOKE)


@pytest.fixture(scope="module")
def paper_dag(tmp_path_factory):
    return workflow_jobs(tmp_path_factory, PAPER)


@pytest.fixture(scope="module")
def smoke_jobs(smoke_dag):
    return plan.plan(load(SMOKE), smoke_dag)


@pytest.fixture(scope="module")
def paper_jobs(paper_dag):
    return plan.plan(load(PAPER), paper_dag)


@pytest.fixture(scope="module")
def paper_per_run(tmp_path_factory):
    """paper.yaml's shapes with one run per training job (stack: 1) at 6 seeds: the small
    models' model groups that packing puts on shared GPUs, few enough that the long language
    chain, not the small models' GPU-hours, sets the wall clock. (config files, priced jobs)"""
    overlay = tmp_path_factory.mktemp("per_run") / "per_run.yaml"
    six = "seeds: [0, 1, 2, 3, 4, 5]"
    overlay.write_text("".join(f"{name}: {{stack: 1, {six}}}\n" for name in ("parity", "ppc"))
                       + f"theory: {{stack: 1, {six}, sfa_seeds: 6}}\n")
    files = (*PAPER, overlay)
    return files, plan.plan(load(files), workflow_jobs(tmp_path_factory, files))


def test_flops_match_torch_flop_counter():
    """The matrix products of a forward pass, as torch counts them (its CPU SDPA is not
    counted: the attention term is ours alone)."""
    from torch.utils.flop_counter import FlopCounterMode

    cfg = ModelConfig(vocab_size=50, n_layer=2, n_head=4, d_model=64, d_ff=96)
    model = GPTNeoX(cfg)
    with FlopCounterMode(display=False) as fc:
        model(torch.randint(0, 50, (3, 17)))
    shape = flops.Shape(2, 64, 96, 50)
    attention = 3 * 17 * 2 * 4 * 64 * (17 + 1) / 2
    assert shape.forward(3, 17) - attention == fc.get_total_flops()


def test_six_n_per_token():
    """Without attention a training step is 6 x (weight matrices) FLOPs per token."""
    cfg = ModelConfig(vocab_size=300, n_layer=3, n_head=2, d_model=32, d_ff=80)
    matrices = sum(p.numel() for n, p in GPTNeoX(cfg).named_parameters() if p.ndim == 2 and "embed_in" not in n)
    shape = flops.Shape(3, 32, 80, 300)
    assert 3 * (shape.forward_flops_per_token(1) - shape.layer_flops_per_token(1) + shape.layer_flops_per_token(0)) \
        == 6 * matrices


@pytest.mark.parametrize("which", ["smoke", "paper"])
def test_every_job_of_the_dag_is_priced(request, which):
    """Every job but the target has a price: FLOPs where a model runs, units where none does."""
    dag_jobs, jobs = request.getfixturevalue(f"{which}_dag"), request.getfixturevalue(f"{which}_jobs")
    assert [j.rule for j in dag_jobs if plan.cost_function(j.rule) is None] == ["all"]
    assert len(jobs) == len(dag_jobs) - 1
    assert {j.dag.slice for j in jobs} == {"parity", "ppc", "language", "theory", "report"}
    unpriced = [(j.dag.rule, j.dag.name) for j in jobs if not (j.work.flops > 0 if j.work.model_job else j.work.units)]
    assert not unpriced
    benches = [j.dag.bench for j in jobs]  # --compare matches jobs by these
    assert len(set(benches)) == len(benches), [b for b, n in Counter(benches).items() if n > 1]


def test_every_jobs_log_and_benchmark_share_its_name(smoke_dag):
    """logs/<name>.log and results/benchmarks/<name>.tsv: a training's summary records the name
    (sparselen.interface.run.log_name), by which the ledger finds its MFU."""
    from sparselen.interface.job import Job
    from sparselen.interface.run import log_name

    named = [j for j in smoke_dag if j.bench]
    assert all(j.log == f"logs/{j.bench}.log" for j in named), [(j.log, j.bench) for j in named
                                                                 if j.log != f"logs/{j.bench}.log"]
    train = next(j for j in named if j.rule == "parity_train")
    assert log_name(Job.of(train.rule)) == "" and log_name(Job(train.rule, log=[train.log])) == train.bench


def test_a_rule_without_a_cost_fails_naming_it(monkeypatch, capsys, smoke_dag):
    """Before any output, naming the function the rule's slice must define."""
    import sparselen.parity.cost as parity_cost
    from sparselen.cli import main

    monkeypatch.delattr(parity_cost, "evaluate")
    monkeypatch.setattr(dag, "workflow_jobs", lambda files: smoke_dag)
    with pytest.raises(plan.MissingCost, match=r"^rule parity_evaluate has no cost: define sparselen\.parity\.cost\.evaluate$"):
        main(["estimate", "--configfile", *map(str, SMOKE), "--cpu-profile", "builtin"])
    assert capsys.readouterr().out == ""
    new_slice = replace(smoke_dag[0], rule="sweep_train")
    with pytest.raises(plan.MissingCost, match=r"define sparselen\.sweep\.cost\.train"):
        plan.plan(load(SMOKE), [new_slice])


def test_submissions_are_the_slurm_profiles(paper_per_run):
    """A model's training and evaluations are one submission whose limit adds their runtimes: a
    language model's alone, the small models' 8 to a submission (packing), planned side by side,
    so the limit is one model group's; the SFA runs share submissions (group-components), whose
    limit Snakemake sets for runs side by side (one run's), while the executor plugin runs them
    in turn: the submission takes the sum of its runs."""
    files, paper_jobs = paper_per_run
    df = tables.estimate(load(files), paper_jobs, None, profiles.CPU_DEFAULT)
    runtime = load(PAPER)["resources"]["runtime"]
    language_runtime = load(PAPER)["resources"].get("language_runtime", runtime)
    language = df[df["rule"].isin(["language_train", "language_loss_by_position"])].groupby("submission")
    assert language.size().eq(2).all() and language["limit_min"].first().eq(language_runtime + 30).all()
    packed = df[df["group"] == timeline.PACKED_GROUP]
    assert set(packed["slice"]) == {"parity", "ppc", "theory"}
    assert (packed.groupby("job")["submission"].nunique() == 1).all()  # each model group in one submission
    assert packed.groupby("submission")["job"].nunique().max() == 8  # the profile's group-components
    assert set(packed["limit_min"]) == {runtime + 10}  # a training and an evaluation, 8 side by side
    sfa = df[df["rule"] == "theory_run_sfa"]
    sfa_runtime = load(PAPER)["resources"]["sfa_runtime"]
    per_submission = sfa.groupby("submission").size()  # the profile's group-components: cpu_train
    assert len(per_submission) > 1 and per_submission.max() == 1 and set(sfa["limit_min"]) == {sfa_runtime}
    first = sfa[sfa["submission"] == sfa["submission"].iloc[0]]
    sub = tables.submissions(df).set_index("submission").loc[first["submission"].iloc[0]]
    assert sub["predicted_h"] == pytest.approx(first["seconds"].sum() / 3600) and sub["limit_h"] == sfa_runtime / 60
    # the paper's SFA runs finish in the first attempt; a longer one resumes from its checkpoint
    assert sub["attempts"] == 1 and sub["checkpoints"]


def test_attempts_and_resubmissions():
    # 100 min of training, checkpoints every minute, 30 min limit: 30, then 60 (total 89 done), then 90
    assert tables.attempts_needed(6000, 6000, 1000, 10, 1800, 0) == 3
    assert tables.attempts_needed(600, 600, 100, 10, 1800, 0) == 1
    # no checkpoints: only an attempt whose limit covers the whole job finishes
    assert tables.attempts_needed(5000, 0, 0, 0, 1800, 0) == 3
    # checkpoint only at the end: a rerun of the command starts again at attempt 1, so only
    # retries that reach a long enough limit finish it
    assert tables.attempts_needed(5000, 5000, 100, 100, 1000, 0) == math.inf
    assert tables.attempts_needed(5000, 5000, 100, 100, 1000, 0, retries=4) == 5
    assert tables.attempts_needed(1e9, 0, 0, 0, 1800, 0) == math.inf
    # a later attempt's limit at most cap_s (resources.max_runtime): 30, 40, 40 min instead of 30,
    # 60, 90, so a fourth attempt (a rerun of the command) finishes it
    assert tables.attempts_needed(8000, 8000, 1000, 10, 1800, 0) == 3
    assert tables.attempts_needed(8000, 8000, 1000, 10, 1800, 0, cap_s=2400) == 4
    # checkpoints every 10 min, 30 min limit, no retries: each command's attempt saves 30 min
    assert tables.attempts_needed(6000, 6000, 100, 10, 1800, 0, retries=0) == 4
    # ... at least 20 min apart (checkpoint_minutes): each attempt saves 20 min
    assert tables.attempts_needed(6000, 6000, 100, 10, 1800, 0, retries=0, checkpoint_minutes=20) == 5


def test_the_wall_clock_follows_the_dags_dependencies():
    """A chain of 1 + 6 + 3 h behind eight 1 h GPU jobs: on 8 GPUs the sum over the GPUs (2 h)
    says nothing, the chain (10 h) binds; the scheduler starts the chain's head first, so its
    wall clock is the chain; on 1 GPU the GPU work (14 h) binds. A 2-GPU task on 1 GPU takes
    twice as long."""
    Task = schedule.Task
    chain = [Task("tokens", 1, cpus=1), Task("train", 6, ("tokens",), gpus=1), Task("analyze", 3, ("train",), gpus=1)]
    others = [Task(f"small{i}", 1, gpus=1) for i in range(8)]
    tasks = others + chain  # listed last: the scheduler must find the chain by its length
    hours, critical = schedule.critical_chain(tasks)
    assert hours == 10 and [t.name for t in critical] == ["tokens", "train", "analyze"]
    assert schedule.wall_clock(tasks, gpus=8) == 10 > sum(t.hours * t.gpus for t in tasks) / 8
    assert schedule.wall_clock(tasks, gpus=1) == 17  # 1 h tokens, then 8 + 6 + 3 h on the one GPU, 1 h overlapped
    assert schedule.wall_clock([Task("dp", 4, gpus=2)], gpus=1) == 8
    assert schedule.wall_clock([Task("a", 2, cpus=1), Task("b", 2, cpus=1)], cpus=1) == 4  # cores are a limit too
    with pytest.raises(ValueError, match="cycle"):
        schedule.critical_chain([Task("a", 1, ("b",)), Task("b", 1, ("a",))])


def test_the_workflows_priorities_start_the_critical_chain_first(paper_per_run):
    """Snakemake's priorities (the dry run's) order paper.yaml's submissions as the estimate's
    scheduler does by chain length: on 8 GPUs they reach its wall clock, never later than first
    come, first served (no priorities), and the long jobs of the critical chain come first."""
    files, paper_jobs = paper_per_run
    gpu, cpu = profiles.resolve("h100", 0.4, None)
    df = tables.estimate(load(files), paper_jobs, gpu, cpu)
    tasks = timeline.submission_tasks(df)
    priority = df.groupby("submission")["priority"].max().to_dict()
    by_chain = schedule.wall_clock(tasks, gpus=8)
    by_priority = schedule.wall_clock(tasks, gpus=8, rank=priority)
    unordered = schedule.wall_clock(tasks, gpus=8, rank=dict.fromkeys(priority, 0))
    # within a priority Snakemake's order is its own (the scheduler here: the order jobs became
    # ready), which moves this GPU-bound schedule by up to about 1%
    assert by_priority == pytest.approx(by_chain, rel=0.02) and unordered >= by_priority
    long_on_chain = [t.name for t in schedule.critical_chain(tasks)[1] if t.hours >= 1]
    assert long_on_chain and all(priority[name] > 0 for name in long_on_chain), long_on_chain


def test_the_smoke_configs_clock_follows_its_dag(smoke_jobs):
    """On the smoke config every job waits on its inputs: the critical chain runs from the corpus
    through the reference language model's training to the report, and the wall clock on any
    number of cores is at least that chain and at least the core-hours over the cores."""
    df = tables.estimate(load(SMOKE), smoke_jobs, None, profiles.CPU_DEFAULT)
    clock = timeline.campaign_clock(df, local=True, cores=2)
    rules = [t.name.partition(":")[0] for t in clock["chain"]]
    assert rules[:3] == ["language_corpus", "language_tokenizer", "language_tokens"], rules
    assert "language_train" in rules and rules[-1] == "report_render", rules
    assert clock["chain_h"] == pytest.approx(sum(t.hours for t in clock["chain"]))
    busy = df["seconds"].sum() / 3600
    assert clock["wall_h"][2] >= max(clock["chain_h"], busy / 2) - 1e-9
    assert timeline.campaign_clock(df, local=True, cores=1000)["wall_h"][1000] == pytest.approx(clock["chain_h"])


def test_compilation_is_priced_where_it_is_applied():
    """torch.compile applies to training (the trainer compiles), not to evaluation: a training
    job pays compile_s once per attempt and compiled per-layer step overheads; an evaluation
    job neither."""
    compiled, eager = profiles.gpu_profile("h100", compile=True), profiles.gpu_profile("h100", compile=False)
    shape = flops.Shape(6, 512, 2048, 6)
    train = flops.Work().add("train", 1000, 1e15, shape)
    evaluation = flops.Work().add("forward", 1000, 1e14, shape)
    assert compiled.call_layer_s == eager.call_layer_s and compiled.step_layer_s < eager.step_layer_s
    assert profiles.seconds(evaluation, compiled) == profiles.seconds(evaluation, eager)
    t = profiles.seconds(train, compiled)
    assert t["restart_seconds"] == compiled.job_s + compiled.compile_s
    assert t["busy_seconds"] == pytest.approx(1e15 / compiled.rate(512))
    assert profiles.seconds(evaluation, compiled)["restart_seconds"] == compiled.job_s


def test_a_submissions_jobs_run_in_turn_and_packed_ones_share_their_gpu():
    """Under SLURM a submission's jobs run one at a time (SLURM_GROUP_AT_ONCE), whatever their
    group: their times add up. Side by side (``at_once``: locally), a level runs in layers of
    ``at_once``, longest first, each taking its longest job; on a shared GPU (packed) a layer
    takes the longer of that and the sum of its jobs' FLOP time."""
    import pandas as pd

    g = pd.DataFrame({"level": [0, 0, 0, 1], "seconds": [10.0, 8.0, 6.0, 1.0], "train_seconds": [9.0, 7.0, 5.0, 0.0],
                      "busy_seconds": [1.0, 1.0, 1.0, 0.5]})
    assert timeline.SLURM_GROUP_AT_ONCE == 1
    assert timeline.submission_seconds(g) == (10 + 8 + 6 + 1, 9 + 7 + 5 + 0)  # in turn, packed or not
    assert timeline.submission_seconds(g, shared_gpu=True) == timeline.submission_seconds(g)
    assert timeline.submission_seconds(g, None) == (11.0, 9.0)  # all side by side, each on its own devices
    assert timeline.submission_seconds(g, 2) == (10 + 6 + 1, 9 + 5 + 0)
    g["busy_seconds"] = [7.0, 6.0, 1.0, 0.5]  # the first layer keeps a shared GPU busy for 13 s
    assert timeline.submission_seconds(g, 2) == (10 + 6 + 1, 9 + 5 + 0)
    need, train = timeline.submission_seconds(g, 2, shared_gpu=True)
    assert need == 13 + 6 + 1 and train == pytest.approx(9 * 13 / 10 + 5)


def test_packing_on_the_paper_config(capsys, paper_per_run, tmp_path_factory):
    """paper.yaml on an H100, one run per job: the small models' groups go 8 to a submission
    that holds one GPU, as Snakemake forms them (dag: the SLURM profile's group-components); the
    figures without packing are those of the DAG with packing.jobs_per_gpu 1 (each model group
    a submission); with packing, fewer submissions and GPU-hours."""
    from sparselen.ppc.runs import task_schemes, task_seeds

    per_run, paper_jobs = paper_per_run
    gpu, cpu = profiles.resolve("h100", 0.4, None)
    t = tables.report(load(per_run), paper_jobs, gpu, cpu)
    assert t["jobs_per_gpu"] == 8
    df, subs = t["jobs"], t["submissions"]
    packed = df[df["group"] == timeline.PACKED_GROUP]
    assert set(packed["slice"]) == {"parity", "ppc", "theory"}
    runs = packed.assign(run=packed["slice"] + packed["job"]).groupby("submission")["run"].nunique()
    cfg = load(per_run)
    ppc_runs = sum(len(task_schemes(cfg["ppc"], t)) * len(task_seeds(cfg["ppc"], t)) for t in cfg["ppc"]["tasks"])
    gpt_runs = (df["rule"] == "theory_run_gpt").sum()
    assert runs.max() == 8 and runs.sum() == (df["rule"] == "parity_train").sum() + ppc_runs + gpt_runs

    overlay = tmp_path_factory.mktemp("unpacked") / "unpacked.yaml"
    overlay.write_text("packing: {jobs_per_gpu: 1}\n")
    files = (*per_run, overlay)
    unpacked_cfg = load(files)
    unpacked = tables.estimate(unpacked_cfg, plan.plan(unpacked_cfg, workflow_jobs(tmp_path_factory, files)), gpu, cpu)
    assert timeline.PACKED_GROUP not in set(unpacked["group"])
    gpu_rows = unpacked[unpacked["device"] == "gpu"]
    without, with_ = t["packing"].iloc[0], t["packing"].iloc[1]
    assert without["gpu_submissions"] == gpu_rows["submission"].nunique()
    assert without["submissions"] == unpacked["submission"].nunique()
    assert without["gpu_hours"] == pytest.approx(gpu_rows["device_seconds"].sum() / 3600)
    assert with_["gpu_submissions"] == without["gpu_submissions"] - runs.sum() + len(runs)
    # a packed submission holds one GPU for its wall time: under SLURM its model groups one by
    # one (SLURM_GROUP_AT_ONCE), so packing saves submissions there, not GPU-hours
    assert timeline.SLURM_GROUP_AT_ONCE == 1 and with_["gpu_hours"] == pytest.approx(without["gpu_hours"])
    sub = subs[subs["packed"]].iloc[0]
    assert sub["gpu_hours"] == pytest.approx(df[df["submission"] == sub["submission"]]["seconds"].sum() / 3600)
    out = capsys.readouterr().out
    assert "Assumptions:" in out and "Packing: 8 model groups" in out and "with packing (what the workflow submits)" in out


def test_sfa_runs_are_priced_on_their_threads(paper_jobs, smoke_dag):
    """An SFA run takes theory.sfa_threads threads (unset: the top-level threads, 1 by default):
    its FLOPs and activation passes run the CPU profile's speed-up faster on them, its per-step
    overheads and start-up do not; a GPU's host threads speed nothing up."""
    sfa = [j for j in paper_jobs if j.dag.rule == "theory_run_sfa"]
    threads = load(PAPER)["theory"]["sfa_threads"]
    assert threads > 1 and {j.dag.threads for j in sfa} == {j.work.threads for j in sfa} == {threads}
    assert {j.threads for j in smoke_dag if per_run_rule(j.rule) == "theory_run_sfa"} == {1}
    cpu = profiles.CPU_DEFAULT
    work = max(sfa, key=lambda j: j.work.flops).work
    fixed = profiles.seconds(replace(work, terms=[replace(t, flops=0.0) for t in work.terms], units={}), cpu)
    alone, spread = (profiles.seconds(replace(work, threads=n), cpu)["seconds"] - fixed["seconds"] for n in (1, threads))
    assert cpu.speedup(1) == 1 and alone / spread == pytest.approx(cpu.speedup(threads))
    assert cpu.speedup(threads) == 1 + (threads - 1) * cpu.thread_efficiency > 1
    assert profiles.gpu_profile("h100").speedup(threads) == 1


def test_an_sfa_stack_is_priced_as_its_runs_one_after_another(paper_jobs):
    """theory.sfa_stack: a job of S SFA runs takes S runs' time less S - 1 start-ups and one
    run's memory (its runs train in turn, not as one model); a training stack of a slice that
    batches its runs is priced as one model (S x a run's training step in memory)."""
    from types import SimpleNamespace

    from sparselen.estimate import stacks

    run = replace(next(j for j in paper_jobs if j.dag.rule == "theory_run_sfa").work, threads=1)
    sfa = SimpleNamespace(rule="theory_run_sfa_stack0", slice="theory", params=SimpleNamespace(stack_seeds=[0, 1, 2]))
    three = stacks.price(sfa, run)
    cpu = profiles.CPU_DEFAULT
    alone = profiles.seconds(run, cpu)["seconds"]
    assert three.runs == 3 and three.flops == pytest.approx(3 * run.flops)
    assert profiles.seconds(three, cpu)["seconds"] == pytest.approx(3 * alone - 2 * cpu.job_s)
    assert three.memory == run.memory
    gpt = next(j for j in paper_jobs if j.dag.rule.startswith("theory_run_gpt")).run
    batched = stacks.price(SimpleNamespace(**{**vars(sfa), "rule": "theory_run_gpt_stack0"}), gpt)
    assert batched.memory["gpu"].bytes == pytest.approx(memory.stacked(gpt.memory["gpu"].bytes, 3, "gpu"))


def test_profiles():
    h100 = profiles.gpu_profile("H100")
    assert h100.peak_flops == pytest.approx(989.4e12) and "datasheet" in h100.source
    assert profiles.gpu_profile("a100", utilization=0.5).rate(768) == pytest.approx(156e12)
    with pytest.raises(ValueError, match="unknown GPU"):
        profiles.gpu_profile("tpu")
    p = profiles.profile_from_throughput(model={"n_layer": 2, "d_model": 64, "d_ff": 256, "vocab_size": 6},
                                    seq_len=36, tokens_per_s=30000.0)
    w = flops.Work().add("train", 1, 3 * flops.Shape(2, 64, 256, 6).forward(1, 36), flops.Shape(2, 64, 256, 6))
    fixed = p.job_s + p.units["model_job"]  # start-up and the trainer around the steps
    assert profiles.seconds(w, p)["seconds"] - fixed == pytest.approx(36 / 30000)


def test_paper_config_on_h100(capsys, paper_jobs):
    gpu, cpu = profiles.resolve("h100", 0.4, None)
    t = tables.report(load(PAPER), paper_jobs, gpu, cpu)
    jobs = t["jobs"]
    gpu_h = jobs.loc[jobs["device"] == "gpu", "seconds"].sum() / 3600
    assert 30 < gpu_h < 1000, gpu_h  # tens of GPU-hours, not 228,000
    out = capsys.readouterr().out
    # paper.yaml's runtimes are what its estimate asks for: no submission exceeds its limit
    assert "language_train" in out and "exceed their SLURM time limit" not in out
    # every GPU job's predicted peak memory is shown and fits an 80 GB H100 with room to spare
    assert "max_mem_gib" in out and "72.0 GiB usable (90% of 80.0 GiB)" in out
    # the wall clock waits for the DAG: never under its critical chain (a job of the longest path:
    # the longest SFA runs, or tokens -> the long-context training -> an analysis part) nor the
    # GPU-hours over the GPUs; more GPUs never take longer
    clock = t["clock"]
    chain = [rule for task in clock["chain"] for rule in timeline.rules_of(jobs, task, local=False).split("+")]
    assert any(r.startswith(("theory_run_sfa", "language_analyze")) for r in chain), chain
    assert clock["wall_h"][8] >= max(clock["chain_h"], gpu_h / 8) - 1e-9 and clock["wall_h"][64] <= clock["wall_h"][8]
    # a day on one node of 8 GPUs at the cap of its rounds (PPC 142 seeds a task, parity 277 a K_train):
    # no night, since every round of every claim is priced here (the expected hours: the rounds' table)
    assert clock["wall_h"][8] <= 18, clock["wall_h"]
    line = re.search(r"Wall clock .*: 8 GPUs: (\d+):(\d\d) \(at least \d+:\d\d\); 64 GPUs: \d+:\d\d", out)
    assert line and int(line[1]) + int(line[2]) / 60 == pytest.approx(clock["wall_h"][8], abs=1 / 60), out[-600:]
    # the README's runbook states the figures this estimate prints
    total = dict((d, h) for h, d in re.findall(r"(\d+:\d\d) (CPU|GPU)-hours", out.split("\nTotal: ")[1].split("\n")[0]))
    runbook = (ROOT / "README.md").read_text().split("## Paper scale on GPUs")[1]
    stated = f"{total['GPU']} GPU-hours and {total['CPU']} CPU-hours of jobs, {line[1]}:{line[2]} wall clock on 8 GPUs"
    assert stated in " ".join(runbook.split()), f"README.md's runbook should say: {stated}"
    assert re.search(r"Critical chain, \d+:\d\d ", out) and "nan" not in out
    on_gpu = jobs[jobs["device"] == "gpu"]
    assert on_gpu["memory_gib"].notna().all() and on_gpu["memory_gib"].max() < 0.6 * gpu.usable_bytes / memory.GiB
    assert set(on_gpu.loc[on_gpu["rule"] == "language_train", "memory_key"]) == {"language.micro_batch_tokens"}
    assert t["errors"] == []
    # every stack job's limit is its prediction here times resources.runtime_margin, under the
    # partition's maximum (sparselen.estimate.limits), computed when the workflow was read
    cfg, stacked = load(PAPER), jobs[jobs["runs"] > 1]
    # parity 5 K_train x 5 rounds of one stack, PPC 44 (task, run) x 4 rounds of one stack, each trained and
    # evaluated; the GPT's 9 cells
    assert len(stacked) == 411 and (stacked["runtime_min"] <= cfg["resources"]["max_runtime"]).all()
    assert stacked["runtime_min"].tolist() == [limits.limit_minutes(cfg, s) for s in stacked["seconds"]]
    assert (t["submissions"]["predicted_h"] <= t["submissions"]["limit_h"]).all()
    # the trained models' disk: 4 bytes per parameter of each model file and of each finished
    # run's checkpoint, the largest training jobs' checkpoints of 12 bytes in flight at the peak
    d = t["disk"].set_index("slice")
    assert d.loc["all", "runs"] == stacked.loc[stacked["parameters"] > 0, "runs"].sum() + 9  # 9 language runs
    ppc = jobs[(jobs["rule"] == "ppc_train")]
    assert d.loc["ppc", "finished_gib"] == pytest.approx(8 * (ppc["runs"] * ppc["parameters"]).sum() / memory.GiB)
    assert 800 < d.loc["ppc", "finished_gib"] < d.loc["ppc", "peak_gib"] < 1000 and d.loc["all", "peak_gib"] < 1300
    # train.steps of 262,144 tokens through a 12-layer width-768 model: ~3e18 FLOPs per model
    lt, steps = jobs[jobs["rule"] == "language_train"], load(PAPER)["language"]["train"]["steps"]
    assert lt["flops"].iloc[0] == pytest.approx(6 * 85e6 * steps * 262144 * 1.2, rel=0.3)
    assert set(jobs.loc[jobs["rule"] == "theory_run_sfa", "device"]) == {"cpu"}  # --device cpu in the rule


def test_a_language_model_on_several_gpus(capsys, paper_dag, paper_jobs):
    """language.parallel: 8 GPUs (4 per node x 2 nodes) cut a training's wall time by 8 x the
    assumed efficiency, cost about the same GPU-hours, and change no other job."""
    gpu, cpu = profiles.resolve("h100", 0.4, None)
    cfg = load(PAPER)
    cfg["language"]["micro_batch_tokens"] = 0  # one pass per step on every device: the same overheads
    one = tables.estimate(cfg, plan.plan(cfg, paper_dag), gpu, cpu)
    cfg["language"]["parallel"] = {"processes": 4, "nodes": 2, "strategy": "auto"}
    jobs = plan.plan(cfg, paper_dag)
    eight = tables.estimate(cfg, jobs, gpu, cpu, dp_efficiency=0.8)
    train = one["rule"] == "language_train"
    assert (eight.loc[train, "devices"] == 8).all() and (eight.loc[~train, "devices"] == 1).all()
    start = gpu.job_s + gpu.compile_s  # start-up and compilation, paid by every device
    assert ((eight.loc[train, "seconds"] - start) * 8 * 0.8).to_numpy() == pytest.approx(
        (one.loc[train, "seconds"] - start).to_numpy())
    # GPU-hours: the one-device work over the efficiency, plus every device's start-up
    assert eight.loc[train, "device_seconds"].to_numpy() == pytest.approx(
        ((one.loc[train, "seconds"] - start) / 0.8 + 8 * start).to_numpy())
    assert eight.loc[~train, "seconds"].to_numpy() == pytest.approx(one.loc[~train, "seconds"].to_numpy())
    tables.report(cfg, jobs, gpu, cpu, dp_efficiency=0.8)
    assert "n devices run n x 0.8 as fast as one" in capsys.readouterr().out


def test_quick_calibration_and_command(tmp_path, capsys, monkeypatch):
    p = calibrate.calibrate(quick=True)
    assert p.peak_flops > 1e8 and p.job_s > 0.1 and p.step_s >= 0
    prof = tmp_path / "cpu.json"
    prof.write_text(p.to_json())
    assert profiles.load_profile(prof) == p
    from sparselen.cli import main

    monkeypatch.chdir(tmp_path)  # the DAG's .snakemake/, as `snakemake -n` here
    main(["estimate", "--configfile", *map(str, SMOKE), "--cpu-profile", str(prof), "--jobs-csv",
          str(tmp_path / "jobs.csv")])
    out = capsys.readouterr().out
    assert "Per slice" in out and "parity_train" in out and (tmp_path / "jobs.csv").exists()


def test_a_local_runs_estimate_reads_without_the_docs(monkeypatch, capsys, smoke_dag):
    """A CPU run: durations as h:mm, no empty (nan) cells or GPU columns, no SLURM tables, the
    wall clock on this machine's cores, and a last line saying what to run."""
    from sparselen.cli import main

    monkeypatch.setattr(dag, "workflow_jobs", lambda files: smoke_dag)
    assert main(["estimate", "--configfile", *map(str, SMOKE), "--cores", "3", "--cpu-profile", "builtin"]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out and "mfu" not in out and "gpu_busy" not in out
    assert "Submissions and GPU-hours" not in out and "SLURM" not in out and "Packing" not in out
    section = out.split("Per job type")[1].split("\nDisk of the trained models")[0]
    table = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
             if line.startswith("|") and not line.startswith("|:")]
    columns = dict(zip(table[0], zip(*table[1:])))
    assert "device" not in columns and "devices" not in columns
    assert all(set(cells) != {"-"} for cells in columns.values())  # no column that says nothing
    for name in ("h:mm", "max_job"):
        assert all(re.fullmatch(r"<?\d+:\d\d", c) for c in columns[name]), columns[name]
    clock = re.search(r"Wall clock on this machine's 3 cores .*: (\d+:\d\d) \(at least", out)
    assert clock, out[-800:]
    assert out.splitlines()[-1] == (f'next: make run SNAKEMAKE_ARGS="--configfile {" ".join(map(str, SMOKE))}" '
                                    f"(about {clock[1]} on this machine's 3 cores)")


def test_durations_read_as_hours_and_minutes():
    from sparselen.estimate.display import hm

    assert [hm(h) for h in (0, 0.000897, 1 / 60, 1.5, 17.14, 123.0)] == ["0:00", "<0:01", "0:01", "1:30", "17:08",
                                                                       "123:00"]
    assert hm(math.nan) == "-" and hm(math.inf) == "never"


def test_compare_sets_predictions_against_measured_wall_time(tmp_path, smoke_jobs):
    """Snakemake samples a job's CPU time at most every 30 s, so the comparison reads wall time."""
    jobs = tables.estimate(load(SMOKE), smoke_jobs, None, profiles.CPU_DEFAULT, 0)
    train = jobs[jobs["rule"] == "parity_train"].iloc[0]
    path = tmp_path / f"{train['bench']}.tsv"
    path.parent.mkdir(parents=True)
    path.write_text("s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
                    "40.0\t0:00:40\t100\t1\t1\t1\t0\t0\t90\t15.0\n")
    cmp = tables.compare(jobs, tmp_path)
    assert len(cmp) == 1 and cmp["measured_s"].iloc[0] == 40.0
    assert cmp["ratio"].iloc[0] == pytest.approx(train["seconds"] / 40.0)
    by_slice, _ = tables.comparison_tables(cmp)
    words = tables.comparison_words(by_slice, "cpu")
    ratio = train["seconds"] / 40.0
    assert f"the prediction was {ratio:.2f} of the measured wall time" in words
    assert ("within 30%" in words) == (1 / 1.3 <= ratio <= 1.3) and ("--cpu-profile auto" in words) != (
        "within 30%" in words)


def test_an_invalid_config_is_named_without_a_traceback(tmp_path, capsys):
    from sparselen.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("language:\n  eval: {windows: 1}\n")
    assert main(["estimate", "--configfile", *map(str, PAPER), str(bad), "--cpu-profile", "builtin"]) == 2
    err = capsys.readouterr().err
    assert f"sparselen estimate ({PAPER[0]} {bad}): Error validating config file" in err
    assert "windows" in err and "Traceback" not in err


def test_the_one_pass_language_batch_is_refused_on_an_h100(tmp_path, monkeypatch, capsys, paper_dag):
    """paper.yaml's micro-batches pass (exit 0); an overlay putting a step's 262,144 tokens
    through one pass exits 1 after the tables, naming the jobs, the predicted and usable memory
    and the key that fixes it. Its seeds in one round (the cap's DAG): rounds price the same
    jobs a plan per round, minutes that check nothing of the language batch."""
    from sparselen.cli import main

    monkeypatch.setattr(dag, "workflow_jobs", lambda files: paper_dag)  # micro-batches are no rule params
    unrounded = tmp_path / "unrounded.yaml"
    unrounded.write_text("parity: {rounds: null}\nppc: {rounds: null}\n")
    paper = [*map(str, PAPER), str(unrounded)]
    assert main(["estimate", "--configfile", *paper, "--gpu", "h100", "--cpu-profile", "builtin"]) == 0
    captured = capsys.readouterr()
    assert "ERROR" not in captured.err
    # a datasheet profile: the pilot first, then the estimate with its profile, then SLURM
    assert re.fullmatch(r"next: on one GPU of the cluster, sparselen pilot --configfile \S+paper\.yaml .*then "
                        r"sparselen estimate --configfile .+ --gpu pilot_profile\.json; then snakemake --profile "
                        r"workflow/profiles/slurm --configfile .+ \(docs/cluster\.md\)",
                        captured.out.splitlines()[-1]), captured.out.splitlines()[-1]
    one_pass = tmp_path / "one-pass.yaml"
    one_pass.write_text("language:\n  micro_batch_tokens: 262144\n")
    assert main(["estimate", "--configfile", *paper, str(one_pass), "--gpu", "h100", "--cpu-profile", "builtin"]) == 1
    captured = capsys.readouterr()
    assert "Per job type" in captured.out and captured.out.splitlines()[-1].startswith("next: fix what the ERROR")
    errors = [line for line in captured.err.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 2, errors  # one per context: 128 x 2048 and 512 x 512 tokens
    assert re.fullmatch(r"ERROR: language_train context=2048 run=rope seed=0 and 2 more: predicted peak "
                        r"1\d\d\.\d GiB \(training step of 128 x 2048 tokens per pass\) > 72\.0 GiB usable on the "
                        r"GPU: lower language\.micro_batch_tokens \(now 262144; docs/gpu\.md\)", errors[0]), errors[0]


def test_a_job_that_no_attempt_finishes_is_an_error(paper_jobs):
    """An SFA run checkpoints checkpoint_minutes apart: at a 10-minute limit with checkpoints an
    hour apart none of its 3 attempts (10, 20, 30 min) reaches one, so each starts over and it
    never finishes; at four fifths of the longest run the submissions that hold one (alone or
    with another, in turn) resume in attempt 2 (a warning); paper.yaml's runtimes pass on an
    H100."""
    cfg, (gpu, cpu) = load(PAPER), profiles.resolve("h100", 0.4, None)
    quiet = {"out": lambda *a: None, "err": lambda *a: None}
    t = tables.report(cfg, paper_jobs, gpu, cpu, **quiet)
    assert t["errors"] == []
    longest_min = t["jobs"].loc[t["jobs"]["rule"] == "theory_run_sfa", "seconds"].max() / 60

    def sfa_limit(minutes):
        cfg["resources"]["sfa_runtime"] = minutes
        return [replace(j, dag=replace(j.dag, runtime_min=minutes, limit_min=minutes))
                if j.dag.rule == "theory_run_sfa" else j for j in paper_jobs]

    cfg["checkpoint_minutes"] = 60
    errors = tables.report(cfg, sfa_limit(10), gpu, cpu, **quiet)["errors"]
    assert errors and all(e.startswith("cpu_train:theory/") for e in errors)  # the submissions of the longer runs
    assert re.fullmatch(r"cpu_train:theory/distribution=\w+ k=\d+ seed=\d+ \(theory_run_sfa\): predicted \d+:\d\d > limit 0:10, and 3 attempts "
                        r"\(up to 0:30\) each start over \(none reaches a checkpoint\): it never finishes; checkpoint "
                        r"more often \(checkpoint_minutes, train\.checkpoint_every\) or raise resources\.sfa_runtime "
                        r"from 10 to at least \d+ min", errors[0]), errors[0]
    cfg["checkpoint_minutes"] = 10
    lines = []
    limit = math.ceil(0.8 * longest_min / 10) * 10
    assert tables.report(cfg, sfa_limit(limit), gpu, cpu, out=lines.append, err=lambda *a: None)["errors"] == []
    resumed = [line for line in lines if line.lstrip().startswith("cpu_train")]
    assert resumed and all("finishes in attempt 2 (1 resubmission(s), resuming from checkpoints)" in line
                           for line in resumed), resumed


def test_tokenization_over_its_limit_resumes_from_its_chunks(capsys, paper_jobs):
    """paper.yaml's tokenization encodes in resumable chunks: at 10 minutes (the data
    submission's limit then 3 x 10 min) an attempt that is killed loses at most a chunk and the
    next goes on: a warning, not an error."""
    cfg, (gpu, cpu) = load(PAPER), profiles.resolve("h100", 0.4, None)
    data = {j.dag.submission for j in paper_jobs if j.dag.rule == "language_tokens"}
    cfg["resources"]["tokens_runtime"] = 10
    short = [replace(j, dag=replace(j.dag, runtime_min=10 if j.dag.rule == "language_tokens" else j.dag.runtime_min,
                                    limit_min=30)) if j.dag.submission in data else j for j in paper_jobs]
    t = tables.report(cfg, short, gpu, cpu)
    out = capsys.readouterr().out
    assert t["errors"] == [] and "exceed their SLURM time limit" in out
    assert "language_tokens" in out and "resuming from checkpoints" in out


def test_parameters_are_counted_without_allocating():
    from sparselen.nn.architectures import build_model, model_config

    for cfg in (ModelConfig(vocab_size=40, n_layer=2, n_head=2, d_model=32, d_ff=48, scheme="ppc",
                            max_position_id=30, id_embedding=True),
                model_config({"architecture": "olmo", "variant": "olmo2", "n_layer": 2, "n_head": 2, "d_model": 32,
                              "d_ff": 48, "tie_embeddings": True}, 40)):
        assert memory.parameters(cfg) == build_model(cfg).num_parameters()


def test_the_tracker_counts_live_storages():
    """A view costs nothing; a storage counts until its last tensor dies."""
    from sparselen.estimate.tracker import PeakTensorMemory

    with PeakTensorMemory() as t:
        x = torch.ones(1000)
        y = x[10:]
        del x
        assert t.now == 4000
        z = y * 2
        assert t.now == 4000 + 990 * 4
        del y, z
        w = torch.ones(10)
    assert t.peak == 4000 + 990 * 4 and t.now == 40 and w.sum() == 10


@pytest.mark.parametrize("model", [{"n_layer": 2, "n_head": 4, "d_model": 64, "d_ff": 256, "rotary_pct": 0.25},
                                   {"architecture": "olmo", "variant": "kempner_c4", "n_layer": 2, "n_head": 4,
                                    "d_model": 64, "d_ff": 256}])
def test_the_memory_model_predicts_a_measured_training_step(model):
    """The trainer's step (its backward and AdamW), in one pass and in micro-steps, peaks
    within 30% of the prediction on the CPU (measured: live storage bytes)."""
    from sparselen.estimate.tracker import PeakTensorMemory
    from sparselen.nn.architectures import build_model, model_config
    from sparselen.nn.batch import Batch
    from sparselen.training.train import OptimConfig, TrainConfig, backward, make_optimizer

    cfg = model_config(model, 1024, scheme="rope")
    batch = Batch(*torch.randint(0, 1024, (2, 8, 128), generator=torch.Generator().manual_seed(0)))
    peaks = {}
    for micro in (0, 2):
        net = build_model(cfg)
        opt = make_optimizer(net, OptimConfig())
        with PeakTensorMemory() as t:
            t.track(*net.parameters(), *net.buffers())
            for _ in range(2):
                opt.zero_grad(set_to_none=True)
                backward(net, net, batch, TrainConfig(steps=2, batch_size=8, micro_batch=micro), torch.device("cpu"))
                opt.step()
        predicted = memory.train_step(cfg, micro or 8, 128, "cpu")
        assert 0.7 < predicted / t.peak < 1.3, (micro, predicted / t.peak)
        peaks[micro] = t.peak
    assert peaks[2] < 0.5 * peaks[0]


def test_a_submission_over_its_limit_is_a_warning_when_it_resumes(capsys, paper_jobs):
    """The language submissions at 1 h instead of paper.yaml's language_runtime: they exceed it, and resume from checkpoints (the trainings' and the
    analysis' per-token progress) in a later attempt: a warning, not an error."""
    from dataclasses import replace

    gpu, cpu = profiles.resolve("h100", 0.4, None)
    short = [plan.Job(replace(j.dag, limit_min=60), j.work) if j.dag.slice == "language" else j for j in paper_jobs]
    t = tables.report(load(PAPER), short, gpu, cpu)
    out = capsys.readouterr().out
    assert "exceed their SLURM time limit" in out and t["errors"] == []
    assert "language_analyze" in out and "resuming from checkpoints" in out and "no checkpoints" not in out


STACKED = "gpus_per_job: 1\nparity: {seeds: [0, 1, 2, 3, 4, 5, 6], stack: %d}\n"  # chunks 0-2, 3-5, 6 at 3


@pytest.fixture(scope="module")
def parity_stacks(tmp_path_factory):
    """The smoke config on a GPU with seven parity seeds, per run and in stacks of 3: per stack
    size, (config files, priced jobs)."""
    out = {}
    for size in (1, 3):
        overlay = tmp_path_factory.mktemp("stacks") / "stacks.yaml"
        overlay.write_text(STACKED % size)
        files = (*SMOKE, overlay)
        out[size] = files, plan.plan(load(files), workflow_jobs(tmp_path_factory, files))
    return out


def test_a_stack_job_is_priced_as_its_runs_in_one_job(capsys, parity_stacks):
    """parity.stack 3 on an H100: each stack rule's job is priced as its chunk's runs in one job
    (start-up and compilation once, more than one run, less than its runs alone, at least their
    FLOPs, S x a run's training step), an evaluation stack as its runs in one stacked model after
    one start-up (each run's model file, the FLOPs of all three, one pass per batch for all: the
    passes of the batches that share a pass's tokens among three runs, S x a run's pass in
    memory), and the tables show the runs per job; the estimate offers the largest stack that
    fits, a cell's seven."""
    gpu, cpu = profiles.resolve("h100", 0.4, None)
    files, jobs = parity_stacks[3]
    _, per_run = parity_stacks[1]
    cells = len(load(files)["parity"]["K_train"])
    parity = [j for j in jobs if j.dag.rule.startswith("parity_train")]
    assert {j.dag.rule for j in parity} == {f"parity_train_stack{i}" for i in range(3)}
    assert sorted(j.work.runs for j in parity) == [1] * cells + [3] * 2 * cells
    assert {j.dag.wildcards.seeds for j in parity} == {"0-2", "3-5", "6"}
    evaluations = [j for j in jobs if j.dag.rule.startswith("parity_evaluate")]
    assert sorted(j.work.runs for j in evaluations) == [1] * cells + [3] * 2 * cells
    alone = next(j for j in per_run if j.dag.rule == "parity_evaluate")
    three = next(j for j in evaluations if j.work.runs == 3)
    e1, e3 = profiles.seconds(alone.work, gpu)["seconds"], profiles.seconds(three.work, gpu)["seconds"]
    as_run = plan.cost_function("parity_evaluate")(three.dag, load(files))  # one run of the stack: its passes
    calls = {"alone": sum(t.calls for t in alone.work.terms), "three": sum(t.calls for t in three.work.terms)}
    assert calls["three"] == sum(t.calls for t in as_run.terms) and calls["alone"] <= calls["three"] < 3 * calls["alone"]
    per_call = gpu.call_s + alone.work.terms[0].n_layer * gpu.call_layer_s
    assert three.work.flops == pytest.approx(3 * alone.work.flops)
    assert e3 == pytest.approx(3 * e1 - 2 * gpu.job_s - (3 * calls["alone"] - calls["three"]) * per_call)
    assert three.work.memory["gpu"].bytes == pytest.approx(memory.stacked(as_run.memory["gpu"].bytes, 3, "gpu"))
    one = next(j for j in per_run if j.dag.rule == "parity_train")
    stack = next(j for j in parity if j.work.runs == 3)
    t1, t3 = profiles.seconds(one.work, gpu), profiles.seconds(stack.work, gpu)
    assert t3["restart_seconds"] == t1["restart_seconds"] == gpu.job_s + gpu.compile_s
    assert t1["seconds"] < t3["seconds"] < 3 * t1["seconds"]
    (train,) = [t for t in stack.work.terms if t.kind == "train"]
    longest = 3 * train.shape.forward(train.rows, max(train.lengths)) * train.calls
    assert 3 * one.work.flops < stack.work.flops < 3 * longest
    assert stack.work.memory["gpu"].bytes == pytest.approx(memory.stacked(one.work.memory["gpu"].bytes, 3, "gpu"))
    assert stack.work.memory["gpu"].key == "parity.stack"

    t = tables.report(load(files), jobs, gpu, cpu)
    out = capsys.readouterr().out
    rules = t["rules"].set_index("rule")
    assert rules.loc["parity_train", "jobs"] == 3 * cells and rules.loc["parity_train", "stack"] == 3
    assert rules.loc["parity_train", "runs"] == 7 * cells
    assert re.search(rf"\| parity\s+\| parity_train\s+\| gpu\s+\|\s+{3 * cells} \|\s+{7 * cells} \|\s+3 \|", out)
    assert "Stacks (parity.stack 3; sparselen.training.stacked)" in out and t["errors"] == []
    subs = t["submissions"].set_index("submission")
    assert not subs.loc[stack.dag.submission, "packed"]
    assert t["best_stacks"] == {"parity": 7}
    assert "parity.stack: 7 (now 3)" in out and re.search(r"With them: [\d:]+ GPU-hours of these slices' training", out)
    hours = t["jobs"].query("rule == 'parity_train'")["seconds"].sum() / 3600
    assert stack_size.training_hours(jobs, {"parity": 3}, gpu) == pytest.approx(hours)


def test_a_stack_jobs_limit_is_a_multiple_of_its_prediction(tmp_path_factory):
    """Stacks of 3 of the smoke config's parity runs on a GPU, at a margin of 100 and a
    partition's maximum of 100 minutes: the DAG's time limit of each stack job (its chunk of one
    seed too) is 100 x the estimate's prediction of it on resources.runtime_gpu, at least 30
    and at most 100 minutes; no job and no group's submission (a training, then its
    evaluations) asks for more than 100 minutes in any attempt."""
    overlay = tmp_path_factory.mktemp("limits") / "limits.yaml"
    overlay.write_text(STACKED % 3 + "resources: {runtime_margin: 100, max_runtime: 100}\n")
    files = (*SMOKE, overlay)
    cfg = load(files)
    jobs = plan.plan(cfg, workflow_jobs(tmp_path_factory, files))
    gpu, cpu = profiles.resolve("h100", profiles.UTILIZATION, None, compile=cfg["compile"])
    df = tables.estimate(cfg, jobs, gpu, cpu)
    stacked = df[df["job"].str.contains("seeds=") & (df["slice"] == "parity")]
    assert len(stacked) == 12 and set(stacked["runs"]) == {1, 3}
    minutes = [math.ceil(100 * s / 60) for s in stacked["seconds"]]
    assert stacked["runtime_min"].tolist() == [min(100, max(limits.MIN_MINUTES, m)) for m in minutes]
    assert len(set(stacked["runtime_min"])) > 1 and {m for m in minutes if 30 < m < 100}
    assert df["runtime_min"].max() <= 100
    model = df[df["group"].isin(["model", timeline.PACKED_GROUP])]
    assert len(model) and model["limit_min"].max() == 100
    for attempt in (2, 3):  # the language training leaves its loss by position's minutes
        assert limits.attempt_minutes(cfg, 70, attempt, reserve=30) + min(30 * attempt, 100) <= 100


def test_a_stack_over_the_gpus_memory_exits_1_naming_its_key(tmp_path, monkeypatch, capsys, parity_stacks):
    """A GPU that holds two of the parity run's training steps, not three: the stacks of 3 are
    an error (exit 1) naming the stack and parity.stack; the stack of one and the evaluations
    fit; the estimate offers the largest stack within 60% of the usable memory (stack_size.SHARE),
    one run, and warns that 3 are over it. (The other slices' jobs, larger, are errors of their
    own.)"""
    import json

    from sparselen.cli import main
    from sparselen.estimate.profiles import USABLE

    files, jobs = parity_stacks[3]
    one = next(j for j in parity_stacks[1][1] if j.dag.rule == "parity_train").work.memory["gpu"].bytes
    usable = (memory.stacked(one, 2, "gpu") + memory.stacked(one, 3, "gpu")) / 2
    small = tmp_path / "small.json"
    small.write_text(json.dumps({"name": "small", "device": "gpu", "peak_flops": 1e14, "memory_bytes": usable / USABLE}))
    monkeypatch.setattr(dag, "workflow_jobs", lambda files: [j.dag for j in jobs])
    monkeypatch.setattr(plan, "plan", lambda config, dag_jobs: jobs)
    assert main(["estimate", "--configfile", *map(str, files), "--gpu", str(small), "--cpu-profile", "builtin"]) == 1
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.startswith("ERROR: parity")]
    assert len(errors) == 1, errors
    assert re.fullmatch(r"ERROR: parity_train K_train=\d+ seeds=(0-2|3-5) and 3 more: predicted peak [\d.]+ GiB "
                        r"\(training step of \d+ x \d+ tokens for each of 3 runs\) > [\d.]+ GiB usable on the GPU: "
                        r"lower parity\.stack \(now 3; docs/gpu\.md\)", errors[0]), errors[0]
    assert memory.stacked(one, 2, "gpu") > stack_size.SHARE * usable and "parity.stack: 1 (now 3)" in captured.out
    assert re.search(r"WARNING: parity\.stack 3: predicted peak [\d.]+ GiB, over 60% of the GPU's usable", captured.out)
    size, peak = stack_size.largest_fit(jobs, usable)["parity"]
    assert size == 2 and peak.bytes <= usable < memory.stacked(one, 3, "gpu")


def test_the_memory_model_predicts_a_stacks_training_step():
    """``train_stack``'s peak on the CPU, from its first model to its last file, within 30% of
    S x a run's training step at S = 1 and 4 (benchmarks/stacked_memory.py measures more)."""
    from sparselen.estimate.tracker import PeakTensorMemory
    from sparselen.interface.job import Runtime
    from sparselen.interface.run import Run, RunFiles
    from sparselen.nn.batch import Batch
    from sparselen.training.stacked import train_stack
    from sparselen.training.train import TrainConfig

    cfg = ModelConfig(vocab_size=64, n_layer=2, n_head=4, d_model=64, d_ff=256, scheme="rope")

    def batches(seed):
        return lambda step: Batch(*torch.randint(0, 64, (2, 16, 48), generator=torch.Generator().manual_seed(seed)))

    peaks = {}
    for stack in (1, 4):
        import tempfile
        from pathlib import Path

        with tempfile.TemporaryDirectory() as tmp, PeakTensorMemory() as t:
            runs = [Run({"s": s}, {"seed": s}, RunFiles(*(Path(tmp) / f"{s}.{e}" for e in ("pt", "csv", "json", "ckpt"))),
                        Runtime("cpu", False, 1)) for s in range(stack)]
            train_stack(cfg, [TrainConfig(seed=s, steps=3, batch_size=16, log_every=1) for s in range(stack)],
                        [batches(s) for s in range(stack)], runs)
        predicted = memory.train_step(cfg, 16, 48, "cpu", stack=stack)
        assert 0.7 < predicted / t.peak < 1.3, (stack, predicted / t.peak)
        peaks[stack] = t.peak
    assert peaks[4] > 3 * peaks[1]


def test_a_gpu_stack_draws_its_batches_beside_the_device_and_a_cpu_stack_after():
    """A stack's training step on a GPU takes the longer of its device time and its runs'
    batches drawn on the host (a worker process draws them: sparselen.training.stacked.step_batches); on
    a CPU the stack draws them itself, so each further run's batch adds to the step."""
    from sparselen.estimate.profiles import step_seconds
    from sparselen.nn.flops import Shape, Term

    gpu, cpu = profiles.resolve("h100", 0.4, None)
    shape = Shape.of({"n_layer": 2, "n_head": 2, "d_model": 64, "d_ff": 128}, 8)
    flop = 3 * shape.forward(8, 20)
    one = Term("train", 1, flop, 2, 64, rows=8, lengths=(20,), shape=shape)
    device = step_seconds(one, gpu)
    for runs in (2, 64, 4096):
        term = replace(one, flops=runs * flop, runs=runs)
        device_s = device + (runs - 1) * flop / gpu.rate(64)
        assert step_seconds(term, gpu) == pytest.approx(max(device_s, runs * gpu.batch_s))
        assert step_seconds(term, cpu) == pytest.approx(
            step_seconds(replace(term, runs=1), cpu) + (runs - 1) * cpu.batch_s)
    assert step_seconds(replace(one, flops=4096 * flop, runs=4096), gpu) == pytest.approx(4096 * gpu.batch_s)


def test_a_stacks_optimizer_traffic_grows_linearly_with_its_runs():
    """Every training step streams ``OPTIMIZER_BYTES`` (54) per parameter and run (AdamW,
    per-run clipping, casts) at the GPU's datasheet memory bandwidth: a stack of S runs S times
    one run's, on top of overheads that do not grow with S. Parity's paper.yaml stack, 58 runs of
    18.9M parameters, streams 59 GB a step: about 17.7 ms on an H100 (3.35 TB/s). A CPU's
    profile prices none apart (its calibrated overheads hold it)."""
    from types import SimpleNamespace

    from sparselen.estimate import stacks
    from sparselen.estimate.profiles import GROUP_BYTES, OPTIMIZER_BYTES, optimizer_seconds, step_seconds
    from sparselen.parity import cost
    from sparselen.parity.task import VOCAB

    config = load(PAPER)
    p = config["parity"]
    run = cost.train(SimpleNamespace(params=SimpleNamespace(model=p["model"], scheme=p["scheme"], train=p["train"])),
                     config)
    assert run.parameters == memory.parameters(ModelConfig(vocab_size=len(VOCAB), scheme=p["scheme"], **p["model"]))
    assert run.parameters == pytest.approx(18.9e6, rel=2e-3)
    gpu, cpu = profiles.resolve("h100", 0.4, None)
    assert gpu.memory_bandwidth == 3.35e12 and not cpu.memory_bandwidth

    def term(stack, groups=1):
        grouped = replace(run, terms=[replace(t, length_groups=groups) for t in run.terms])
        return next(t for t in stacks.stack_work([grouped] * stack, "parity").terms if t.kind == "train")

    one = optimizer_seconds(term(1), gpu)
    assert one == pytest.approx(OPTIMIZER_BYTES * run.parameters / 3.35e12)
    for stack in (2, 17, 35, 58):
        t = term(stack)
        assert optimizer_seconds(t, gpu) == pytest.approx(stack * one)
        assert step_seconds(t, gpu) - step_seconds(replace(t, parameters=0), gpu) == pytest.approx(stack * one)
        assert optimizer_seconds(t, cpu) == 0 and step_seconds(t, cpu) == step_seconds(replace(t, parameters=0), cpu)
    assert optimizer_seconds(term(58), gpu) == pytest.approx(17.7e-3, rel=2e-3)
    # at S = 58, four times the step's flat overheads (2 ms + 0.32 ms per layer)
    assert optimizer_seconds(term(58), gpu) > 4 * (gpu.step_s + p["model"]["n_layer"] * gpu.step_layer_s)
    # in length groups (paper.yaml's parity.length_groups: 3) each run's weights are gathered and
    # its gradients scattered too: GROUP_BYTES more per parameter and run (a stack of one: none)
    assert p["length_groups"] == 3 and run.terms[0].length_groups == 3
    assert optimizer_seconds(term(58, 3), gpu) == pytest.approx(58 * one * (OPTIMIZER_BYTES + GROUP_BYTES) / OPTIMIZER_BYTES)
    assert GROUP_BYTES == 16 and optimizer_seconds(term(1, 3), gpu) == one


def test_a_stack_in_length_groups_is_priced_at_each_groups_longest():
    """``parity.length_groups``: a stack's runs sorted by drawn length and cut into contiguous
    groups, each padded to its own longest (``stacked.length_groups``). The estimate's expected
    FLOPs (each group's longest an order statistic of the S draws) agree with the mean of the
    trainer's own grouping over 4000 simulated steps within 1%; one group is the longest of S
    (priced as before, bit for bit); paper.yaml's parity stack of 58 pads 1.42x a run's FLOPs in
    one pass and 1.13x in three, and its step takes one pass per group."""
    import random

    from sparselen.estimate import stacks
    from sparselen.nn.flops import Shape, Term
    from sparselen.training.stacked import padded_lengths

    shape, lengths = Shape(6, 512, 2048, 6), tuple(range(21, 52, 2))
    term = Term("train", 1, 0.0, 6, 512, rows=64, lengths=lengths, shape=shape)
    flops = {T: 3 * shape.forward(64, T) for T in lengths}
    real = sum(flops.values()) / len(lengths)
    n = len(lengths)
    one_group = 58 * sum((((i + 1) / n) ** 58 - (i / n) ** 58) * 3 * shape.forward(64, T) for i, T in enumerate(lengths))
    assert stacks.padded_flops(term, 58) == stacks.padded_flops(term, 58, 1) == one_group
    rng = random.Random(0)
    for stack, groups in ((58, 1), (58, 3), (7, 3), (35, 4), (5, 9)):
        drawn = [[rng.choice(lengths) for _ in range(stack)] for _ in range(4000)]
        simulated = sum(sum(flops[T] for T in padded_lengths(d, groups)) for d in drawn) / len(drawn)
        assert stacks.padded_flops(term, stack, groups) == pytest.approx(simulated, rel=1e-2), (stack, groups)
    assert stacks.padded_flops(term, 5, 9) == pytest.approx(5 * real)  # a group per run: no padding
    assert stacks.padded_flops(term, 58) / (58 * real) == pytest.approx(1.418, abs=1e-3)
    assert stacks.padded_flops(term, 58, 3) / (58 * real) == pytest.approx(1.134, abs=1e-3)

    from types import SimpleNamespace

    from sparselen.parity import cost

    config = load(PAPER)
    p = config["parity"]
    run = cost.train(SimpleNamespace(params=SimpleNamespace(model=p["model"], scheme=p["scheme"], train=p["train"])),
                     config)
    (stacked,) = [t for t in stacks.stack_work([run] * 58, "parity").terms if t.kind == "train"]
    assert (stacked.length_groups, stacked.passes) == (3, 3)
    assert stacked.flops / (58 * run.flops) == pytest.approx(1.134, abs=2e-3)
    (one,) = [t for t in stacks.stack_work([run], "parity").terms if t.kind == "train"]
    assert (one.length_groups, one.passes, one.flops) == (1, 1, run.flops)


def test_the_last_token_batch_knob_prices_the_analysis_passes_and_names_itself(paper_dag):
    """``language.analysis_batch_size`` (a runtime knob): the analysis' and transfer's
    last-token passes at its batch (fewer calls, the same FLOPs), the selectors' passes at
    ``language.analysis.batch_size``; its pass's memory is named by the knob's key."""
    import copy

    config = load(PAPER)
    analyze = next(j for j in paper_dag if j.rule == "language_analyze")
    transfer = next(j for j in paper_dag if j.rule == "language_transfer")
    priced = {}
    for knob in (32, 512):
        c = copy.deepcopy(config)
        c["language"]["analysis_batch_size"] = knob
        priced[knob] = {j.rule: plan.cost_function(j.rule)(j, c) for j in (analyze, transfer)}
    for rule in ("language_analyze", "language_transfer"):
        small, large = priced[32][rule], priced[512][rule]
        assert large.flops == pytest.approx(small.flops)
        assert sum(t.calls for t in large.terms) < sum(t.calls for t in small.terms)
        keys = {key for _, key, _, _ in large.passes}
        assert "language.analysis_batch_size" in keys and "language.analysis.batch_size" in keys
    grad = [t for t in priced[512]["language_analyze"].terms if t.kind == "grad"]
    assert grad == [t for t in priced[32]["language_analyze"].terms if t.kind == "grad"]  # saliency keeps its rows


def test_the_readme_runbook_states_what_the_estimate_prints(paper_jobs):
    """The README's paper-scale runbook gives `sparselen estimate --configfile configs/paper.yaml
    --gpu h100 --gpus-available 8`'s GPU-hours, CPU-hours and wall clock, as the command prints
    them (the same profile and tables)."""
    cfg, printed = load(PAPER), []
    gpu, cpu = profiles.resolve("h100", 0.4, None, compile=bool(cfg.get("compile")))
    tables.report(cfg, paper_jobs, gpu, cpu, out=printed.append, err=printed.append, gpus_available=(8,))
    out = "\n".join(map(str, printed))
    total = re.search(r"Total: (\d+:\d\d) CPU-hours, (\d+:\d\d) GPU-hours", out)
    wall = re.search(r"Wall clock .*: 8 GPUs: (\d+:\d\d)", out)
    runbook = (ROOT / "README.md").read_text().split("## Paper scale on GPUs")[1].split("\n## ")[0]
    said = f"{total[2]} GPU-hours and {total[1]} CPU-hours of jobs, {wall[1]} wall clock on 8 GPUs"
    assert said in " ".join(runbook.split()), said
