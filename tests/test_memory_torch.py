"""The ``torch`` profile's schedule (Keras 3 on PyTorch, eager): what Keras's torch backend and
autograd hold, rule by rule, as measured by the torch-step oracle (harness/torch_step.py,
docs/torch-oracle.md).  Expected figures are worked out by hand from each rule."""

from __future__ import annotations

import pytest

import memlint.layers as registry
from memlint.ir import OptimizerSpec
from memlint.layers.base import Args
from memlint.memory import estimate
from memlint.memory.estimate import TORCH_CUBLAS_WORKSPACES
from memlint.memory.optimizers import update_temporary_elements
from memlint.memory.profiles import TF_GRAPH, TORCH, XLA
from tests.test_memory_walk import graph_of, parts, saved_names

F32 = 4
ROUNDING = "allocator rounding"


def exact(breakdown) -> int:
    """The peak without the caching allocator's rounding and cuBLAS's workspaces (what the
    torch-step oracle's CPU trace holds)."""
    return breakdown.peak - parts(breakdown).get(ROUNDING, 0) - workspaces(breakdown)


def workspaces(breakdown) -> int:
    return parts(breakdown).get(TORCH_CUBLAS_WORKSPACES, 0)


def moment(breakdown, phase: str, layer: str) -> int:
    """One moment of the walk, without cuBLAS's workspaces (held through all of them)."""
    return next(m["bytes"] for m in breakdown.timeline
                if m["phase"] == phase and m["layer"] == layer) - workspaces(breakdown)


def saved(layer: str, args, kwargs, input_shape):
    instance = registry.instantiate(layer, Args(list(args), dict(kwargs)))
    out, _ = registry.call(instance, input_shape)
    return instance.kind.saved(instance.config, input_shape, out)


def under(entries, profile: str) -> list:
    return [(s.what, s.shape, s.dtype, s.when, s.count) for s in entries
            if not s.profiles or profile in s.profiles]


MLP = ("model = keras.Sequential([keras.Input((256,)), L.Dense(256), L.Dense(256), "
       "L.Dense(256)])")
MLP_WEIGHTS = 3 * (256 * 256 + 256) * F32


def test_a_sequential_model_holds_every_layer_output_until_its_forward_returns():
    # inference, batch 8: each output is 8 KiB; at the last layer the batch and all three
    # outputs are alive under torch (Keras's tensor map), and the last one's product beside
    # its biased sum (the torch-step oracle, this MLP trained at batch 64: the two outputs
    # before it, its `mm` and its `add` at the forward's peak), two outputs under TensorFlow
    graph = graph_of(MLP, batch=8, mode="infer")
    out = 8 * 256 * F32
    torch_step = estimate(graph, profile=TORCH)
    assert exact(torch_step) == MLP_WEIGHTS + out + 4 * out
    assert {"dense output", "dense_1 output"} <= set(saved_names(torch_step))
    assert exact(estimate(graph, profile=TF_GRAPH)) == MLP_WEIGHTS + out + 2 * out


def test_last_gradients_live_through_the_forward_and_the_update_makes_temporaries():
    # Adam, batch 8: the forward's first moment holds the weights, two slots, the last
    # step's gradients (zero_grad comes after the forward), the batch, the targets and the
    # first layer's product and biased output; the update holds the new gradients and three
    # weight-sized lists
    graph = graph_of(MLP, batch=8, optimizer="adam")
    b = estimate(graph, profile=TORCH)
    data = 8 * 256 * F32
    state = MLP_WEIGHTS * 3 + 2 * data  # weights, two slots, batch and targets
    rounding = 512 - (MLP_WEIGHTS * 2 % 512 or 512)  # only the slots' buffer is uneven
    assert moment(b, "forward", "dense") - rounding == state + MLP_WEIGHTS + 2 * data
    assert moment(b, "update", "optimizer") - rounding == state + MLP_WEIGHTS + 3 * MLP_WEIGHTS
    # neither happens under XLA (the gradients are consumed, the update is fused)
    x = estimate(graph, profile=XLA)
    assert moment(x, "update", "optimizer") < moment(b, "update", "optimizer") - 3 * MLP_WEIGHTS


