"""Focused tests of MEM001-MEM004: thresholds, options, messages and locations.

Expected figures are worked out by hand from the rules' formulas (shown in comments), not
copied from memlint's output.  Budgets use ``cuda-context: 1MiB`` and ``reserve: 1MiB`` so
that usable memory is simply the GPU size minus 2 MiB.
"""

from __future__ import annotations

import textwrap
from dataclasses import replace

import libcst as cst
import pytest

from memlint.analysis import analyze_text
from memlint.checks import RULES, RuleContext
from memlint.checks.mem003_deep_stack_on_tiny_input import axis_taps, padding_share
from memlint.config import settings_from_table
from memlint.memory.estimate import estimate, max_batch_size
from memlint.memory.profiles import DEFAULT

MiB = 2**20


def run(source: str, **options):
    table = {key.replace("_", "-"): value for key, value in options.items()}
    settings = settings_from_table(table, "test")
    return analyze_text(textwrap.dedent(source).lstrip("\n"), "model.py", settings)


def diags(source: str, code: str, **options) -> list:
    return [d for d in run(source, **options).diagnostics if d.code == code]


def budget(gpu: str, **rules) -> dict:
    """Settings for a GPU whose usable memory is ``gpu`` minus 2 MiB."""
    options = {"gpu": gpu, "cuda_context": "1MiB", "reserve": "1MiB"}
    if rules:
        options["rules"] = rules
    return options


# ====================================================================== MEM001

DENSE_1000 = """
import tensorflow as tf
from tensorflow import keras

model = keras.Sequential([keras.Input(shape=(1000,)), keras.layers.Dense(1000)])
model.compile(optimizer="{optimizer}", loss="mse")
model.{call}(x, y, batch_size=1)
"""
# Dense(1000) on 1000 inputs: 1000*1000 + 1000 = 1,001,000 parameters, 4,004,000 bytes.
# Adam training: weights + gradients + 2 slots = 4 copies = 16,016,000 bytes.
# SGD training: 2 copies = 8,008,000 bytes.  Inference: 1 copy = 4,004,000 bytes.


def dense_model(optimizer="adam", call="fit") -> str:
    return DENSE_1000.format(optimizer=optimizer, call=call)


def test_mem001_silent_without_budget():
    assert diags(dense_model(), "MEM001") == []


def test_mem001_error_when_training_state_exceeds_usable():
    # 17 MiB GPU -> 15 MiB = 15,728,640 usable < 16,016,000
    found = diags(dense_model(), "MEM001", **budget("17MiB"))
    assert len(found) == 1
    d = found[0]
    assert d.severity == "error" and d.line == 4
    assert d.data["state_bytes"] == 16_016_000
    assert d.data["usable"] == 15 * MiB
    # format_bytes: 4,004,000 B = 3.82 MiB; 8,008,000 B = 7.64 MiB; 16,016,000 B = 15.3 MiB
    assert "weights 3.82 MiB + gradients 3.82 MiB + optimizer 7.64 MiB" in d.message
    assert "15.3 MiB" in d.message and "15 MiB usable of 17 MiB" in d.message
    assert "adam: 2 slots per parameter" in d.message
    assert "Dense layer 'dense' (line 4) holds 100% of the 1,001,000 parameters" in d.message
    # dropping Adam's slots saves 8,008,000 bytes, which brings 16,016,000 under 15,728,640
    assert ("SGD without momentum instead of adam keeps no optimizer slots and saves "
            "7.64 MiB (enough to bring it under the usable memory)") in d.message
    assert "mixed precision would not help" in d.message


def test_mem001_warning_over_warn_share():
    # 19 MiB GPU -> 17 MiB = 17,825,792 usable; 16,016,000 / 17,825,792 = 0.898 > 0.8
    found = diags(dense_model(), "MEM001", **budget("19MiB"))
    assert [d.severity for d in found] == ["warning"]
    assert "90% of the 17 MiB usable" in found[0].message
    # room left: 17,825,792 - 16,016,000 = 1,809,792 B = 1.73 MiB
    assert "leaving 1.73 MiB for activations" in found[0].message


