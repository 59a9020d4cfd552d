"""Cases for the activations family."""

from tests.layer_cases import case, keras3

CASES = [
    # Activation: any rank, no weights
    case("Activation", "relu", input=[None, 8]),
    case("Activation", activation="softmax", input=[None, 5, 3]),
    case("Activation", "tanh", input=[None, None, None, 3]),
    case("Activation", "sigmoid", input=[4, 2, 2, 2, 2]),
    case("Activation", None, input=[None, 7]),
    case("Activation", "linear", trainable=False, input=[None, 3]),
    # ReLU
    case("ReLU", input=[None, 10]),
    case("ReLU", 6.0, input=[None, 32, 32, 3]),
    case("ReLU", max_value=6.0, negative_slope=0.1, threshold=0.5, input=[None, None, 4]),
    case("ReLU", max_value=-1.0, input=[None, 4]),
    case("ReLU", negative_slope=-0.5, input=[None, 4]),
    case("ReLU", threshold=-1.0, input=[None, 4]),
    case("ReLU", negative_slope=None, input=[None, 4]),
    # LeakyReLU (Keras 1/2 spelled the slope ``alpha``)
    case("LeakyReLU", input=[None, 16]),
    case("LeakyReLU", 0.2, input=[None, 4, 4, 8]),
    case("LeakyReLU", negative_slope=0.01, input=[None, None]),
    case("LeakyReLU", alpha=0.1, input=[None, 12], twin=keras3("LeakyReLU", negative_slope=0.1)),
    case("LeakyReLU", negative_slope=-0.1, input=[None, 4]),
    # PReLU: alpha has the input shape minus the batch, 1 along shared axes
    case("PReLU", input=[None, 10]),
    case("PReLU", input=[None, 5, 7]),
    case("PReLU", input=[None, 8, 8, 3]),
    case("PReLU", shared_axes=[1, 2], input=[None, 8, 8, 3]),
    case("PReLU", shared_axes=[2, 3], input=[None, 16, 8, 8]),
    case("PReLU", shared_axes=1, input=[None, None, 6]),
    case("PReLU", shared_axes=(1,), input=[None, None, 6]),
    case("PReLU", shared_axes=[1, 2], input=[None, None, None, 4]),
    case("PReLU", shared_axes=[-1], input=[None, 4, 8]),
    case("PReLU", shared_axes=[0], input=[None, 4, 8]),
    case("PReLU", input=[None, None, 8]),
    case("PReLU", shared_axes=[3], input=[None, 4, 8]),
    case("PReLU", trainable=False, input=[None, 6]),
    case("PReLU", init="zero", input=[None, 5], twin=keras3("PReLU", alpha_initializer="zeros")),
    # ELU
    case("ELU", input=[None, 8]),
    case("ELU", 0.5, input=[None, 3, 3, 3]),
    case("ELU", alpha=2.0, input=[None, None, 2]),
    # Softmax: Keras uses the axis only when the layer runs
    case("Softmax", input=[None, 10]),
    case("Softmax", axis=1, input=[None, 5, 4]),
    case("Softmax", axis=[1, 2], input=[None, 5, 4]),
    case("Softmax", axis=-2, input=[2, None, 6]),
    case("Softmax", axis=5, input=[None, 5, 4]),
]
