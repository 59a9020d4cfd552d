"""Cases for the core family."""

from tests.layer_cases import case, keras3

CASES = [
    case("Dense", 4, input=[None, 32]),
    case("Dense", 7, use_bias=False, input=[None, 5, 9]),
    case("Dense", units=3, trainable=False, input=[2, 6]),
    case("Dense", output_dim=5, input=[None, 8], twin=keras3("Dense", 5)),
    case("Dense", 3, input=[None, None]),
]