def test_mem001_warn_share_option():
    # 24 MiB GPU -> 22 MiB = 23,068,672 usable; share 16,016,000 / 23,068,672 = 0.694
    assert diags(dense_model(), "MEM001", **budget("24MiB")) == []
    found = diags(dense_model(), "MEM001", **budget("24MiB", MEM001={"warn-share": 0.6}))
    assert [d.severity for d in found] == ["warning"]
    assert "warn-share 60%" in found[0].message


def test_mem001_sgd_counts_no_slots():
    # SGD: 8,008,000 bytes; a 10 MiB GPU has 8 MiB = 8,388,608 usable: 0.955 -> warning
    found = diags(dense_model(optimizer="sgd"), "MEM001", **budget("10MiB"))
    assert [d.severity for d in found] == ["warning"]
    assert found[0].data["state_bytes"] == 8_008_000
    assert "sgd keeps no slots" in found[0].message
    assert "SGD without momentum instead" not in found[0].message


def test_mem001_inference_counts_weights_only():
    # predict(): 4,004,000 bytes of weights; 5 MiB GPU -> 3 MiB = 3,145,728 usable -> error
    found = diags(dense_model(call="predict"), "MEM001", **budget("5MiB"))
    assert [d.severity for d in found] == ["error"]
    assert found[0].data["state_bytes"] == 4_004_000
    assert "weights of model 'sequential' take 3.82 MiB" in found[0].message
    # float16 inference halves the weights: 4,004,000 / 2 = 2,002,000 B = 1.91 MiB
    assert "3.82 MiB -> 1.91 MiB" in found[0].message
    # 6 MiB GPU -> 4 MiB = 4,194,304 usable: 0.955 -> warning; 7 MiB -> 5 MiB: 0.764 -> none
    assert [d.severity for d in diags(dense_model(call="predict"), "MEM001",
                                      **budget("6MiB"))] == ["warning"]
    assert diags(dense_model(call="predict"), "MEM001", **budget("7MiB")) == []


STACK = """
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([
    keras.Input(shape=(256,)),
    layers.Dense(256), layers.Dense(256), layers.Dense(256), layers.Dense(256),
    layers.Dense(256), layers.Dense(256), layers.Dense(256), layers.Dense(256),
    layers.Dense(256), layers.Dense(256),
    layers.Dense(1),
])
model.compile(optimizer="adam", loss="mse")
model.fit(x, y, batch_size=1)
"""


def test_mem001_names_the_run_and_how_many_layers_to_remove():
    # each Dense(256) on 256: 65,792 params; ten of them 657,920; Dense(1): 257.
    # total 658,177; Adam training 16 bytes each = 10,530,832 bytes.
    # 11 MiB GPU -> 9 MiB = 9,437,184 usable; excess 1,093,648 bytes.
    # one Dense(256) frees 65,792 * 16 = 1,052,672 < excess; two free 2,105,344 -> 2 layers.
    found = diags(STACK, "MEM001", **budget("11MiB"))
    assert len(found) == 1 and found[0].severity == "error"
    message = found[0].message
    assert "11 Dense layers dense..dense_10 (lines 6-9)" in message
    assert "removing 2 of the 11 Dense layers in that run would free 2.01 MiB" in message


def test_mem001_suggests_global_pooling_for_flatten_dense():
    source = """
    from tensorflow import keras
    from tensorflow.keras import layers

    model = keras.Sequential([
        keras.Input(shape=(16, 16, 3)),
        layers.Conv2D(8, 3, padding="same"),
        layers.Flatten(),
        layers.Dense(100),
    ])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x, y, batch_size=1)
    """
    # conv: 3*3*3*8 + 8 = 224; Flatten: 16*16*8 = 2048; Dense: 2048*100 + 100 = 204,900.
    # total 205,124 params, SGD training 8 bytes each = 1,640,992 bytes.
    # 3 MiB GPU -> 1 MiB = 1,048,576 usable -> error.
    # GlobalAveragePooling2D feeds 8 values instead of 2048: saves (2048 - 8) * 100 = 204,000
    # parameters, 204,000 * 8 = 1,632,000 bytes = 1.56 MiB.
    found = diags(source, "MEM001", **budget("3MiB"))
    assert len(found) == 1
    assert ("GlobalAveragePooling2D instead of Flatten 'flatten' (line 7) cuts 204,000 "
            "parameters from Dense 'dense' (line 8), saving 1.56 MiB (enough to bring it "
            "under the usable memory)") in found[0].message


