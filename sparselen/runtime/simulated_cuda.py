"""A simulated CUDA device, so the code path a GPU takes can be checked on a CPU-only machine.

PyTorch's CPU wheel cannot create CUDA tensors, and its ``FakeTensorMode`` refuses ``"cuda"``
without CUDA support. So a wrong-device bug (a batch left on the host, an evaluation fed CPU
samples by a model on the GPU) shows only on a real GPU, hours into a cluster job. Here a
``TorchFunctionMode`` keeps every tensor on the CPU but remembers which storages a real run
would hold on the GPU ("device" storages):

- tensors moved or created on ``cuda`` (``.to``, ``.cuda()``, ``device=`` of a factory,
  ``Module.to``) get device storages; every op with a device input gives device outputs;
  ``.device`` and ``.is_cuda`` answer as on a GPU, so code that follows ``x.device`` behaves
  as it would there;
- an op that mixes device tensors with host tensors of one or more dimensions (host 0-dim
  scalars aside, as CUDA allows), or tensors of two GPUs, raises the ``RuntimeError`` a GPU
  would raise; so do ``.numpy()`` of a device tensor and a CPU generator drawing on the
  device. Indexing a device tensor with host indices and ``copy_`` across devices are
  allowed, as on a GPU;
- ``torch.cuda`` answers as on a node with ``devices`` GPUs (availability, count, properties,
  ``set_device``, streams and synchronisation as no-ops); ``init_process_group("nccl")``
  becomes gloo; gradients of device tensors (``.grad``, ``torch.autograd.grad``) live on the
  device.

Not simulated: numerics (``torch.autocast("cuda")`` is disabled, as the CPU build does, since
bf16 matrix products are several times slower on most CPUs), kernels, memory (see
``sparselen.estimate``) and ``torch.compile``. A job enters the simulation when the environment
variable ``SPARSELEN_SIMULATE_CUDA`` holds its number of GPUs (``sparselen.jobs.dispatch.run``), so a whole
workflow runs under it (``tests/workflow/test_paper_config.py``).
"""

from __future__ import annotations

import contextlib
import os
from types import SimpleNamespace

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.overrides import TorchFunctionMode

ENV = "SPARSELEN_SIMULATE_CUDA"
MEMORY = 80 * 2**30  # the simulated GPU's memory (an H100's), for code that sizes work by it

# Ops that take tensors of several devices on a real GPU too: cross-device copies, and the
# shallow-copy check of Module.to (which compares the host parameter with its device copy).
CROSS_DEVICE = {"copy_", "_has_compatible_shallow_copy_type"}
INDEXING = {"__getitem__", "__setitem__", "index_put_", "index_put"}  # host indices are allowed


def requested() -> int:
    """Simulated GPUs asked for by the environment (0: no simulation)."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return 0
    if not value.isdigit():
        raise ValueError(f"{ENV}={value!r}: expected the number of simulated GPUs (e.g. 1)")
    return int(value)


def _cuda_index(device, current: int) -> int | None:
    """The GPU index a ``device`` argument names, or None when it names no GPU."""
    if device is None:
        return None
    if isinstance(device, int):
        return device
    d = torch.device(device)
    if d.type != "cuda":
        return None
    return current if d.index is None else d.index


def _mismatch(func, devices) -> RuntimeError:
    names = ", ".join(sorted(devices))
    return RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, {names}! "
                        f"(simulated CUDA, in {_name(func)})")


def _tensors(obj):
    """The tensors in an op's arguments (nested lists, tuples and dicts): a plain walk, several
    times faster than ``torch.utils._pytree`` on the few arguments an op takes."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            if isinstance(x, torch.Tensor):
                yield x
            elif isinstance(x, (list, tuple, dict)):
                yield from _tensors(x)
    elif isinstance(obj, dict):
        yield from _tensors(tuple(obj.values()))


_NAMES: dict = {}


def _name(func) -> str:
    """The op's name, cached: it is asked for on every op."""
    try:
        return _NAMES[func]
    except (KeyError, TypeError):
        pass
    name = _op_name(func)
    try:
        _NAMES[func] = name
    except TypeError:
        pass
    return name


def _op_name(func) -> str:
    name = getattr(func, "__name__", str(func))
    if name in ("__get__", "__set__"):
        return f"{getattr(func.__self__, '__name__', '?')}.{name}"
    return name


