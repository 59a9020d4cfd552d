"""Which family module registers each Keras layer name (its class name and older spellings).

The registry imports a family the first time one of its names is looked up, so a file that
uses Dense and Conv2D does not pay for the preprocessing or recurrent layers.
``tests/test_layer_index.py`` checks this table against what the families register.
"""

FAMILIES = {
    "activations": (
        "Activation", "ELU", "LeakyReLU", "PReLU", "ReLU", "Softmax",
    ),
    "attention": (
        "AdditiveAttention", "Attention", "MultiHeadAttention",
    ),
    "convolutional": (
        "AtrousConvolution1D", "AtrousConvolution2D", "Conv1D", "Conv1DTranspose", "Conv2D",
        "Conv2DTranspose", "Conv3D", "Conv3DTranspose", "Convolution1D",
        "Convolution1DTranspose", "Convolution2D", "Convolution2DTranspose", "Convolution3D",
        "Convolution3DTranspose", "Deconv2D", "Deconv3D", "Deconvolution2D", "Deconvolution3D",
        "DepthwiseConv1D", "DepthwiseConv2D", "SeparableConv1D", "SeparableConv2D",
        "SeparableConvolution1D", "SeparableConvolution2D",
    ),
    "convolutional_recurrent": (
        "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D",
    ),
    "core": (
        "Dense", "EinsumDense", "Identity", "InputLayer", "Masking",
    ),
    "embedding": (
        "Embedding",
    ),
    "locally_connected": (
        "LocallyConnected1D", "LocallyConnected2D",
    ),
    "merging": (
        "Add", "Average", "Concatenate", "Dot", "Maximum", "Minimum", "Multiply", "Subtract",
    ),
    "normalization": (
        "BatchNormalization", "GroupNormalization", "LayerNormalization", "UnitNormalization",
    ),
    "pooling": (
        "AveragePooling1D", "AveragePooling2D", "AveragePooling3D", "AvgPool1D", "AvgPool2D",
        "AvgPool3D", "GlobalAveragePooling1D", "GlobalAveragePooling2D",
        "GlobalAveragePooling3D", "GlobalAvgPool1D", "GlobalAvgPool2D", "GlobalAvgPool3D",
        "GlobalMaxPool1D", "GlobalMaxPool2D", "GlobalMaxPool3D", "GlobalMaxPooling1D",
        "GlobalMaxPooling2D", "GlobalMaxPooling3D", "MaxPool1D", "MaxPool2D", "MaxPool3D",
        "MaxPooling1D", "MaxPooling2D", "MaxPooling3D",
    ),
    "preprocessing": (
        "CategoryEncoding", "CenterCrop", "Discretization", "HashedCrossing", "Hashing",
        "IntegerLookup", "Normalization", "RandomContrast", "RandomCrop", "RandomFlip",
        "RandomRotation", "RandomTranslation", "RandomZoom", "Rescaling", "Resizing",
        "StringLookup", "TextVectorization",
    ),
    "regularization": (
        "ActivityRegularization", "AlphaDropout", "Dropout", "GaussianDropout",
        "GaussianNoise", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D",
    ),
    "reshaping": (
        "Cropping1D", "Cropping2D", "Cropping3D", "Flatten", "Permute", "RepeatVector",
        "Reshape", "UpSampling1D", "UpSampling2D", "UpSampling3D", "ZeroPadding1D",
        "ZeroPadding2D", "ZeroPadding3D",
    ),
    "rnn": (
        "Bidirectional", "CuDNNGRU", "CuDNNLSTM", "GRU", "GRUCell", "LSTM", "LSTMCell", "RNN",
        "SimpleRNN", "SimpleRNNCell", "StackedRNNCells",
    ),
    "wrappers": (
        "Lambda", "TimeDistributed",
    ),
}
