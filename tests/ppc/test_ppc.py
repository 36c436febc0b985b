"""PPC machinery: KV-cached generation equals full recomputation for every scheme, ids are
fed back as the reconstruction says, the id embedding, config checks, and the workflow's
steps end to end (with a task's own model overrides)."""

import copy
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from conftest import validated

from sparselen.interface.config import load as load_config
from sparselen.interface.job import Job
from sparselen.jobs.dispatch import run
from sparselen.nn.batch import IGNORE
from sparselen.nn.model import GPTNeoX, ModelConfig
from sparselen.ppc import checks
from sparselen.ppc import jobs as ppc
from sparselen.ppc.evaluate import cell_scores, evaluate_cells
from sparselen.ppc.generate import generate
from sparselen.ppc.tasks import sampler_params, variable_assignment
from sparselen.runtime.rng import generator
from sparselen.training.train import load_model, loss_fn

SCHEMES = ("nope", "rope", "coupled", "ppc")


def tiny(scheme, vocab=20, id_embedding=None):
    torch.manual_seed(0)
    emb = scheme in ("coupled", "ppc") if id_embedding is None else id_embedding
    cfg = ModelConfig(vocab_size=vocab, n_layer=2, n_head=2, d_model=32, d_ff=64, scheme=scheme,
                      max_position_id=63, id_embedding=emb)
    return GPTNeoX(cfg).eval()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_cached_generation_equals_recomputation(scheme):
    model = tiny(scheme)
    g = generator("gen", 0)
    prompt = torch.randint(0, 20, (5, 9), generator=g)
    ids = torch.randint(0, 40, (5, 9), generator=g)
    oracle = torch.randint(0, 40, (5, 12), generator=g)
    a_tok, a_ids = generate(model, prompt, ids, 12, oracle_ids=oracle, use_cache=True)
    b_tok, b_ids = generate(model, prompt, ids, 12, oracle_ids=oracle, use_cache=False)
    assert a_tok.shape == (5, 12) and torch.equal(a_tok, b_tok)
    if scheme in ("coupled", "ppc"):
        assert torch.equal(a_ids, b_ids)
    else:
        assert a_ids is None
    if scheme == "coupled":
        assert torch.equal(a_ids, oracle)


def test_ppc_generation_feeds_back_predicted_ids():
    """Step by step by hand: the token and the id each step emits are the next step's input."""
    model = tiny("ppc")
    prompt, ids = torch.randint(0, 20, (3, 6)), torch.arange(6).expand(3, -1)
    tokens, out_ids = generate(model, prompt, ids, 4)
    seq, seq_ids = prompt, ids
    for step in range(4):
        logits, pos_logits = model(seq, seq_ids)
        assert torch.equal(tokens[:, step], logits[:, -1].argmax(-1))
        assert torch.equal(out_ids[:, step], pos_logits[:, -1].argmax(-1))
        seq = torch.cat((seq, tokens[:, step:step + 1]), 1)
        seq_ids = torch.cat((seq_ids, out_ids[:, step:step + 1]), 1)


def test_coupled_generation_needs_ids():
    with pytest.raises(ValueError, match="oracle"):
        generate(tiny("coupled"), torch.zeros((1, 3), dtype=torch.long), torch.zeros((1, 3), dtype=torch.long), 2)


def test_id_embedding_breaks_shift_invariance_only_when_on():
    """RoPE alone cannot tell absolute ids apart (so no head could predict them); the id
    embedding can."""
    x = torch.randint(0, 20, (2, 7))
    ids = torch.arange(7).expand(2, -1)
    plain, emb = tiny("ppc", id_embedding=False), tiny("ppc", id_embedding=True)
    assert torch.allclose(plain(x, ids)[0], plain(x, ids + 11)[0], atol=1e-4)
    assert not torch.allclose(emb(x, ids)[0], emb(x, ids + 11)[0], atol=1e-4)
    with pytest.raises(ValueError, match="id_embedding"):
        ModelConfig(vocab_size=5, scheme="rope", max_position_id=10, id_embedding=True)


