"""Models kept on plain objects (a GAN class, a classifier with ``build_model``): every model
they compile is reported, named after its holder, with the trainable split of its own
compile(); ``--entry`` constructs such a class.  Real Keras checks the fixtures
(``fixtures/keras2_gan_class.py``, ``fixtures/keras2_classifier_class.py``) in
``tests/test_fixtures_oracle.py``."""

from __future__ import annotations

import textwrap

from memlint.analysis import analyze_file, analyze_text
from memlint.config import Settings
from memlint.reporters.text import part_line
from tests.conftest import FIXTURES

GAN = textwrap.dedent("""
    import numpy as np
    from keras.layers import Dense, Input
    from keras.models import Model, Sequential
    from keras.optimizers import Adam


    class GAN:
        def __init__(self, latent=4):
            self.latent = latent
            self.discriminator = self.build_discriminator()
            self.discriminator.compile(loss="binary_crossentropy", optimizer=Adam(2e-4))
            self.generator = self.build_generator()
            z = Input(shape=(self.latent,))
            self.discriminator.trainable = False
            self.combined = Model(z, self.discriminator(self.generator(z)))
            self.combined.compile(loss="binary_crossentropy", optimizer=Adam(2e-4))

        def build_generator(self):
            model = Sequential()
            model.add(Dense(8, input_dim=self.latent))
            return model

        def build_discriminator(self):
            model = Sequential()
            model.add(Dense(3, input_dim=8))
            model.add(Dense(1))
            return model

        def train(self, steps, batch_size=16):
            for _ in range(steps):
                noise = np.random.normal(0, 1, (batch_size, self.latent))
                real = np.random.rand(batch_size, 8)
                fake = self.generator.predict(noise)
                self.discriminator.train_on_batch(real, np.ones((batch_size, 1)))
                self.discriminator.train_on_batch(fake, np.zeros((batch_size, 1)))
                self.combined.train_on_batch(noise, np.ones((batch_size, 1)))
""")
MAIN = "\n\nif __name__ == '__main__':\n    gan = GAN()\n    gan.train(3)\n"
D_PARAMS = (8 * 3 + 3) + (3 + 1)  # 31
G_PARAMS = 4 * 8 + 8  # 40


def by_variable(report) -> dict:
    return {graph.variable: (graph, breakdown)
            for graph, breakdown in zip(report.models, report.breakdowns)}


def test_every_compiled_model_of_a_plain_class_is_reported_with_its_compile_time_split():
    models = by_variable(analyze_text(GAN + MAIN, "gan.py", Settings()))
    assert set(models) == {"gan.discriminator", "gan.combined"}  # the generator: a part only
    discriminator, d_memory = models["gan.discriminator"]
    assert (discriminator.trainable_params, discriminator.non_trainable_params) == (D_PARAMS, 0)
    combined, c_memory = models["gan.combined"]
    assert (combined.trainable_params, combined.non_trainable_params) == (G_PARAMS, D_PARAMS)
    # the estimates follow the split: Adam keeps two slots per trainable parameter
    assert d_memory.category("optimizer") == 2 * 4 * D_PARAMS
    assert c_memory.category("optimizer") == 2 * 4 * G_PARAMS
    assert discriminator.setup.mode == "train" and discriminator.setup.batch_size == 16
    assert combined.setup.batch_size == 16


def test_entry_constructs_a_plain_class():
    report = analyze_text(GAN, "gan.py", Settings(entry="GAN(latent=6)"))
    models = by_variable(report)
    assert set(models) == {"GAN.discriminator", "GAN.combined"}
    combined = models["GAN.combined"][0]
    assert combined.trainable_params == 6 * 8 + 8
    assert not [d for d in report.diagnostics if "--entry" in d.message]


def test_without_entry_a_plain_class_that_builds_models_is_listed_as_a_factory():
    report = analyze_text(GAN, "gan.py", Settings())
    assert report.models == [] and report.entries == [("GAN", False)]
    (note,) = [d for d in report.diagnostics if "factories" in d.message]
    assert "GAN(latent=...)" in note.message


