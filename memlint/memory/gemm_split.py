"""How many partial products XLA's Triton GEMMs split a matrix product into.

Compiled for an Ampere or Hopper GPU (whose matrix products are Triton fusions) without a
device to autotune on, XLA splits the contracting dimension of a product ``[M, K] x [K, N]``
into ``split`` slices and sums them afterwards: the slices' results are a
``f32[split, M, N]`` temporary beside the product's output while it runs. The split grows
with ``sqrt(K / N)``, is capped by ``sqrt(K)``, by ``1.05 sqrt(K / tiles)`` for the output's
tiles of 64 rows by 128 columns (contractions of 256 and more; shorter ones shrink once ``M``
passes 128 rows) and keeps the temporary within 8 MiB; a contracting size the slices
do not divide into whole 16-byte vectors (four float32 elements each) is padded, both
operands copied. Fitted to 873 deviceless H100 plans of single products (``M`` 4-1024, ``K``
64-49152, ``N`` 8-4096): 82% of the 474 whose temporary reaches 256 KiB within 10%, the rest
within a factor of two (too many slices for some products of a contracting size of 256 to
1024, which XLA does not split, too few for some of 256 to 1024 rows). A contracting size of
128 to 255 splits the same way once the product reaches 393,216 multiply-adds (a 128-wide
Dense's input gradient at batch 32: ``f32[8, 32, 128]``); on 132 such H100 plans the count
of slices is XLA's in 106, more than XLA's in 12 (XLA does not split a 512-wide product of
16 to 64 rows) and fewer in 14 (XLA's two-slice splits of products of 128K output elements,
and some of a contracting size of 255). The A100 splits such products in half as many slices
or not at all (a 128-wide input gradient at batch 32: not split), so they are taken as not
split there. Shorter contracting sizes are not split. Float16 products split the same way
(their partial sums are float32) and pad to 16-byte vectors of eight elements. The A100
splits some longer products in half as many slices (the 784-wide MNIST products: the
estimate is 10-13% over there) and others as the H100 does (a 7200-wide VGG head: 16 slices,
a 7232-long padded copy of its kernel); the H100's rule is used for both, on the safe side.
A later grid of 136 single-product train steps (harness.gemm_split_probe,
``tests/data/gemm_splits.json``: M 64-2048, K 256-2048, N 64-512) showed the shrink with the
rows starting later for contracting sizes of 256 and more: from 224 rows, not 128, the grid
agreed on 118 products instead of 102, XLA taking more slices than the rule on 18. The
shrink by rows alone missed that it is the output's tile count that halves the split (a
256-to-128 product at 256 rows keeps 8 slices, a 784-to-512 one 4): capping the split by
``1.05 sqrt(K / tiles)``, tiles of 64 rows (counted fractionally) by 128 columns, the grid
agrees on 135 of 136 (XLA takes more slices on one, two where the rule takes none, 784 to
512 at 1,024 rows), fewer on none; over the stored train steps it moved two rows
(``synthetic_data_loops`` at batch 256 on the H100 -20.1% -> -0.3%, ``mnist_mlp_sgd`` at
256 +0.4% -> +7.4%, its splits now XLA's).
"""

from __future__ import annotations

import math

PARTIALS_CAP = 8 * 2 ** 20  # bytes of partial sums a split keeps within
MAX_SPLIT = 128
# a contracting size under 256, and a kernel gradient's product: the split shrinks with the
# square root of the rows beyond this many
SHRINK_FROM_ROWS = 128
# a contracting size of 256 or more: at most TILED_SPLIT * sqrt(contracting / tiles) slices,
# the output counted in tiles of TILE_ROWS x TILE_COLUMNS
TILE_ROWS, TILE_COLUMNS = 64, 128
TILED_SPLIT = 1.05
# a contracting size of 128 to 255 is split only from this many multiply-adds on
SHORT_MIN_WORK = 3 * 2 ** 17


def _floor_pow2(x: float) -> int:
    return 0 if x < 1 else 2 ** int(math.floor(math.log2(x) + 1e-9))