def test_training_batch_has_ppc_loss_and_offsets():
    cfg = copy.deepcopy(TASKS_CFG["variable_assignment"])
    fn = ppc.training_batches("variable_assignment", cfg, seed=0, batch_size=16, max_position_id=63, offset=True)
    b0, b0_again, b1 = fn(0), fn(0), fn(1)
    assert torch.equal(b0.input_ids, b0_again.input_ids) and torch.equal(b0.position_ids, b0_again.position_ids)
    assert not torch.equal(b0.position_ids[:, :5], b1.position_ids[:, :5])
    assert int(b0.position_ids.max()) <= 63 and int(b0.position_ids[:, 0].max()) > 0  # random start offsets
    model = tiny("ppc", vocab=len(variable_assignment.VOCAB))
    _, parts = loss_fn(model, b0, 1.0)
    assert "position_loss" in parts and float(parts["position_loss"]) > 0


TASKS_CFG = {
    "copy_repeat": {"train_sizes": [2, 4], "eval_sizes": [3, 8], "alphabet": 3},
    "variable_assignment": {"train_sizes": [2, 4], "eval_sizes": [3, 8], "num_variables": 8, "max_depth": 2},
    "addition": {"train_sizes": [1, 3], "eval_sizes": [2, 5]},
}


def config(**over):
    p = {"tasks": list(TASKS_CFG), "schemes": list(SCHEMES), "seeds": [0], "max_position_id": 40,
         "random_offset": True, "id_embedding": ["ppc"], "position_loss_weight": 1.0,
         "model": {"n_layer": 1, "n_head": 2, "d_model": 16, "d_ff": 32},
         "train": {"steps": 3, "batch_size": 4, "log_every": 1},
         "eval": {"seed": 1, "n": 6, "batch_size": 4}, **copy.deepcopy(TASKS_CFG)}
    return validated(ppc={**p, **over})["ppc"]


def test_config_errors_name_key_and_value():
    assert checks.config_errors(config()) == []
    errs = checks.config_errors(config(max_position_id=20))
    assert any("ppc.max_position_id = 20" in e and "variable_assignment" in e for e in errs)
    bad = config()
    bad["copy_repeat"]["train_sizes"] = [5, 2]
    del bad["addition"]
    errs = checks.config_errors(bad)
    assert any("ppc.copy_repeat.train_sizes = [5, 2]" in e for e in errs)
    assert any("ppc.addition is missing" in e for e in errs)
    bad = config()
    bad["variable_assignment"]["eval_sizes"] = [3, 9]
    assert any("num_variables = 8" in e for e in checks.config_errors(bad))
    bad = config()
    bad["variable_assignment"]["value_digits"] = [3, 2]
    assert any("ppc.variable_assignment.value_digits = [3, 2]" in e for e in checks.config_errors(bad))
    longer = config()
    longer["variable_assignment"]["value_digits"] = [1, 4]  # 8 lines of up to 7 tokens
    assert any("ppc.max_position_id = 40: ppc.variable_assignment reaches coupled id 58" in e
               for e in checks.config_errors(longer))
    bad = config()
    bad["copy_repeat"]["model"] = {"n_head": 3}
    assert any("ppc.copy_repeat.model: d_model = 16 is not divisible by n_head = 3" in e
               for e in checks.config_errors(bad))


def test_pointer_copy_config_errors():
    pc = {"train_sizes": [1, 4], "eval_sizes": [2, 7], "num_keys": 8, "line_length": [3, 3]}
    p = config(tasks=[*TASKS_CFG, "pointer_copy"], pointer_copy=pc)
    assert p["pointer_copy"]["alphabet"] == 4  # the schema's default
    assert checks.config_errors(p) == []
    bad = copy.deepcopy(p)
    bad["pointer_copy"]["eval_sizes"] = [2, 9]
    assert any("ppc.pointer_copy.num_keys = 8" in e for e in checks.config_errors(bad))
    bad = copy.deepcopy(p)
    bad["pointer_copy"]["line_length"] = [3, 2]
    assert any("ppc.pointer_copy.line_length = [3, 2]" in e for e in checks.config_errors(bad))
    longer = copy.deepcopy(p)
    longer["pointer_copy"]["line_length"] = [2, 4]  # 7 lines of up to 6 tokens, then the query
    assert any("ppc.max_position_id = 40: ppc.pointer_copy reaches coupled id 42" in e
               for e in checks.config_errors(longer))