def test_the_last_compile_decides_and_a_model_never_compiled_keeps_the_final_flags():
    source = textwrap.dedent("""
        import keras
        from keras import layers

        class Holder(object):
            def __init__(self):
                self.model = keras.Sequential([keras.Input((4,)), layers.Dense(2),
                                               layers.Dense(1)])
                self.model.compile(optimizer="sgd", loss="mse")
                self.model.layers[0].trainable = False
                self.model.compile(optimizer="sgd", loss="mse")  # recompiled: frozen first
                self.model.layers[1].trainable = False  # after the last compile
                self.probe = keras.Sequential([keras.Input((4,)), layers.Dense(3)])
                self.probe.trainable = False

        holder = Holder()
        """)
    models = by_variable(analyze_text(source, "h.py", Settings()))
    assert set(models) == {"holder.model", "holder.probe"}  # the probe: used by nothing else
    model = models["holder.model"][0]
    assert (model.trainable_params, model.non_trainable_params) == (3, 10)
    assert models["holder.probe"][0].non_trainable_params == 15


def test_objects_inside_objects_and_local_objects_name_their_models():
    source = textwrap.dedent("""
        import keras
        from keras import layers

        class Nets:
            def __init__(self):
                self.critic = keras.Sequential([keras.Input((4,)), layers.Dense(1)])
                self.critic.compile(optimizer="adam", loss="mse")

        class Trainer:
            def __init__(self):
                self.nets = Nets()

        def main():
            trainer = Trainer()

        runner = Trainer()
        main()
        """)
    names = {graph.variable for graph in analyze_text(source, "t.py", Settings()).models}
    assert names == {"runner.nets.critic", "Trainer.nets.critic"}


def test_classifier_fixture_with_entry():
    path = FIXTURES / "keras2_classifier_class.py"
    entry = "Classifier(input_shape=(128, 1), nb_classes=5)"
    (model,) = analyze_file(str(path), Settings(entry=entry)).models
    assert model.variable == "Classifier.model"
    assert model.params == 266_373  # real Keras: the same (the oracle tier checks each layer)
    (other,) = analyze_file(str(path), Settings(
        entry="Classifier(input_shape=(64, 3), nb_classes=2)")).models
    assert other.params == 266_373 + 8 * 2 * 128 - (128 * 3 + 3)  # conv1 kernel, dense


def test_gan_fixture_reports_each_compiled_model():
    report = analyze_file(str(FIXTURES / "keras2_gan_class.py"), Settings())
    models = by_variable(report)
    assert set(models) == {"dcgan.discriminator", "dcgan.generator", "dcgan.combined"}
    discriminator = models["dcgan.discriminator"][0]
    combined = models["dcgan.combined"][0]
    assert discriminator.non_trainable_params == 384  # the BatchNormalization statistics
    assert combined.non_trainable_params == discriminator.params + 384
    assert models["dcgan.generator"][0].setup.mode == "infer"


BACKBONE = textwrap.dedent("""
    import numpy as np
    import keras
    from keras import layers

    conv_base = keras.Sequential([keras.Input((32, 32, 3)), layers.Conv2D(8, 3),
                                  layers.GlobalAveragePooling2D()], name="conv_base")
    conv_base.trainable = False
    model = keras.Sequential([conv_base, layers.Dense(2)])
    model.compile(optimizer="rmsprop", loss="mse")
    model.fit(np.zeros((100, 32, 32, 3)), np.zeros((100, 2)), batch_size=20)
""")


def test_a_module_level_backbone_only_another_model_runs_is_part_of_it():
    """Chollet's fine-tuning scripts keep the backbone at module level (``conv_base``) and
    only put it in a Sequential: it is no model of its own (no estimate at an assumed batch
    of 32 with Adam, no diagnostics of its own); the report names it as a part."""
    report = analyze_text(BACKBONE, "ft.py", Settings(gpu="1GiB"))
    assert [graph.variable for graph in report.models] == ["model"]
    assert [(graph.variable, graph.setup.part_of) for graph in report.parts] == \
        [("conv_base", ["sequential"])]
    assert all(diag.model != "conv_base" for diag in report.diagnostics)
    assert report.models[0].setup.batch_size == 20
    from memlint.reporters import json_format, text
    assert "Model 'conv_base' (Sequential) at ft.py:6: runs only inside 'sequential'" in \
        text.render_report([report], [], None)
    doc = json_format.document([report], [])
    assert [(p["variable"], p["part_of"]) for p in doc["parts"]] == \
        [("conv_base", ["sequential"])]
    from memlint.reporters import html
    assert "Model &#x27;conv_base&#x27; (Sequential) at ft.py:6: runs only inside" in \
        html.page([report], [])


