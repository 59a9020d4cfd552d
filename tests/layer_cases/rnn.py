"""Cases for the rnn family."""

from tests.layer_cases import case, keras3, layer

_FLAG_COMBOS = [
    {},
    {"return_sequences": True},
    {"return_state": True},
    {"return_sequences": True, "return_state": True},
]

CASES = []

# Every recurrent layer with every output-changing flag combination, with and without bias.
for _kind in ("SimpleRNN", "LSTM", "GRU"):
    for _flags in _FLAG_COMBOS:
        CASES.append(case(_kind, 16, input=[None, 10, 8], **_flags))
        CASES.append(case(_kind, 5, use_bias=False, input=[None, None, 3], **_flags))
    CASES += [
        case(_kind, units=32, input=[None, 50, 100]),
        case(_kind, 4, input=[2, 7, 3]),
        case(_kind, 8, go_backwards=True, input=[None, 6, 4]),
        case(_kind, 8, stateful=True, input=[4, 6, 4]),
        case(_kind, 8, stateful=True, return_sequences=True, return_state=True, input=[4, 6, 4]),
        case(_kind, 8, stateful=True, input=[None, 6, 4]),
        case(_kind, 8, unroll=True, input=[None, 6, 4]),
        case(_kind, 8, dropout=0.2, recurrent_dropout=0.1, input=[None, 6, 4]),
        case(_kind, 8, activation="relu", input=[None, 6, 4]),
        case(_kind, 8, trainable=False, input=[None, 6, 4]),
        case(_kind, 8, input=[None, 6]),
        case(_kind, 8, input=[None, 3, 6, 4]),
        case(_kind, 8, input=[None, 6, None]),
        case(_kind, 0, input=[None, 6, 4]),
        case(_kind, -2, input=[None, 6, 4]),
        # Keras 1: output_dim=, init=, inner_init=, dropout_W=, dropout_U=
        case(_kind, output_dim=12, return_sequences=True, input=[None, 20, 5],
             twin=keras3(_kind, 12, return_sequences=True)),
        case(_kind, output_dim=7, init="glorot_uniform", inner_init="orthogonal",
             dropout_W=0.2, dropout_U=0.2, input=[None, 9, 3], twin=keras3(_kind, 7)),
    ]