@pytest.mark.parametrize("name, lists", [("sgd", 0), ("adam", 3), ("adamw", 3),
                                         ("rmsprop", 3), ("adagrad", 3), ("nadam", 5),
                                         ("lion", 2)])
def test_update_temporaries_per_optimizer(name, lists):
    shapes = [(10, 4), (4,), (4, 3)]
    assert update_temporary_elements(OptimizerSpec(name, {}, "t"), shapes) == lists * 56


def test_an_optimizer_updating_one_variable_at_a_time_makes_temporaries_of_the_largest():
    shapes = [(10, 4), (4,), (4, 3)]
    assert update_temporary_elements(OptimizerSpec("ftrl", {}, "t"), shapes) == 3 * 40
    assert update_temporary_elements(OptimizerSpec("adam", {}, "t"), []) == 0


def test_a_loss_scale_optimizer_holds_the_unscaled_gradients_through_the_update():
    """The torch step of a mixed_float16 CNN under RMSprop: four weight-sized lists at the
    update's peak, the division by the loss scale's among them (the torch oracle)."""
    shapes = [(10, 4), (4,), (4, 3)]
    rmsprop = OptimizerSpec("rmsprop", {}, "t")
    assert update_temporary_elements(rmsprop, shapes, loss_scaled=True) == 4 * 56
    assert update_temporary_elements(rmsprop, shapes, "graph", loss_scaled=True) == \
        update_temporary_elements(rmsprop, shapes, "graph")  # measured under torch only
    mixed = graph_of(MLP, batch=8, optimizer="rmsprop", policy="mixed_float16")
    bf16 = graph_of(MLP, batch=8, optimizer="rmsprop", policy="mixed_bfloat16")
    scaled, plain = (moment(estimate(g, profile=TORCH), "update", "optimizer")
                     for g in (mixed, bf16))
    assert scaled - plain >= MLP_WEIGHTS  # no loss scaling under mixed_bfloat16


def test_convolutions_keep_a_layout_copy_and_a_kernel_copy_under_torch():
    entries = saved("Conv2D", (16, 3), {"padding": "same"}, (None, 16, 16, 8))
    assert ("layout copy", (None, 16, 16, 8), "compute", "saved", 1) in under(entries, "torch")
    assert ("kernel layout copy", (3 * 3 * 8 * 16,), "variable", "saved", 1) \
        in under(entries, "torch")
    assert not any(w == "input" for w, *_ in under(entries, "torch"))
    assert ("input", (), "compute", "saved", 1) in under(entries, "tf-graph")
    assert not any(w.endswith("layout copy") for w, *_ in under(entries, "xla"))
    # one spatial axis: the channels-first copy only (no channels-last memory format)
    entries = saved("Conv1D", (8, 3), {}, (None, 100, 4))
    assert [w for w, *_ in under(entries, "torch")] == ["unbiased product", "layout copy"]
    # channels-first data is convolved as it is, after the padding's copy where the
    # "same" padding is uneven (the Keras 1 MNIST CNN at batch 32: -9.3% -> -2.1%)
    entries = saved("Conv2D", (16, 3), {"data_format": "channels_first"}, (None, 8, 16, 16))
    assert [w for w, *_ in under(entries, "torch")] == ["input", "unbiased product"]
    entries = saved("Conv2D", (16, 3), {"data_format": "channels_first", "strides": 2,
                                        "padding": "same"}, (None, 8, 24, 24))
    assert ("padded input", (None, 8, 25, 25), "compute", "saved", 1) in under(entries,
                                                                               "torch")
    assert not any(w == "input" for w, *_ in under(entries, "torch"))


