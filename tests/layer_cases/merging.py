"""Cases for the merging family."""

from tests.layer_cases import case

CASES = []

# The element-wise merges share Keras's broadcasting rules.
for _kind in ("Add", "Multiply", "Average", "Maximum", "Minimum"):
    CASES += [
        case(_kind, input=[[None, 16], [None, 16]], call="list"),
        case(_kind, input=[[None, 8, 8, 3], [None, 8, 8, 3], [None, 8, 8, 3]], call="list"),
        case(_kind, input=[[None, 4], [None, 5]], call="list"),
        case(_kind, input=[[None, None], [None, 5]], call="list"),
        case(_kind, input=[[None, 5], [None, None]], call="list"),
        case(_kind, input=[[None, 1, 5], [None, 3, 5]], call="list"),
        case(_kind, input=[[None, 3, 5], [None, 5]], call="list"),
        case(_kind, input=[[None, 3, 5], [None, 3]], call="list"),
        case(_kind, input=[[2, 5], [3, 5]], call="list"),
        case(_kind, input=[[None, 5], [3, 5]], call="list"),
        case(_kind, input=[[None, 4]], call="list"),
    ]

CASES += [
    case("Add", input=[[None, 5], [None, 5], [None, 1]], call="list"),
    case("Add", input=[[None, 1], [None, 1, 7], [None, 6, 1]], call="list"),
    case("Add", input=[[None, 2, 3], [None, 2, 4]], call="list"),
    case("Add", input=[[None, 10, 10, 32], [None, 10, 10, 32]], trainable=False, call="list"),
    case("Average", input=[[None, 1], [None, None]], call="list"),
    case("Maximum", input=[[None], [None]], call="list"),
    case("Maximum", input=[[None], [None, 3]], call="list"),
    case("Multiply", input=[[None, 2, 3], [None, 2, 1]], call="list"),
    case("Multiply", input=[[8, None, 3], [8, 4, 3]], call="list"),
    # Subtract takes exactly two inputs
    case("Subtract", input=[[None, 16], [None, 16]], call="list"),
    case("Subtract", input=[[None, 4, 16], [None, 1, 16]], call="list"),
    case("Subtract", input=[[None, 16], [None, 8]], call="list"),
    case("Subtract", input=[[None, None, 3], [None, 7, 3]], call="list"),
    case("Subtract", input=[[None, 5], [None, 5], [None, 5]], call="list"),
    case("Subtract", input=[[None, 5]], call="list"),
    # Concatenate: other dims (batch included) must match; None matches anything
    case("Concatenate", input=[[None, 2, 3], [None, 2, 4]], call="list"),
    case("Concatenate", axis=1, input=[[None, 2, 3], [None, 5, 3]], call="list"),
    case("Concatenate", 1, input=[[None, 2, 3], [None, 5, 3], [None, 1, 3]], call="list"),
    case("Concatenate", axis=-2, input=[[None, 2, 3], [None, 5, 3]], call="list"),
    case("Concatenate", input=[[None, 8, 8, 16], [None, 8, 8, 32]], call="list"),
    case("Concatenate", axis=1, input=[[None, 16, 8, 8], [None, 32, 8, 8]], call="list"),
    case("Concatenate", input=[[None, 2, 3], [None, 3, 4]], call="list"),
    case("Concatenate", axis=1, input=[[None, 2, None], [None, 3, 3]], call="list"),
    case("Concatenate", axis=1, input=[[None, None, 3], [None, 3, 3]], call="list"),
    case("Concatenate", axis=1, input=[[None, 3, 3], [None, None, 3]], call="list"),
    case("Concatenate", input=[[None, None, 3], [None, 4, 3]], call="list"),
    case("Concatenate", input=[[None, 2, 3], [None, 4]], call="list"),
    case("Concatenate", input=[[None, 1, 3], [None, 2, 3]], call="list"),
    case("Concatenate", axis=0, input=[[2, 3], [4, 3]], call="list"),
    case("Concatenate", axis=0, input=[[None, 3], [4, 3]], call="list"),
    case("Concatenate", input=[[2, 3], [4, 3]], call="list"),
    case("Concatenate", input=[[2, 3], [None, 3]], call="list"),
    case("Concatenate", axis=3, input=[[None, 2, 3], [None, 2, 3]], call="list"),
    case("Concatenate", axis=-4, input=[[None, 2, 3], [None, 2, 3]], call="list"),
    case("Concatenate", axis=2, input=[[None, 3, None], [None, 3]], call="list"),
    case("Concatenate", axis=2, input=[[None, 3, 4], [None, 3]], call="list"),
    case("Concatenate", input=[[None, 3]], call="list"),
    case("Concatenate", input=[[None, 7], [None, 9]], trainable=False, call="list"),
]

CASES += [
    # Dot: int or pair axes; sizes along the axes must agree
    case("Dot", 1, input=[[None, 8], [None, 8]], call="list"),
    case("Dot", axes=-1, input=[[None, 8], [None, 8]], call="list"),
    case("Dot", -1, normalize=True, input=[[None, 5, 8], [None, 6, 8]], call="list"),
    case("Dot", axes=(2, 2), input=[[None, 5, 8], [None, 6, 8]], call="list"),
    case("Dot", axes=[1, 1], input=[[None, 5, 8], [None, 5, 3]], call="list"),
    case("Dot", axes=(2, 1), input=[[None, 5, 8], [None, 8, 3]], call="list"),
    case("Dot", axes=(-1, -2), input=[[None, 5, 8], [None, 8, 3]], call="list"),
    case("Dot", 2, input=[[None, 5, 8], [None, 6, 8]], call="list"),
    case("Dot", -1, input=[[None, 4, 5, 8], [None, 8]], call="list"),
    case("Dot", (3, 1), input=[[None, 4, 5, 8], [None, 8]], call="list"),
    case("Dot", 1, input=[[None, None], [None, None]], call="list"),
    case("Dot", 1, input=[[None, None, 4], [None, None, 6]], call="list"),
    case("Dot", 1, input=[[2, 3], [2, 3]], call="list"),
    case("Dot", 1, trainable=False, input=[[None, 3], [None, 3]], call="list"),
    case("Dot", 0, input=[[4, 3], [4, 3]], call="list"),
    # rejected
    case("Dot", 1, input=[[None, 8], [None, 7]], call="list"),
    case("Dot", 1, input=[[None, None], [None, 7]], call="list"),
    case("Dot", (1, 2, 3), input=[[None, 8], [None, 8]], call="list"),
    case("Dot", (1.0, 1), input=[[None, 8], [None, 8]], call="list"),
    case("Dot", "last", input=[[None, 8], [None, 8]], call="list"),
    case("Dot", 1, input=[[None, 8], [None, 8], [None, 8]], call="list"),
    case("Dot", 1, input=[[None, 8]], call="list"),
    case("Dot", 3, input=[[None, 8], [None, 8]], call="list"),
    case("Dot", (1, 4), input=[[None, 8, 2], [None, 8]], call="list"),
    case("Dot", input=[[None, 8], [None, 8]], call="list"),
]
