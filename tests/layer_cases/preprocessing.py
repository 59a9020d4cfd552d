"""Cases for the preprocessing family."""

from tests.layer_cases import case

CASES = [
    case("Rescaling", 1.0 / 255, input=[None, 224, 224, 3]),
    case("Rescaling", scale=1.0 / 127.5, offset=-1.0, input=[None, 32, 32, 3]),
    case("Rescaling", 2.0, 0.5, input=[None, None, None, 1]),
    case("Rescaling", 0.5, input=[None, 10]),
    case("Rescaling", [1.0, 2.0, 3.0], input=[None, 8, 8, 3]),
    case("Rescaling", 1.0 / 255, trainable=False, input=[4, 3, 16, 16]),
    case("Rescaling", input=[None, 10]),
]
