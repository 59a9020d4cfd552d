"""Cases for the regularization family."""

from tests.layer_cases import case, keras3

CASES = [
    # Dropout: any rank, the rate must lie in [0, 1]
    case("Dropout", 0.5, input=[None, 128]),
    case("Dropout", rate=0.0, input=[None, 4, 4]),
    case("Dropout", 1.0, input=[None, None, 3]),
    case("Dropout", 0.25, noise_shape=[None, 1, 8], input=[None, 10, 8]),
    case("Dropout", 0.2, seed=3, trainable=False, input=[None, 7]),
    case("Dropout", 1.5, input=[None, 4]),
    case("Dropout", -0.1, input=[None, 4]),
    case("Dropout", 0.5, noise_shape=[None, 0], input=[None, 4]),
    case("Dropout", 0.5, noise_shape="batch", input=[None, 4]),
    case("Dropout", p=0.3, input=[None, 64], twin=keras3("Dropout", 0.3)),
    # SpatialDropout1D: rank 3
    case("SpatialDropout1D", 0.2, input=[None, 20, 16]),
    case("SpatialDropout1D", rate=0.5, input=[None, None, 8]),
    case("SpatialDropout1D", 0.2, input=[None, 16]),
    case("SpatialDropout1D", 0.2, input=[None, 4, 4, 16]),
    case("SpatialDropout1D", 0.2, trainable=False, input=[None, 20, 16]),
    case("SpatialDropout1D", 2.0, input=[None, 20, 16]),
    case("SpatialDropout1D", p=0.4, input=[None, 10, 3], twin=keras3("SpatialDropout1D", 0.4)),
    # SpatialDropout2D: rank 4, either data format
    case("SpatialDropout2D", 0.3, input=[None, 32, 32, 3]),
    case("SpatialDropout2D", 0.3, data_format="channels_first", input=[None, 3, 32, 32]),
    case("SpatialDropout2D", 0.1, input=[None, None, None, 64]),
    case("SpatialDropout2D", 0.3, input=[None, 32, 3]),
    case("SpatialDropout2D", 0.3, input=[None, 2, 32, 32, 3]),
    case("SpatialDropout2D", 0.3, data_format="channels_middle", input=[None, 8, 8, 3]),
    case("SpatialDropout2D", p=0.2, dim_ordering="th", input=[None, 3, 8, 8],
         twin=keras3("SpatialDropout2D", 0.2, data_format="channels_first")),
    # SpatialDropout3D: rank 5
    case("SpatialDropout3D", 0.5, input=[None, 4, 8, 8, 2]),
    case("SpatialDropout3D", 0.5, data_format="channels_first", input=[None, 2, 4, 8, 8]),
    case("SpatialDropout3D", 0.5, input=[None, 8, 8, 2]),
]

CASES += [
    # GaussianNoise / GaussianDropout / AlphaDropout: no weights, any rank, [0, 1] checks
    case("GaussianNoise", 0.1, input=[None, 16]),
    case("GaussianNoise", stddev=0.5, input=[None, None, 8]),
    case("GaussianNoise", 0.0, seed=1, input=[None, 4, 4, 3]),
    case("GaussianNoise", 1, trainable=False, input=[2, 5]),
    case("GaussianNoise", 1.5, input=[None, 4]),
    case("GaussianNoise", -0.2, input=[None, 4]),
    case("GaussianNoise", input=[None, 4]),
    case("GaussianDropout", 0.3, input=[None, 10]),
    case("GaussianDropout", rate=1.0, input=[None, None, None, 3]),
    case("GaussianDropout", 0.0, input=[None, 7, 2]),
    case("GaussianDropout", 1.2, input=[None, 4]),
    case("GaussianDropout", -1, input=[None, 4]),
    case("GaussianDropout", input=[None, 4]),
    case("AlphaDropout", 0.1, input=[None, 32]),
    case("AlphaDropout", rate=0.5, seed=7, input=[None, None, 6]),
    case("AlphaDropout", 0.2, noise_shape=[None, 1, 6], input=[None, 5, 6]),
    case("AlphaDropout", 0.0, input=[3, 2, 2, 2, 2]),
    case("AlphaDropout", 2.0, input=[None, 4]),
    case("AlphaDropout", input=[None, 4]),
    # ActivityRegularization: l1/l2 must be non-negative numbers
    case("ActivityRegularization", input=[None, 8]),
    case("ActivityRegularization", l1=0.01, input=[None, 4, 8]),
    case("ActivityRegularization", 0.01, 0.02, input=[None, None, 3]),
    case("ActivityRegularization", l2=1e-4, trainable=False, input=[None, 5]),
    case("ActivityRegularization", l1=None, l2=None, input=[None, 5]),
    case("ActivityRegularization", l1=-0.1, input=[None, 5]),
    case("ActivityRegularization", l2=-1, input=[None, 5]),
    case("ActivityRegularization", l1="big", input=[None, 5]),
]

CASES += [
    # Keras 1 spellings: GaussianNoise(sigma), GaussianDropout(p)
    case("GaussianNoise", sigma=0.2, input=[None, 16], twin=keras3("GaussianNoise", 0.2)),
    case("GaussianDropout", p=0.3, input=[None, 4, 16], twin=keras3("GaussianDropout", 0.3)),
    case("GaussianNoise", sigma=2.0, input=[None, 16], twin=keras3("GaussianNoise", 2.0)),
]
