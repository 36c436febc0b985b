"""OLMo-format token files: round trip, the trainer's batches from them, clear errors."""

import numpy as np
import pytest
import torch

from sparselen.language import token_files as tf
from sparselen.language.data import pack, training_batches

EOS = 0


def random_docs(n, vocab, seed=0, max_len=300):
    g = np.random.default_rng(seed)
    return [g.integers(1, vocab, g.integers(1, max_len)).tolist() for _ in range(n)]


@pytest.mark.parametrize("vocab,dtype", [(50304, "uint16"), (65536, "uint16"), (100278, "uint32")])
def test_round_trip(tmp_path, vocab, dtype):
    docs = random_docs(40, vocab)
    docs[3][0] = vocab - 1  # the largest id survives
    info = tf.write_token_file(tmp_path / "a.npy", docs, EOS, vocab)
    assert info["dtype"] == dtype == tf.dtype_for_vocab(vocab)
    raw = np.fromfile(tmp_path / "a.npy", dtype=dtype)  # headerless: exactly the ids
    assert raw.nbytes == (tmp_path / "a.npy").stat().st_size
    assert torch.equal(torch.from_numpy(raw.astype(np.int64)), pack(docs, EOS))
    s = tf.TokenStream(tmp_path / "a.npy", dtype, vocab, EOS)
    assert len(s) == info["tokens"] == sum(map(len, docs)) + len(docs)
    assert [d.tolist() for d in s.documents()] == docs


def test_training_batches_equal_in_memory_stream(tmp_path):
    """Windows across file boundaries, and the trainer's (seed, step) batches, are those of the
    packed in-memory stream."""
    docs = random_docs(60, 8192, seed=1)
    tf.write_token_file(tmp_path / "0.npy", docs[:25], EOS, 8192)
    tf.write_token_file(tmp_path / "1.npy", docs[25:], EOS, 8192)
    s = tf.TokenStream(tf.token_paths([tmp_path]), "uint16", 8192, EOS)
    t = pack(docs, EOS)
    assert len(s) == len(t)
    idx = torch.randint(0, len(t), (7, 33))
    assert torch.equal(s[idx], t[idx]) and s[idx].dtype == torch.long
    a, b = training_batches(s, 64, 8, seed=3), training_batches(t, 64, 8, seed=3)
    for step in (0, 1, 17):
        assert torch.equal(a(step).input_ids, b(step).input_ids) and torch.equal(a(step).labels, b(step).labels)


def test_write_then_load_split_files(tmp_path):
    ids = {"train": random_docs(30, 1000, seed=2), "eval": random_docs(5, 1000, seed=3)}
    meta = tf.write_tokens(tmp_path, ids, EOS, 1000)
    loaded = tf.load_tokens(meta, root=tmp_path)
    assert torch.equal(loaded["train"][torch.arange(len(loaded["train"]))], pack(ids["train"], EOS))
    assert [d.tolist() for d in loaded["eval"]] == ids["eval"] and loaded["vocab_size"] == 1000
    # the same files named in a config, as a user with pre-tokenized C4 would
    cfg = {"train": [str(tmp_path / "train.npy")], "eval": str(tmp_path / "ev*.npy"), "dtype": "uint16",
           "eos_id": EOS, "vocab_size": 1000}
    assert len(tf.load_tokens(cfg)["eval"]) == 5


def test_wrong_dtype_and_size_are_refused_clearly(tmp_path):
    docs = random_docs(200, 50000, seed=4)  # ids below 50279, the EOS of the check below
    tf.write_token_file(tmp_path / "u16.npy", docs, EOS, 50304)
    tf.write_token_file(tmp_path / "u32.npy", docs, EOS, 50304, dtype="uint32")
    n16 = (tmp_path / "u16.npy").stat().st_size // 2
    if n16 % 2 == 0:  # make the uint16 file not a whole number of uint32s too
        tf.write_token_file(tmp_path / "u16.npy", docs + [[5]], EOS, 50304)
    with pytest.raises(ValueError, match="not a whole number of uint32 ids.*fits uint8, uint16"):
        tf.TokenStream(tmp_path / "u16.npy", "uint32", 50304, EOS)
    even = docs[:10] + [[7, 7]] if (sum(map(len, docs[:10])) + 10) % 2 else docs[:10]
    tf.write_token_file(tmp_path / "u16even.npy", even, EOS, 50304)
    with pytest.raises(ValueError, match=r">= vocab_size 50304.*try uint16"):
        tf.TokenStream(tmp_path / "u16even.npy", "uint32", 50304, EOS)
    with pytest.raises(ValueError, match="probably uint32"):
        tf.TokenStream(tmp_path / "u32.npy", "uint16", None, None)
    with pytest.raises(ValueError, match="dtype 'int32'"):
        tf.TokenStream(tmp_path / "u32.npy", "int32")
    with pytest.raises(ValueError, match="EOS id 50279 does not occur"):
        tf.TokenStream(tmp_path / "u16.npy", "uint16", 50304, 50279)
    with pytest.raises(ValueError, match=">= vocab_size 1000"):
        tf.TokenStream(tmp_path / "u16.npy", "uint16", 1000, EOS)
    (tmp_path / "odd.npy").write_bytes(b"\x01\x00\x02")
    with pytest.raises(ValueError, match="3 bytes is not a whole number of uint16"):
        tf.TokenStream(tmp_path / "odd.npy", "uint16")
    with pytest.raises(FileNotFoundError, match="matches no file"):
        tf.token_paths([str(tmp_path / "nothing*.npy")])
    with pytest.raises(ValueError, match="does not fit uint16"):
        tf.write_token_file(tmp_path / "x.npy", docs, EOS, 100278, dtype="uint16")


def test_np_save_files_are_read_by_their_header(tmp_path):
    """Files written with np.save (a header, unlike OLMo's) are read through it, and must agree."""
    arr = pack(random_docs(10, 500, seed=5), EOS).numpy().astype(np.uint16)
    np.save(tmp_path / "saved.npy", arr)
    s = tf.TokenStream(tmp_path / "saved.npy", "uint16", 500, EOS)
    assert torch.equal(s[torch.arange(len(s))], torch.from_numpy(arr.astype(np.int64)))
    with pytest.raises(ValueError, match="np.save file of dtype uint16"):
        tf.TokenStream(tmp_path / "saved.npy", "uint32")


def test_large_file_checks_read_only_samples(tmp_path, monkeypatch):
    monkeypatch.setattr(tf, "CHECK_BLOCK", 64)
    monkeypatch.setattr(tf, "CHECK_BLOCKS", 4)
    docs = random_docs(100, 30000, seed=6)
    tf.write_token_file(tmp_path / "big.npy", docs, EOS, 30000)
    assert len(tf._sample(np.memmap(tmp_path / "big.npy", dtype="uint16", mode="r"))) == 256
    tf.TokenStream(tmp_path / "big.npy", "uint16", 30000, EOS)
