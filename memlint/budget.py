"""The GPU memory budget: ``--gpu 2GiB`` or a catalog name, minus what the framework reserves.

Usable memory = total - CUDA context - framework reserve.

* CUDA context: 300 MiB by default (CUDA >= 11.7 with lazy module loading; older setups
  take over 1 GiB: set ``cuda-context``).
* Framework reserve: TensorFlow leaves memory to the system when it preallocates: 225 MiB when
  under 2 GiB is free, otherwise 500 MiB (compute capability <= 6), 1050 MiB (7.x),
  1536 MiB (8.x) or 1800 MiB (>= 9).  A size without a known card assumes 7.x.  Set
  ``reserve`` to override (TensorFlow's own override is ``TF_DEVICE_MIN_SYS_MEMORY_IN_MB``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Optional

from memlint.catalog import data_yaml
from memlint.units import format_bytes, parse_size
from memlint.records import record

_CATALOG = Path(__file__).resolve().parent / "data" / "gpus.yaml"

MiB = 2**20
DEFAULT_CUDA_CONTEXT = 300 * MiB


@record(frozen=True)
class Budget:
    """How much GPU memory a model may use, and how that figure was reached."""

    label: str  # what the user asked for: "2GiB", "t4"
    device: str  # the card's name, or "GPU with 2 GiB"
    total: int
    cuda_context: int
    framework_reserve: int
    # what the process may use at most when the code caps it (a share of the card, a memory
    # limit), with where that comes from; None: no cap
    cap: Optional[int] = None
    cap_source: str = ""
    reserve_source: str = "TensorFlow's default"  # whose reserve framework_reserve is
    devices: int = 1  # GPUs each holding one replica (the budget is per device)
    compute_capability: Optional[str] = None  # the card's, when --gpu names one ("7.5")
    # the verdict's room for memlint's own error, a share of the peak, when configured
    # (None: the backend profile's, memory/verdict.py)
    margin: Optional[float] = None

    @property
    def reserve(self) -> int:
        return self.cuda_context + self.framework_reserve

    @property
    def usable(self) -> int:
        room = max(self.total - self.reserve, 0)
        return min(room, self.cap) if self.cap is not None else room

    def as_dict(self) -> dict:
        return {"label": self.label, "device": self.device, "total": self.total,
                "cuda_context": self.cuda_context, "framework_reserve": self.framework_reserve,
                "reserve_source": self.reserve_source, "cap": self.cap,
                "cap_source": self.cap_source or None, "devices": self.devices,
                "usable": self.usable, "margin": self.margin}


def tensorflow_reserve(free_bytes: int, compute_capability: Optional[str]) -> int:
    """Memory TensorFlow leaves to the system when it preallocates (gpu_device.cc defaults)."""
    if free_bytes < 2 * 2**30:
        return 225 * MiB
    major = int(str(compute_capability).split(".")[0]) if compute_capability else 7
    if major <= 6:
        return 500 * MiB
    if major == 7:
        return 1050 * MiB
    if major == 8:
        return 1536 * MiB
    return 1800 * MiB


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]", "", name.lower())


@lru_cache(maxsize=1)
def catalog() -> dict:
    """The GPU catalog (``memlint/data/gpus.yaml``), keyed by its entry names (read through
    a JSON snapshot: no YAML parser on later runs)."""
    return data_yaml("gpus", _CATALOG, lambda gpus: all("memory" in e for e in gpus.values()))


def find_gpu(name: str) -> Optional[dict]:
    """The catalog entry for ``name`` (case, spaces, dashes and underscores ignored)."""
    wanted = _key(name)
    for key, entry in catalog().items():
        if wanted in {_key(key), *(_key(a) for a in entry.get("aliases", []))}:
            return entry
    return None


def resolve_budget(spec: str, *, cuda_context: Optional[int] = None,
                   reserve: Optional[int] = None, margin: Optional[float] = None) -> Budget:
    """A :class:`Budget` from ``--gpu`` text: a size (``2GiB``, ``2GB``) or a catalog name.

    Raises ``ValueError`` naming the accepted forms when ``spec`` is neither.
    """
    context = DEFAULT_CUDA_CONTEXT if cuda_context is None else cuda_context
    try:  # a size first: no catalog name reads as one, and sizes need no catalog
        total = parse_size(spec)
        device = f"GPU with {spec}"
        capability = None
    except ValueError:
        entry = find_gpu(spec)
        if entry is None:
            names = ", ".join(sorted(catalog()))
            raise ValueError(
                f"--gpu {spec!r} is neither a size (2GiB, 1536MiB, 8GB) nor a known GPU ({names})"
            ) from None
        total = parse_size(entry["memory"])
        device = entry["name"]
        capability = entry.get("compute_capability")
    framework = reserve if reserve is not None else tensorflow_reserve(total - context, capability)
    budget = Budget(label=spec, device=device, total=total, cuda_context=context,
                    framework_reserve=framework,
                    reserve_source="configured" if reserve is not None else
                    "TensorFlow's default",
                    compute_capability=str(capability) if capability else None,
                    margin=margin)
    if budget.usable <= 0:
        raise ValueError(
            f"--gpu {spec!r} leaves no usable memory: the CUDA context "
            f"({format_bytes(context)}) and the framework reserve ({format_bytes(framework)}) "
            "take all of it (set --cuda-context / --reserve if yours are smaller)")
    return budget
