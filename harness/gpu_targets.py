"""Described GPUs for XLA's deviceless compilation (harness only, never memlint): the facts in
``gpu_targets.yaml`` as the text GpuTargetConfigProto that
``jax.experimental.topologies.get_topology_desc(platform="cuda", target_config=...)`` reads."""

from __future__ import annotations

from pathlib import Path

import yaml

TARGETS_FILE = Path(__file__).with_name("gpu_targets.yaml")
_LIMITS = {"threads_per_block_limit": 1024, "threads_per_warp": 32,
           "block_dim_limit_x": 2147483647, "block_dim_limit_y": 65535,
           "block_dim_limit_z": 65535, "registers_per_core_limit": 65536,
           "registers_per_block_limit": 65536, "thread_dim_limit_x": 1024,
           "thread_dim_limit_y": 1024, "thread_dim_limit_z": 64}
_FIELDS = ("core_count", "fpus_per_core", "threads_per_core_limit", "shared_memory_per_block",
           "shared_memory_per_core", "shared_memory_per_block_optin", "l2_cache_size",
           "memory_bandwidth", "clock_rate_ghz", "device_memory_size")


def targets() -> dict:
    """Every described GPU: ``{key: facts}``."""
    return yaml.safe_load(TARGETS_FILE.read_text(encoding="utf-8"))


def target_config(key: str) -> str:
    """The GpuTargetConfigProto text for one described GPU (``h100``, ``t4``, ``a100``)."""
    facts = targets()[key]
    major, minor = facts["compute_capability"]
    lines = ["gpu_device_info {"]
    lines += [f"  {name}: {value}" for name, value in _LIMITS.items()]
    lines += [f"  {name}: {facts[name]}" for name in _FIELDS]
    lines += [f"  cuda_compute_capability {{ major: {major} minor: {minor} }}",
              f'  name: "{facts["name"]}"',
              f'  device_vendor: "NVIDIA Corporation"',
              "}",
              'platform_name: "CUDA"',
              "dnn_version_info { major: 9 minor: 10 patch: 0 }",
              f'device_description_str: "{facts["name"]}"']
    return "\n".join(lines) + "\n"