# ====================================================================== MEM002

WIDE = """
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([
    keras.Input(shape=(256, 256, 3)),
    layers.Conv2D(64, 1),
    layers.GlobalAveragePooling2D(),
    layers.Dense(1),
])
model.compile(optimizer="sgd", loss="mse")
model.fit(x, y, batch_size={batch})
"""
# Conv2D(64, 1) output: 256*256*64 = 4,194,304 floats = 16 MiB per sample in float32.
# 2050 MiB GPU -> 2048 MiB usable; activation-share 0.25 -> 512 MiB = 32 samples.


def test_mem002_silent_without_budget():
    assert diags(WIDE.format(batch=64), "MEM002") == []


def test_mem002_layer_share_boundary():
    # batch 32: 512 MiB, exactly the share -> not over it
    assert diags(WIDE.format(batch=32), "MEM002", **budget("2050MiB")) == []
    # batch 33: 528 MiB > 512 MiB
    found = diags(WIDE.format(batch=33), "MEM002", **budget("2050MiB"))
    assert len(found) == 1
    d = found[0]
    assert d.severity == "warning" and d.line == 6
    assert "output of Conv2D 'conv2d' is (33, 256, 256, 64) at batch size 33" in d.message
    # 528 / 2048 = 25.8% -> "26%"; 528 MiB in float32; mixed_float16 halves it to 264 MiB
    assert "528 MiB in float32, 26% of the 2 GiB usable" in d.message
    assert "batch size <= 32 keeps it under 25%" in d.message
    assert "mixed_float16 halves it to 264 MiB" in d.message
    assert d.data["per_sample"] == 16 * MiB and d.data["max_batch_under_share"] == 32


def test_mem002_activation_share_option():
    # share 0.5 -> 1024 MiB = 64 samples: batch 33 is fine, batch 65 is not
    options = budget("2050MiB", MEM002={"activation-share": 0.5})
    assert diags(WIDE.format(batch=33), "MEM002", **options) == []
    found = [d for d in diags(WIDE.format(batch=65), "MEM002", **options)
             if d.severity == "warning"]
    assert len(found) == 1 and "batch size <= 64 keeps it under 50%" in found[0].message


def test_mem002_even_one_sample_too_large():
    # 50 MiB GPU -> 48 MiB usable; 25% = 12 MiB < 16 MiB for one sample
    found = [d for d in diags(WIDE.format(batch=1), "MEM002", **budget("50MiB"))
             if d.severity == "warning"]
    assert len(found) == 1
    assert "even one sample's output (16 MiB) is over 25%" in found[0].message


def test_mem002_peak_over_budget_names_largest_batch():
    source = WIDE.format(batch=256)
    report = run(source, **budget("2050MiB", MEM002={"activation-share": 4.0}))
    found = [d for d in report.diagnostics if d.code == "MEM002"]
    assert len(found) == 1
    d = found[0]
    assert d.severity == "error" and d.line == 11  # the fit() call
    graph, breakdown = report.models[0], report.breakdowns[0]
    usable = 2048 * MiB
    assert breakdown.peak > usable >= breakdown.fixed_bytes
    best = d.data["max_batch_size"]
    assert f"batch size <= {best} fits" in d.message
    # the named batch size fits with the default profile's margin, one more does not
    room = int(usable / (1 + DEFAULT.verdict_margin))
    assert estimate(graph, replace(graph.setup, batch_size=best)).peak <= room
    assert estimate(graph, replace(graph.setup, batch_size=best + 1)).peak > room
    # activations at 16 bits are half the float32 ones
    mixed = estimate(graph, replace(graph.setup, dtype_policy="mixed_float16"))
    assert mixed.category("activations") * 2 == breakdown.category("activations")
    assert "mixed_float16 halves activations" in d.message
    assert d.data["mixed_float16_peak"] == mixed.peak
    assert max_batch_size(breakdown, room) == best


def test_mem002_peak_leaves_parameter_overflow_to_mem001():
    # DENSE_1000 with Adam needs 16,016,000 bytes before activations: 17 MiB is too small
    report = run(dense_model(), **budget("17MiB"))
    assert [d.code for d in report.diagnostics if d.code in ("MEM001", "MEM002")] == ["MEM001"]


