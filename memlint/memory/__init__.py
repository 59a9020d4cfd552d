"""The memory model: pure functions from a model graph and its setup to a named breakdown."""

from memlint.memory.estimate import MemoryBreakdown, Part, estimate, max_batch_size

__all__ = ["MemoryBreakdown", "Part", "estimate", "max_batch_size"]
