"""Byte sizes, the GPU catalog and usable memory."""

import pytest

from memlint.budget import MiB, find_gpu, resolve_budget, tensorflow_reserve
from memlint.units import format_bytes, parse_size


@pytest.mark.parametrize("text,expected", [
    ("2GiB", 2 * 2**30), ("1536MiB", 1536 * 2**20), ("2GB", 2 * 10**9), ("2G", 2 * 2**30),
    ("512", 512), ("1.5GiB", int(1.5 * 2**30)), (" 8 gib ", 8 * 2**30),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "GiB", "2 parsecs", "-1GiB", "0", "two GiB"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_format_bytes_binary_units():
    assert format_bytes(0) == "0 B"
    assert format_bytes(1023) == "1023 B"
    assert format_bytes(2**20) == "1 MiB"
    assert format_bytes(206_538_153 * 4) == "788 MiB"
    assert format_bytes(1.5 * 2**30) == "1.5 GiB"


def test_tensorflow_reserve_by_free_memory_and_capability():
    assert tensorflow_reserve(1 * 2**30, "9.0") == 225 * MiB
    assert tensorflow_reserve(10 * 2**30, "6.1") == 500 * MiB
    assert tensorflow_reserve(10 * 2**30, "7.5") == 1050 * MiB
    assert tensorflow_reserve(10 * 2**30, "8.6") == 1536 * MiB
    assert tensorflow_reserve(10 * 2**30, "9.0") == 1800 * MiB


def test_size_budget_subtracts_context_and_reserve():
    budget = resolve_budget("2GiB")
    # 2048 MiB total, 300 MiB CUDA context, 1748 MiB free < 2 GiB -> TF keeps 225 MiB
    assert budget.total == 2048 * MiB
    assert budget.usable == (2048 - 300 - 225) * MiB


def test_catalog_names_are_forgiving():
    assert find_gpu("RTX 3090")["memory"] == "24GiB"
    assert find_gpu("a100_80gb") is not None
    assert find_gpu("h100")["compute_capability"] == "9.0"
    budget = resolve_budget("t4")
    assert budget.total == 16 * 2**30
    assert budget.framework_reserve == 1050 * MiB  # compute capability 7.5


@pytest.mark.parametrize("name", ["gtx-960", "gtx-1080-ti", "rtx-2080-ti", "rtx-3090",
                                  "rtx-4090", "t4", "v100-16gb", "v100-32gb", "a10g", "l4",
                                  "a100-40gb", "a100-80gb", "h100-80gb", "h200"])
def test_catalog_has_the_promised_gpus(name):
    assert find_gpu(name) is not None


def test_overrides_of_context_and_reserve():
    budget = resolve_budget("8GiB", cuda_context=0, reserve=0)
    assert budget.usable == 8 * 2**30


def test_unknown_gpu_message_lists_forms():
    with pytest.raises(ValueError, match="neither a size"):
        resolve_budget("gtx-9999")


def test_a_context_or_reserve_of_zero_is_accepted_where_the_gpu_size_is_not():
    """``--cuda-context 0 --reserve 0`` (a budget measured without them, or JAX with
    preallocation off): the whole size is usable; a GPU of 0 bytes stays an error."""
    from memlint.analysis import budget_for
    from memlint.config import Settings

    assert parse_size("0", allow_zero=True) == 0 and parse_size("0MiB", allow_zero=True) == 0
    budget = budget_for(Settings(gpu="6MiB", cuda_context="0", reserve="0"))
    assert budget.usable == 6 * MiB
    with pytest.raises(ValueError):
        budget_for(Settings(gpu="0", cuda_context="0", reserve="0"))