def test_mem002_max_layers_option():
    source = """
    from tensorflow import keras
    from tensorflow.keras import layers

    model = keras.Sequential([
        keras.Input(shape=(64, 64, 16)),
        layers.Conv2D(16, 1),
        layers.Conv2D(16, 1),
        layers.Conv2D(16, 1),
        layers.GlobalAveragePooling2D(),
    ])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x, y, batch_size=4)
    """
    # each output 64*64*16*4 samples*4 bytes = 1 MiB; 3 MiB GPU -> 1 MiB usable;
    # limit 0.25 MiB -> all three layers are over it.
    options = budget("3MiB", MEM002={"max-layers": 2})
    warnings = [d for d in diags(source, "MEM002", **options) if d.severity == "warning"]
    assert len(warnings) == 2
    assert "1 more layer(s) also exceed the share" in warnings[0].message


# ====================================================================== MEM003

def test_axis_taps_by_hand():
    # 3-tap kernel, 'same', length 4: positions 0..3 see 2, 3, 3, 2 taps inside -> 10 of 12
    assert axis_taps(4, 3, 1, 1, "same") == (10, 12)
    # length 2: 2 + 2 of 6
    assert axis_taps(2, 3, 1, 1, "same") == (4, 6)
    # length 5: 2 + 3 + 3 + 3 + 2 = 13 of 15
    assert axis_taps(5, 3, 1, 1, "same") == (13, 15)
    # stride 2, length 4: 2 outputs, total padding (2-1)*2 + 3 - 4 = 1, all of it after:
    # output 0 reads 0,1,2 (3 inside), output 1 reads 2,3,4 (2 inside) -> 5 of 6
    assert axis_taps(4, 3, 2, 1, "same") == (5, 6)
    # dilation 2, length 5: effective kernel 5, 2 before; taps at -2, 0, +2 of each output:
    # inside for 3, 5 and 3 of the 5 outputs -> 11 of 15
    assert axis_taps(5, 3, 1, 2, "same") == (11, 15)
    # causal, length 4: 2 padded before; taps at -2, -1, 0 inside for 2, 3, 4 outputs
    assert axis_taps(4, 3, 1, 1, "causal") == (9, 12)
    # a 1-tap kernel never reads padding; 'valid' never does
    assert axis_taps(7, 1, 1, 1, "same") == (7, 7)
    assert axis_taps(6, 3, 1, 1, "valid") == (12, 12)


def test_padding_share_by_hand():
    # 3x3 on 4x4: 1 - (10*10)/(12*12) = 44/144
    assert padding_share((4, 4), (3, 3), (1, 1), (1, 1), "same") == pytest.approx(44 / 144)
    # 3x3 on 2x2: 1 - 16/36 = 20/36
    assert padding_share((2, 2), (3, 3), (1, 1), (1, 1), "same") == pytest.approx(20 / 36)
    # 3x3 on 5x5: 1 - 169/225 = 56/225 = 0.249 (just under the default 0.25)
    assert padding_share((5, 5), (3, 3), (1, 1), (1, 1), "same") == pytest.approx(56 / 225)
    # 3x3 on 8x8: per axis 2 + 6*3 + 2 = 22 of 24 -> 1 - 484/576
    assert padding_share((8, 8), (3, 3), (1, 1), (1, 1), "same") == pytest.approx(92 / 576)


def conv_stack(size: int, count: int, *, between: str = "", kernel: int = 3,
               padding: str = "same") -> str:
    body = "".join(f"    layers.Conv2D(8, {kernel}, padding=\"{padding}\"),\n{between}"
                   for _ in range(count))
    return ("from tensorflow import keras\nfrom tensorflow.keras import layers\n\n"
            "model = keras.Sequential([\n"
            f"    keras.Input(shape=({size}, {size}, 8)),\n{body}"
            "    layers.GlobalAveragePooling2D(),\n])\n")


