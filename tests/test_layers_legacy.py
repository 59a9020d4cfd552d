"""Keras 2 layers that Keras 3 dropped, checked against counts derived by hand from the
Keras 2 sources (``keras/layers/locally_connected``, ``tf.keras`` ``cudnn_recurrent.py``).

The oracle tier cannot build these with Keras 3; where an exact Keras 3 twin exists, the
cases live in ``tests/layer_cases`` instead (CuDNNGRU, and LocallyConnected with 1-wide
kernels or ``implementation=2``).
"""

from __future__ import annotations

import pytest

import memlint.layers as registry
from memlint.layers.base import Args, LayerError, UnresolvedArgument


def build(type_name: str, input_shape, *args, **kwargs):
    """Output shape, trainable and non-trainable counts of one layer."""
    layer = registry.instantiate(type_name, Args(list(args), kwargs))
    out, weights = registry.call(layer, tuple(input_shape))
    return (out, sum(w.size for w in weights if w.trainable),
            sum(w.size for w in weights if not w.trainable))


# ---------------------------------------------------------------- LocallyConnected1D/2D

@pytest.mark.parametrize("args, kwargs, input_shape, output, params", [
    # implementation 1: (positions, kernel * channels, filters) + bias (positions, filters)
    ((8, 3), {}, (None, 10, 4), (None, 8, 8), 8 * 3 * 4 * 8 + 8 * 8),
    ((8, 3), {"strides": 2}, (None, 10, 4), (None, 4, 8), 4 * 3 * 4 * 8 + 4 * 8),
    ((8, 3), {"use_bias": False}, (None, 10, 4), (None, 8, 8), 8 * 3 * 4 * 8),
    ((8, 3), {"data_format": "channels_first"}, (None, 4, 10), (None, 8, 8),
     8 * 3 * 4 * 8 + 8 * 8),
    ((2, 10), {}, (7, 10, 1), (7, 1, 2), 1 * 10 * 1 * 2 + 2),
    # implementation 3, valid: one value per connection, the same count as implementation 1
    ((8, 3), {"implementation": 3}, (None, 10, 4), (None, 8, 8), 8 * 3 * 4 * 8 + 8 * 8),
    # implementation 3, same: windows clipped at both ends (2 + 3 + 3 + 3 + 2 positions)
    ((4, 3), {"implementation": 3, "padding": "same"}, (None, 5, 2), (None, 5, 4),
     13 * 2 * 4 + 5 * 4),
    # implementation 3, same, stride 2: outputs 0, 2, 4 see 2 + 3 + 2 inputs
    ((4, 3), {"implementation": 3, "padding": "same", "strides": 2}, (None, 5, 2),
     (None, 3, 4), 7 * 2 * 4 + 3 * 4),
    # implementation 2: the dense (length, channels, positions, filters) kernel
    ((8, 3), {"implementation": 2}, (None, 10, 4), (None, 8, 8), 10 * 4 * 8 * 8 + 8 * 8),
    # Keras 1 spellings
    ((), {"nb_filter": 8, "filter_length": 3, "subsample_length": 2}, (None, 10, 4),
     (None, 4, 8), 4 * 3 * 4 * 8 + 4 * 8),
    ((8, 3), {"bias": False, "border_mode": "valid"}, (None, 10, 4), (None, 8, 8),
     8 * 3 * 4 * 8),
])
def test_locally_connected_1d(args, kwargs, input_shape, output, params):
    assert build("LocallyConnected1D", input_shape, *args, **kwargs) == (output, params, 0)


@pytest.mark.parametrize("args, kwargs, input_shape, output, params", [
    # the Keras 2 docstring example: (30*30)*(3*3*3*64) + (30*30)*64 parameters
    ((64, (3, 3)), {}, (None, 32, 32, 3), (None, 30, 30, 64),
     (30 * 30) * (3 * 3 * 3 * 64) + (30 * 30) * 64),
    ((4, 2), {"data_format": "channels_first"}, (None, 3, 5, 5), (None, 4, 4, 4),
     16 * (2 * 2 * 3) * 4 + 4 * 4 * 4),
    ((4, (3, 2)), {"strides": (2, 1)}, (None, 7, 5, 2), (None, 3, 4, 4),
     12 * (3 * 2 * 2) * 4 + 12 * 4),
    # implementation 3, same, 3x3 on 4x4: 3 + 3 + ... per axis = 2 + 3 + 3 + 2 = 10
    ((2, 3), {"implementation": 3, "padding": "same"}, (None, 4, 4, 1), (None, 4, 4, 2),
     10 * 10 * 1 * 2 + 4 * 4 * 2),
    # Keras 1: LocallyConnected2D(nb_filter, nb_row, nb_col, subsample=..., dim_ordering=...)
    ((64, 3, 3), {"border_mode": "valid"}, (None, 32, 32, 3), (None, 30, 30, 64),
     (30 * 30) * (3 * 3 * 3 * 64) + (30 * 30) * 64),
    ((4, 2, 2), {"dim_ordering": "th"}, (None, 3, 5, 5), (None, 4, 4, 4),
     16 * (2 * 2 * 3) * 4 + 4 * 4 * 4),
])
def test_locally_connected_2d(args, kwargs, input_shape, output, params):
    assert build("LocallyConnected2D", input_shape, *args, **kwargs) == (output, params, 0)