def test_a_one_axis_convolution_of_a_convolutions_result_copies_nothing_under_torch():
    """Keras's torch backend convolves over one axis the input permuted to channels-first and
    permutes the result back as a view, which a ReLU keeps the strides of: the next Conv1D
    finds it contiguous once permuted, so autograd keeps the ReLU's output and no copy for
    that convolution (the torch-step oracle's traces: `speaker_residual_conv1d` at batch 32
    +23.5% -> +7.3%, `separable_conv1d_keyword_spotting` +10.9% -> -0.1%,
    `audio_autoencoder_1d` +29.0% -> +16.1% with the copies dropped)."""
    body = ("model = keras.Sequential([keras.Input((400, 8)), L.Conv1D(16, 3), L.ReLU(), "
            "L.Conv1D(16, 3), L.ReLU(), L.GlobalAveragePooling1D(), L.Dense(2)])")
    b = estimate(graph_of(body, batch=32, optimizer="sgd"), profile=TORCH)
    second = moment(b, "forward", "conv1d_1") - moment(b, "forward", "re_lu")
    assert second == 2 * 32 * 396 * 16 * F32  # its output and unbiased product, no copy


@pytest.mark.parametrize("body, oracle_peak", [
    ("x = keras.Input((128, 128, 64))\n"
     "model = keras.Model(x, L.Conv2D(8, 1)(L.Conv2D(64, 1)(x)))", 172_057_744),
    ("x = keras.Input((32, 32, 64))\n"
     "u = L.UpSampling2D((4, 4), interpolation='bilinear')(L.Conv2D(64, 1)(x))\n"
     "model = keras.Model(x, L.Conv2D(8, 1)(u))", 111_240_336)])
def test_a_2d_convolution_holds_both_input_copies_as_the_second_is_made_under_torch(
        body, oracle_peak):
    """Keras's torch backend copies a channels-last input channels-first and torch converts
    that copy to the channels-last memory format: both exist while the second is written,
    the first gone before the convolution's result (torch-step oracle's traces at batch 8
    with Adam, the peak at the second convolution: -14.6% and -22.6% with the second copy
    only; keras.io's DeepLabV3+ twin -10.6% -> +0.1% at batch 32)."""
    b = estimate(graph_of(body, batch=8, optimizer="adam"), profile=TORCH)
    assert abs(exact(b) - oracle_peak) / oracle_peak <= 0.005


def test_transposed_convolutions_have_no_xla_scratch_under_torch():
    entries = saved("Conv2DTranspose", (8, 3), {"strides": 2, "padding": "same"},
                    (None, 16, 16, 4))
    assert [w for w, *_ in under(entries, "torch")] == ["unbiased product", "layout copy",
                                                        "kernel layout copy"]
    assert any(w == "padded output gradient" for w, *_ in under(entries, "xla"))


def test_pooling_keeps_its_channels_first_copy_and_int64_indices_under_torch():
    entries = saved("MaxPooling2D", (), {}, (None, 16, 16, 8))
    assert sorted(under(entries, "torch")) == [
        ("argmax indices", (None, 8, 8, 8), "int64", "saved", 1),
        ("layout copy", (None, 16, 16, 8), "compute", "saved", 1)]
    assert [w for w, *_ in under(saved("AveragePooling2D", (2,), {}, (None, 16, 16, 8)),
                                 "torch")] == ["layout copy"]
    assert under(saved("AveragePooling2D", (2,), {}, (None, 16, 16, 8)), "xla") == []
    # one axis: no input is kept, only the indices
    assert [w for w, *_ in under(saved("MaxPooling1D", (), {}, (None, 100, 8)), "torch")] \
        == ["argmax indices"]
    assert under(saved("AveragePooling1D", (2,), {}, (None, 100, 8)), "torch") == []


def test_a_flatten_after_pooling_copies_under_torch_only():
    body = ("model = keras.Sequential([keras.Input((16, 16, 8)), L.MaxPooling2D(), "
            "L.Flatten(), L.Dense(4)])")
    graph = graph_of(body, batch=8, mode="infer")
    flat = 8 * 8 * 8 * 8 * F32  # the flattened pooling output
    torch_step, tf_step = estimate(graph, profile=TORCH), estimate(graph, profile=TF_GRAPH)
    assert "flatten output" not in saved_names(tf_step)  # a view of the pooled tensor
    copy = [t for t in torch_step.peak_at["tensors"] if t["name"] == "flatten output"]
    assert [t["bytes"] for t in copy] == [flat]


