"""FLOP counts of GPT-NeoX passes, and a job's work as terms a device profile prices
(``sparselen.estimate.profiles``), with its passes' peak memory (``Work.need``:
``sparselen.nn.memory``).

Matrix products only (a multiply-add is 2 FLOPs): per token and layer of a forward pass
``8 d^2 + 4 d d_ff`` for the projections and MLP plus ``4 d c`` for attention over ``c`` keys
(causal: c = (T + 1) / 2 on average over T tokens; a KV-cached generation step attends to the
whole cache); ``2 d V`` per unembedded position (plus the PPC position head). A training step is
3x its forward pass (backward = 2x forward): the usual ``6 N`` per token plus attention (Kaplan
et al. 2020, "Scaling laws for neural language models", section 2.1). The slices' cost functions
(``sparselen/<slice>/cost.py``) build their jobs' ``Work`` from these.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sparselen.nn.memory import DEVICES, Peak


@dataclass(frozen=True)
class Shape:
    """A GPT-NeoX's matrix-product sizes."""

    n_layer: int
    d_model: int
    d_ff: int
    vocab: int
    extra_head: int = 0  # outputs of the PPC position head (evaluated at every position)

    @classmethod
    def of(cls, model: dict, vocab: int, extra_head: int = 0) -> "Shape":
        return cls(int(model["n_layer"]), int(model["d_model"]), int(model["d_ff"]),
                   int(vocab), int(extra_head))

    def layer_flops_per_token(self, keys: float) -> float:
        d = self.d_model
        return self.n_layer * (8 * d * d + 4 * d * self.d_ff + 4 * d * keys)

    def head_flops(self) -> float:
        return 2 * self.d_model * (self.vocab + self.extra_head)

    def forward_flops_per_token(self, seq_len: float) -> float:
        """Causal forward pass, every position unembedded."""
        return self.layer_flops_per_token((seq_len + 1) / 2) + self.head_flops()

    def forward(self, rows: float, seq_len: float, unembed: str = "all") -> float:
        """FLOPs of one causal forward pass over ``rows`` x ``seq_len`` tokens; ``unembed``:
        all positions, or only the ``last`` (the models' ``last_only``: the last layer computes
        keys and values at every position, everything else at the last alone)."""
        full = seq_len * self.layer_flops_per_token((seq_len + 1) / 2)
        if unembed == "all":
            return rows * (full + self.head_flops() * seq_len)
        d = self.d_model
        last_layer = seq_len * 4 * d * d + 4 * d * d + 4 * d * self.d_ff + 4 * d * seq_len
        return rows * (full * (self.n_layer - 1) / self.n_layer + last_layer + self.head_flops())

    def cached_step(self, rows: float, cache_len: float) -> float:
        """One KV-cached generation step: one new token per row attending to ``cache_len`` + 1 keys."""
        return rows * (self.layer_flops_per_token(cache_len + 1) + self.head_flops())


@dataclass
class Term:
    """``calls`` passes of one kind (``train``: forward + backward + optimizer step;
    ``forward``: no-grad forward; ``grad``: forward + input gradients) totalling ``flops``."""

    kind: str
    calls: float
    flops: float
    n_layer: int
    d_model: int
    passes: int = 1  # forward/backward passes per call (a training step's micro-steps)
    runs: int = 1  # runs a call serves (a stack's training step: sparselen.estimate.stacks)
    # a training term's step: its rows, the equally likely lengths of a batch, the model's sizes
    # (what a stack pads to the longest of its runs' batches)
    rows: int = 0
    lengths: tuple = ()
    shape: Shape | None = None
    # a training term's parameters per run: what its optimizer step streams through memory each
    # step, for every run a call serves (``sparselen.estimate.profiles.optimizer_seconds``)
    parameters: int = 0
    # a stack's passes per step, its runs grouped by the length each drew, each group padded to
    # its own longest (``sparselen.training.stacked.length_groups``; a slice's ``length_groups``)
    length_groups: int = 1
    # a no-grad term a stack job takes for all its runs at once (parity's evaluation stack: one
    # pass per batch for every run), priced as one run's calls with all its runs' FLOPs
    stacked: bool = False


