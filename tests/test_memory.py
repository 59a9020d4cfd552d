"""Memory model v1: expected figures are derived by hand from the documented formulas."""

from memlint.ir import LayerNode, ModelGraph, OptimizerSpec, TrainingSetup, Weight
from memlint.memory import estimate, max_batch_size
from memlint.memory.optimizers import slots_per_variable


def _dense_model(mode="train", optimizer="adam", policy="float32", batch=2, **options):
    dense = LayerNode("dense", "Dense", None, weights=[Weight("kernel", (8, 4)),
                                                       Weight("bias", (4,))],
                      input_shapes=[(None, 8)], output_shapes=[(None, 4)])
    bn = LayerNode("bn", "BatchNormalization", None,
                   weights=[Weight("gamma", (4,)), Weight("beta", (4,)),
                            Weight("mean", (4,), False), Weight("var", (4,), False)],
                   input_shapes=[(None, 4)], output_shapes=[(None, 4)])
    setup = TrainingSetup(mode=mode, batch_size=batch, dtype_policy=policy,
                          optimizer=OptimizerSpec(optimizer, options))
    return ModelGraph("m", None, layers=[dense, bn], input_shapes=[(None, 8)], setup=setup)


def test_training_parts_adam_float32():
    b = estimate(_dense_model())
    # 36 + 16 params; 44 trainable
    assert b.category("weights") == 52 * 4
    assert b.category("gradients") == 44 * 4
    assert b.category("optimizer") == 2 * 44 * 4
    # two outputs of 2 x 4 floats each
    assert b.category("activations") == 2 * (2 * 4 * 4)
    # input 2 x 8 floats + largest activation (32 bytes) as the backward transient
    assert b.category("other") == 2 * 8 * 4 + 32
    assert b.peak == 208 + 176 + 352 + 64 + 96


def test_optimizer_slots_follow_keras():
    assert slots_per_variable(OptimizerSpec("sgd")) == 0
    assert slots_per_variable(OptimizerSpec("sgd", {"momentum": 0.9})) == 1
    assert slots_per_variable(OptimizerSpec("adam", {"amsgrad": True})) == 3
    assert slots_per_variable(OptimizerSpec("rmsprop", {"centered": True, "momentum": 0.5})) == 3
    assert slots_per_variable(OptimizerSpec("adam", {"use_ema": True})) == 3


def test_mixed_precision_halves_activations_not_weights():
    full = estimate(_dense_model())
    mixed = estimate(_dense_model(policy="mixed_float16"))
    assert mixed.category("weights") == full.category("weights")
    assert mixed.category("activations") * 2 == full.category("activations")


def test_inference_has_no_gradients_or_slots():
    b = estimate(_dense_model(mode="infer"))
    assert b.category("gradients") == 0 and b.category("optimizer") == 0
    assert b.category("weights") == 52 * 4


def test_max_batch_size_is_linear_and_exact():
    b = estimate(_dense_model(batch=2))
    per_sample = (b.peak - b.fixed_bytes) // 2
    usable = b.fixed_bytes + 10 * per_sample + per_sample // 2
    assert max_batch_size(b, usable) == 10
    assert max_batch_size(b, b.fixed_bytes - 1) == 0


def test_attention_scores_count_as_saved_activations():
    from memlint.frontends.keras import analyze_source

    result = analyze_source(
        "import keras\n"
        "q = keras.Input((10, 16))\n"
        "v = keras.Input((12, 16))\n"
        "out = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)(q, v)\n"
        "m = keras.Model([q, v], out)\n"
        "m.compile('sgd', 'mse')\n", "a.py")
    (graph,) = result.models
    mha = next(layer for layer in graph.layers if layer.type == "MultiHeadAttention")
    # projected q (10x2x4), k (12x2x4), v (12x2x4), scores (2x10x12), heads output (10x2x4)
    assert sorted(mha.inner_shapes) == sorted([(None, 10, 2, 4), (None, 12, 2, 4),
                                               (None, 12, 2, 4), (None, 2, 10, 12),
                                               (None, 10, 2, 4)])
    b = estimate(graph)
    batch = graph.setup.batch_size
    per_sample = 80 + 96 + 96 + 240 + 80 + 10 * 16  # inner tensors + the layer's output
    assert b.category("activations") == batch * per_sample * 4


def test_weights_with_a_stored_dtype_count_in_it():
    graph = _dense_model(mode="train")
    dense = graph.layers[0]
    dense.weights = [Weight("kernel", (8, 4), itemsize=1), Weight("bias", (4,), itemsize=2)]
    b = estimate(graph)
    # int8 kernel 32 B + fp16 bias 8 B; BatchNormalization stays at 4 bytes (16 x 4)
    assert b.category("weights") == 32 + 8 + 16 * 4
    assert b.category("gradients") == 32 + 8 + 8 * 4