def test_batch_norm_keeps_float32_copies_under_torch():
    entries = saved("BatchNormalization", (), {}, (None, 8, 8, 16))
    torch_entries = under(entries, "torch")
    assert ("centered copy", (None, 8, 8, 16), "float32", "saved", 1) in torch_entries
    assert ("float32 input", (None, 8, 8, 16), "float32", "saved", 1) in torch_entries
    assert not any(w == "input" for w, *_ in torch_entries)
    assert not any(w in ("centered copy", "float32 input") for w, *_ in under(entries, "xla"))


BN = ("model = keras.Sequential([keras.Input((16, 16, 8)), L.BatchNormalization(), "
      "L.GlobalAveragePooling2D(), L.Dense(4)])")


def test_batch_norm_casts_a_16_bit_input_up_and_keeps_the_cast_under_torch():
    # batch 8: the input is 8 * 16 * 16 * 8 elements; under mixed_float16 the kept float32
    # cast is a buffer of its own (4 B an element), under float32 the input itself
    elements = 8 * 16 * 16 * 8
    for policy, cast in (("float32", False), ("mixed_float16", True)):
        b = estimate(graph_of(BN, batch=8, policy=policy), profile=TORCH)
        kept = {t["name"]: t["bytes"] for t in b.peak_at["tensors"]}
        assert kept["batch_normalization centered copy"] == elements * F32
        assert kept.get("batch_normalization float32 input") == (elements * F32 if cast
                                                                 else None)


def test_sigmoid_and_softmax_outputs_keep_their_logits_under_torch():
    entries = saved("Dense", (8,), {"activation": "softmax"}, (None, 4))
    assert ("logits", (None, 8), "compute", "saved", 1) in under(entries, "torch")
    assert [w for w, _, _, when, _ in under(entries, "xla") if when == "saved"] == [
        "input", "output"]  # (its product while it runs: a forward moment's)
    assert not any(w == "logits"
                   for w, *_ in under(saved("Dense", (8,), {"activation": "tanh"}, (None, 4)),
                                      "torch"))


@pytest.mark.parametrize("layer, units, projections", [("SimpleRNN", 1, False),
                                                       ("LSTM", 11, True), ("GRU", 10, True)])
def test_recurrences_keep_the_python_loops_tensors_under_torch(layer, units, projections):
    entries = under(saved(layer, (32,), {}, (None, 50, 7)), "torch")
    assert ("steps' states and gates", (None, 50, 32), "compute", "saved", units) in entries
    assert not any(w == "time-major input" for w, *_ in entries)  # unbound views
    gates = {"SimpleRNN": 1, "LSTM": 4, "GRU": 3}[layer]
    expected = [("input projections", (None, 50, gates * 32), "compute", "forward", 1),
                ("input projection gradients", (None, 50, gates * 32), "compute",
                 "backward", 3)] if projections else []
    assert [e for e in entries if e[0].startswith("input projection")] == expected
    # the last step only: the stacked outputs while the call runs
    assert ("stacked outputs", (None, 50, 32), "compute", "forward", 1) in entries


def test_attention_without_dropout_keeps_no_score_matrix_under_torch():
    shapes = [(None, 20, 16), (None, 20, 16)]
    entries = saved("MultiHeadAttention", (), {"num_heads": 2, "key_dim": 8}, shapes)
    torch_entries = under(entries, "torch")
    assert not any(w in ("attention probabilities", "attention scores", "score gradients")
                   for w, *_ in torch_entries)
    assert ("log-sum-exp", (None, 2, 20), "float32", "saved", 1) in torch_entries
    # the fused kernel's own output besides the heads-last copy the output projection
    # reads (the torch step of a transformer block at batch 32: -13.7% -> -7.7%)
    assert ("fused attention output", (None, 20, 2, 8), "compute", "saved", 1) \
        in torch_entries
    assert ("heads output", (None, 20, 2, 8), "compute", "saved", 1) in torch_entries
    assert any(w == "attention scores" for w, *_ in under(entries, "xla"))
    assert not any(w == "fused attention output" for w, *_ in under(entries, "xla"))
    # with dropout Keras computes the scores itself: scores, probabilities, dropped ones
    entries = saved("MultiHeadAttention", (), {"num_heads": 2, "key_dim": 8, "dropout": 0.1},
                    shapes)
    names = [w for w, *_ in under(entries, "torch")]
    assert {"attention scores", "attention probabilities", "dropped probabilities"} \
        <= set(names)