def test_mem003_run_on_4x4_maps():
    found = diags(conv_stack(4, 3), "MEM003")
    assert len(found) == 1
    d = found[0]
    assert d.severity == "warning" and d.line == 6  # the first convolution
    # 44/144 = 30.6% -> "31%"; each Conv2D(8, 3) on 8 channels: 3*3*8*8 + 8 = 584 params
    assert ("3 Conv2D layers (conv2d..conv2d_2, lines 6-8) run 3x3 kernels with 'same' "
            "padding on 4x4 maps: 31% of their kernel taps read padding") in d.message
    assert "They hold 1,752 parameters (100% of the model)" in d.message
    assert d.data["padding_share"] == pytest.approx([44 / 144, 44 / 144])


def test_mem003_not_on_5x5_or_larger_maps():
    assert diags(conv_stack(5, 3), "MEM003") == []  # 24.9% < 25%
    assert diags(conv_stack(8, 6), "MEM003") == []


def test_mem003_padding_share_option():
    options = {"rules": {"MEM003": {"padding-share": 0.2}}}
    assert len(diags(conv_stack(5, 3), "MEM003", **options)) == 1  # 24.9% > 20%
    options = {"rules": {"MEM003": {"padding-share": 0.35}}}
    assert diags(conv_stack(4, 3), "MEM003", **options) == []  # 30.6% < 35%


def test_mem003_min_stack():
    # one layer on 4x4 passes padding-share but the map is larger than the kernel
    assert diags(conv_stack(4, 1), "MEM003") == []
    options = {"rules": {"MEM003": {"min-stack": 1}}}
    found = diags(conv_stack(4, 1), "MEM003", **options)
    assert len(found) == 1 and found[0].message.startswith("Conv2D 'conv2d' (line 6) runs")
    options = {"rules": {"MEM003": {"min-stack": 4}}}
    assert diags(conv_stack(4, 3), "MEM003", **options) == []


def test_mem003_single_layer_on_map_no_larger_than_kernel():
    # 3x3 on 3x3: per axis 2 + 3 + 2 = 7 of 9 -> 1 - 49/81 = 39.5% -> "40%"
    found = diags(conv_stack(3, 1), "MEM003")
    assert len(found) == 1
    assert "40% of its kernel taps read padding" in found[0].message
    assert "at least as large as the map" in found[0].message


def test_mem003_valid_padding_and_1x1_kernels_are_fine():
    assert diags(conv_stack(4, 3, kernel=1), "MEM003") == []
    assert diags(conv_stack(9, 3, padding="valid"), "MEM003") == []


def test_mem003_shape_keeping_layers_do_not_break_a_run():
    between = "    layers.BatchNormalization(),\n    layers.Activation(\"relu\"),\n"
    found = diags(conv_stack(4, 3, between=between), "MEM003")
    # convolutions on lines 6, 9 and 12
    assert len(found) == 1 and "3 Conv2D layers (conv2d..conv2d_2, lines 6-12)" in \
        found[0].message


def test_mem003_pooling_breaks_a_run_and_collapsed_maps_are_reported():
    source = """
    from tensorflow import keras
    from tensorflow.keras import layers

    model = keras.Sequential([
        keras.Input(shape=(4, 4, 8)),
        layers.Conv2D(8, 3, padding="same"),
        layers.Conv2D(8, 3, padding="same"),
        layers.MaxPooling2D(2),
        layers.Conv2D(8, 3, padding="same"),
        layers.Conv2D(8, 3, padding="same"),
        layers.MaxPooling2D(2),
        layers.Conv2D(8, 3, padding="same"),
        layers.MaxPooling2D(2, padding="same"),
        layers.Flatten(),
    ])
    """
    found = diags(source, "MEM003")
    assert [d.line for d in found] == [6, 9, 12]
    assert "on 4x4 maps: 31%" in found[0].message
    assert "on 2x2 maps: 56%" in found[1].message  # 20/36 = 55.6%
    # the last conv and pooling run on 1x1 maps: 8 of 9 taps read padding
    assert found[2].message.startswith("2 Conv2D/MaxPooling2D layers (conv2d_4..max_pooling2d_2")
    assert "on 1x1 maps" in found[2].message and "8 of its 9 taps" in found[2].message


