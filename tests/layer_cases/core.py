"""Cases for the core family."""

from tests.layer_cases import case, keras3

CASES = [
    case("Dense", 4, input=[None, 32]),
    case("Dense", 7, use_bias=False, input=[None, 5, 9]),
    case("Dense", units=3, trainable=False, input=[2, 6]),
    case("Dense", output_dim=5, input=[None, 8], twin=keras3("Dense", 5)),
    case("Dense", 3, input=[None, None]),
]

CASES += [
    # Identity and Masking: no weights, same shape, any rank
    case("Identity", input=[None, 8]),
    case("Identity", input=[None, None, 3, 4]),
    case("Identity", trainable=False, input=[2, 5]),
    case("Masking", input=[None, 10, 8]),
    case("Masking", mask_value=-1.0, input=[None, None, 4]),
    case("Masking", 0.5, input=[None, 6]),
    case("Masking", 0.0, trainable=False, input=[3, 4, 2, 2]),
    # EinsumDense: kernel sizes come from output_shape, else from the input
    case("EinsumDense", "ab,bc->ac", 64, input=[None, 32]),
    case("EinsumDense", "ab,bc->ac", output_shape=64, bias_axes="c", input=[None, 32]),
    case("EinsumDense", "abc,cd->abd", (None, 64), bias_axes="d", input=[None, 10, 32]),
    case("EinsumDense", "abc,cd->abd", (10, 64), input=[None, 10, 32]),
    case("EinsumDense", "abc,cd->abd", (12, 64), input=[None, 10, 32]),
    case("EinsumDense", "abc,cde->abde", (None, 4, 16), bias_axes="de", input=[None, 10, 32]),
    case("EinsumDense", "abc,cde->abde", (None, 4, 16), bias_axes="e", input=[None, 10, 32]),
    case("EinsumDense", "abc,cde->abde", (None, 4, 16), bias_axes="be", input=[None, 10, 32]),
    case("EinsumDense", "abc,cde->abde", (None, 4, 16), bias_axes="b", input=[None, 10, 32]),
    case("EinsumDense", "abc,cde->abde", (None, 4, 16), bias_axes="b", input=[None, None, 32]),
    case("EinsumDense", "abcd,cde->abe", (None, 16), bias_axes="e", input=[None, 7, 4, 8]),
    case("EinsumDense", "abc,cd->abd", (None, 64), input=[None, None, 32]),
    case("EinsumDense", "abc,cd->abd", (None, 64), input=[None, 10, None]),
    case("EinsumDense", "abc,bcd->ad", 6, input=[None, 10, 3]),
    case("EinsumDense", "abc,bcd->ad", 6, input=[None, None, 3]),
    # ellipses on the left and right
    case("EinsumDense", "...b,bc->...c", 64, bias_axes="c", input=[None, 5, 7, 32]),
    case("EinsumDense", "...b,bc->...c", 64, input=[None, 32]),
    case("EinsumDense", "...ab,bc->...ac", (5, 9), bias_axes="c", input=[None, 3, 5, 4]),
    case("EinsumDense", "...ab,bc->...ac", (5, 9), bias_axes="a", input=[None, 3, 5, 4]),
    case("EinsumDense", "ab...,bc->ac...", (9,), bias_axes="c", input=[None, 4, 3, 2]),
    case("EinsumDense", "ab...,bc->ac...", 9, input=[None, 4, 3]),
    case("EinsumDense", "abc...,cd->abd...", (None, 9), bias_axes="d", input=[None, 2, 4, 3]),
    case("EinsumDense", "ab,bc->ac", [7], trainable=False, input=[None, 5]),
    case("EinsumDense", "ab,bc->ac", 7, activation="relu", input=[3, 5]),
    # rejected
    case("EinsumDense", "ab,bc->ac", 7, input=[None, None]),
    case("EinsumDense", "ab,bc->ac", None, input=[None, 5]),
    case("EinsumDense", "ab,bc->ac", (None,), input=[None, 5]),
    case("EinsumDense", "ab,bc->ad", 7, input=[None, 5]),
    case("EinsumDense", "ab,bx->ac", 7, input=[None, 5]),
    case("EinsumDense", "ab,bc->ac", 7, bias_axes="x", input=[None, 5]),
    case("EinsumDense", "ab->ac", 7, input=[None, 5]),
    case("EinsumDense", "a,b,c->ac", 7, input=[None, 5]),
    case("EinsumDense", "ab,bc->ac", 7, input=[None, 5, 4]),
    case("EinsumDense", "abc,cd->abd", (None, 7), input=[None, 5]),
    case("EinsumDense", input=[None, 5]),
]
