"""The memory model (v2, the walk): expected figures are derived by hand from the walk's rules
(docs/memory-model-v2.md).  Under v1 these tests summed parts (every output kept, every
gradient alive); v2 reports what is alive at the peak moment of the step, so several figures
changed on purpose -- each test says how."""

from memlint.ir import LayerNode, ModelGraph, OptimizerSpec, TrainingSetup, Weight
from memlint.memory import estimate, max_batch_size
from memlint.memory.optimizers import slots_per_variable


def _dense_model(mode="train", optimizer="adam", policy="float32", batch=2, **options):
    dense = LayerNode("dense", "Dense", None, weights=[Weight("kernel", (8, 4)),
                                                       Weight("bias", (4,))],
                      config={"units": 4, "use_bias": True, "activation": None},
                      input_shapes=[(None, 8)], output_shapes=[(None, 4)])
    bn = LayerNode("bn", "BatchNormalization", None,
                   config={"axis": -1, "center": True, "scale": True, "renorm": False},
                   weights=[Weight("gamma", (4,)), Weight("beta", (4,)),
                            Weight("mean", (4,), False), Weight("var", (4,), False)],
                   input_shapes=[(None, 4)], output_shapes=[(None, 4)])
    setup = TrainingSetup(mode=mode, batch_size=batch, dtype_policy=policy,
                          optimizer=OptimizerSpec(optimizer, options))
    return ModelGraph("m", None, layers=[dense, bn], input_shapes=[(None, 8)], setup=setup)


def test_training_parts_adam_float32():
    b = estimate(_dense_model())
    # No backend: the TensorFlow graph-mode schedule (every gradient waits for the update).
    # The peak is the dense layer's backward: the 52 variables, 2 x 44 Adam slots, both
    # layers' gradients (8 + 36 parameters), the batch (2 x 8), the targets (2 x 4) and the
    # gradient of the dense output (2 x 4); the activations that BatchNormalization kept
    # (its input and statistics) were released when its own backward finished.
    # (v1 summed every part: activations 64, a backward transient of 32 and no targets.)
    assert b.peak_at["phase"] == "backward" and b.peak_at["layer"] == "dense"
    assert b.category("weights") == 52 * 4
    assert b.category("gradients") == 44 * 4
    assert b.category("optimizer") == 2 * 44 * 4
    assert b.category("activations") == 0
    assert b.category("other") == 2 * 8 * 4 + 2 * 4 * 4 + 2 * 4 * 4
    assert b.peak == 208 + 176 + 352 + 64 + 32 + 32
    # earlier, BatchNormalization's forward: its input (kept), statistics (2 x 4 float32) and
    # output alive with the state, the batch and the targets
    forward = [m for m in b.timeline if m["phase"] == "forward"]
    assert forward[-1] == {"phase": "forward", "layer": "bn",
                           "bytes": 208 + 352 + 64 + 32 + 32 + 32 + 32}


def test_optimizer_slots_follow_keras():
    assert slots_per_variable(OptimizerSpec("sgd")) == 0
    assert slots_per_variable(OptimizerSpec("sgd", {"momentum": 0.9})) == 1
    assert slots_per_variable(OptimizerSpec("adam", {"amsgrad": True})) == 3
    assert slots_per_variable(OptimizerSpec("rmsprop", {"centered": True, "momentum": 0.5})) == 3
    assert slots_per_variable(OptimizerSpec("adam", {"use_ema": True})) == 3
    # TensorFlow Addons: NovoGrad's second moments are one number per variable
    assert slots_per_variable(OptimizerSpec("novograd")) == 1
    assert slots_per_variable(OptimizerSpec("rectifiedadam", {"amsgrad": True})) == 3
    assert slots_per_variable(OptimizerSpec("sgdw", {"momentum": 0.9})) == 1


def test_mixed_precision_halves_activations_not_weights():
    full = estimate(_dense_model(batch=64))
    mixed = estimate(_dense_model(batch=64, policy="mixed_float16"))
    assert mixed.category("weights") == full.category("weights")
    # the batch stays in float32; the activation gradient at the peak is 16-bit
    assert full.category("other") - mixed.category("other") == 64 * 4 * 2
    bn_forward = [m["bytes"] for m in full.timeline if m["layer"] == "bn"][0]
    mixed_forward = [m["bytes"] for m in mixed.timeline if m["layer"] == "bn"][0]
    assert bn_forward - mixed_forward == 2 * 64 * 4 * 2  # dense and bn outputs, halved


def test_inference_has_no_gradients_or_slots():
    b = estimate(_dense_model(mode="infer"))
    assert b.category("gradients") == 0 and b.category("optimizer") == 0
    assert b.category("weights") == 52 * 4
    # the forward pass alone: at bn, its input and its output (the default schedule writes
    # over a dying input only for element-wise layers)
    assert b.category("activations") == 2 * (2 * 4 * 4)
    assert {m["phase"] for m in b.timeline} == {"forward"}


def test_max_batch_size_is_exact():
    # v2: the peak is the largest of the walk's moments, each linear in the batch size, so
    # the largest batch is the smallest over the moments (v1: one linear function)
    small = estimate(_dense_model(batch=2))

    def peak(batch):
        return estimate(_dense_model(batch=batch)).peak

    for batch in (1, 10, 1000):
        assert max_batch_size(small, peak(batch)) == batch
        assert max_batch_size(small, peak(batch) - 1) == batch - 1
    assert max_batch_size(small, small.fixed_bytes - 1) == 0


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
    from memlint.memory.profiles import XLA

    b = estimate(graph, profile=XLA)
    batch = graph.setup.batch_size or 1
    # v2 (the walk, XLA): the layer's inputs, projections, scores, probabilities and heads
    # output are kept; its backward adds one score-sized gradient: three score-sized buffers
    # while it runs, as XLA's plans hold (v1 counted the inner tensors and the output as one
    # sum)
    assert b.peak_at["layer"] == "multi_head_attention"
    scores = batch * 2 * 10 * 12 * 4
    assert [p.bytes for p in b.parts if p.name == "backward scratch"] == [scores]
    kept = {t["name"] for t in b.peak_at["tensors"]}
    assert {"multi_head_attention attention probabilities",
            "multi_head_attention attention scores"} <= kept


def test_weights_with_a_stored_dtype_count_in_it():
    graph = _dense_model(mode="train")
    dense = graph.layers[0]
    dense.weights = [Weight("kernel", (8, 4), itemsize=1), Weight("bias", (4,), itemsize=2)]
    b = estimate(graph)
    # int8 kernel 32 B + fp16 bias 8 B; BatchNormalization stays at 4 bytes (16 x 4)
    assert b.category("weights") == 32 + 8 + 16 * 4
    # the gradients have the variables' dtypes too: at the update (all of them made, nothing
    # else alive but the state, the batch and the targets)
    update = [m["bytes"] for m in b.timeline if m["phase"] == "update"][0]
    assert update - (104 + 2 * 44 * 4 + 2 * 8 * 4 + 2 * 4 * 4) == 32 + 8 + 8 * 4