def test_mem003_causal_conv1d_on_short_sequence():
    source = """
    from tensorflow import keras
    from tensorflow.keras import layers

    model = keras.Sequential([
        keras.Input(shape=(2, 4)),
        layers.Conv1D(4, 3, padding="causal"),
    ])
    """
    # length 2, 3 taps, 2 padded before: taps at -2, -1, 0 inside for 0, 1, 2 outputs -> 3/6
    found = diags(source, "MEM003")
    assert len(found) == 1 and "'causal' padding on 2 map: 50%" in found[0].message


def test_mem003_seed_model():
    source = ["from keras.models import Sequential",
              "from keras.layers import Dense, Convolution2D, MaxPooling2D, Flatten",
              "model = Sequential()",
              "model.add(Convolution2D(256, 3, 3, border_mode='same', input_shape=(16,16,1)))",
              "model.add(MaxPooling2D(pool_size=(2,2), strides=(2,2)))",
              "model.add(Convolution2D(512, 3, 3, border_mode='same'))",
              "model.add(MaxPooling2D(pool_size=(2,2), strides=(2,2)))"]
    source += ["model.add(Convolution2D(1024, 3, 3, border_mode='same'))"] * 22
    source += ["model.add(MaxPooling2D(pool_size=(2,2), strides=(2,2)))",
               "model.add(Convolution2D(256, 3, 3, border_mode='same'))",
               "model.add(Convolution2D(32, 3, 3, border_mode='same'))",
               "model.add(MaxPooling2D(pool_size=(2,2)))",
               "model.add(Flatten())", "model.add(Dense(4))", "model.add(Dense(1))"]
    found = diags("\n".join(source) + "\n", "MEM003")
    assert [d.line for d in found] == [8, 31]
    # 22 layers: 3*3*512*1024 + 1024 = 4,719,616, then 21 x (3*3*1024*1024 + 1024 = 9,438,208)
    assert "22 Conv2D layers" in found[0].message and "lines 8-29" in found[0].message
    assert f"{4_719_616 + 21 * 9_438_208:,} parameters" in found[0].message
    assert "2 Conv2D layers" in found[1].message and "2x2 maps: 56%" in found[1].message


# ====================================================================== MEM004

MODEL = 'model = keras.Sequential([keras.Input(shape=(8,)), keras.layers.Dense(1)])\n'
FIT = "model.compile(optimizer='sgd', loss='mse')\nmodel.fit(x, y, batch_size=4)\n"


def mem004(source: str) -> list:
    return diags(source, "MEM004")


@pytest.mark.parametrize("imports", [
    "import tensorflow as tf\nfrom tensorflow import keras\n",
    "from tensorflow import keras\n",
    "import keras\n",
    "import tensorflow.compat.v1 as tf\nfrom tensorflow import keras\n",
])
def test_mem004_fires_without_setting(imports):
    source = imports + "\n" + MODEL + FIT
    found = mem004(source)
    line = len(imports.splitlines()) + 2
    assert [(d.line, d.severity) for d in found] == [(line, "warning")]
    assert "set_memory_growth(gpu, True)" in found[0].message
    assert "TF_FORCE_GPU_ALLOW_GROWTH=true" in found[0].message


def test_mem004_keras_from_import_and_train_on_batch():
    source = ("from keras.models import Sequential\nfrom keras.layers import Dense\n\n"
              "model = Sequential([Dense(4, input_shape=(8,))])\n"
              "model.compile(optimizer='sgd', loss='mse')\nmodel.train_on_batch(x, y)\n")
    assert [d.line for d in mem004(source)] == [4]


def test_mem004_fit_without_a_resolved_model():
    source = ("from tensorflow import keras\n\nmodel = keras.models.load_model('m.keras')\n"
              "model.fit(x, y)\n")
    assert [d.line for d in mem004(source)] == [4]


def test_mem004_points_at_the_trained_model():
    # a preprocessing Sequential built first and only mapped over the data is not what
    # takes the GPU: the diagnostic names the model that fit() trains
    source = ("from tensorflow import keras\n\n"
              "augment = keras.Sequential([keras.layers.RandomFlip('horizontal')])\n"
              "inputs = keras.Input(shape=(8,))\n"
              "model = keras.Model(inputs, keras.layers.Dense(1)(inputs))\n" + FIT)
    found = mem004(source)
    assert [d.line for d in found] == [5]
    assert "builds model 'functional' here and trains it" in found[0].message