def test_steps_end_to_end(tmp_path):
    """Tiny run of every step for one task and every scheme, PoSE and a variant (RoPE at another
    base), each a job as the workflow runs it; the table and figure come out."""
    variant = {"scheme": "rope", "model": {"rotary_base": 100.0}}
    p = config(schemes=[*SCHEMES, "pose", "rope_base100"], variants={"rope_base100": variant},
               pose={"chunks": 2, "target_length": 64})
    runs = p["schemes"]
    task = "variable_assignment"
    p[task]["model"] = {"n_head": 4, "rotary_pct": 0.5}  # the task's overrides of ppc.model
    ev = tmp_path / "eval_set.pt"
    run(Job.of("ppc_eval_data", output={"eval_set": ev}, wildcards={"task": task},
               params={"sampler": sampler_params(p[task]), "sizes": p[task]["eval_sizes"], "eval": p["eval"],
                       "train_sizes": p[task]["train_sizes"]}))
    train_params = {k: p[k] for k in ("model", "train", "max_position_id", "random_offset", "id_embedding",
                                      "position_loss_weight")} | {"task_config": p[task]}
    csvs = []
    for scheme in runs:
        d = tmp_path / scheme
        run(Job.of("ppc_train", wildcards={"task": task, "run": scheme, "seed": 0},
                   output={"model": d / "model.pt", "log_csv": d / "log.csv", "summary": d / "s.json"},
                   params={**train_params, "checkpoint": d / "ck.pt", "variant": p["variants"].get(scheme),
                           "pose": p["pose"] if scheme == "pose" else None}))
        run(Job.of("ppc_evaluate", input={"model": d / "model.pt", "eval_set": ev}, output={"eval": d / "eval.csv"},
                   wildcards={"task": task, "run": scheme, "seed": 0}, params={"batch_size": 4}))
        csvs.append(str(d / "eval.csv"))
        model, _ = load_model(d / "model.pt", torch.device("cpu"))
        assert (model.cfg.n_head, model.cfg.rotary_pct, model.cfg.d_model) == (4, 0.5, 16)
        assert model.cfg.scheme == ("rope" if scheme == "rope_base100" else scheme)
        assert model.cfg.rotary_base == (100.0 if scheme == "rope_base100" else 10000.0)
        df = pd.read_csv(d / "eval.csv")
        assert (df["scheme"] == scheme).all()
        # the test cells, then the validation cell at the largest size
        assert list(zip(df["split"], df["size"])) == [("test", 3), ("test", 8), ("validation", 8)]
        assert (df["n"] == 6).all() and (df["first_lookup_limit"] == variable_assignment.max_first_lookup(4)).all()
        for column in ("position_accuracy", "first_id_accuracy", "first_id_accuracy_within"):
            assert df[column].notna().all() == (scheme == "ppc")
        assert df["accuracy_beyond"].notna().tolist() == (df["n_beyond"] > 0).tolist()
    run(Job.of("ppc_table", input={"evals": csvs}, output={"csv": tmp_path / "t.csv", "md": tmp_path / "t.md"}))
    table = pd.read_csv(tmp_path / "t.csv")
    assert set(table["scheme"]) == set(runs) and (table["n_samples"] == 6).all()  # the test samples only
    assert set(table.loc[table["metric"] == "position_ids", "scheme"]) == {"ppc"}
    assert set(table.loc[table["metric"] == "first_id", "scheme"]) == {"ppc"}
    assert set(table.loc[table["metric"] == "exact_match_within", "scheme"]) == {"coupled", "ppc"}
    assert table["beyond_lookup"].between(0, 1).all() and table.groupby("size")["beyond_lookup"].nunique().eq(1).all()
    run(Job.of("ppc_figure", input={"table": tmp_path / "t.csv"}, params={"train_max_sizes": {task: 4}},
               output={"png": tmp_path / "f.png", "pdf": tmp_path / "f.pdf"}))
    assert (tmp_path / "f.png").stat().st_size > 0 and (tmp_path / "f.pdf").stat().st_size > 0


def test_pose_runs_shift_plain_positions_not_coupled_ids():
    """A PPC task's batches carry coupled ids; a pose run trains on PoSE-shifted plain
    positions of the same samples, never on shifted coupled ids."""
    from sparselen.ppc.jobs import training_batches
    from sparselen.training.train import TrainConfig, apply_position_scheme

    p = config()
    task = "variable_assignment"
    coupled = training_batches(task, p[task], 0, 4, p["max_position_id"], True)(3)
    plain = training_batches(task, p[task], 0, 4, p["max_position_id"], True, coupled=False)(3)
    assert torch.equal(coupled.input_ids, plain.input_ids) and plain.position_ids is None
    cfg = ModelConfig(vocab_size=len(variable_assignment.VOCAB), scheme="pose")
    tc = TrainConfig.from_section({**p["train"], "optimizer": {}}, 0, {"chunks": 2, "target_length": 64})
    ids = apply_position_scheme(plain, cfg, tc, 3).position_ids
    T = plain.input_ids.shape[1]
    steps = ids[:, 1:] - ids[:, :-1]
    assert (steps >= 1).all() and (steps > 1).any() and (ids[:, 0] == 0).all() and int(ids.max()) < 64 and T > 2