def test_a_backbone_run_on_its_own_too_is_a_model_of_its_own():
    """Run on data itself (features extracted with ``predict``), it has a step of its own."""
    source = BACKBONE + "features = conv_base.predict(np.zeros((10, 32, 32, 3)), batch_size=5)\n"
    report = analyze_text(source, "ft.py", Settings())
    assert sorted(graph.variable for graph in report.models) == ["conv_base", "model"]
    assert not report.parts


SHARED_TENSORS = textwrap.dedent("""
    import numpy as np
    import keras
    from keras import layers

    image = keras.Input((32, 32, 3))
    base = keras.Model(image, layers.GlobalAveragePooling2D()(layers.Conv2D(8, 3)(image)),
                       name="base")
    for layer in base.layers[:2]:
        layer.trainable = False
    predictions = layers.Dense(2, activation="softmax")(base.output)
    model = keras.Model(inputs=base.input, outputs=predictions)
    model.compile(optimizer="sgd", loss="categorical_crossentropy")
    model.fit(np.zeros((100, 32, 32, 3)), np.zeros((100, 2)), batch_size=16)
""")


def test_a_backbone_whose_tensors_build_the_trained_model_is_part_of_it():
    """Keras 2 fine-tuning builds ``Model(base.input, head(base.output))``: every layer of
    the backbone is in the trained model, and nothing runs the backbone on its own, so it
    is that model's part (it was estimated at an assumed batch of 32 with Adam, and at
    --gpu 400MiB a ResNet50 backbone got a MEM002 error of its own)."""
    report = analyze_text(SHARED_TENSORS, "ft.py", Settings(gpu="1GiB"))
    assert [graph.variable for graph in report.models] == ["model"]
    assert [(graph.variable, graph.setup.part_of) for graph in report.parts] == \
        [("base", ["functional"])]
    assert report.models[0].setup.batch_size == 16
    # run on data itself, it is a model of its own again
    alone = analyze_text(SHARED_TENSORS + "base.predict(np.zeros((4, 32, 32, 3)))\n",
                         "ft.py", Settings())
    assert sorted(graph.variable for graph in alone.models) == ["base", "model"]


INNER_OUTPUT = textwrap.dedent("""
    import numpy as np
    import keras
    from keras import layers

    image = keras.Input((64, 64, 3))
    x = layers.Conv2D(8, 3, padding="same", name="stem")(image)
    x = layers.Conv2D(16, 3, strides=2, padding="same", name="mid")(x)
    x = layers.Conv2D(512, 3, strides=2, padding="same", name="top")(x)
    base = keras.Model(image, layers.GlobalAveragePooling2D()(x), name="base")
    features = base.get_layer("mid").output
    head = layers.Conv2D(4, 1, name="head")(features)
    model = keras.Model(inputs=base.input, outputs=head)
    model.compile(optimizer="adam", loss="mse")
    model.fit(np.zeros((100, 64, 64, 3)), np.zeros((100, 32, 32, 4)), batch_size=8)
""")


def test_a_backbone_whose_inner_output_builds_the_trained_model_is_part_of_it():
    """DeepLabV3+ (keras.io) takes ``resnet50.get_layer("conv4_block6_2_relu").output``:
    the trained model holds the backbone's layers up to there, not its last ones.  Nothing
    runs the backbone on its own, so it is that model's part: it was estimated alone at an
    assumed batch of 32 with Adam (a MEM002 error of 13.5 GiB for a ResNet50 on 512x512
    images the script never runs)."""
    report = analyze_text(INNER_OUTPUT, "seg.py", Settings(gpu="1GiB"))
    assert [graph.variable for graph in report.models] == ["model"]
    assert [(graph.variable, graph.setup.part_of) for graph in report.parts] == \
        [("base", ["functional"])]
    model = report.models[0]
    assert [layer.name for layer in model.layers] == ["input_layer", "stem", "mid", "head"]
    assert model.setup.batch_size == 8
    assert all(diag.model != "base" for diag in report.diagnostics)