@dataclass
class Work:
    terms: list = field(default_factory=list)
    units: dict = field(default_factory=dict)
    # the part a killed attempt keeps, for resubmission arithmetic: its terms' kinds or units'
    # names, its units of progress (training steps, the analysis's searches, tokenization's
    # chunks) and how many of them a checkpoint holds
    resumable: tuple = ("train",)
    train_steps: int = 0
    checkpoint_every: int = 0
    model_job: bool = True  # False: no model (data, tables, figures): always on the CPU profile
    cpu_only: bool = False  # runs on the CPU even in a GPU job (theory SFA runs: --device cpu)
    threads: int = 1  # CPU threads its FLOPs and units run on (theory SFA runs: theory.sfa_threads)
    devices: int = 1  # devices training one model together (language.parallel: processes x nodes)
    memory: dict = field(default_factory=dict)  # device kind ("gpu", "cpu") -> its largest pass (memory.Peak)
    passes: list = field(default_factory=list)  # every pass: (what, key, {kind: bytes}, training step)
    runs: int = 1  # the runs the job trains or evaluates (a stack's: sparselen.estimate.stacks)
    parameters: int = 0  # a training job's parameters per run: its files on disk (sparselen.estimate.disk)

    def need(self, what: str, key: str, peak_bytes, training_step: bool = False, stacked: bool = False) -> "Work":
        """A pass of this job (``what``, shrunk by config ``key``) whose peak memory on a device
        kind is ``peak_bytes(kind)``; the job's peak on each kind is its largest pass.
        ``training_step``: the pass a stack of runs takes for all of them at once (its peak
        scales with the stack, ``memory.stacked``); ``stacked``: another such pass (parity's
        evaluation stack)."""
        bytes_ = {kind: float(peak_bytes(kind)) for kind in DEVICES}
        self.passes.append((what, key, bytes_, training_step or stacked))
        for kind, b in bytes_.items():
            if kind not in self.memory or b > self.memory[kind].bytes:
                self.memory[kind] = Peak(b, what, key)
        return self

    def add(self, kind: str, calls: float, flops: float, shape: Shape, passes: int = 1, stacked: bool = False) -> "Work":
        self.terms.append(Term(kind, float(calls), float(flops), shape.n_layer, shape.d_model, passes,
                               stacked=stacked))
        return self

    def unit(self, name: str, amount: float) -> "Work":
        self.units[name] = self.units.get(name, 0.0) + float(amount)
        return self

    @property
    def flops(self) -> float:
        return sum(t.flops for t in self.terms)


def mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


def chunks(n: int, batch: int) -> list[int]:
    """The batch sizes of ``n`` rows in batches of at most ``batch``."""
    return [min(batch, n - i) for i in range(0, n, batch)]


def train_work(shape: Shape, train: dict, rows: int, seq_lens: list[float], passes: int = 1,
               parameters: int = 0) -> Work:
    """``train.steps`` training steps of ``rows`` sequences whose length is drawn from ``seq_lens``,
    each in ``passes`` forward/backward passes (micro-steps), of a model of ``parameters``
    parameters (the job's and its training term's)."""
    steps = int(train["steps"])
    per_step = mean(3 * shape.forward(rows, T) for T in seq_lens)
    w = Work(train_steps=steps, checkpoint_every=int(train.get("checkpoint_every", steps)), parameters=int(parameters))
    w.add("train", steps, steps * per_step, shape, passes)
    w.terms[-1] = replace(w.terms[-1], rows=rows, lengths=tuple(seq_lens), shape=shape, parameters=int(parameters))
    return w


def micro_steps(rows: int, micro_batch: int) -> tuple[int, int]:
    """(rows per pass, passes) of a step of ``rows`` in micro-batches of ``micro_batch`` rows
    (0, or at least ``rows``: one pass)."""
    per_pass = min(micro_batch, rows) if micro_batch else rows
    return per_pass, -(-rows // per_pass)


def aggregate(job=None, config=None) -> Work:
    """A table, figure or report job: no model, a fixed cost (pandas, matplotlib, scipy); a
    slice's cost module names it for each such step."""
    return Work(model_job=False).unit("aggregate_job", 1)
