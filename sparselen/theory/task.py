"""k-sparse planted correlation distributions (the paper's Definition 3.2) as a sampler.

[paper] A sample of length l is drawn as follows: a set S of k planted positions is drawn
from a law Q_l over k-subsets of [l]; the tokens at S are drawn from a planted distribution
mu over V^k; every other token is drawn i.i.d. from a background distribution nu over V; the
label depends on the planted tokens X_S only. Locality: the spread max(S) - min(S) is at most
L_local. Regularity (Assumption 4.2): the law of S, seen relative to min(S), is (nearly) the
same for every length.

[ours, a reconstruction] The concrete family sampled here. Tokens are values 0..q-1, the same
values "marked" (q..2q-1), and a query token 2q that ends every sample; the label (a value)
is what the query position predicts. The first planted token is marked (``mark="first"``),
or every planted token is (``mark="all"``). Offsets of S relative to min(S) are fixed,
d_j = (j-1) * gap (``offsets="fixed"``; required when only the first token is marked, so that
the planted tuple can be found at all), or a uniform sorted (k-1)-subset of 1..locality-1
(``offsets="random"``). Three laws of S:

- ``local``: S = s + d with s uniform; the spread is bounded for every length.
- ``nonlocal``: the l content tokens form k blocks of m = l/k tokens; planted token j sits in
  block j at in-block index s (+ d_j with random offsets; with fixed offsets all planted
  tokens share their in-block index, like digits of equal significance in addition). The
  spread grows like l (k >= 2), and the offsets seen at length l are never seen at another
  length: no locality, no regularity.
- ``coupled``: the same tokens as ``nonlocal``, with coupled position ids (the in-block index,
  as in position coupling, Cho et al. 2024): planted tokens are about l/k apart in absolute
  position but 0 (fixed offsets) or d_j (random offsets) apart in coupled position, so in
  coupled ids the law is local.

For k = 1 the three laws coincide (a single token is always local).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from sparselen.nn.batch import IGNORE, Batch
from sparselen.runtime.rng import generator

POSITION_LAWS = ("local", "nonlocal", "coupled")
LABELS = ("sum_mod", "first", "max")


@dataclass(frozen=True)
class PlantedConfig:
    k: int
    positions: str = "local"  # local | nonlocal | coupled
    n_values: int = 2  # q: the value alphabet
    background: tuple | None = None  # law nu of a non-planted value (None: uniform)
    planted: tuple | None = None  # law of each planted value, i.i.d. (None: uniform)
    label: str = "sum_mod"  # sum_mod (sum of planted values mod q) | first | max
    mark: str = "first"  # first | all: which planted tokens carry the mark
    offsets: str = "fixed"  # fixed: d_j = (j-1)*gap | random: sorted subset of 1..locality-1
    gap: int = 1
    locality: int = 4  # random offsets: the spread is at most locality - 1

    def __post_init__(self):
        def bad(key, why):
            raise ValueError(f"planted.{key} = {getattr(self, key)!r}: {why}")

        if self.k < 1:
            bad("k", "must be >= 1")
        if self.positions not in POSITION_LAWS:
            bad("positions", f"expected one of {POSITION_LAWS}")
        if self.n_values < 2:
            bad("n_values", "need at least 2 values")
        for key in ("background", "planted"):
            p = getattr(self, key)
            if p is not None and (len(p) != self.n_values or min(p) < 0 or abs(sum(p) - 1) > 1e-6):
                bad(key, f"must be {self.n_values} non-negative probabilities summing to 1")
        if self.label not in LABELS:
            bad("label", f"expected one of {LABELS}")
        if self.mark not in ("first", "all"):
            bad("mark", "expected first or all")
        if self.offsets not in ("fixed", "random"):
            bad("offsets", "expected fixed or random")
        if self.offsets == "random" and self.mark != "all" and self.k > 1:
            bad("offsets", "random offsets need mark='all' (else the planted tuple cannot be identified)")
        if self.offsets == "random" and self.locality < self.k:
            bad("locality", f"must be >= k = {self.k} to hold k distinct offsets")
        if self.gap < 1:
            bad("gap", "must be >= 1")

    @property
    def vocab_size(self) -> int:
        return 2 * self.n_values + 1

    @property
    def query_token(self) -> int:
        return 2 * self.n_values

    @property
    def spread(self) -> int:
        """Largest max(S) - min(S) of the offsets d (in coupled ids for the coupled law)."""
        if self.offsets == "random":
            return self.locality - 1
        return (self.k - 1) * self.gap if self.positions == "local" else 0

    def blocks(self) -> int:
        return 1 if self.positions == "local" else self.k

    def min_length(self) -> int:
        return self.blocks() * (self.spread + 1)

    def check_length(self, length: int) -> None:
        b = self.blocks()
        if length % b or length < self.min_length():
            raise ValueError(f"length {length} is not valid for the {self.positions} law with k={self.k}: "
                             f"it must be a multiple of {b} and at least {self.min_length()}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class PlantedSamples:
    tokens: torch.Tensor  # (n, l + 1): l content tokens, then the query token
    position_ids: torch.Tensor  # (l + 1,): absolute (local, nonlocal) or coupled ids, shared by all rows
    support: torch.Tensor  # (n, k): the planted positions S (sequence indices), in planted order
    values: torch.Tensor  # (n, k): the planted values
    label: torch.Tensor  # (n,): a value in 0..q-1


def _categorical(probs, shape, g: torch.Generator, n_values: int) -> torch.Tensor:
    if probs is None:
        return torch.randint(0, n_values, shape, generator=g)
    p = torch.tensor(probs, dtype=torch.float64)
    return torch.multinomial(p, int(torch.tensor(shape).prod()), replacement=True, generator=g).view(shape)


def offsets(cfg: PlantedConfig, n: int, g: torch.Generator) -> torch.Tensor:
    """(n, k) offsets d of the planted positions relative to the first; d[:, 0] = 0."""
    if cfg.offsets == "fixed" or cfg.k == 1:
        gap = cfg.gap if cfg.positions == "local" else 0
        return (torch.arange(cfg.k) * gap).expand(n, cfg.k).clone()
    scores = torch.rand(n, cfg.locality - 1, generator=g)
    chosen = scores.argsort(dim=1)[:, : cfg.k - 1] + 1
    return torch.cat((torch.zeros(n, 1, dtype=torch.long), chosen.sort(dim=1).values), dim=1)


def position_ids(cfg: PlantedConfig, length: int) -> torch.Tensor:
    """Ids of the l content tokens and the query: 0..l for local and nonlocal; for coupled,
    the in-block index, and the query gets m (the id after every block's last token)."""
    if cfg.positions != "coupled":
        return torch.arange(length + 1)
    m = length // cfg.k
    return torch.cat((torch.arange(length) % m, torch.tensor([m])))


def sample(cfg: PlantedConfig, length: int, n: int, g: torch.Generator) -> PlantedSamples:
    """``n`` samples with ``length`` content tokens each."""
    cfg.check_length(length)
    d = offsets(cfg, n, g)
    b = cfg.blocks()
    m = length // b
    start = (torch.rand(n, generator=g) * (m - d[:, -1])).long()  # uniform in 0..m-1-d_k
    block = torch.arange(cfg.k) * m if b > 1 else torch.zeros(cfg.k, dtype=torch.long)
    support = start[:, None] + d + block
    tokens = _categorical(cfg.background, (n, length), g, cfg.n_values)
    values = _categorical(cfg.planted, (n, cfg.k), g, cfg.n_values)
    marked = values.clone()
    marked[:, 0] += cfg.n_values
    if cfg.mark == "all":
        marked += cfg.n_values * (torch.arange(cfg.k) > 0)
    tokens.scatter_(1, support, marked)
    tokens = torch.cat((tokens, torch.full((n, 1), cfg.query_token)), dim=1)
    return PlantedSamples(tokens, position_ids(cfg, length), support, values, label_of(cfg, values))


def label_of(cfg: PlantedConfig, values: torch.Tensor) -> torch.Tensor:
    """The label function: a function of the planted values only."""
    if cfg.label == "sum_mod":
        return values.sum(dim=1) % cfg.n_values
    if cfg.label == "first":
        return values[:, 0].clone()
    return values.max(dim=1).values


def spread_in_ids(s: PlantedSamples) -> torch.Tensor:
    """max(S) - min(S) measured in the samples' position ids (absolute or coupled)."""
    ids = s.position_ids[s.support]
    return ids.max(dim=1).values - ids.min(dim=1).values


def planted_config(task: dict, distribution: str, k: int) -> PlantedConfig:
    """``task`` = theory.task (everything but k and the law of S)."""
    t = dict(task)
    for key in ("background", "planted"):
        if t.get(key) is not None:
            t[key] = tuple(t[key])
    return PlantedConfig(k=k, positions=distribution, **t)


def valid_lengths(pc: PlantedConfig, lo: int, hi: int) -> list[int]:
    """The lengths in [lo, hi] the law accepts (multiples of k for the block laws)."""
    return [n for n in range(lo, hi + 1) if n % pc.blocks() == 0 and n >= pc.min_length()]


def eval_lengths(L: int, ratios) -> dict:
    """{ratio: Lbar}: Lbar = ratio * L (L is the longest training length)."""
    return {r: int(round(r * L)) for r in ratios}


def gpt_batches(pc: PlantedConfig, lengths: list[int], batch_size: int, seed: int, coupled: bool, max_id: int):
    """``batch_fn(step) -> Batch`` for ``sparselen.training.train.train``: loss on the query position only.

    For coupled ids [ours: PoSE (Zhu et al. 2024) carried over to coupled ids]: every id of a
    sample is shifted by a random start, the in-block ids from a random cut on by a random skip
    (the same in every block, so coupled tokens keep equal ids), and the query by a further
    skip, all keeping ids <= ``max_id``: in-block distances and query distances of the longest
    evaluated lengths are seen in training. Evaluation uses the unshifted ids.
    """

    def uniform(upper: torch.Tensor, g) -> torch.Tensor:  # integers in 0..upper, per row
        return (torch.rand(upper.shape, generator=g) * (upper + 1)).long()

    def batch_fn(step: int) -> Batch:
        g = generator("theory-train", seed, step)
        n = lengths[int(torch.randint(len(lengths), (1,), generator=g))]
        s = sample(pc, n, batch_size, g)
        labels = torch.full_like(s.tokens, IGNORE)
        labels[:, -1] = s.label  # value v is token id v
        ids = None
        if coupled:
            within, m = s.position_ids[:-1], int(s.position_ids[-1])
            room = torch.full((batch_size,), max(0, max_id - m))
            skip = uniform(room, g)
            start = uniform(room - skip, g)
            query_skip = uniform(room - skip - start, g)
            cut = 1 + (torch.rand(batch_size, generator=g) * max(1, m - 1)).long()
            content = within[None, :] + start[:, None] + skip[:, None] * (within[None, :] >= cut[:, None])
            query = (m + start + skip + query_skip)[:, None]
            ids = torch.cat((content, query), dim=1)
        return Batch(s.tokens, labels, ids)

    return batch_fn
