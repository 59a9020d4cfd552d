"""Cases for the wrappers family (TimeDistributed).

Lambda needs a Python function, which a JSON case cannot carry: its cases are hand-derived in
``tests/test_layers_wrappers.py``.
"""

from tests.layer_cases import case, keras3, layer

CASES = [
    # Dense on every step; fixed, None and unknown time axes; fixed batch
    case("TimeDistributed", layer("Dense", 4), input=[None, 10, 8]),
    case("TimeDistributed", layer("Dense", 4), input=[None, None, 8]),
    case("TimeDistributed", layer("Dense", 4), input=[3, 10, 8]),
    case("TimeDistributed", layer("Dense", 4, use_bias=False), input=[None, 5, 6]),
    case("TimeDistributed", layer=layer("Dense", units=16), input=[None, 7, 3]),
    case("TimeDistributed", layer("Dense", 4), input=[None, 5, 6, 3]),
    case("TimeDistributed", layer("Dense", 4, trainable=False), input=[None, 10, 8]),
    case("TimeDistributed", layer("Dense", 4), trainable=False, input=[None, 10, 8]),
    # convolution and pooling on every frame of a video
    case("TimeDistributed", layer("Conv2D", 64, 3), input=[32, 10, 128, 128, 3]),
    case("TimeDistributed", layer("Conv2D", 8, (3, 3), padding="same", strides=2),
         input=[None, None, 32, 32, 3]),
    case("TimeDistributed", layer("Conv2D", 8, 3, use_bias=False), input=[None, 4, 9, 9, 2]),
    case("TimeDistributed", layer("Conv2D", 8, 3, data_format="channels_first"),
         input=[None, 4, 2, 9, 9]),
    case("TimeDistributed", layer("Conv1D", 4, 3), input=[None, 5, 7, 7]),
    case("TimeDistributed", layer("Conv3D", 2, 2), input=[None, 3, 4, 4, 4, 1]),
    case("TimeDistributed", layer("MaxPooling2D"), input=[None, 10, 8, 8, 3]),
    case("TimeDistributed", layer("MaxPooling2D", (2, 2), strides=1), input=[None, None, 5, 5, 3]),
    case("TimeDistributed", layer("AveragePooling1D", 2), input=[None, 6, 8, 3]),
    case("TimeDistributed", layer("GlobalAveragePooling2D"), input=[None, 10, 8, 8, 3]),
    # reshaping
    case("TimeDistributed", layer("Flatten"), input=[None, 10, 4, 5]),
    case("TimeDistributed", layer("Flatten"), input=[None, None, 3, 4]),
    case("TimeDistributed", layer("Flatten"), input=[None, 10, 4, 5, 2]),
    case("TimeDistributed", layer("Reshape", (2, -1)), input=[None, 5, 6]),
    # normalization: the axis is counted on the per-step shape
    case("TimeDistributed", layer("BatchNormalization"), input=[None, 10, 8]),
    case("TimeDistributed", layer("BatchNormalization"), input=[None, 10, 6, 6, 3]),
    case("TimeDistributed", layer("BatchNormalization", axis=1), input=[None, 5, 6, 3]),
    case("TimeDistributed", layer("BatchNormalization", center=False, scale=False),
         input=[None, 5, 4]),
    case("TimeDistributed", layer("BatchNormalization"), trainable=False, input=[None, 5, 4]),
    case("TimeDistributed", layer("LayerNormalization"), input=[None, 5, 4]),
    # weightless layers, embeddings, recurrent layers over a second time axis
    case("TimeDistributed", layer("Dropout", 0.5), input=[None, 5, 4]),
    case("TimeDistributed", layer("Activation", "relu"), input=[None, 5, 4, 2]),
    case("TimeDistributed", layer("Embedding", 10, 3), input=[None, 5, 6]),
    case("TimeDistributed", layer("LSTM", 8), input=[None, 5, 7, 3]),
    case("TimeDistributed", layer("GRU", 4, return_sequences=True), input=[None, 5, None, 3]),
    case("TimeDistributed", layer("Bidirectional", layer("LSTM", 4)), input=[None, 5, 7, 3]),
    # Keras 1/2 spellings of the inner layer
    case("TimeDistributed", layer("Convolution2D", 32, 3, 3, border_mode="same", subsample=(2, 2)),
         input=[None, 6, 31, 31, 3],
         twin=keras3("TimeDistributed", layer("Conv2D", 32, (3, 3), padding="same", strides=2))),
    case("TimeDistributed", layer("Dense", output_dim=5), input=[None, 6, 8],
         twin=keras3("TimeDistributed", layer("Dense", 5))),
    case("TimeDistributed", layer("MaxPool2D", 3), input=[None, 2, 9, 9, 1]),
    case("TimeDistributed", layer("BatchNormalization", trainable=False), input=[None, 5, 4]),
    case("TimeDistributed", layer("Conv2DTranspose", 4, 3, strides=2), input=[None, 3, 5, 5, 2]),
    case("TimeDistributed", layer("ZeroPadding2D", 1), input=[None, 3, 5, 5, 2]),
    case("TimeDistributed", layer("UpSampling1D", 2), input=[None, 3, 5, 2]),
    # nested TimeDistributed
    case("TimeDistributed", layer("TimeDistributed", layer("Dense", 3)), input=[None, 4, 5, 6]),
    case("TimeDistributed", layer("TimeDistributed", layer("Dense", 3)), input=[None, 4, 5]),
    # rejected: rank below 3, undefined features, multi-output or multi-input inner layers
    case("TimeDistributed", layer("Dense", 4), input=[None, 5]),
    case("TimeDistributed", layer("Flatten"), input=[None, 5]),
    case("TimeDistributed", layer("Dense", 4), input=[None, 5, None]),
    case("TimeDistributed", layer("Conv2D", 4, 3), input=[None, 5, 7, 7]),
    case("TimeDistributed", layer("Conv2D", 4, 3), input=[None, 5, 2, 2, 3]),
    case("TimeDistributed", layer("LSTM", 4, return_state=True), input=[None, 5, 7, 3]),
    case("TimeDistributed", layer("Concatenate"), input=[None, 5, 7]),
    case("TimeDistributed", "Dense", input=[None, 5, 7]),
    case("TimeDistributed", input=[None, 5, 7]),
]
