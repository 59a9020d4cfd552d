"""The split-K temporaries of float32 Dense products under XLA on Hopper
(memlint/memory/gemm_split.py), against deviceless H100 plans of single products
``jax.jit(lambda x, w: x @ w)`` (temp bytes, jax/jaxlib 0.10.2)."""

from __future__ import annotations

import pytest

from memlint.memory.gemm_split import partial_bytes, split_k
from memlint.memory.profiles import XLA
from tests.test_memory_walk import _tensors, estimate, graph_of

# (rows, contracting, columns): the plan's temp bytes
H100_PLANS = {
    (8, 1024, 64): 32_768,
    (32, 1024, 512): 524_288,
    (128, 4096, 1024): 8_388_608,
    (1024, 4096, 1024): 8_388_608,
    (8, 49152, 16): 65_536,
    (32, 49152, 2048): 8_388_608,
    (8, 784, 512): 1_795_072,  # split 8, padded to 800: two copies beside the partial sums
    (8, 784, 64): 272_384,  # split 16, padded to 832
    (32, 7744, 128): 5_521_408,
    (128, 3136, 128): 5_373_952,
    (32, 9216, 512): 2_097_152,
    (8, 64, 512): 0,  # too short a contracting dimension to split
    (1024, 128, 64): 0,
    # a contracting size of 128 to 255 splits from 393,216 multiply-adds on
    (32, 128, 128): 131_072,  # a 128-wide Dense's input gradient at batch 32
    (64, 128, 256): 262_144,
    (16, 192, 128): 65_536,
    (32, 255, 64): 163_840,  # padded to 256: both operands copied
    (16, 160, 128): 0,
    (32, 128, 64): 0,
}


@pytest.mark.parametrize("shape", sorted(H100_PLANS))
def test_partial_bytes_match_the_plans(shape):
    assert partial_bytes(*shape) == H100_PLANS[shape]


def test_the_split_is_a_power_of_two_within_its_cap():
    for rows in (4, 32, 512):
        for contracting in (256, 1000, 65536):
            for columns in (8, 300, 4096):
                split = split_k(rows, contracting, columns)
                assert split == 0 or (split & (split - 1) == 0 and 2 <= split <= 128)
                assert split * rows * columns * 4 <= 8 * 2 ** 20 or split == 2


def test_the_a100_does_not_split_short_contracting_sizes():
    """A100 plan of ``[32, 128] x [128, 128]``: no temporary (the H100 splits it in 8): a
    128-wide Dense's input gradient at batch 32 holds partial sums on the H100 only."""
    assert partial_bytes(32, 128, 128, short=False) == 0
    assert partial_bytes(32, 1024, 512, short=False) == H100_PLANS[(32, 1024, 512)]
    graph = graph_of("model = keras.Sequential([keras.Input((32,)), "
                     "L.Dense(128, activation='relu'), L.Dense(128), L.Dense(5)])", batch=32)
    scratch = []
    for capability in ("9.0", "8.0"):
        breakdown = estimate(graph, profile=XLA, compute_capability=capability)
        scratch.append(max(m["bytes"] for m in breakdown.timeline))
    hopper = _tensors(estimate(graph, profile=XLA, compute_capability="9.0"))
    assert hopper.get("dense_1 split-K partial sums") == 131_072
    assert scratch[0] > scratch[1]


MLP = ("model = keras.Sequential([keras.Input((784,)), L.Dense(512, activation='relu'), "
       "L.Dense(10)])")


def test_the_walk_holds_the_partial_sums_while_the_product_runs_on_triton_gpus():
    graph = graph_of(MLP, batch=8, mode="infer")
    for capability in ("9.0", "8.0"):
        triton = estimate(graph, profile=XLA, compute_capability=capability)
        assert _tensors(triton)["dense split-K partial sums"] == 1_795_072
        assert {p.name: p.bytes for p in triton.parts}["matrix-product scratch"] == 1_795_072
    cublas = estimate(graph, profile=XLA, compute_capability="7.5")  # the T4: cuBLAS
    assert "dense split-K partial sums" not in _tensors(cublas)
    # 16-bit operands pad to 16 bytes per slice (784 -> 832 over 8 slices); the kernel's
    # cast to 16 bits is written padded, so only the input is copied
    mixed = graph_of(MLP, batch=8, mode="infer", policy="mixed_bfloat16")
    held = _tensors(estimate(mixed, profile=XLA, compute_capability="9.0"))
    assert held["dense split-K partial sums"] == 8 * 8 * 512 * 4 + 8 * 832 * 2


def test_float16_products_pad_to_sixteen_bytes_per_slice():
    """Deviceless H100 plan of ``[32, 784] x [784, 512]`` in float16: temp 1,429,504 bytes
    (8 slices of float32 partial sums and both operands padded to 832)."""
    assert partial_bytes(32, 784, 512, itemsize=2) == 1_429_504
    assert partial_bytes(32, 784, 512, itemsize=2, copy_right=False) == \
        1_429_504 - 832 * 512 * 2


# The fit against the stored grid of deviceless H100 plans (harness.gemm_split_probe): how
# many products split_k gives XLA's split for, and how many it splits in fewer slices than
# XLA (fewer slices: fewer partial sums counted, the side that under-estimates).  A change of
# the fit must not do worse on either; the figures are the current fit's, to be raised.
GRID_AGREES_AT_LEAST = 135
GRID_FEWER_AT_MOST = 1


def test_split_k_against_the_stored_grid_of_h100_plans():
    from harness.gemm_split_probe import grid, load

    data = load()
    assert data["meta"]["target"] == "h100"
    splits = {tuple(int(v) for v in key.split(",")): s for key, s in data["splits"].items()}
    assert set(splits) == set(grid())
    ours = {shape: split_k(*shape) for shape in splits}
    agrees = sum(ours[shape] == s for shape, s in splits.items())
    fewer = [(shape, s, ours[shape]) for shape, s in splits.items() if ours[shape] < s]
    assert agrees >= GRID_AGREES_AT_LEAST
    assert len(fewer) <= GRID_FEWER_AT_MOST, fewer
    # the data: every split XLA chose is a power of two
    assert all(s == 0 or s & (s - 1) == 0 for s in splits.values())
