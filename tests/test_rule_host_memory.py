"""MEM006 dataset-in-host-memory, called through RuleContext on hand-built graphs.

Sizes are worked out by hand: 50,000 x 224 x 224 x 3 float32 is 30,105,600,000 bytes
(28.0 GiB); the default limit is 2 GiB (2,147,483,648 bytes).
"""

from __future__ import annotations

import textwrap

from memlint.analysis import analyze_text
from memlint.catalog import default_options
from memlint.checks import RULES, RuleContext
from memlint.config import settings_from_table
from memlint.ir import HostData, Location, ModelGraph, TrainingSetup

GiB = 2**30
IMAGENET_LIKE = 50_000 * 224 * 224 * 3 * 4  # 30,105,600,000 bytes


def array(shape, dtype="float32", line=12, what="arrays passed to fit() at line 12",
          itemsize=4) -> HostData:
    size = itemsize
    for d in shape:
        size *= d
    return HostData(what, size, tuple(shape), dtype, Location("m.py", line, 1))


def model(name: str, *host) -> ModelGraph:
    setup = TrainingSetup(batch_size=32, location=Location("m.py", 12, 1),
                          host_data=list(host))
    return ModelGraph(name, Location("m.py", 5, 9), setup=setup)


def check(*graphs, **options) -> list:
    opts = dict(default_options("MEM006"), **options)
    ctx = RuleContext(path="m.py", models=list(graphs), breakdowns=[None] * len(graphs),
                      budget=None, options=opts)
    return list(RULES["MEM006"].check(ctx))


def test_default_limit_is_2_gib():
    assert default_options("MEM006") == {"host-bytes": "2GiB"}


def test_whole_dataset_passed_to_fit():
    data = array((50_000, 224, 224, 3))
    assert data.bytes == IMAGENET_LIKE
    (d,) = check(model("m", data))
    assert d.code == "MEM006" and d.severity == "warning" and d.line == 12
    assert d.message.startswith(
        "50,000 x 224 x 224 x 3 float32 = 28 GiB in host memory (arrays passed to fit() at "
        "line 12), over the 2 GiB host-bytes limit")
    assert "from_tensor_slices" in d.message and "2 GiB or more" in d.message
    assert "(this data is over it)" in d.message
    assert "keras.utils.PyDataset" in d.message and "generator" in d.message
    assert d.data["bytes"] == IMAGENET_LIKE and d.data["shape"] == [50_000, 224, 224, 3]


def test_from_tensor_slices_wording():
    data = array((20_000, 256, 256, 3), dtype="float64", itemsize=8, line=8,
                 what="arrays given to from_tensor_slices() at line 8")
    (d,) = check(model("m", data))
    assert d.line == 8
    assert "`from_tensor_slices` copies it into a tensor" in d.message
    assert "embeds it in the graph as a constant" in d.message


def test_under_the_limit_is_silent():
    small = array((5_000, 32, 32, 3))  # 61,440,000 bytes
    assert check(model("m", small)) == []
    # exactly at the limit is not over it
    exact = HostData("x", 2 * GiB, (2 * GiB,), "uint8", Location("m.py", 3, 1))
    assert check(model("m", exact)) == []
    assert len(check(model("m", HostData("x", 2 * GiB + 1, (2 * GiB + 1,), "uint8")))) == 1


def test_host_bytes_option():
    data = array((1_000, 512, 512, 3))  # 3,145,728,000 bytes = 2.93 GiB
    assert len(check(model("m", data))) == 1
    assert check(model("m", data), **{"host-bytes": "4GiB"}) == []
    assert check(model("m", data), **{"host-bytes": 4 * GiB}) == []
    (d,) = check(model("m", array((1_000, 256, 256, 3))), **{"host-bytes": "512MiB"})
    assert "over the 512 MiB host-bytes limit" in d.message
    assert "this data is over it" not in d.message  # 750 MiB: under TensorFlow's 2 GiB


def test_one_diagnostic_per_array_over_the_limit():
    x = array((50_000, 224, 224, 3))
    y = array((50_000, 1000))  # 200,000,000 bytes: under the limit
    z = array((20_000, 224, 224, 3), line=14, what="arrays passed to predict() at line 14")
    found = check(model("m", x, y, z))
    assert [d.line for d in found] == [12, 14]
    assert all("together" not in d.message for d in found)


def test_arrays_over_the_limit_together():
    a = array((1_500, 512, 512), line=12)  # 1,572,864,000 bytes each, 2.93 GiB together
    b = array((1_500, 512, 512), dtype="int32", line=12)
    (d,) = check(model("seg", a, b))
    assert d.line == 12
    assert d.message.startswith("the arrays model 'seg' is fed take 2.93 GiB of host memory "
                                "together, over the 2 GiB host-bytes limit")
    assert "1,500 x 512 x 512 float32 = 1.46 GiB" in d.message
    assert "1,500 x 512 x 512 int32" in d.message
    assert d.data["bytes"] == 2 * 1_572_864_000


def test_same_array_feeding_two_models_is_reported_once():
    data = array((50_000, 224, 224, 3))
    same = array((50_000, 224, 224, 3))
    found = check(model("a", data), model("b", same))
    assert len(found) == 1 and found[0].model == "a"
    # the same shape handed over at another line is another array
    other = array((50_000, 224, 224, 3), line=20, what="arrays passed to fit() at line 20")
    assert [d.line for d in check(model("a", data), model("b", other))] == [12, 20]


def test_two_equal_arrays_in_one_call_are_two_arrays():
    left, right = array((50_000, 224, 224, 3)), array((50_000, 224, 224, 3))
    assert len(check(model("siamese", left, right))) == 2


def test_end_to_end_numpy_array_to_fit():
    source = textwrap.dedent("""
        import numpy as np
        from tensorflow import keras
        from tensorflow.keras import layers

        x_train = np.zeros((50000, 224, 224, 3), dtype="float32")
        y_train = np.zeros((50000,), dtype="int64")
        model = keras.Sequential([
            keras.Input(shape=(224, 224, 3)),
            layers.GlobalAveragePooling2D(),
            layers.Dense(10),
        ])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(x_train, y_train, batch_size=32)
        """).lstrip("\n")
    report = analyze_text(source, "model.py", settings_from_table({}, "test"))
    found = [d for d in report.diagnostics if d.code == "MEM006"]
    assert [d.line for d in found] == [13]
    assert "50,000 x 224 x 224 x 3 float32 = 28 GiB in host memory" in found[0].message
