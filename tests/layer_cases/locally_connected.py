"""Cases for the locally_connected family (Keras 2 LocallyConnected1D/2D).

Keras 3 has no locally connected layers, so each case is built in Keras 3 by an EinsumDense
twin with the same output shape and weight counts: with a 1-wide kernel (implementation 1)
the kernel is one ``(channels, filters)`` matrix per output position; implementation 2's
dense kernel ``(*input spatial, channels, *output spatial, filters)`` is an EinsumDense
kernel for any kernel size.  Other kernel sizes and implementation 3 are checked by hand in
``tests/test_layers_legacy.py``.
"""

from tests.layer_cases import case, keras3


def _twin1d(steps: int, filters: int, bias: bool = True) -> dict:
    """Implementation 1 with kernel_size 1: a ``(steps, channels, filters)`` kernel."""
    kwargs = {"bias_axes": "ed"} if bias else {}
    return keras3("EinsumDense", "abc,ecd->aed", (steps, filters), **kwargs)


def _twin1d_dense(steps: int, filters: int, bias: bool = True) -> dict:
    """Implementation 2: a ``(length, channels, steps, filters)`` kernel."""
    kwargs = {"bias_axes": "ed"} if bias else {}
    return keras3("EinsumDense", "abc,bced->aed", (steps, filters), **kwargs)


def _twin2d(rows: int, cols: int, filters: int, bias: bool = True) -> dict:
    kwargs = {"bias_axes": "efg"} if bias else {}
    return keras3("EinsumDense", "abcd,efdg->aefg", (rows, cols, filters), **kwargs)


def _twin2d_dense(rows: int, cols: int, filters: int) -> dict:
    return keras3("EinsumDense", "abcd,bcdefg->aefg", (rows, cols, filters), bias_axes="efg")


CASES = [
    # LocallyConnected1D, implementation 1, kernel_size 1
    case("LocallyConnected1D", 8, 1, input=[None, 10, 4], twin=_twin1d(10, 8)),
    case("LocallyConnected1D", filters=8, kernel_size=1, use_bias=False, input=[None, 10, 4],
         twin=_twin1d(10, 8, bias=False)),
    case("LocallyConnected1D", 8, 1, strides=3, input=[None, 10, 4], twin=_twin1d(4, 8)),
    case("LocallyConnected1D", 8, 1, 2, input=[None, 9, 4], twin=_twin1d(5, 8)),
    case("LocallyConnected1D", 6, 1, trainable=False, input=[2, 7, 3],
         twin=keras3("EinsumDense", "abc,ecd->aed", (7, 6), bias_axes="ed", trainable=False)),
    case("LocallyConnected1D", 6, 1, data_format="channels_first", input=[None, 3, 7],
         twin=keras3("EinsumDense", "acb,ecd->ade", (6, 7), bias_axes="de")),
    # implementation 2: dense kernel, any kernel size, 'same' padding allowed
    case("LocallyConnected1D", 8, 3, implementation=2, input=[None, 10, 4],
         twin=_twin1d_dense(8, 8)),
    case("LocallyConnected1D", 8, 3, padding="same", implementation=2, input=[None, 10, 4],
         twin=_twin1d_dense(10, 8)),
    case("LocallyConnected1D", 5, 4, strides=2, implementation=2, input=[None, 11, 2],
         twin=_twin1d_dense(4, 5)),
    case("LocallyConnected1D", 5, 3, strides=2, padding="same", implementation=2,
         input=[None, 11, 2], twin=_twin1d_dense(6, 5)),
    case("LocallyConnected1D", 5, 3, use_bias=False, implementation=2, input=[None, 6, 2],
         twin=_twin1d_dense(4, 5, bias=False)),
    # Keras 1 spelling
    case("LocallyConnected1D", nb_filter=8, filter_length=1, input=[None, 10, 4],
         twin=_twin1d(10, 8)),
    case("LocallyConnected1D", 8, 1, subsample_length=2, input=[None, 10, 4],
         twin=_twin1d(5, 8)),
    # LocallyConnected2D
    case("LocallyConnected2D", 8, 1, input=[None, 5, 6, 3], twin=_twin2d(5, 6, 8)),
    case("LocallyConnected2D", 8, (1, 1), strides=(2, 3), input=[None, 5, 6, 3],
         twin=_twin2d(3, 2, 8)),
    case("LocallyConnected2D", 8, kernel_size=1, use_bias=False, input=[None, 5, 6, 3],
         twin=_twin2d(5, 6, 8, bias=False)),
    case("LocallyConnected2D", 4, (3, 2), implementation=2, input=[None, 5, 6, 3],
         twin=_twin2d_dense(3, 5, 4)),
    case("LocallyConnected2D", 4, 3, padding="same", strides=2, implementation=2,
         input=[None, 5, 6, 3], twin=_twin2d_dense(3, 3, 4)),
    case("LocallyConnected2D", nb_filter=8, nb_row=1, nb_col=1, input=[None, 5, 6, 3],
         twin=_twin2d(5, 6, 8)),
    case("LocallyConnected2D", 8, 1, 1, border_mode="valid", subsample=(2, 2),
         input=[None, 5, 6, 3], twin=_twin2d(3, 3, 8)),
    # rejected (the twin is rejected by Keras 3 for the same reason: an unknown size)
    case("LocallyConnected1D", 8, 3, implementation=2, input=[None, None, 4],
         twin=_twin1d_dense(8, 8)),
    case("LocallyConnected1D", 8, 1, input=[None, 10, None], twin=_twin1d(10, 8)),
]
