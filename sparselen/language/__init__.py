"""Natural language (docs/reconstruction.md, "Natural language"): corpus, tokenizer, packed
token streams, losses by position, the sparse-dependency analysis (how few distant tokens
carry the benefit of a long context), tables and figures, and the steps the workflow's
``language_*`` rules run."""