def test_locally_connected_trainable_false_moves_every_weight():
    out, trainable, frozen = build("LocallyConnected1D", (None, 10, 4), 8, 3, trainable=False)
    assert (out, trainable, frozen) == ((None, 8, 8), 0, 8 * 3 * 4 * 8 + 8 * 8)


@pytest.mark.parametrize("type_name, args, kwargs, input_shape", [
    # Keras 2 allows padding="same" only with implementation 2 or 3
    ("LocallyConnected1D", (8, 3), {"padding": "same"}, (None, 10, 4)),
    ("LocallyConnected1D", (8, 3), {"padding": "causal", "implementation": 2}, (None, 10, 4)),
    ("LocallyConnected1D", (8, 3), {"implementation": 4}, (None, 10, 4)),
    ("LocallyConnected1D", (0, 3), {}, (None, 10, 4)),
    # unknown length or channels, too short, wrong rank
    ("LocallyConnected1D", (8, 3), {}, (None, None, 4)),
    ("LocallyConnected1D", (8, 3), {}, (None, 10, None)),
    ("LocallyConnected1D", (8, 3), {}, (None, 2, 4)),
    ("LocallyConnected1D", (8, 3), {}, (None, 10)),
    ("LocallyConnected2D", (8, 3), {}, (None, 10, 4)),
    ("LocallyConnected2D", (8, 3), {}, (None, 10, None, 3)),
    ("LocallyConnected2D", (8, 3), {}, (None, 2, 10, 3)),
])
def test_locally_connected_rejects(type_name, args, kwargs, input_shape):
    with pytest.raises(LayerError):
        build(type_name, input_shape, *args, **kwargs)


def test_locally_connected_2d_three_ints_is_ambiguous():
    # Keras 1 reads (filters, rows, cols); Keras 2 reads (filters, kernel_size, strides).
    with pytest.raises(UnresolvedArgument):
        build("LocallyConnected2D", (None, 8, 8, 3), 16, 3, 3)


# ---------------------------------------------------------------- CuDNNLSTM / CuDNNGRU

def _cudnn_lstm(features: int, units: int) -> int:
    return 4 * (features * units + units * units) + 8 * units


def _cudnn_gru(features: int, units: int) -> int:
    return 3 * (features * units + units * units) + 6 * units


@pytest.mark.parametrize("kwargs, output", [
    ({}, (None, 16)),
    ({"return_sequences": True}, (None, 10, 16)),
    ({"return_state": True}, [(None, 16), (None, 16), (None, 16)]),
    ({"return_sequences": True, "return_state": True},
     [(None, 10, 16), (None, 16), (None, 16)]),
    ({"go_backwards": True}, (None, 16)),
])
def test_cudnn_lstm(kwargs, output):
    assert build("CuDNNLSTM", (None, 10, 8), 16, **kwargs) == (output, _cudnn_lstm(8, 16), 0)


def test_cudnn_lstm_counts():
    # 4 * (8 * 16 + 16 * 16) + 8 * 16 = 1664: 4 * 16 more than LSTM(16), whose bias is 4 * 16
    assert _cudnn_lstm(8, 16) == 1664
    _, lstm, _ = build("LSTM", (None, 10, 8), 16)
    assert _cudnn_lstm(8, 16) - lstm == 4 * 16


@pytest.mark.parametrize("kwargs, output", [
    ({}, (None, 16)),
    ({"return_sequences": True, "return_state": True}, [(None, 10, 16), (None, 16)]),
])
def test_cudnn_gru(kwargs, output):
    assert build("CuDNNGRU", (None, 10, 8), 16, **kwargs) == (output, _cudnn_gru(8, 16), 0)
    assert _cudnn_gru(8, 16) == 1248


def test_cudnn_layers_always_have_a_bias():
    # Keras 2's CuDNN layers take no use_bias; a stray one changes nothing here.
    assert build("CuDNNLSTM", (None, 5, 3), 4, use_bias=False)[1] == _cudnn_lstm(3, 4)


def test_cudnn_lstm_in_bidirectional():
    layer = registry.instantiate("CuDNNLSTM", Args([4], {}))
    out = build("Bidirectional", (None, 5, 3), layer)
    assert out == ((None, 8), 2 * _cudnn_lstm(3, 4), 0)


def test_cudnn_lstm_trainable_false():
    assert build("CuDNNLSTM", (None, 5, 3), 4, trainable=False) == ((None, 4), 0,
                                                                    _cudnn_lstm(3, 4))


@pytest.mark.parametrize("type_name, args, kwargs, input_shape", [
    ("CuDNNLSTM", (0,), {}, (None, 5, 3)),
    ("CuDNNLSTM", (4,), {}, (None, 5, None)),
    ("CuDNNLSTM", (4,), {}, (None, 5)),
    ("CuDNNGRU", (4,), {"stateful": True}, (None, 5, 3)),
])
def test_cudnn_rejects(type_name, args, kwargs, input_shape):
    with pytest.raises(LayerError):
        build(type_name, input_shape, *args, **kwargs)