CASES += [
    # LSTM / GRU specifics
    case("LSTM", 8, unit_forget_bias=False, implementation=1, input=[None, 6, 4]),
    case("LSTM", 8, use_cudnn=False, input=[None, 6, 4]),
    case("LSTM", 8, use_cudnn="sometimes", input=[None, 6, 4]),
    case("LSTM", 8, consume_less="gpu", forget_bias_init="one", input=[None, 6, 4],
         twin=keras3("LSTM", 8)),
    case("GRU", 8, reset_after=False, input=[None, 6, 4]),
    case("GRU", 8, reset_after=False, use_bias=False, input=[None, 6, 4]),
    case("GRU", 8, reset_after=False, return_sequences=True, return_state=True,
         input=[None, None, 4]),
    case("GRU", 8, reset_after=True, input=[None, 6, 4]),
    case("GRU", 8, use_cudnn=True, input=[None, 6, 4]),
    case("GRU", 8, use_cudnn=1.5, input=[None, 6, 4]),
    case("GRU", output_dim=6, input=[None, 5, 3], twin=keras3("GRU", 6)),
    case("SimpleRNN", 8, unroll=True, input=[None, None, 4]),

    # Bidirectional: every merge mode with every output flag
    case("Bidirectional", layer("LSTM", 8), input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 8), merge_mode="sum", input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 8), merge_mode="mul", input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 8), merge_mode="ave", input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 8), merge_mode=None, input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 8), "concat", input=[None, 10, 4]),
    case("Bidirectional", layer("GRU", 6, return_sequences=True), input=[None, None, 4]),
    case("Bidirectional", layer("GRU", 6, return_sequences=True), merge_mode="sum",
         input=[None, None, 4]),
    case("Bidirectional", layer("GRU", 6, return_sequences=True), merge_mode=None,
         input=[None, None, 4]),
    case("Bidirectional", layer("LSTM", 8, return_state=True), input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 8, return_state=True), merge_mode="ave",
         input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 8, return_state=True), merge_mode=None,
         input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 8, return_sequences=True, return_state=True),
         input=[None, 10, 4]),
    case("Bidirectional", layer("GRU", 5, return_sequences=True, return_state=True),
         merge_mode=None, input=[None, 10, 4]),
    case("Bidirectional", layer("SimpleRNN", 3, return_state=True), merge_mode="mul",
         input=[None, 10, 4]),
    case("Bidirectional", layer("SimpleRNN", 3, use_bias=False), input=[None, 10, 4]),
    case("Bidirectional", layer("GRU", 4, reset_after=False), input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", units=4), input=[None, 10, 4]),
    # trainable flags, stateful, None dims
    case("Bidirectional", layer("LSTM", 8, trainable=False), input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 8), trainable=False, input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 8, stateful=True), input=[3, 10, 4]),
    case("Bidirectional", layer("LSTM", 8, stateful=True), input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 8), input=[None, None, 4]),
    case("Bidirectional", layer("LSTM", 8), input=[None, 10, None]),
    # an explicit backward layer; Keras takes the output shape from the forward layer
    case("Bidirectional", layer("LSTM", 8),
         backward_layer=layer("LSTM", 8, go_backwards=True), input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 4),
         backward_layer=layer("LSTM", 6, go_backwards=True), input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 4),
         backward_layer=layer("GRU", 6, go_backwards=True), merge_mode="sum",
         input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 4, return_sequences=True),
         backward_layer=layer("GRU", 6, go_backwards=True, return_sequences=True),
         merge_mode=None, input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 4),
         backward_layer=layer("LSTM", 4, go_backwards=True, trainable=False),
         input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 4, go_backwards=True),
         backward_layer=layer("LSTM", 4), input=[None, 10, 4]),
    # rejected configurations
    case("Bidirectional", layer("LSTM", 4), backward_layer=layer("LSTM", 4),
         input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 4, go_backwards=True), input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 4),
         backward_layer=layer("LSTM", 4, go_backwards=True, return_sequences=True),
         input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 4, return_state=True),
         backward_layer=layer("LSTM", 4, go_backwards=True), input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 4), merge_mode="max", input=[None, 10, 4]),
    case("Bidirectional", layer("Dense", 4), input=[None, 10, 4]),
    case("Bidirectional", layer("LSTM", 4), input=[None, 4]),
    case("Bidirectional", layer("LSTM", 4), input=[None, 2, 10, 4]),
    # Keras 1 spelling of the wrapped layer
    case("Bidirectional", layer("LSTM", output_dim=10, return_sequences=True),
         merge_mode="concat", input=[None, 15, 8],
         twin=keras3("Bidirectional", layer("LSTM", 10, return_sequences=True))),
]

# RNN with cells: one cell, a list of cells, or a StackedRNNCells
_RNN_FLAGS = [{}, {"return_sequences": True}, {"return_state": True},
              {"return_sequences": True, "return_state": True}]
for _cell in ("SimpleRNNCell", "LSTMCell", "GRUCell"):
    for _flags in _RNN_FLAGS:
        CASES.append(case("RNN", layer(_cell, 6), input=[None, 10, 4], **_flags))
    CASES += [
        case("RNN", layer(_cell, 5, use_bias=False), input=[None, None, 3]),
        case("RNN", layer(_cell, units=3, dropout=0.1), go_backwards=True, input=[2, 7, 4]),
        case("RNN", layer(_cell, 4, trainable=False), input=[None, 7, 4]),
        case("RNN", layer(_cell, 4), trainable=False, input=[None, 7, 4]),
        case("RNN", layer(_cell, 4), input=[None, 7, None]),
        case("RNN", layer(_cell, 4), input=[None, 2, 7, 4]),
        case("RNN", layer(_cell, 4), input=[3, 7]),
        case("RNN", layer(_cell, 4), input=[None, 7]),
        case("RNN", layer(_cell, 4), stateful=True, input=[None, 7, 4]),
        case("RNN", layer(_cell, 4), stateful=True, return_state=True, input=[2, 7, 4]),
        case("RNN", layer(_cell, 4), False, True, unroll=True, input=[None, 7, 4]),
        case("Bidirectional", layer("RNN", layer(_cell, 4)), input=[None, 7, 4]),
        case("Bidirectional", layer("RNN", layer(_cell, 4), return_sequences=True),
             merge_mode="sum", input=[None, 7, 4]),
    ]