def test_mem004_untrained_model_is_not_said_to_be_trained():
    source = ("from tensorflow import keras\n\n" + MODEL
              + "model.predict(x, batch_size=4)\nother = keras.models.load_model('m')\n"
              "other.fit(x, y)\n")
    found = mem004(source)
    assert [d.line for d in found] == [3]
    assert "and trains it" not in found[0].message


def test_mem004_silent_without_framework_or_model():
    assert mem004("import torch\nmodel = torch.nn.Linear(8, 1)\nmodel.fit(x, y)\n") == []
    assert mem004("import tensorflow as tf\nprint(tf.__version__)\n") == []


SETTINGS_OK = [
    "for gpu in tf.config.list_physical_devices('GPU'):\n"
    "    tf.config.experimental.set_memory_growth(gpu, True)\n",
    "tf.config.experimental.set_memory_growth(device=gpus[0], enable=True)\n",
    "tf.config.set_logical_device_configuration(\n    gpus[0],\n"
    "    [tf.config.LogicalDeviceConfiguration(memory_limit=1024)])\n",
    "tf.config.experimental.set_virtual_device_configuration(\n    gpus[0],\n"
    "    [tf.config.experimental.VirtualDeviceConfiguration(memory_limit=1024)])\n",
    "config = tf.compat.v1.ConfigProto()\nconfig.gpu_options.allow_growth = True\n",
    "config = tf.ConfigProto()\nconfig.gpu_options.per_process_gpu_memory_fraction = 0.4\n",
    "config = tf.compat.v1.ConfigProto(gpu_options=tf.compat.v1.GPUOptions(allow_growth=True))\n",
    "opts = tf.GPUOptions(per_process_gpu_memory_fraction=0.5)\n",
    "os.environ['TF_FORCE_GPU_ALLOW_GROWTH'] = 'true'\n",
    "os.environ.setdefault('TF_FORCE_GPU_ALLOW_GROWTH', 'true')\n",
    "os.putenv('TF_FORCE_GPU_ALLOW_GROWTH', 'true')\n",
    "os.environ.update({'TF_FORCE_GPU_ALLOW_GROWTH': 'true'})\n",
    "environ['TF_FORCE_GPU_ALLOW_GROWTH'] = 'true'\n",
    "os.environ['TF_FORCE_GPU_ALLOW_GROWTH'] = flag\n",
]


@pytest.mark.parametrize("setting", SETTINGS_OK)
def test_mem004_satisfied_by_setting(setting):
    source = ("import os\nfrom os import environ\nimport tensorflow as tf\n"
              "from tensorflow import keras\n\n" + setting + MODEL + FIT)
    assert mem004(source) == []


SETTINGS_OFF = [
    "tf.config.experimental.set_memory_growth(gpus[0], False)\n",
    "config = tf.ConfigProto()\nconfig.gpu_options.allow_growth = False\n",
    "config = tf.ConfigProto()\nconfig.gpu_options.per_process_gpu_memory_fraction = 1.0\n",
    "os.environ['TF_FORCE_GPU_ALLOW_GROWTH'] = 'false'\n",
    "os.environ['TF_FORCE_GPU_ALLOW_GROWTH'] = 'True'\n",  # TensorFlow accepts only 'true'
    "os.environ['TF_FORCE_GPU_ALLOW_GROWTH'] = '1'\n",
    "opts = tf.GPUOptions(allow_growth=False)\n",
]


@pytest.mark.parametrize("setting", SETTINGS_OFF)
def test_mem004_not_satisfied_by_setting_that_is_off(setting):
    source = "import os\nimport tensorflow as tf\nfrom tensorflow import keras\n\n" + setting
    source += MODEL + FIT
    found = mem004(source)
    assert len(found) == 1 and found[0].line == 5 + len(setting.splitlines())


def test_mem004_explains_an_unparsed_environment_value():
    source = ("import os\nfrom tensorflow import keras\n\n"
              "os.environ['TF_FORCE_GPU_ALLOW_GROWTH'] = 'True'\n" + MODEL + FIT)
    found = mem004(source)
    assert len(found) == 1
    assert "which TensorFlow ignores: it accepts only 'true' or 'false'" in found[0].message