class Scripted:
    """A stand-in model that answers each prompt it is given with a scripted response (tokens
    and ids, by the prompt's tokens), then ``filler`` tokens at id 0 forever: what generation
    and scoring make of it is what the counts see. ``steps``: the model calls of the last
    generation."""

    def __init__(self, scripts: dict, vocab: int, max_id: int = 63, scheme: str = "ppc", filler: int = 0):
        self.cfg = SimpleNamespace(scheme=scheme, position_target="absolute", max_position_id=max_id)
        self.scripts, self.vocab, self.max_id, self.filler = scripts, vocab, max_id, filler

    def new_cache(self):
        return None

    def __call__(self, seq, ids, cache=None, last_only=False):
        if seq.shape[1] > 1:  # a new prompt
            self.rows, self.steps = [self.scripts[tuple(row)] for row in seq.tolist()], 0
        step, self.steps = self.steps, self.steps + 1
        at = [(t[step], i[step]) if step < len(t) else (self.filler, 0) for t, i in self.rows]
        tokens, pos = torch.tensor(at).T
        return (torch.nn.functional.one_hot(tokens, self.vocab)[:, None].float(),
                torch.nn.functional.one_hot(pos, self.max_id + 1)[:, None].float())


def scripts_of(s, edit=lambda i, tokens, ids: (tokens, ids)):
    """Each sample's true response (tokens, ids), keyed by its prompt, as ``edit`` changes it."""
    out = {}
    for i in range(len(s)):
        P, L = int(s.prompt_len[i]), int(s.length[i])
        out[tuple(s.tokens[i, :P].tolist())] = edit(i, s.tokens[i, P:L].tolist(), s.position_ids[i, P:L].tolist())
    assert len(out) == len(s)  # prompts tell samples apart
    return out


def test_exact_match_needs_the_response_to_end_where_the_target_ends_and_every_id():
    """Parity with a scratchpad (responses of 3 and 4 tokens in one batch): a model that gets
    every token and id right is exact whatever it emits after its end; one that never ends, ends
    early, or gets only the answer's id (no marked bit follows) or the end token's id wrong is not."""
    from sparselen.ppc.tasks import parity_scratchpad as task

    s = task.sample(torch.full((40,), 9), generator("cells", 3), k=(1, 2))
    n, lengths = len(s), s.length - s.prompt_len
    assert set(lengths.tolist()) == {3, 4}
    cases = {  # edit of the true response -> (tokens, ids, both, ended)
        "right": (lambda i, t, d: (t, d), (n, n, n, n)),
        "never ends": (lambda i, t, d: (t[:-1] + [task.EVEN] * 3, d + [d[-1]] * 2), (0, 0, 0, 0)),
        "ends early": (lambda i, t, d: (t[:-2] + [task.EOS], d[:-1]), (0, 0, 0, 0)),
        "answer's id": (lambda i, t, d: (t, d[:-2] + [d[-2] - 1, d[-1]]), (n, 0, 0, n)),
        "end's id": (lambda i, t, d: (t, d[:-1] + [d[-1] + 1]), (n, 0, 0, n)),
    }
    for name, (edit, expected) in cases.items():
        model = Scripted(scripts_of(s, edit), len(task.VOCAB), filler=task.EVEN)
        c = cell_scores(model, s, 16, torch.device("cpu"), eos=task.EOS)
        assert (c["tokens"], c["ids"], c["both"], c["ended"]) == expected, name
    # generation stops once every sample has ended
    model = Scripted(scripts_of(s, lambda i, t, d: ([task.EOS], d[:1])), len(task.VOCAB), filler=task.EVEN)
    tokens, _ = generate(model, s.tokens[:4, :19], s.position_ids[:4, :19], 4, eos=task.EOS)
    assert tokens.tolist() == [[task.EOS]] * 4 and model.steps == 1
    assert cell_scores(model, s, 16, torch.device("cpu"))["ended"] == 0  # the end token, read off the targets


