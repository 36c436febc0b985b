"""Jobs that the tests of several layers build: a small parity training's params (``PARAMS``),
one data-parallel language training's job (``job_spec``) and how close its weights must come to
one process's (``TOLERANCE``)."""

PARAMS = {
    "model": {"n_layer": 1, "n_head": 2, "d_model": 32, "d_ff": 64, "rotary_pct": 1.0, "rotary_base": 10000.0,
              "layer_norm_eps": 1e-5},
    "scheme": "pose",
    "pose": {"chunks": 2, "target_length": 101},
    "train": {"lengths": [10, 20], "one_length_per_batch": True, "steps": 600, "batch_size": 16,
              "checkpoint_every": 10, "log_every": 10,
              "optimizer": {"lr": 3e-3, "weight_decay": 0.1, "betas": [0.9, 0.999], "eps": 1e-8,
                            "warmup_steps": 10, "schedule": "linear", "grad_clip": 1.0}},
}

STEPS = 100
MODEL = {"architecture": "olmo", "variant": "olmo1", "n_layer": 2, "n_head": 2, "d_model": 32, "d_ff": 64}
TRAIN = {"steps": STEPS, "batch_tokens": 8 * 32, "checkpoint_every": 10, "log_every": 10,
         "optimizer": {"lr": 3e-3, "warmup_steps": 10}}
TOLERANCE = 1e-5  # max |weight difference| between 1 and 2 processes (float summation order only)


def job_spec(out, tokens, processes=1, strategy="auto", micro_tokens=0) -> dict:
    """The language_train job of one model (context 32, pose, seed 0) writing under ``out``;
    ``micro_tokens``: language.micro_batch_tokens."""
    return {"rule": "language_train", "input": {"tokens": str(tokens)},
            "wildcards": {"context": 32, "run": "pose", "seed": 0},
            "output": {"model": str(out / "model.pt"), "log_csv": str(out / "log.csv"),
                       "summary": str(out / "summary.json")},
            "params": {"model": MODEL, "scheme": "pose", "pose": {"chunks": 2, "target_length": 256}, "train": TRAIN,
                       "checkpoint": str(out / "ckpt.pt")},
            "config": {"device": "cpu", "compile": False, "threads": 1,
                       "language": {"parallel": {"processes": processes, "strategy": strategy},
                                    "micro_batch_tokens": micro_tokens}}}
