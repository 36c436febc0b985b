"""Natural language (SPEC.md section 5): corpus, tokenizer, packed token streams, losses by
position, and the sparse-dependency analysis (how few distant tokens carry the benefit of a
long context)."""
