"""What the GPU-plan tiers need to compile (jax, jaxlib, Keras, the CUDA plugin and a real
ptxas), and the one rule for when it is missing: a skip, or a failure in CI
(MEMLINT_REQUIRE_GPUPLAN=1)."""

from __future__ import annotations

import importlib.util
import os

import pytest

from harness import gpu_plan


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a parent package is missing
        return False


def require_gpuplan() -> None:
    missing = [m for m in ("jax", "jaxlib", "keras", "jax_plugins.xla_cuda12")
               if not _installed(m)]
    if gpu_plan.real_ptxas() is None:
        missing.append("ptxas (nvidia-cuda-nvcc-cu12)")
    if not missing:
        return
    if os.environ.get("MEMLINT_REQUIRE_GPUPLAN") == "1":
        pytest.fail(f"MEMLINT_REQUIRE_GPUPLAN=1 but {', '.join(missing)} is not installed")
    pytest.skip(f"{', '.join(missing)} not installed (pip install -e '.[gpuplan]')")