SEQ2SEQ_INFERENCE = textwrap.dedent("""
    import numpy as np
    import keras
    from keras.layers import Input, LSTM, Dense

    encoder_inputs = Input(shape=(None, 20))
    encoder_outputs, state_h, state_c = LSTM(32, return_state=True)(encoder_inputs)
    decoder_inputs = Input(shape=(None, 30))
    decoder_lstm = LSTM(32, return_sequences=True, return_state=True)
    decoder_outputs, _, _ = decoder_lstm(decoder_inputs, initial_state=[state_h, state_c])
    decoder_dense = Dense(30, activation="softmax")
    model = keras.Model([encoder_inputs, decoder_inputs], decoder_dense(decoder_outputs))
    model.compile(optimizer="rmsprop", loss="categorical_crossentropy")
    model.fit([np.zeros((100, 12, 20)), np.zeros((100, 15, 30))], np.zeros((100, 15, 30)),
              batch_size=16)
    encoder_model = keras.Model(encoder_inputs, [state_h, state_c])
    h, c = Input(shape=(32,)), Input(shape=(32,))
    outputs, h2, c2 = decoder_lstm(decoder_inputs, initial_state=[h, c])
    decoder_model = keras.Model([decoder_inputs, h, c], [decoder_dense(outputs), h2, c2])
""")


def test_inference_models_of_the_trained_layers_are_said_to_share_them():
    """Keras 2's character-level seq2seq builds its sampling models from the trained
    layers after fit(): they are the trained model's parts, but they do not run inside it
    (the report said "runs only inside 'functional'")."""
    report = analyze_text(SEQ2SEQ_INFERENCE, "s2s.py", Settings())
    assert [graph.variable for graph in report.models] == ["model"]
    parts = {graph.variable: graph for graph in report.parts}
    assert sorted(parts) == ["decoder_model", "encoder_model"]
    for variable, line in (("encoder_model", 16), ("decoder_model", 19)):
        assert parts[variable].setup.part_shares
        assert part_line(parts[variable]) == (
            f"Model '{parts[variable].name}' (Functional) at s2s.py:{line}: its layers run in "
            "'functional' (nothing compiles, fits or calls it on its own): their weights and "
            "memory are in its estimate")


PART_OF_A_PART = textwrap.dedent("""
    import numpy as np
    import keras
    from keras import layers

    image = keras.Input((16, 16, 3))
    base = keras.Model(image, layers.GlobalAveragePooling2D()(layers.Conv2D(8, 3)(image)),
                       name="base")
    embed = keras.Model(base.input, layers.Dense(4)(base.output), name="embed")
    a, b = keras.Input((16, 16, 3)), keras.Input((16, 16, 3))
    model = keras.Model([a, b], layers.Subtract()([embed(a), embed(b)]))
    model.compile(optimizer="adam", loss="mse")
    model.fit([np.zeros((10, 16, 16, 3))] * 2, np.zeros((10, 4)), batch_size=5)
""")


def test_a_backbone_of_a_model_that_runs_as_a_layer_is_a_part_too():
    """keras.io's triplet-loss siamese network: ResNet50's tensors build the embedding, the
    embedding runs as a layer of the trained model; the backbone was estimated alone at an
    assumed batch of 32 (the embedding is itself a part, not a model that runs)."""
    report = analyze_text(PART_OF_A_PART, "siamese.py", Settings(gpu="1GiB"))
    assert [graph.variable for graph in report.models] == ["model"]
    assert sorted((graph.variable, graph.setup.part_of) for graph in report.parts) == \
        [("base", ["embed"]), ("embed", ["functional"])]


def test_a_sequentials_symbolic_tensors_are_named_as_not_modelled():
    """``Model(seq.input, head(seq.output))`` on a Sequential: memlint has no tensors for a
    Sequential's graph; the note says so in words, not an internal type's name."""
    source = SHARED_TENSORS.replace(
        "image = keras.Input((32, 32, 3))\n"
        "base = keras.Model(image, layers.GlobalAveragePooling2D()(layers.Conv2D(8, 3)(image)),\n"
        "                   name=\"base\")\n",
        "base = keras.Sequential([keras.Input((32, 32, 3)), layers.Conv2D(8, 3),\n"
        "                         layers.GlobalAveragePooling2D()], name=\"base\")\n")
    assert "keras.Sequential" in source
    report = analyze_text(source, "ft.py", Settings())
    notes = [d.message for d in report.diagnostics if d.code == "MEM900"]
    assert any("symbolic input of Sequential model 'base'" in note for note in notes), notes
    assert not any("BoundMethod" in note for note in notes)


AUGMENTED = textwrap.dedent("""
    import tensorflow as tf
    from tensorflow import keras
    from tensorflow.keras import layers

    augment = keras.Sequential([layers.RandomCrop(28, 28), layers.RandomFlip("horizontal")],
                               name="augment")
    images = tf.zeros((1000, 32, 32, 3))
    labels = tf.zeros((1000,), dtype="int32")
    ds = tf.data.Dataset.from_tensor_slices((images, labels)).batch(64)
    ds = ds.map(lambda x, y: (augment(x), y))
    inputs = keras.Input((28, 28, 3))
    x = layers.Conv2D(8, 3)(inputs)
    outputs = layers.Dense(10)(layers.GlobalAveragePooling2D()(x))
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(ds, epochs=2)
""")