LAYER_CLASS = '''
class Block(L.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.a, self.b, self.c = L.Dense(256), L.Dense(256), L.Dense(256)

    def call(self, x):
        return self.c(self.b(self.a(x)))


model = keras.Sequential([keras.Input((256,)), Block(), L.Dense(256)])
'''
NESTED_MODEL = '''
block = keras.Sequential([L.Dense(256), L.Dense(256), L.Dense(256)])
model = keras.Sequential([keras.Input((256,)), block, L.Dense(256)])
'''


@pytest.mark.parametrize("body, alive", [(NESTED_MODEL, 6), (LAYER_CLASS, 4)])
def test_only_a_models_tensor_map_holds_the_outputs_made_inside_it(body, alive):
    # inference, batch 8: a nested model's map holds its three outputs (with the batch and
    # the last layer's output and product: six); a layer class's call() holds only what its
    # locals name, and its output is held by the outer model's map (the batch, two outputs
    # and a product at a time)
    b = estimate(graph_of(body, batch=8, mode="infer"), profile=TORCH)
    weights = 4 * (256 * 256 + 256) * F32
    assert exact(b) == weights + alive * 8 * 256 * F32


@pytest.mark.parametrize("optimizer, copies", [("sgd", 0), ("adam", 1), ("rmsprop", 2)])
def test_tensorflow_graph_updates_make_element_wise_temporaries(optimizer, copies):
    # tf-graph, batch 8: at the update, the weights, the slots, every gradient, the batch,
    # the targets and the update's temporaries (weight-sized copies: docs/tf-oracle.md)
    b = estimate(graph_of(MLP, batch=8, optimizer=optimizer), profile=TF_GRAPH)
    slots = {"sgd": 0, "adam": 2, "rmsprop": 1}[optimizer]
    data = 8 * 256 * F32
    assert moment(b, "update", "optimizer") == \
        MLP_WEIGHTS * (1 + slots + 1 + copies) + 2 * data
    assert update_temporary_elements(OptimizerSpec("sgd", {"momentum": 0.9}, "t"), [(4, 3)],
                                     "graph") == 12


AUTOENCODER = ("model = keras.Sequential([keras.Input((64, 64, 3)), L.Conv2D(3, 1)])")
OUTPUT = 32 * 64 * 64 * 3 * F32  # the model's output at batch 32


@pytest.mark.parametrize("loss,buffers", [("mse", 4), ("mae", 3), ("binary_crossentropy", 2),
                                          ("huber", 5), ("kl_divergence", 6),
                                          ("my_loss", 6)])
def test_the_losss_eager_backward_holds_output_sized_buffers_by_loss(loss, buffers):
    """Torch-step oracle, a 1x1 convolution with a [32, 64, 64, 3] output: at the peak, in
    the loss's backward, 5 / 4 / 3 / 6 / 7 output-sized float32 buffers beyond the
    forward's (MSE / MAE / BCE / Huber / KL), one of them the loss gradient; memlint was
    29% to 55% under without them, and matches each to the byte with them.  A custom loss
    takes the largest count; XLA fuses the loss."""
    spelled = loss if loss == "my_loss" else f"'{loss}'"
    source = ("def my_loss(y, p):\n    return keras.ops.mean(keras.ops.abs(y - p))\n"
              + AUTOENCODER + f"\nmodel.compile(optimizer='adam', loss={spelled})")
    graph = graph_of(source, batch=32)
    assert graph.setup.loss == (None if loss == "my_loss" else {
        "mse": "mean_squared_error", "mae": "mean_absolute_error"}.get(loss, loss))
    torch = estimate(graph, profile=TORCH)
    xla = estimate(graph, profile=XLA)
    assert torch.peak_at["layer"] == "loss"
    temporaries = [t for t in torch.peak_at["tensors"] if t["name"].startswith("the backward")]
    assert [t["bytes"] for t in temporaries] == [buffers * OUTPUT]
    assert not any(t["name"].startswith("the backward") for t in xla.peak_at["tensors"])