def test_generation_to_the_end_token_equals_generation_alone_up_to_each_end():
    """A batch stops each row at its end token or cap; what a row generated up to there is what
    it generates alone."""
    model = tiny("ppc")
    g = generator("gen", 1)
    prompt, ids = torch.randint(0, 20, (6, 7), generator=g), torch.arange(7).expand(6, -1)
    free, _ = generate(model, prompt, ids, 10)
    eos = int(free[:, 1:].flatten().mode().values)  # a token some rows emit after their first
    caps = torch.tensor([5, 10, 10, 3, 3, 10])
    tokens, _ = generate(model, prompt, ids, 10, eos=eos, caps=caps)
    ends = [min([j + 1 for j, t in enumerate(row) if t == eos] + [int(c)]) for row, c in zip(free.tolist(), caps)]
    assert tokens.shape[1] == max(ends) < 10 and len(set(ends)) > 1
    for row, end in zip(range(6), ends):
        assert tokens[row, :end].tolist() == free[row, :end].tolist()


def test_cell_scores_of_prompts_of_several_lengths():
    """Constants of 1-3 digits make prompts of one size differ in length: the cell is generated
    one prompt length at a time, each sample scored on its own response."""
    s = variable_assignment.sample(torch.full((24,), 5), generator("cells", 0), num_variables=8, max_depth=2,
                                   value_digits=(1, 3))
    assert len(s.prompt_len.unique()) > 2
    n, wrong = len(s), set(range(0, 24, 5))
    model = Scripted(scripts_of(s, lambda i, t, d: (t, [x + (i in wrong) for x in d])), len(variable_assignment.VOCAB))
    c = cell_scores(model, s, 4, torch.device("cpu"), eos=variable_assignment.EOS)
    assert (c["tokens"], c["ids"], c["both"], c["first_id"], c["ended"]) == (n, n - 5, n - 5, n - 5, n)


def test_id_diagnostics_count_first_and_later_ids_and_lookup_distances():
    """The true responses, some with a wrong first id and some with a wrong later id: the counts
    find exactly those, and split the first ids by lookup distance."""
    from sparselen.ppc.evaluate import first_lookup_distance

    s = variable_assignment.sample(torch.full((24,), 5), generator("cells", 1), num_variables=8, max_depth=2)
    n = len(s)
    first = dict(zip(range(6), [1, 9, 1, 9, 1, 9]))  # a wrong first id, at two distances

    def edit(i, tokens, ids):
        ids = ids.copy()
        ids[0] += first.get(i, 0)
        ids[1] += i in (6, 7, 8)  # a wrong second id
        return tokens, ids

    model = Scripted(scripts_of(s, edit), len(variable_assignment.VOCAB))
    distance = first_lookup_distance(s)  # of the true first ids
    limit = int(distance[:6].sort().values[1])
    far = distance > limit
    assert 0 < int(far.sum()) < n and 0 < int(far[:6].sum()) < 6
    c = cell_scores(model, s, 5, torch.device("cpu"), lookup_limit=limit)
    assert (c["tokens"], c["ids"], c["first_id"], c["both"]) == (n, n - 9, n - 6, n - 9)
    assert c["beyond"] == int(far.sum()) and c["first_id_beyond"] == int(far[6:].sum())
    assert c["both_beyond"] == int(far[9:].sum())
    row = evaluate_cells(model, {5: vars(s)}, 5, torch.device("cpu"), limit, variable_assignment.EOS)[0]
    assert row["later_id_accuracy"] == (n - 9) / (n - 6) and row["n_beyond"] == c["beyond"]
    assert row["first_id_accuracy_within"] == (n - c["beyond"] - int((~far[:6]).sum())) / (n - c["beyond"])
    assert row["end_accuracy"] == 1.0