def _ceil_pow2(x: float) -> int:
    return 1 if x <= 1 else 2 ** int(math.ceil(math.log2(x) - 1e-9))


def split_k(rows: int, contracting: int, columns: int, short: bool = True,
            transposed: bool = False) -> int:
    """The number of slices (0: not split) of a ``[rows, contracting] x
    [contracting, columns]`` product (its operands' dtype does not change it);
    ``short=False``: a contracting size under 256 is not split (the A100);
    ``transposed``: a kernel gradient ``x.T @ dy``, which contracts the batch: its split
    shrinks from 128 rows (the grid of forward products does not cover it; an H100 plan of a
    784-512-512-10 MLP at batch 1024 does not split its first kernel gradient in four)."""
    if rows < 4 or contracting < (128 if short else 256) or columns < 8:
        return 0
    if contracting < 256 and rows * contracting * columns < SHORT_MIN_WORK:
        return 0
    ideal = min(_floor_pow2(8 * math.sqrt(contracting / columns)),
                _ceil_pow2(math.sqrt(contracting) / 2), MAX_SPLIT)
    if contracting >= 256 and not transposed:
        # no more slices than the contracting size's square root spread over the output's
        # tiles (64 rows by 128 columns; rows counted fractionally)
        tiles = max(1.0, rows / TILE_ROWS) * -(-columns // TILE_COLUMNS)
        split = min(ideal, _floor_pow2(TILED_SPLIT * math.sqrt(contracting / tiles)))
    else:
        split = _floor_pow2(ideal / math.sqrt(max(1.0, rows / SHRINK_FROM_ROWS)))
    capped = _floor_pow2(PARTIALS_CAP / 4 / (rows * columns))
    if capped < split and ideal >= 4:
        return max(capped, 2)
    return split if split >= 4 else 0


def partial_sum_bytes(rows: int, contracting: int, columns: int, short: bool = True) -> int:
    """Bytes of the float32 partial sums alone (``f32[split, rows, columns]``) of a split
    ``[rows, contracting] x [contracting, columns]`` product (0: not split)."""
    return split_k(rows, contracting, columns, short) * rows * columns * 4


def padded_left_bytes(rows: int, contracting: int, columns: int, itemsize: int = 4,
                      short: bool = True) -> int:
    """Bytes of the left operand's padded copy (``[rows, padded contracting]``) of a split
    ``[rows, contracting] x [contracting, columns]`` product whose slices the contracting
    size does not divide into whole 16-byte vectors (0: not split, or not padded); part of
    :func:`partial_bytes`."""
    split = split_k(rows, contracting, columns, short)
    step = 16 // itemsize * split
    if not split or not contracting % step:
        return 0
    return rows * (-(-contracting // step) * step) * itemsize


def partial_bytes(rows: int, contracting: int, columns: int, itemsize: int = 4,
                  copy_right: bool = True, short: bool = True,
                  transposed: bool = False) -> int:
    """Bytes of what a split product of ``itemsize``-byte operands holds while it runs: the
    float32 partial sums, and, where the contracting size is no multiple of 16 bytes per
    slice, copies of both operands padded to one (measured: ``[8, 784] x [784, 512]`` in
    float32 splits 8 ways and pads to 800, ``f32[800, 512]`` and ``f32[8, 800]`` beside
    ``f32[8, 8, 512]``: 1,795,072 bytes; ``[32, 784] x [784, 512]`` in float16 pads to 832:
    1,429,504 bytes).  ``copy_right=False``: the right operand is written padded where it is
    made (a weight cast to 16 bits for the product), so only the left one is copied.
    ``short``, ``transposed``: see :func:`split_k`."""
    split = split_k(rows, contracting, columns, short, transposed)
    if not split:
        return 0
    size = split * rows * columns * 4
    step = 16 // itemsize * split
    if contracting % step:
        padded = -(-contracting // step) * step
        size += ((padded * columns if copy_right else 0) + rows * padded) * itemsize
    return size