def test_mem004_setting_after_model_is_late():
    source = ("import tensorflow as tf\nfrom tensorflow import keras\n\n" + MODEL
              + "gpus = tf.config.list_physical_devices('GPU')\n"
              + "tf.config.experimental.set_memory_growth(gpus[0], True)\n" + FIT)
    found = mem004(source)
    assert [d.line for d in found] == [6]  # at the late setting
    assert "Physical devices cannot be modified after being initialized" in found[0].message
    assert "model 'sequential' built at line 4" in found[0].message


def test_mem004_memory_limit_after_tensor_is_late():
    source = ("import tensorflow as tf\nfrom tensorflow import keras\n\n"
              "ones = tf.ones((2, 2))\n"
              "tf.config.set_logical_device_configuration(gpus[0], [cfg])\n" + MODEL + FIT)
    found = mem004(source)
    assert [d.line for d in found] == [5]
    assert "Virtual devices cannot be modified after being initialized" in found[0].message
    assert "tf.ones() at line 4" in found[0].message


def test_mem004_env_after_model_has_no_effect():
    source = ("import os\nfrom tensorflow import keras\n\n" + MODEL
              + "os.environ['TF_FORCE_GPU_ALLOW_GROWTH'] = 'true'\n" + FIT)
    found = mem004(source)
    assert [d.line for d in found] == [5] and "no effect" in found[0].message


def test_mem004_order_follows_function_calls():
    setup = ("def setup_gpu():\n"
             "    for gpu in tf.config.list_physical_devices('GPU'):\n"
             "        tf.config.experimental.set_memory_growth(gpu, True)\n\n")
    # (the frontend does not inline user functions yet, so the tensor in build() is what
    # initialises the GPU here; once it does, the model built there counts too)
    build = ("def build():\n"
             "    warm_up = tf.ones((1,))\n"
             "    return keras.Sequential([keras.Input(shape=(8,)), keras.layers.Dense(1)])\n\n")
    head = "import tensorflow as tf\nfrom tensorflow import keras\n\n"
    # setup first, then the model built in a function: fine
    early = head + setup + build + "setup_gpu()\nmodel = build()\n" + FIT
    assert mem004(early) == []
    # the model first, the setup after: late, reported in setup_gpu
    late = head + setup + build + "model = build()\nsetup_gpu()\n" + FIT
    found = mem004(late)
    assert [d.line for d in found] == [6]
    assert "tf.ones() at line 9" in found[0].message
    # a setup function never called at module level: order unknown, not judged
    unknown = head + setup + MODEL + FIT
    assert mem004(unknown) == []


def test_mem004_other_keras_backend():
    body = "import keras\n\n" + MODEL + FIT
    jax = "import os\nos.environ['KERAS_BACKEND'] = 'jax'\n" + body
    assert mem004(jax) == []
    torch = "import os\nos.environ.setdefault('KERAS_BACKEND', 'torch')\n" + body
    assert mem004(torch) == []
    tf_backend = "import os\nos.environ['KERAS_BACKEND'] = 'tensorflow'\n" + body
    assert len(mem004(tf_backend)) == 1
    # set after keras is imported: too late to change the backend
    after = "import os\nimport keras\nos.environ['KERAS_BACKEND'] = 'jax'\n\n" + MODEL + FIT
    assert len(mem004(after)) == 1


@pytest.mark.parametrize("backend, fires", [("jax", False), ("torch", False), ("tf", True)])
def test_mem004_backend_configured_outside_the_code(backend, fires):
    """``--backend jax`` (or the config file's) says TensorFlow does not run the models:
    nothing to limit; a configured TensorFlow backend still needs the setting."""
    source = "import keras\n\n" + MODEL + FIT
    assert len(diags(source, "MEM004", backend=backend)) == (1 if fires else 0)
    assert len(mem004(source)) == 1  # not stated anywhere: Keras's default, TensorFlow


def test_mem004_without_a_parsed_module():
    rule = RULES["MEM004"]
    ctx = RuleContext(path="m.onnx", models=[], breakdowns=[], budget=None, options={},
                      module=None)
    assert list(rule.check(ctx)) == []
    ctx = replace(ctx, module=cst.parse_module("import tensorflow as tf\nmodel.fit(x)\n"))
    assert [d.line for d in rule.check(ctx)] == [2]