def test_task_forms_and_parity_scratchpad_config_errors():
    """Two forms of one task are two sections; a scratchpad needs room for its marked bits; the
    schema knows each form's keys by its task (id skips only where a task has units)."""
    from sparselen.interface.config import schema_errors

    forms = {"parity_scratchpad": {"train_sizes": [3, 5], "eval_sizes": [3, 8], "k": [1, 3]},
             "parity_scratchpad_dense": {"train_sizes": [3, 5], "eval_sizes": [3, 8], "dense": True, "id_skips": 1}}
    p = config(tasks=[*TASKS_CFG, *forms], **forms)
    assert p["parity_scratchpad_dense"]["k"] == [1, 4] and p["parity_scratchpad"]["id_skips"] == 0  # defaults
    assert checks.config_errors(p) == []
    bad = copy.deepcopy(p)
    bad["parity_scratchpad"]["k"] = [1, 4]
    assert any("ppc.parity_scratchpad.k = [1, 4]: samples of 3 pairs (the smallest size) cannot hold 4" in e
               for e in checks.config_errors(bad))
    bad["parity_scratchpad"]["eval_sizes"] = [3, 20]  # 2 * 20 + 1 > 40
    assert any("ppc.parity_scratchpad reaches coupled id 41" in e for e in checks.config_errors(bad))
    raw = {"ppc": {**copy.deepcopy(p), "tasks": ["sorting"], "copy_repeat": {**p["copy_repeat"], "id_skips": 1}}}
    errors = schema_errors(raw)
    assert any("ppc.tasks[0] = 'sorting'" in e for e in errors)
    assert any(e.startswith("ppc.copy_repeat:") and "id_skips" in e for e in errors)


def test_parity_scratchpad_trains_on_id_skips_and_every_id():
    """A coupled run of a task with id skips trains on skipped ids; every response token's id is
    a training target, the answer's (no marked bit follows) and the end token's included."""
    task_cfg = {"train_sizes": [3, 5], "eval_sizes": [3, 6], "k": [1, 2], "dense": False, "id_skips": 1}
    plain = ppc.training_batches("parity_scratchpad", {**task_cfg, "id_skips": 0}, 0, 16, 40, False)(0)
    skipped = ppc.training_batches("parity_scratchpad", task_cfg, 0, 16, 40, False)(0)
    assert torch.equal(plain.input_ids, skipped.input_ids) and (skipped.position_ids >= plain.position_ids).all()
    assert (skipped.position_ids > plain.position_ids).any() and int(skipped.position_ids.max()) <= 40
    assert (ppc.training_batches("parity_scratchpad", task_cfg, 0, 16, 40, False, coupled=False)(0).position_ids
            is None)
    assert torch.equal(skipped.labels != IGNORE, skipped.position_labels != IGNORE)


@pytest.mark.parametrize("configfile", ["config.yaml", "configs/cpu-extended.yaml"])
def test_every_training_size_trains_on_the_layout_evaluation_feeds(configfile):
    """Evaluation lays each sample's coupled ids out unshifted (ids from 0, no skip), and the fit
    gate reads exact match at the training sizes so laid out: a coupled run trains on that
    layout at every training size of every task, in at least 1 / (2 (max_position_id + 1)) of
    its rows (one uniform shift: 1 / (room + 1)), with id skips too. A skip and then a random
    offset left cpu-extended's parity_scratchpad l = 3 unshifted in about 1 of 24,000 rows:
    never in some training runs, and PPC, which never had to predict the id 7 of its answer,
    failed that training size."""
    from sparselen.ppc.runs import run_task_config
    from sparselen.ppc.tasks import task_module

    p = load_config([Path(__file__).resolve().parents[2] / configfile])["ppc"]
    rows, steps = 8192, 8
    for task in p["tasks"]:
        cfg, module = run_task_config(p, task), task_module(task)
        lo, hi = cfg["train_sizes"]
        fn = ppc.training_batches(task, cfg, 0, rows, p["max_position_id"], p["random_offset"])
        unshifted, drawn = torch.zeros(hi + 1), torch.zeros(hi + 1)
        for step in range(steps):
            b = fn(step)
            g = generator("ppc-train", task, 0, step)  # the batch's samples, drawn again, with their own ids
            size = torch.randint(lo, hi + 1, (rows,), generator=g)
            s = module.sample(size, g, **sampler_params(cfg))
            assert torch.equal(b.input_ids, s.tokens)
            drawn += torch.bincount(size, minlength=hi + 1)
            unshifted += torch.bincount(size[(b.position_ids == s.position_ids).all(dim=1)], minlength=hi + 1)
        share = (unshifted / drawn)[lo:]
        assert (share >= 1 / (2 * (p["max_position_id"] + 1))).all(), (task, dict(zip(range(lo, hi + 1), share.tolist())))