def test_several_outputs_losses_run_one_after_the_other_under_torch():
    body = ("inp = keras.Input((64, 64, 3))\n"
            "model = keras.Model(inp, [L.Conv2D(3, 1)(inp), L.Conv2D(1, 1)(inp)])\n"
            "model.compile(optimizer='adam', loss=['mse', 'mse'])")
    b = estimate(graph_of(body, batch=32), profile=TORCH)
    temporaries = [t for t in b.peak_at["tensors"] if t["name"].startswith("the backward")]
    assert [t["bytes"] for t in temporaries] == [4 * OUTPUT]  # the larger output's only


def test_time_distributed_sums_each_steps_input_gradient_under_torch():
    """Keras loops over a static time axis; autograd makes each step's input gradient a
    zero tensor of the whole input's size and sums them one by one: a torch step of
    TimeDistributed(Conv2D) -> TimeDistributed(MaxPooling2D) over 6 frames at batch 32 held
    two such tensors and their sum (memlint -24% without them, +8% with them)."""
    body = ("model = keras.Sequential([keras.Input((6, 16, 16, 3)), L.TimeDistributed("
            "L.Conv2D(8, 3, padding='same', activation='relu')), L.TimeDistributed("
            "L.MaxPooling2D(2)), L.TimeDistributed(L.Flatten()), L.GRU(12), L.Dense(4)])")
    conv_out = 32 * 6 * 16 * 16 * 8 * F32
    b = estimate(graph_of(body, batch=32), profile=TORCH)
    steps = {t["name"]: t["bytes"] for t in b.peak_at["tensors"]}
    assert steps.get("time_distributed_1 step gradients") == 2 * conv_out
    # the first wrapper's input is the data: no input gradient, no step gradients
    assert not any(name.startswith("time_distributed step") for name in steps)
    pooling = registry.instantiate("TimeDistributed", Args([registry.instantiate(
        "MaxPooling2D", Args([2], {}))], {}))
    assert ("step gradients", (None, 6, 16, 16, 8), "compute", "backward", 2) in under(
        pooling.kind.saved(pooling.config, (None, 6, 16, 16, 8), (None, 6, 8, 8, 8)), "torch")
    assert not [s for s in pooling.kind.saved(pooling.config, (None, None, 16, 16, 8),
                                              (None, None, 8, 8, 8))
                if s.what == "step gradients"]  # a time axis of unknown length: vmap


@pytest.mark.parametrize("options,kept", [("", True), (", use_bias=False", False),
                                          (", activation='relu'", False)])
def test_a_biased_layer_holds_its_product_and_the_sum_while_it_runs_under_torch(options,
                                                                               kept):
    """Keras adds the bias as an operation of its own: three biased 3x3 convolutions into a
    global pooling peaked (torch-step oracle, batch 32) at the last one's bias add, its
    ``convolution`` and ``add`` results both alive (memlint -12.4% without it, -0.1% with
    it); unbiased, the product is the output (-0.1% before and after).  With an activation
    the pre-activation and the output are already two buffers there."""
    body = ("model = keras.Sequential([keras.Input((32, 32, 16))] + [L.Conv2D(16, 3, "
            f"padding='same'{options}) for _ in range(3)] + [L.GlobalAveragePooling2D(), "
            "L.Dense(1)])")
    output = 32 * 32 * 32 * 16 * F32
    b = estimate(graph_of(body, batch=32), profile=TORCH)
    live = parts(b)["live activations"]
    if kept:  # the first two outputs (Keras's tensor map), the product and the sum
        assert (b.peak_at["phase"], b.peak_at["layer"]) == ("forward", "conv2d_2")
        assert live == 4 * output
    else:
        assert live < 4 * output
    xla = estimate(graph_of(body, batch=32), profile=XLA)
    assert parts(xla)["live activations"] < 4 * output


