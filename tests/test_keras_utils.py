"""Keras's application helpers, evaluated statically (expected values follow
keras/src/applications/imagenet_utils.py; the applications oracle checks them end to end)."""

import pytest

from memlint.frontends.keras.keras_utils import correct_pad, obtain_input_shape
from memlint.frontends.keras.values import Tensor, is_unknown


@pytest.mark.parametrize("args,expected", [
    ((None, 224, 32, "channels_last", True, "imagenet"), (224, 224, 3)),
    ((None, 224, 32, "channels_last", False, None), (None, None, 3)),
    ((None, 224, 32, "channels_first", False, None), (3, None, None)),
    (((160, 160, 3), 224, 32, "channels_last", False, "imagenet"), (160, 160, 3)),
    (((96, 128, 1), 224, 32, "channels_last", True, None), (96, 128, 1)),
    (((1, 64, 64), 224, 32, "channels_first", False, None), (1, 64, 64)),
])
def test_obtain_input_shape(args, expected):
    assert obtain_input_shape(list(args), {}) == expected


@pytest.mark.parametrize("args", [
    ((160, 160, 3), 224, 32, "channels_last", True, "imagenet"),  # top needs 224x224x3
    ((16, 16, 3), 224, 32, "channels_last", False, None),  # under min_size
    ((64, 64, 1), 224, 32, "channels_last", False, "imagenet"),  # imagenet needs 3 channels
    ((None, None, 3), 224, 32, "channels_last", True, None),  # a top needs a static size
])
def test_obtain_input_shape_refusals_are_unknown(args):
    assert is_unknown(obtain_input_shape(list(args), {}))


def test_correct_pad_for_even_and_odd_maps():
    assert correct_pad([Tensor((None, 112, 112, 32)), 3], {}, "channels_last") == ((0, 1), (0, 1))
    assert correct_pad([Tensor((None, 7, 9, 8)), (5, 3)], {}, "channels_last") == ((2, 2), (1, 1))
    assert correct_pad([Tensor((None, 8, 16, 16)), 3], {}, "channels_first") == ((0, 1), (0, 1))
