"""keras.applications backbones in user code, replayed from the data memlint ships (no Keras
needed): the transfer-learning patterns, argument handling, refusals and notes.

The models themselves are compared with real Keras in tests/test_applications_replay_oracle.py;
here the checks are on what the frontend does with them.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from memlint.analysis import analyze_text
from memlint.config import Settings
from memlint.frontends.keras import applications

DATA = Path(applications.DATA)


def run(code: str):
    return analyze_text(textwrap.dedent(code), "model.py", Settings())


def model(report, name: str):
    found = [m for m in report.models if m.name == name]
    assert len(found) == 1, [m.name for m in report.models]
    return found[0]


def messages(report, code: str) -> list:
    return [d.message for d in report.diagnostics if d.code == code]


def test_every_keras_application_is_shipped():
    index = applications.index()
    assert len(index) == 40
    for name, info in index.items():
        assert (DATA / f"{name}.json.xz").is_file(), name
        assert info["variants"], name
        assert "include_top" in info["structural"]


def test_the_data_is_small():
    total = sum(p.stat().st_size for p in DATA.iterdir())
    assert total < 1_000_000, total  # stated in the README


def test_frozen_backbone_with_a_new_head():
    report = run("""
        import keras
        from keras import layers
        base = keras.applications.ResNet50(weights="imagenet", include_top=False,
                                           input_shape=(224, 224, 3))
        base.trainable = False
        x = layers.GlobalAveragePooling2D()(base.output)
        outputs = layers.Dense(5, activation="softmax")(x)
        model = keras.Model(base.input, outputs)
        model.compile(optimizer="adam", loss="categorical_crossentropy")
        model.fit(x_train, y_train, batch_size=32, epochs=3)
    """)
    head = model(report, "functional")
    names = [layer.name for layer in head.layers]
    assert names[0] == "input_layer" and "conv5_block3_out" in names
    assert names[-2:] == ["global_average_pooling2d", "dense"]
    assert head.trainable_params == 2048 * 5 + 5
    assert head.params == 23_587_712 + 2048 * 5 + 5
    assert head.layers[1].location.line == 4  # the factory call
    # the backbone runs only inside the model its tensors build: its part, not a model of
    # its own estimated on assumed settings
    (backbone,) = report.parts
    assert backbone.name == "resnet50" and backbone.setup.part_of == ["functional"]
    assert backbone.trainable_params == 0
    assert not any("later version" in d.message for d in report.diagnostics)


def test_backbone_as_the_first_layer_of_a_sequential():
    report = run("""
        import tensorflow as tf
        model = tf.keras.Sequential([
            tf.keras.applications.MobileNetV2(input_shape=(160, 160, 3), include_top=False,
                                              weights="imagenet"),
            tf.keras.layers.GlobalAveragePooling2D(),
            tf.keras.layers.Dense(1),
        ])
        model.layers[0].trainable = False
        model.compile(optimizer="adam", loss="mse")
        model.fit(images, labels, batch_size=16)
    """)
    (seq,) = report.models
    assert [l.name for l in seq.layers] == ["mobilenetv2_1.00_160",
                                              "global_average_pooling2d", "dense"]
    assert seq.layers[0].output_shape == (None, 5, 5, 1280)
    assert seq.trainable_params == 1281


def test_partial_unfreezing_through_layers_slices():
    report = run("""
        from keras.applications.vgg16 import VGG16
        from keras import models, layers
        conv_base = VGG16(weights="imagenet", include_top=False, input_shape=(150, 150, 3))
        for layer in conv_base.layers[:15]:
            layer.trainable = False
        model = models.Sequential()
        model.add(conv_base)
        model.add(layers.Flatten())
        model.add(layers.Dense(256, activation="relu"))
        model.add(layers.Dense(1, activation="sigmoid"))
        model.compile(optimizer="rmsprop", loss="binary_crossentropy")
    """)
    seq = model(report, "sequential")
    vgg = seq.layers[0]
    assert vgg.name == "vgg16" and vgg.output_shape == (None, 4, 4, 512)
    block5 = 3 * (3 * 3 * 512 * 512 + 512)
    assert seq.trainable_params == block5 + 8192 * 256 + 256 + 257


def test_cut_at_an_inner_layer():
    report = run("""
        import keras
        base = keras.applications.InceptionV3(include_top=False, weights="imagenet",
                                              input_shape=(299, 299, 3))
        last = base.get_layer("mixed7").output
        x = keras.layers.Flatten()(last)
        x = keras.layers.Dense(3, activation="sigmoid")(x)
        model = keras.Model(base.input, x)
    """)
    cut = model(report, "functional")
    assert cut.layers[-3].name == "mixed7"
    assert cut.layers[-3].output_shape == (None, 17, 17, 768)
    assert cut.layers[-1].output_shape == (None, 3)


def test_input_tensor_shares_the_callers_input():
    report = run("""
        import keras
        inputs = keras.Input(shape=(128, 128, 3), name="image")
        x = keras.layers.Rescaling(1 / 255)(inputs)
        base = keras.applications.EfficientNetB0(include_top=False, input_tensor=x,
                                                 pooling="avg", weights=None)
        outputs = keras.layers.Dense(4, activation="sigmoid")(base.output)
        model = keras.Model(inputs, outputs)
    """)
    head = model(report, "functional")
    names = [layer.name for layer in head.layers]
    assert names[:2] == ["image", "rescaling"]
    assert "top_conv" in names and head.layers[-1].output_shape == (None, 4)
    backbone = model(report, "efficientnetb0")
    assert backbone.layers[0].name == "image"  # get_source_inputs: the caller's Input


def test_arguments_keras_refuses_and_what_memlint_cannot_know():
    report = run("""
        import json
        import keras
        config = json.load(open("config.json"))
        a = keras.applications.ResNet50(weights="imagenet", classes=10)
        b = keras.applications.MobileNetV2(alpha=0.6, weights=None)
        c = keras.applications.VGG16(include_top=config["top"])
        d = keras.applications.ResNet50(weights="imagenet", input_shape=(200, 200, 3))
    """)
    errors = messages(report, "MEM901")
    notes = messages(report, "MEM900")
    assert any("classes other than 1000" in m for m in errors)
    assert any("alpha=0.6" in m and "0.35" in m for m in notes)
    assert any("include_top is not known statically" in m for m in notes)
    assert any(m.startswith("ResNet50(): ") and "(224, 224, 3)" in m for m in errors)
    assert report.models == []


def test_keras2_spellings_and_injected_modules():
    report = run("""
        import keras
        from keras_applications import resnet50
        model = resnet50.ResNet50(include_top=True, weights=None, backend=keras.backend,
                                  layers=keras.layers, models=keras.models,
                                  utils=keras.utils)
        other = keras.applications.resnet.ResNet101(weights=None)
    """)
    names = [m.name for m in report.models]
    assert names == ["resnet50", "resnet101"]
    assert report.models[0].params == 25_636_712


def test_model_zoos_are_named_in_a_note():
    report = run("""
        import keras_hub
        backbone = keras_hub.models.ResNetBackbone.from_preset("resnet_50_imagenet")
    """)
    (note,) = messages(report, "MEM900")
    assert "keras_hub.models.ResNetBackbone.from_preset()" in note
    assert "keras.applications" in note


def test_a_zoo_layer_in_a_sequential_is_named_as_keras_names_it():
    # TensorFlow Hub's feature extractor as a Sequential's layer: the table and MEM005 said
    # "? '?': layer not known statically"
    report = run("""
        import tensorflow as tf
        import tensorflow_hub as hub
        extractor = hub.KerasLayer("https://tfhub.dev/google/model/5", trainable=False)
        model = tf.keras.Sequential([tf.keras.Input((224, 224, 3)), extractor,
                                     tf.keras.layers.Dense(5)])
    """)
    (graph,) = report.models
    assert [(n.name, n.type, n.output_shape) for n in graph.layers] == [
        ("keras_layer", "KerasLayer", None), ("dense", "Dense", None)]
    notes = messages(report, "MEM900")
    assert any("tensorflow_hub.KerasLayer()" in n and "keras.applications" in n
               for n in notes), notes
    assert not any("?" in n.split(":")[0] for n in messages(report, "MEM005"))


@pytest.mark.parametrize("load", ["tf.keras.models.load_model('pretrained.h5')",
                                  "keras.saving.load_model(path)",
                                  "keras.models.model_from_json(text)"])
def test_a_model_loaded_from_a_file_is_named_in_a_note(load):
    # a fitted model read from a file had no word about its memory under `check`
    report = run(f"""
        import numpy as np
        import tensorflow as tf
        import keras
        model = {load}
        model.fit(np.zeros((8, 4)), np.zeros((8, 1)))
    """)
    (note,) = messages(report, "MEM900")
    assert "the model is read from a file" in note and "ONNX" in note
    assert ("('pretrained.h5')" in note) == ("pretrained.h5" in load)


def test_an_application_memlint_does_not_ship():
    report = run("""
        import keras
        m = keras.applications.ResNeXt50(weights=None)
    """)
    (note,) = messages(report, "MEM900")
    assert "ResNeXt50" in note and "ResNet50V2" in note


def test_names_derived_from_the_model_name_follow_it():
    report = run("""
        import keras
        m = keras.applications.ConvNeXtTiny(weights=None, name="tiny")
    """)
    (tiny,) = report.models
    assert tiny.name == "tiny"
    assert [layer.name for layer in tiny.layers[1:3]] == ["tiny_prestem_normalization",
                                                         "tiny_stem"]


def test_files_without_applications_load_no_data(tmp_path):
    applications._traces.clear()
    run("""
        import keras
        m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    """)
    assert applications._traces == {}


def test_traces_are_json_with_known_ops():
    known = {"layer", "custom", "input", "call", "tensor_op", "operation", "model",
             "sequential", "obtain_input_shape", "correct_pad"}
    for name, info in applications.index().items():
        for key in info["variants"][:2]:
            ops = applications.stored_trace(name, key)
            assert {op["op"] for op in ops} <= known
            assert ops[-1]["op"] == "model"
    assert applications.stored_trace("VGG16", "no such variant") is None


@pytest.mark.parametrize("line", [
    "keras.applications.ResNet50(weights=None, include_top=False, input_shape=(20, 20, 3))",
    "keras.applications.NASNetMobile(weights='imagenet', input_shape=(None, None, 3))",
])
def test_refusals_give_a_location_and_no_model(line):
    report = run(f"import keras\nm = {line}\n")
    assert report.models == [] or all(m.layers for m in report.models)
    assert any(d.line == 2 for d in report.diagnostics if d.code in ("MEM900", "MEM901"))


def test_a_build_function_handed_to_keras_tuner_is_named_as_tuned():
    # "factories it never calls ... --entry 'build_model(...)' with literal arguments" could
    # not be followed: the tuner passes hp, chosen at run time
    report = run("""
        import keras
        import keras_tuner as kt
        def build_model(hp):
            model = keras.Sequential([keras.Input((8,)),
                                      keras.layers.Dense(hp.Int("units", 32, 512))])
            model.compile(optimizer="adam", loss="mse")
            return model
        tuner = kt.RandomSearch(hypermodel=build_model, objective="val_loss", max_trials=3)
    """)
    (note,) = messages(report, "MEM900")
    assert "the tuner builds build_model(hp) with hyperparameters it chooses at run time" \
        in note and "no estimate of its trials" in note