def test_group_normalization_differentiates_its_variance_op_by_op_under_torch():
    """Conv3D -> GroupNormalization(2) -> ReLU at batch 32 (torch-step oracle): five
    input-sized float32 buffers at the backward's peak, the variance's ``pow_backward``
    products among them; memlint -22.7% without the three it adds, -1.5% with them."""
    entries = saved("GroupNormalization", (2,), {}, (None, 16, 16, 16, 8))
    assert ("variance gradients", (None, 16, 16, 16, 8), "float32", "backward", 3) in under(
        entries, "torch")
    assert not any(w == "variance gradients" for w, *_ in under(entries, "xla"))
    body = ("model = keras.Sequential([keras.Input((16, 16, 16, 8)), L.Conv3D(8, 3, "
            "padding='same'), L.GroupNormalization(2), L.ReLU(), L.Conv3D(1, 1)])")
    b = estimate(graph_of(body, batch=32), profile=TORCH)
    assert (b.peak_at["phase"], b.peak_at["layer"]) == ("backward", "group_normalization")


def test_a_weight_read_by_two_calls_sums_their_gradients_under_torch():
    """A Dense(256) shared by two 4096-feature inputs, SGD at batch 4 (torch-step oracle):
    at the backward's peak the two calls' kernel-gradient products and their sum, three
    kernel-sized tensors (memlint -49.5% without the two products, +0.1% with them)."""
    body = ("a = keras.Input((4096,))\nb = keras.Input((4096,))\nshared = L.Dense(256)\n"
            "model = keras.Model([a, b], L.Dense(1)(L.Concatenate()([shared(a), shared(b)])))")
    graph = graph_of(body, batch=4)
    kernel = (4096 * 256 + 256) * F32
    b = estimate(graph, profile=TORCH)
    names = {t["name"]: t["bytes"] for t in b.peak_at["tensors"]}
    assert names.get("dense weight gradient of another call") == 2 * kernel
    assert names.get("dense weight gradients") == kernel
    xla = estimate(graph, profile=XLA)
    assert not any("another call" in t["name"] for t in xla.peak_at["tensors"])


@pytest.mark.parametrize("layer,shape,states", [("ConvLSTM2D", (None, 6, 24, 24, 4), 14),
                                                ("ConvLSTM1D", (None, 6, 64, 4), 12)])
def test_a_conv_lstm_keeps_each_gates_convolution_copies_under_torch(layer, shape, states):
    """Keras's torch ConvLSTM cell convolves each gate apart: per step four copies of the
    input slice and 14 (two spatial axes) or 12 (one) state-sized tensors, no time-major
    copy (torch-step oracle at batch 32 over 6 steps: 95.9 and 80.8 state-sized buffers
    held after the forward; video_convlstm_nextframe -13.7% -> +4%, the ConvLSTM1D
    fixture -7% -> +3%)."""
    entries = saved(layer, (8, 5), {"padding": "same", "return_sequences": True}, shape)
    state = (None, 6) + shape[2:-1] + (8,)
    assert sorted(under(entries, "torch")) == [
        ("steps' input copies", shape, "compute", "saved", 4),
        ("steps' states and gates", state, "compute", "saved", states)]
    assert ("steps' states and gates", state, "compute", "saved", 13) in under(entries, "xla")
    assert any(w == "time-major input" for w, *_ in under(entries, "xla"))


def test_the_report_names_the_loss_the_estimate_used(tmp_path, capsys):
    import json

    from memlint.cli import main

    path = tmp_path / "m.py"
    path.write_text("import keras\nfrom keras import layers as L\n" + AUTOENCODER +
                    "\nmodel.compile(optimizer='adam', loss=keras.losses.Huber())\n"
                    "model.fit(x, y, batch_size=32)\n")
    assert main(["report", str(path), "--backend", "torch"]) == 0
    out = capsys.readouterr().out
    assert "loss:         huber (the loss in compile() at line 4)" in out
    assert "the backward of huber" in out
    assert main(["report", str(path), "--backend", "torch", "--output-format", "json"]) == 0
    model = json.loads(capsys.readouterr().out)["models"][0]
    assert (model["loss"], model["loss_source"]) == ("huber", "the loss in compile() at line 4")