class SimulatedCuda(TorchFunctionMode):
    """The mode itself; ``simulate`` enters it together with the ``torch.cuda`` answers."""

    def __init__(self, devices: int = 1):
        super().__init__()
        self.devices = devices
        self.current = 0
        self._marks: dict[int, tuple[StorageWeakRef, int, int]] = {}  # storage -> (weak ref, GPU, bytes)

    # -- which storages are on which simulated GPU
    def index(self, t: torch.Tensor) -> int | None:
        if t.layout != torch.strided or t.is_meta:
            return None
        key = t.untyped_storage()._cdata  # a live storage's address: no other live storage has it
        entry = self._marks.get(key)
        if entry is None:
            return None
        ref, idx, _ = entry
        if ref.expired():  # a freed storage whose address was reused
            del self._marks[key]
            return None
        return idx

    def mark(self, out, idx: int):
        for t in _tensors(out):
            if not t.is_meta and t.layout == torch.strided:
                storage = t.untyped_storage()
                entry = self._marks.get(storage._cdata)
                if entry is not None and entry[1] == idx and not entry[0].expired():
                    continue  # a view of a marked storage (most outputs of reshapes and slices)
                ref = StorageWeakRef(storage)
                self._marks[ref.cdata] = (ref, idx, storage.nbytes())
        if len(self._marks) > 4096 and len(self._marks) % 4096 == 0:
            self._marks = {k: v for k, v in self._marks.items() if not v[0].expired()}
        return out

    def check_index(self, idx: int) -> int:
        if not 0 <= idx < self.devices:
            raise RuntimeError(f"CUDA error: invalid device ordinal {idx} (simulated CUDA with {self.devices} GPU(s))")
        return idx

    def device_bytes(self) -> int:
        """Bytes held by live device storages (what ``torch.cuda.memory_allocated`` reports)."""
        self._marks = {k: v for k, v in self._marks.items() if not v[0].expired()}
        return sum(nbytes for _, _, nbytes in self._marks.values())

    # -- the mode
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs) if kwargs else {}
        name = _name(func)
        if name.endswith(".__get__"):
            return self._getter(func, name, args)
        if name.endswith(".__set__"):  # ``p.data = x`` shares x's storage, and so its device
            return func(*args, **kwargs)
        if name in ("to", "cuda", "cpu"):
            return self._transfer(func, name, args, kwargs)
        if name == "pin_memory":  # host memory either way
            return args[0]
        if name in ("numpy", "__array__") and self.index(args[0]) is not None:
            raise TypeError(f"can't convert cuda:{self.index(args[0])} device type tensor to numpy. "
                            "Use Tensor.cpu() to copy the tensor to host memory first. (simulated CUDA)")
        if kwargs.get("pin_memory"):  # host memory either way
            kwargs["pin_memory"] = False
        explicit = _cuda_index(kwargs.get("device"), self.current)
        if explicit is not None:
            kwargs["device"] = "cpu"
            self.check_index(explicit)
        checked = args[:1] + args[2:] if name in INDEXING else args
        devices, host = set(), False
        for t in _tensors((checked, kwargs) if kwargs else checked):
            idx = self.index(t)
            if idx is not None:
                devices.add(idx)
            elif t.dim() > 0:
                host = True
        if name not in CROSS_DEVICE and explicit is None:
            if len(devices) > 1 or (devices and host):
                raise _mismatch(func, {f"cuda:{i}" for i in devices} | ({"cpu"} if host else set()))
        target = explicit if explicit is not None else (min(devices) if devices else None)
        generator = kwargs.get("generator")
        if target is not None and isinstance(generator, torch.Generator) and generator.device.type == "cpu":
            raise RuntimeError(f"Expected a 'cuda' device type for generator but found 'cpu' (simulated CUDA, "
                               f"in {name})")
        out = func(*args, **kwargs)
        if target is not None and name not in CROSS_DEVICE:
            self.mark(out, target)
        return out

    def _getter(self, func, name, args):
        t = args[0]
        if name == "device.__get__":
            idx = self.index(t)
            return torch.device("cuda", idx) if idx is not None else func(*args)
        if name == "is_cuda.__get__":
            return self.index(t) is not None
        if name == "is_cpu.__get__":
            return self.index(t) is None
        out = func(*args)
        if name == "grad.__get__" and isinstance(out, torch.Tensor):  # autograd allocates it on the device
            idx = self.index(t)
            if idx is not None:
                self.mark(out, idx)
        return out

    def _transfer(self, func, name, args, kwargs):
        t, rest = args[0], args[1:]
        src = self.index(t)
        if name == "cpu":
            return func(*args, **kwargs) if src is None else t.to("cpu", copy=True)
        if name == "cuda":
            dst = self.check_index(_cuda_index(rest[0] if rest else kwargs.get("device"), self.current)
                                   if (rest or "device" in kwargs) else self.current)
            dtype, copy = None, False
        else:
            device, dtype, _, memory_format = torch._C._nn._parse_to(*rest, **kwargs)
            copy = bool(kwargs.get("copy", False))
            if device is None:  # a dtype change: stays where it is
                out = func(*args, **kwargs)
                return self.mark(out, src) if src is not None else out
            dst = _cuda_index(device, self.current)
            if dst is None:  # to the host
                if src is None:
                    return func(*args, **kwargs)
                return t.to("cpu", dtype=dtype, copy=True)
            self.check_index(dst)
        if src == dst and not copy and (dtype is None or dtype == t.dtype):
            return t
        return self.mark(t.to("cpu", dtype=dtype, copy=True), dst)


