"""Prompt/response samples with coupled position ids: the format of every PPC task.

A sample is ``prompt + response``, right-padded with the task's PAD id 0. Each token carries a
coupled position id (docs/reconstruction.md, "Position coupling and PPC"): the prompt's ids come from the task's structure, and
each response token's id is the id of the prompt token it is coupled to. Training sees the
ids of both parts (shifted by a random start offset, so that large ids are trained too); at
test time only the prompt's ids are given and a PPC model predicts the rest.

Alignment, as in ``sparselen.nn.batch``: ``labels[:, t]`` is the token at t+1 and
``position_labels[:, t]`` its position id, both only where t+1 is a response token (every
response token's id is a target, the last one's included).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sparselen.nn.batch import IGNORE, Batch

# The layout of a saved evaluation set (``Samples``' fields, what is scored); part of the
# evaluation sets' rule params, so a change rebuilds them and reruns every evaluation.
FORMAT = 2

PAD = 0  # every task's vocabulary starts with "<pad>"


@dataclass
class Samples:
    """``tokens`` and ``position_ids`` (n, T); sample i is ``tokens[i, :length[i]]``, its
    response ``tokens[i, prompt_len[i]:length[i]]`` (ending with the task's end-of-response
    token, ``EOS``)."""

    tokens: torch.Tensor
    position_ids: torch.Tensor
    prompt_len: torch.Tensor
    length: torch.Tensor

    def __len__(self) -> int:
        return self.tokens.shape[0]

    @property
    def response_mask(self) -> torch.Tensor:
        t = torch.arange(self.tokens.shape[1])[None, :]
        return (t >= self.prompt_len[:, None]) & (t < self.length[:, None])

    def select(self, i) -> "Samples":
        return Samples(self.tokens[i], self.position_ids[i], self.prompt_len[i], self.length[i])


def assemble(prompt: torch.Tensor, prompt_ids: torch.Tensor, prompt_len: torch.Tensor,
             response: torch.Tensor, response_ids: torch.Tensor, response_len: torch.Tensor) -> Samples:
    """Join right-padded prompts (n, P) and responses (n, R) row by row into ``Samples``."""
    P = prompt.shape[1]
    length = prompt_len + response_len
    t = torch.arange(int(length.max()))[None, :]
    # column of ``cat(prompt, response)`` that lands at output position t
    src = torch.where(t < prompt_len[:, None], t, P + t - prompt_len[:, None])
    src = src.clamp(max=P + response.shape[1] - 1)
    valid = t < length[:, None]
    tokens = torch.cat((prompt, response), 1).gather(1, src).masked_fill(~valid, PAD)
    ids = torch.cat((prompt_ids, response_ids), 1).gather(1, src).masked_fill(~valid, 0)
    return Samples(tokens, ids, prompt_len, length)


def random_offsets(s: Samples, max_position_id: int, g: torch.Generator) -> torch.Tensor:
    """Per-row start offset, uniform so that the row's largest id stays <= ``max_position_id``."""
    room = max_position_id - s.position_ids.max(dim=1).values
    if bool((room < 0).any()):
        raise ValueError(f"a sample's coupled ids reach {int(s.position_ids.max())} > max_position_id "
                         f"= {max_position_id}; raise ppc.max_position_id")
    return (torch.rand(len(s), generator=g) * (room + 1).float()).long()


def to_batch(s: Samples, offsets: torch.Tensor | None = None, target: str = "absolute",
             max_position_id: int = 0) -> Batch:
    """Teacher-forced batch: token and position-id targets on the response tokens only. A
    position target is the next token's id (``target`` absolute), or that id minus the current
    token's as the class ``offset + max_position_id`` (``target`` offset: ``ModelConfig.position_target``)."""
    ids = s.position_ids if offsets is None else s.position_ids + offsets[:, None]
    response = s.response_mask[:, 1:]
    labels = torch.full_like(s.tokens, IGNORE)
    position_labels = torch.full_like(s.tokens, IGNORE)
    labels[:, :-1][response] = s.tokens[:, 1:][response]
    position_labels[:, :-1][response] = next_ids(ids, target, max_position_id)[response]
    return Batch(input_ids=s.tokens, labels=labels, position_ids=ids, position_labels=position_labels)


def next_ids(ids: torch.Tensor, target: str, max_position_id: int) -> torch.Tensor:
    """(B, T - 1): the class a position head is trained on at each position but the last: the
    next token's id, or its offset from this token's shifted to be >= 0."""
    if target == "absolute":
        return ids[:, 1:]
    if target == "offset":
        return ids[:, 1:] - ids[:, :-1] + max_position_id
    raise ValueError(f"position target {target!r}: expected absolute or offset")


def predicted_ids(classes: torch.Tensor, current: torch.Tensor, target: str, max_position_id: int) -> torch.Tensor:
    """The next ids a position head names (its argmax ``classes``) after tokens of ids
    ``current``: ``next_ids`` inverted, kept within [0, max_position_id]."""
    if target == "absolute":
        return classes
    return (current + classes - max_position_id).clamp(0, max_position_id)


def skip_ids(s: Samples, starts: torch.Tensor, skips: int, max_position_id: int, g: torch.Generator) -> Samples:
    """PoSE-style skips of the coupled ids [ours, after Zhu et al. 2024]: per row, ``skips``
    cut ids drawn among the ids of the tokens ``starts`` marks (the task's units: where a skip
    leaves every coupled lookup intact), and skips sorted and uniform, so that the largest id
    stays <= ``max_position_id``; every id at or above a cut grows by that cut's skip. Ids are
    remapped by value, so each response token keeps the id of the prompt token it is coupled
    to, while the id distances between units grow beyond those of short samples."""
    ids = s.position_ids
    n, T = ids.shape
    room = max_position_id - ids.max(dim=1).values
    if bool((room < 0).any()):
        raise ValueError(f"a sample's coupled ids reach {int(ids.max())} > max_position_id = {max_position_id}; "
                         "raise ppc.max_position_id")
    beyond = max_position_id + 1  # rows with fewer places to cut than draws cut nowhere
    allowed = torch.where(starts, ids, beyond).sort(dim=1).values
    pick = (torch.rand(n, skips, generator=g) * starts.sum(dim=1, keepdim=True)).long().clamp(max=T - 1)
    cuts = allowed.gather(1, pick).sort(dim=1).values
    amounts = (torch.rand(n, skips, generator=g) * (room[:, None] + 1).float()).long().sort(dim=1).values
    piece = (ids[..., None] >= cuts[:, None, :]).sum(dim=-1)  # cuts at or below each id
    offset = torch.cat((torch.zeros(n, 1, dtype=torch.long), amounts), dim=1).gather(1, piece)
    return Samples(s.tokens, ids + offset, s.prompt_len, s.length)