def test_sparse_categorical_crossentropy_makes_five_output_sized_buffers_under_torch():
    """Softmax probabilities over [32, 4096, 3] with integer targets (torch-step oracle):
    5 2/3 output-sized buffers at the loss's forward, the step's peak."""
    from memlint.memory.losses import backward_buffers

    assert backward_buffers("sparse_categorical_crossentropy") == 5
    assert backward_buffers(None) == backward_buffers("a loss no one measured") == 6


def test_cublas_workspaces_per_thread_running_products():
    # PyTorch holds a cuBLAS workspace per thread that runs matrix products: 32 MiB from
    # Hopper on, 8 MiB + 128 KiB before; the forward's and autograd's thread in training
    # (measured on an H200: 64 MiB above the tensors in every training step)
    mib = 2**20
    train, infer = graph_of(MLP, batch=8), graph_of(MLP, batch=8, mode="infer")
    for graph, gpu, held in ((train, "9.0", 64 * mib), (train, None, 64 * mib),
                             (infer, "9.0", 32 * mib), (train, "7.5", 2 * (8 * mib + 128 * 1024)),
                             (infer, "8.0", 8 * mib + 128 * 1024)):
        b = estimate(graph, profile=TORCH, compute_capability=gpu)
        assert workspaces(b) == held, (graph.setup.mode, gpu)
        assert b.peak_at["bytes"] == b.peak
        assert max(m["bytes"] for m in b.timeline) <= b.peak
    assert workspaces(estimate(train, profile=XLA)) == 0
    assert workspaces(estimate(train, profile=TF_GRAPH)) == 0


def test_cublas_workspaces_count_in_the_largest_batch():
    from memlint.memory import max_batch_size

    b = estimate(graph_of(MLP, batch=8), profile=TORCH, compute_capability="9.0")
    assert max_batch_size(b, b.peak) >= 8
    assert max_batch_size(b, b.peak - workspaces(b)) < 8


def test_a_transposed_convolution_s_result_is_channels_first_in_memory_under_torch():
    """A transposed convolution convolves its input's channels-first copy and writes a
    channels-first result, which Keras permutes back as a view and a LeakyReLU keeps the
    strides of: the next Conv2D finds it contiguous once permuted and makes only the
    channels-last copy (PyTorch's trace of Conv2DTranspose -> LeakyReLU -> Conv2D; after a
    Conv2D the first copy is made too).  The same 32x32x16 map from a Conv2D adds that
    copy, less what the call writes while it exists (its [8, 32, 32, 3] result and unbiased
    product); keras.io's DCGAN generator's torch steps +28.2% / +33.2% -> +12.2% / +8.4%."""
    tail = "L.LeakyReLU(0.2), L.Conv2D(3, 5, padding='same')])"
    transposed = estimate(graph_of(
        "model = keras.Sequential([keras.Input((16, 16, 8)), "
        "L.Conv2DTranspose(16, 4, strides=2, padding='same'), " + tail, batch=8,
        optimizer="adam"), profile=TORCH)
    plain = estimate(graph_of(
        "model = keras.Sequential([keras.Input((32, 32, 8)), "
        "L.Conv2D(16, 3, padding='same'), " + tail, batch=8, optimizer="adam"),
        profile=TORCH)
    after_transposed = moment(transposed, "forward", "conv2d") - moment(
        transposed, "forward", "leaky_re_lu")
    after_plain = moment(plain, "forward", "conv2d_1") - moment(plain, "forward",
                                                                "leaky_re_lu")
    assert after_plain - after_transposed == 8 * 32 * 32 * 16 * F32 - 2 * 8 * 32 * 32 * 3 * F32