class _Dummy:
    """A stream, event or stream context that does nothing (there is one simulated stream)."""

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __getattr__(self, name):
        return lambda *a, **k: None


@contextlib.contextmanager
def _patched(obj, **values):
    old = {k: getattr(obj, k) for k in values}
    for k, v in values.items():
        setattr(obj, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(obj, k, v)


@contextlib.contextmanager
def simulate(devices: int = 1, memory: int = MEMORY):
    """Run the body as on a node with ``devices`` simulated GPUs of ``memory`` bytes each."""
    if devices < 1:
        raise ValueError(f"simulated CUDA needs at least one GPU, got {devices}")
    mode = SimulatedCuda(devices)
    props = SimpleNamespace(name="Simulated CUDA GPU", total_memory=memory, major=9, minor=0,
                            multi_processor_count=132)

    def set_device(device):
        mode.current = mode.check_index(_cuda_index(device, mode.current) if not isinstance(device, int) else device)

    real_grad, real_autocast, real_init = torch.autograd.grad, torch.autocast, torch.distributed.init_process_group

    def grad(outputs, inputs, *a, **k):
        """Gradients live where their inputs do."""
        got = real_grad(outputs, inputs, *a, **k)
        single = isinstance(inputs, torch.Tensor)
        for g, x in zip(got, [inputs] if single else inputs):
            if g is not None and mode.index(x) is not None:
                mode.mark(g, mode.index(x))
        return got

    class autocast(real_autocast):
        """``autocast("cuda")`` runs disabled, as on a CPU build (numerics are not simulated)."""

        def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
            if device_type == "cuda":
                device_type, enabled = "cpu", False
            super().__init__(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    def init_process_group(backend=None, *a, device_id=None, **k):
        return real_init("gloo" if backend in (None, "nccl") else backend, *a, **k)

    cuda = dict(
        is_available=lambda: True, device_count=lambda: devices, current_device=lambda: mode.current,
        set_device=set_device, get_device_properties=lambda device=None: props,
        get_device_name=lambda device=None: props.name, get_device_capability=lambda device=None: (9, 0),
        is_bf16_supported=lambda *a, **k: True, synchronize=lambda device=None: None, empty_cache=lambda: None,
        manual_seed=lambda seed: None, manual_seed_all=lambda seed: None, init=lambda: None,
        is_initialized=lambda: True, memory_allocated=lambda device=None: mode.device_bytes(),
        max_memory_allocated=lambda device=None: mode.device_bytes(), reset_peak_memory_stats=lambda device=None: None,
        current_stream=lambda device=None: _Dummy(), default_stream=lambda device=None: _Dummy(), Stream=_Dummy,
        Event=_Dummy, stream=lambda s=None: _Dummy())
    with contextlib.ExitStack() as stack:
        stack.enter_context(_patched(torch.cuda, **cuda))
        stack.enter_context(_patched(torch.autograd, grad=grad))
        stack.enter_context(_patched(torch, autocast=autocast))
        stack.enter_context(_patched(torch.amp, autocast=autocast))
        stack.enter_context(_patched(torch.distributed, init_process_group=init_process_group))
        stack.enter_context(mode)
        yield mode


@contextlib.contextmanager
def from_env():
    """``simulate`` with the GPUs ``SPARSELEN_SIMULATE_CUDA`` asks for; nothing when unset."""
    n = requested()
    if not n:
        yield None
        return
    with simulate(n) as mode:
        yield mode
