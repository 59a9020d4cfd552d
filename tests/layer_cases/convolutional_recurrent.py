"""Cases for the convolutional_recurrent family (ConvLSTM1D/2D/3D)."""

from tests.layer_cases import case

CASES = []

_FLAGS = [{}, {"return_sequences": True}, {"return_state": True},
          {"return_sequences": True, "return_state": True}]

for _flags in _FLAGS:
    CASES += [
        case("ConvLSTM1D", 4, 3, input=[None, 5, 10, 2], **_flags),
        case("ConvLSTM2D", 8, (3, 3), input=[None, 5, 16, 16, 3], **_flags),
        case("ConvLSTM3D", 2, 3, input=[None, 4, 6, 6, 6, 1], **_flags),
    ]

CASES += [
    # padding, strides, dilation, data formats
    case("ConvLSTM2D", 8, 3, padding="same", input=[None, 5, 16, 16, 3]),
    case("ConvLSTM2D", 8, 3, strides=2, input=[None, 5, 16, 15, 3]),
    case("ConvLSTM2D", 8, 3, strides=(2, 1), padding="same", input=[None, 5, 15, 15, 3]),
    case("ConvLSTM2D", 8, 3, dilation_rate=2, input=[None, 5, 16, 16, 3]),
    case("ConvLSTM2D", 8, (3, 1), input=[None, 5, 16, 16, 3]),
    case("ConvLSTM2D", filters=8, kernel_size=3, padding="SAME", input=[None, 5, 16, 16, 3]),
    case("ConvLSTM2D", 8, 3, data_format="channels_first", input=[None, 5, 3, 16, 16]),
    case("ConvLSTM2D", 8, 3, data_format="channels_first", return_sequences=True,
         return_state=True, input=[None, 5, 3, 16, 12]),
    case("ConvLSTM2D", 8, 3, 1, "same", "channels_first", input=[None, 5, 3, 16, 12]),
    case("ConvLSTM1D", 4, 3, use_bias=False, input=[None, 5, 10, 2]),
    case("ConvLSTM1D", 4, 3, unit_forget_bias=False, dropout=0.1, input=[None, None, 10, 2]),
    case("ConvLSTM1D", 4, 3, go_backwards=True, input=[2, 5, 10, 2]),
    case("ConvLSTM1D", 4, 3, stateful=True, input=[2, 5, 10, 2]),
    case("ConvLSTM1D", 4, 3, trainable=False, input=[None, 5, 10, 2]),
    case("ConvLSTM1D", 4, 3, data_format="channels_first", input=[None, 5, 2, 10]),
    case("ConvLSTM3D", 2, (1, 2, 3), padding="same", input=[None, 4, 6, 6, 6, 1]),
    # rejected
    case("ConvLSTM1D", 4, 3, stateful=True, input=[None, 5, 10, 2]),
    case("ConvLSTM2D", 8, 3, input=[None, 5, None, 16, 3]),
    case("ConvLSTM2D", 8, 3, input=[None, 5, 16, 16, None]),
    case("ConvLSTM2D", 8, 3, input=[None, 16, 16, 3]),
    case("ConvLSTM2D", 8, 3, input=[None, 5, 2, 16, 3]),
    case("ConvLSTM2D", 8, 3, padding="causal", input=[None, 5, 16, 16, 3]),
    case("ConvLSTM2D", 8, 3, strides=2, dilation_rate=2, input=[None, 5, 16, 16, 3]),
    case("ConvLSTM2D", 8, (3, 3, 3), input=[None, 5, 16, 16, 3]),
    case("ConvLSTM1D", 4, 3, input=[None, 5, 10, 2, 2]),
    case("ConvLSTM2D", 8, input=[None, 5, 16, 16, 3]),
]
