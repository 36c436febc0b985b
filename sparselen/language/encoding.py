"""The tokens step's encoding: parallel over the job's threads, in chunks that a killed job keeps.

Tokenizing ``configs/paper.yaml``'s corpus is hours of one CPU. Each split's documents are
encoded in chunks of about ``CHUNK_CHARS`` characters per thread, a chunk spread over the
job's threads (``tokenizer.encode``), and appended to a partial file beside the output; after
each chunk a progress file records the documents and bytes done. A killed attempt loses at most
the chunk in flight: the next truncates the partial file to the recorded bytes, skips the
recorded documents and goes on, and writes the file an uninterrupted serial encoding writes
(``tests/language/test_language.py``). Neither file is a Snakemake output, which Snakemake would delete
with a failed job's outputs; the partial file becomes the output when its split is done, and
the progress file goes. A progress file of other inputs (tokenizer, corpus file, dtype,
tokenizers version) is ignored: the split starts over.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

from sparselen.language import corpus
from sparselen.language import tokenizer as tokenizers
from sparselen.language.token_files import append_documents, check_ids_fit
from sparselen.runtime import io

log = logging.getLogger(__name__)
CHUNK_CHARS = 4 << 20  # characters per thread in one chunk (a chunk's ids are held as Python lists)


def fingerprint(tokenizer_path, texts_path, dtype: str) -> str:
    """Hash of what a split's ids depend on: the tokenizer file, the corpus file (path, size,
    modification time), the dtype and the tokenizers library's version."""
    import tokenizers

    src = Path(texts_path).stat()
    h = hashlib.sha256(Path(tokenizer_path).read_bytes())
    h.update(f"{Path(texts_path).resolve()}|{src.st_size}|{src.st_mtime_ns}|{dtype}|{tokenizers.__version__}".encode())
    return h.hexdigest()[:16]


def partial_paths(out) -> tuple[Path, Path]:
    """(partial file, progress file) of the output ``out``."""
    out = Path(out)
    return out.with_name(out.name + ".partial"), out.with_name(out.name + ".progress.json")


def write_split(out, texts_path, tok, tokenizer_path, eos_id: int, vocab_size: int, dtype: str, threads: int = 1,
                chunk_chars: int = CHUNK_CHARS) -> dict:
    """Encode the JSONL split ``texts_path`` into the token file ``out`` (``token_files``'
    format), resuming a killed attempt's chunks. Returns {path, dtype, tokens, documents}."""
    check_ids_fit(eos_id, vocab_size, dtype)
    partial, progress_path = partial_paths(out)
    key = fingerprint(tokenizer_path, texts_path, dtype)
    done = {"fingerprint": key, "documents": 0, "tokens": 0, "bytes": 0}
    if progress_path.exists() and partial.exists():
        saved = json.loads(progress_path.read_text())
        if saved.get("fingerprint") == key and partial.stat().st_size >= saved["bytes"]:
            done = saved
            log.info("resuming %s after %d documents (%d tokens)", out, done["documents"], done["tokens"])
        else:
            log.info("ignoring %s: another encoding (fingerprint %s, not %s)", progress_path, saved.get("fingerprint"), key)
    partial.parent.mkdir(parents=True, exist_ok=True)
    with open(partial, "r+b" if done["bytes"] else "wb") as f:
        f.truncate(done["bytes"])
        f.seek(done["bytes"])
        texts = corpus.texts(texts_path, skip=done["documents"])
        for batch in tokenizers.batches(texts, chunk_chars * max(1, threads)):
            ids = tokenizers.encode(tok, batch, parallel=threads > 1)
            n_tokens, n_docs = append_documents(f, ids, eos_id, vocab_size, dtype, first=done["documents"])
            f.flush()
            os.fsync(f.fileno())
            done = {**done, "documents": done["documents"] + n_docs, "tokens": done["tokens"] + n_tokens,
                    "bytes": f.tell()}
            io.write_json(progress_path, done)
    os.replace(partial, out)
    progress_path.unlink(missing_ok=True)
    return {"path": str(out), "dtype": dtype, "tokens": done["tokens"], "documents": done["documents"]}
