"""Greedy autoregressive generation of a response, for every position scheme.

At each step the model emits a token and, under ``ppc``, the position id of that token (its
position head); both are fed back for the next step. ``coupled`` models get each response
token's id from an oracle (the task's true ids), ``nope``/``rope``/``pose`` use no ids (plain
0..T-1). With ``use_cache`` the prompt is encoded once and each step feeds one token through
the KV cache; without it every step recomputes the whole sequence (the reference the cached
path is tested against). With an end-of-response token a row is done once it emits it (or
reaches its cap), and generation stops when every row is done: the batch stays one tensor, and
what a done row emits afterwards is left for the caller to mask.
"""

from __future__ import annotations

import torch

from sparselen.nn.model import GPTNeoX
from sparselen.ppc.samples import predicted_ids

COUPLED = ("coupled", "ppc")


@torch.no_grad()
def generate(model: GPTNeoX, prompt: torch.Tensor, prompt_ids: torch.Tensor | None, steps: int,
             oracle_ids: torch.Tensor | None = None, use_cache: bool = True, eos: int | None = None,
             caps: torch.Tensor | None = None, forced: bool = False):
    """Generate up to ``steps`` tokens after ``prompt`` (B, P), all prompts of one length.

    With ``eos``, row b is done once it has emitted ``eos`` or ``caps[b]`` tokens (default
    ``steps``), and generation stops early when every row is done.
    ``forced``: a ``ppc`` model fed the oracle ids as ``coupled`` is (its tokens given the right
    ids: where its errors are the id head's).
    Returns (tokens (B, S), position ids (B, S) or None), S <= ``steps``: the ids are the ones
    fed with each generated token (predicted for ``ppc``, ``oracle_ids[:, :S]`` for ``coupled``).
    """
    scheme = model.cfg.scheme
    oracle = scheme == "coupled" or (scheme == "ppc" and forced)
    if oracle and (oracle_ids is None or oracle_ids.shape[1] < steps):
        raise ValueError(f"a {scheme} model fed oracle ids needs them for every response step")
    ids = prompt_ids if scheme in COUPLED else None
    if scheme in COUPLED and ids is None:
        raise ValueError(f"a {scheme} model needs the prompt's position ids")
    last_id = None if ids is None else ids[:, -1:]
    cache = model.new_cache() if use_cache else None
    seq, seq_ids = prompt, ids
    logits, pos_logits = model(seq, seq_ids, cache, last_only=True)
    out_tokens, out_ids = [], []
    done = torch.zeros(prompt.shape[0], dtype=torch.bool, device=prompt.device)
    if caps is not None:
        caps = caps.to(prompt.device)
    for step in range(steps):
        token = logits[:, -1].argmax(-1, keepdim=True)
        new_id = None
        if scheme == "ppc" and not forced:
            new_id = predicted_ids(pos_logits[:, -1].argmax(-1, keepdim=True), last_id, model.cfg.position_target,
                                   model.cfg.max_position_id)
        elif scheme in COUPLED:
            new_id = oracle_ids[:, step:step + 1]
        last_id = new_id
        out_tokens.append(token)
        out_ids.append(new_id)
        if eos is not None:
            done |= token[:, 0] == eos
            if caps is not None:
                done |= caps <= step + 1
        if step == steps - 1 or bool(done.all()):
            break
        if use_cache:
            logits, pos_logits = model(token, new_id, cache)
        else:
            seq = torch.cat((seq, token), dim=1)
            seq_ids = None if new_id is None else torch.cat((seq_ids, new_id), dim=1)
            logits, pos_logits = model(seq, seq_ids, last_only=True)
    tokens = torch.cat(out_tokens, dim=1)
    return tokens, (torch.cat(out_ids, dim=1) if scheme in COUPLED else None)