def test_a_model_only_a_dataset_map_runs_is_in_the_input_pipeline():
    """keras.io's augmentation Sequential mapped over the batches (ConvMixer, CIFAR-10
    examples): tf.data runs it on the host, so it has no GPU step of its own; no estimate
    at an assumed batch, no "input shape unknown" for it, and the report says where it
    runs.  The trained model is fed the mapped batches (crops of 28x28)."""
    report = analyze_text(AUGMENTED, "aug.py", Settings(gpu="1GiB"))
    assert [graph.variable for graph in report.models] == ["model"]
    assert [(graph.variable, graph.setup.pipeline, graph.setup.part_of)
            for graph in report.parts] == [("augment", "map() at line 11", [])]
    assert all(diag.model != "augment" for diag in report.diagnostics)
    assert not any("augment" in diag.message for diag in report.diagnostics)
    assert report.models[0].setup.batch_size == 64
    from memlint.reporters import json_format, text
    assert ("Model 'augment' (Sequential) at aug.py:6: runs in the tf.data input "
            "pipeline (map() at line 11), which runs on the host; nothing compiles or fits "
            "it") in \
        text.render_report([report], [], None)
    assert [(p["variable"], p["pipeline"]) for p in json_format.document([report], [])
            ["parts"]] == [("augment", "map() at line 11")]


def test_a_mapped_model_the_trained_model_also_runs_is_part_of_it():
    """Mapped over the data and also the trained model's first layer: it runs on the GPU
    inside that model, as its part."""
    source = AUGMENTED.replace("x = layers.Conv2D(8, 3)(inputs)",
                               "x = layers.Conv2D(8, 3)(augment(inputs))")
    source = source.replace("keras.Input((28, 28, 3))", "keras.Input((32, 32, 3))")
    report = analyze_text(source, "aug.py", Settings())
    assert [(graph.variable, graph.setup.part_of, graph.setup.pipeline)
            for graph in report.parts] == [("augment", [report.models[0].name], "")]
    assert [graph.variable for graph in report.models] == ["model"]


def test_a_model_called_on_data_outside_a_map_keeps_its_own_report():
    """Called on an array at module level (eager inference on the GPU), not in a map()."""
    source = AUGMENTED + "preview = augment(images[:8])\n"
    source = source.replace("ds = ds.map(lambda x, y: (augment(x), y))\n", "")
    report = analyze_text(source, "aug.py", Settings())
    assert "augment" in [graph.variable for graph in report.models]
    assert not report.parts


def test_a_mapped_model_also_previewed_on_data_stays_in_the_pipeline():
    """keras.io's cats-vs-dogs script calls its augmentation Sequential on a batch to plot
    it, then maps it over the training data: no training step of its own either way."""
    source = AUGMENTED.replace("ds = ds.map(", "preview = augment(images[:8])\nds = ds.map(")
    report = analyze_text(source, "aug.py", Settings())
    assert [(graph.variable, graph.setup.pipeline) for graph in report.parts] == \
        [("augment", "map() at line 12")]


def test_a_recurrent_layers_states_of_an_unknown_input_are_unpacked():
    """With the token count read from the corpus (``len(input_characters)``), the
    encoder's ``out, h, c = LSTM(..., return_state=True)(inputs)`` unpacked an unknown
    value: the sampling models were "not known statically (name 'state_h' is not defined)";
    each state is a tensor of a shape not known, for the input's reason."""
    source = SEQ2SEQ_INFERENCE.replace(
        "encoder_inputs = Input(shape=(None, 20))",
        "from corpus import characters\n"
        "encoder_inputs = Input(shape=(None, len(characters)))")
    report = analyze_text(source, "s2s.py", Settings())
    notes = [d.message for d in report.diagnostics if d.code == "MEM900"]
    assert not any("Model(...)" in note or "unpacking" in note for note in notes), notes
    assert sorted(graph.variable for graph in report.parts) == ["decoder_model",
                                                                 "encoder_model"]
    (model,) = report.models
    assert {layer.name: layer.unresolved for layer in model.layers}["lstm"] == \
        "input shape unknown"