def test_a_task_format_is_part_of_its_runs_identity_and_the_eval_sets_format_of_their_params():
    """A run trained on an earlier token format (parity without the final "$") is not one of
    today's: its section carries the format, while a task on its first format keeps the identity
    it had; saved evaluation sets are rebuilt when their layout changes."""
    from sparselen.ppc.runs import run_task_config
    from sparselen.ppc.tasks import sampler_params

    p = {"seeds": [0], "copy_repeat": {"train_sizes": [2, 10], "seeds": [1]},
         "parity_scratchpad": {"train_sizes": [3, 7], "k": 2}}
    assert run_task_config(p, "copy_repeat") == {"train_sizes": [2, 10]}
    assert run_task_config(p, "parity_scratchpad")["format"] >= 2
    assert "format" not in sampler_params(run_task_config(p, "parity_scratchpad"))
    rules = (Path(__file__).resolve().parents[2] / "workflow/rules/ppc.smk").read_text()
    assert "format=sparselen.ppc.samples.FORMAT" in rules.partition("rule ppc_eval_data:")[2].partition("rule ")[0]


def test_where_the_first_wrong_id_is_and_the_tokens_given_the_oracles_ids():
    """Parity with a scratchpad at k = 2 (responses of 4 tokens: even, two entries, the answer,
    then $; the answer and $ share the id 2l + 1 that ends the response): a wrong first id, a
    wrong second one and a wrong answer's id are counted where they are; fed the oracle's ids,
    a model that gets every token right is right whatever ids it would predict."""
    from sparselen.ppc.tasks import parity_scratchpad as task

    s = task.sample(torch.full((24,), 9), generator("cells", 5), k=(2, 2))
    n = len(s)
    cases = {"first": lambda i, t, d: (t, [d[0] + 1, *d[1:]]), "later": lambda i, t, d: (t, [d[0], d[1] + 1, *d[2:]]),
             "end": lambda i, t, d: (t, [*d[:-2], d[-2] - 1, d[-1]]), "none": lambda i, t, d: (t, d)}
    for where, edit in cases.items():
        model = Scripted(scripts_of(s, edit), len(task.VOCAB), filler=task.EVEN)
        c = cell_scores(model, s, 8, torch.device("cpu"), eos=task.EOS)
        errors = {w: c[f"error_{w}"] for w in ("first", "later", "end")}
        assert errors == {w: n * (w == where) for w in errors}, where
        assert c["forced_tokens"] == c["tokens"] == n


def test_an_offset_head_names_the_ids_an_absolute_one_does():
    """The offset reading's targets (the next id minus the current one, shifted by
    max_position_id) decode, from the current ids, to the absolute targets; a decoded id stays
    within [0, max_position_id]."""
    from sparselen.ppc.samples import next_ids, predicted_ids

    ids = torch.tensor([[0, 3, 4, 9, 2, 2], [5, 1, 0, 7, 7, 8]])
    offset = next_ids(ids, "offset", 9)
    assert (offset >= 0).all() and (offset <= 18).all()
    assert torch.equal(predicted_ids(offset, ids[:, :-1], "offset", 9), next_ids(ids, "absolute", 9))
    assert predicted_ids(torch.tensor([[18]]), torch.tensor([[5]]), "offset", 9).item() == 9


def test_an_offset_ppc_model_trains_on_offsets_and_generates_absolute_ids():
    """A ppc run reading its head as offsets: its training batch's position labels are the
    offsets of the absolute ones, and its position head has an output per offset."""
    from sparselen.ppc.jobs import training_batches

    absolute = training_batches("copy_repeat", {"train_sizes": [2, 4], "alphabet": 4}, 0, 8, 40, True)(3)
    offset = training_batches("copy_repeat", {"train_sizes": [2, 4], "alphabet": 4}, 0, 8, 40, True,
                              target="offset")(3)
    labelled = absolute.position_labels != IGNORE
    assert torch.equal(offset.position_labels != IGNORE, labelled)
    current = absolute.position_ids[:, :-1][labelled[:, :-1]]
    assert torch.equal(offset.position_labels[:, :-1][labelled[:, :-1]] - 40 + current,
                       absolute.position_labels[:, :-1][labelled[:, :-1]])
    model = GPTNeoX(ModelConfig(vocab_size=8, scheme="ppc", max_position_id=40, position_target="offset",
                                n_layer=1, n_head=2, d_model=16, d_ff=32))
    assert model.position_head.out_features == 81