CASES += [
    case("RNN", layer("GRUCell", 4, reset_after=False), input=[None, 7, 4]),
    case("RNN", layer("GRUCell", 4, reset_after=False, use_bias=False), input=[None, 7, 4]),
    case("RNN", layer("LSTMCell", 4, unit_forget_bias=False), input=[None, 7, 4]),
    case("RNN", layer("LSTMCell", 0), input=[None, 7, 4]),
    case("RNN", layer("SimpleRNNCell", -1), input=[None, 7, 4]),
    case("RNN", [], input=[None, 7, 4]),
    case("RNN", layer("LSTM", 4), input=[None, 7, 4]),
    case("RNN", layer("Dense", 4), input=[None, 7, 4]),
    case("RNN", input=[None, 7, 4]),
]

# A list of cells, and StackedRNNCells (whose argument is a list of cells).
CASES += [
    case("RNN", [layer("LSTMCell", 8), layer("GRUCell", 3)], input=[None, 7, 4]),
    case("RNN", [layer("LSTMCell", 8), layer("GRUCell", 3)], return_state=True,
         return_sequences=True, input=[None, 7, 4]),
    case("RNN", [layer("SimpleRNNCell", 8), layer("LSTMCell", 3)], return_state=True,
         input=[None, None, 4]),
    case("RNN", [layer("SimpleRNNCell", 8), layer("LSTMCell", 3, trainable=False),
                 layer("GRUCell", 2, reset_after=False)], input=[None, 7, 4]),
    case("RNN", layer("StackedRNNCells", [layer("LSTMCell", 5), layer("LSTMCell", 6)]),
         return_state=True, input=[None, 7, 4]),
    case("RNN", layer("StackedRNNCells", cells=[layer("GRUCell", 5)]), input=[None, 7, 4]),
    case("RNN", layer("StackedRNNCells", [layer("LSTMCell", 5), layer("GRUCell", 2)]),
         input=[None, 7, None]),
    case("RNN", [layer("LSTMCell", 5)], input=[None, 7, 4]),
]

# Keras 2 CuDNNGRU: exactly a Keras 3 GRU with reset_after=True (separate input and
# recurrent biases); CuDNNLSTM has no Keras 3 twin (see tests/test_layers_legacy.py).
for _flags in _FLAG_COMBOS:
    CASES.append(case("CuDNNGRU", 16, input=[None, 10, 8], twin=keras3("GRU", 16, **_flags),
                      **_flags))
CASES += [
    case("CuDNNGRU", units=4, go_backwards=True, input=[None, None, 3],
         twin=keras3("GRU", 4, go_backwards=True)),
    case("CuDNNGRU", 4, stateful=True, input=[2, 5, 3], twin=keras3("GRU", 4, stateful=True)),
    case("CuDNNGRU", 4, trainable=False, input=[None, 5, 3], twin=keras3("GRU", 4,
                                                                         trainable=False)),
    case("Bidirectional", layer("CuDNNGRU", 4), input=[None, 5, 3],
         twin=keras3("Bidirectional", layer("GRU", 4))),
    case("CuDNNGRU", 4, input=[None, 5, None], twin=keras3("GRU", 4)),
    case("CuDNNGRU", 4, stateful=True, input=[None, 5, 3], twin=keras3("GRU", 4, stateful=True)),
]
