"""What XLA does with a step on a GPU that the walk cannot read off the graph alone: which
calls it fuses into their readers, what it recomputes in the backward instead of keeping,
which products and convolutions are library calls (cuBLAS, cuDNN) whose outputs no fusion
writes over.  Each rule was read from deviceless buffer assignments of XLA's GPU plans
(docs/memory-model-v2.md) and is a predicate on the walk's state: :class:`XlaFusion` is a
mixin of :class:`memlint.memory.walk.Walk`, which allocates and frees what they decide.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import TYPE_CHECKING, Optional

from memlint.layers.base import REGISTRY, Saved, activation_need
from memlint.layers.pooling import pads_before
from memlint.ir import as_shape_list, shape_size
from memlint.memory.tensors import SLICES

if TYPE_CHECKING:  # annotations only: the walk imports this module
    from memlint.memory.walk import _Call, _Tensor

# Layer types XLA fuses into the kernel that reads them: their output is not kept in memory
# unless something saves it, so a ReLU after them keeps a one-byte mask, not its input (after
# a sum, not even that: its backward recomputes the sum's sign, ``relu_of_sum``).
_SUMS = frozenset({"Add", "Subtract", "Average"})
_ELEMENTWISE_MERGES = _SUMS | {"Multiply", "Maximum", "Minimum"}
_RESHAPES = frozenset({"Flatten", "Reshape"})
# convolutions a zero padding folds into (XlaFusion.padded_in_convolution)
_CUDNN_PADDED = frozenset({"Conv1D", "Conv2D", "DepthwiseConv2D"})
_FUSIBLE = frozenset({
    "BatchNormalization", "LayerNormalization", "GroupNormalization", "UnitNormalization",
    "Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum", "Rescaling",
    "Normalization",
})


# XLA GPU (Hopper): the longest global max whose comparison mask is not written
MASKED_REDUCTION = 256

# Hopper: the smallest batch at which a strided transposed convolution's kernel gradient
# reads a batch-minor copy of its output's gradient (XlaFusion.no_batch_minor_copy)
BATCH_MINOR_FROM = 16
# Ampere and Hopper: a one-filter strided transposed convolution over a Dense's unwritten
# activation copies its input for its kernel gradient in the backward from this batch on,
# where the Dense contracts at most UNSPLIT_CONTRACTING features (XlaFusion.
# _over_own_activation; the H100 from batch 16, the A100 at 24 and 32, not at 16; 64
# features measured so, 80 not)
LATE_COPY_FROM = 24
UNSPLIT_CONTRACTING = 64
ONE_PASS_REDUCTION_ROWS = 32 * 128  # XLA GPU: the longest column reduction done in one pass
# float32 NCHW (before Hopper): the batch normalisations whose statistics are one fusion
NCHW_ONE_PASS_BATCH = 8
NCHW_ONE_PASS_ROWS = 8192


# Layers whose call is a matrix product (cuBLAS or a Triton GEMM on a GPU).
GEMM_LAYERS = frozenset({
    "Dense", "EinsumDense", "MultiHeadAttention", "Attention", "AdditiveAttention", "Dot",
    "LSTM", "GRU", "SimpleRNN", "RNN", "Bidirectional", "CuDNNLSTM", "CuDNNGRU",
    "TimeDistributed", "LocallyConnected1D", "LocallyConnected2D", "Gemm", "MatMul"})


def _linear_side_input(layer) -> bool:
    """Whether a layer is a convolution cuDNN adds a sum's other operand into (its side
    input, :attr:`LayerKind.takes_side_input`) with no activation of its own."""
    kind = REGISTRY.get(layer.type)
    return kind is not None and kind.takes_side_input \
        and not _writes_activation_of_its_own(layer)


def _masks_gradient(layer) -> bool:
    """Whether a call's input gradient is its output gradient times a kept mask (a
    dropout's, :attr:`LayerKind.masks_gradient`)."""
    kind = REGISTRY.get(layer.type)
    return kind is not None and kind.masks_gradient


def _keeps_input_for_kernel(layer) -> bool:
    """Whether ``layer`` is a convolution or a Dense product, which keeps its input until its
    kernel's gradient is made."""
    kind = REGISTRY.get(layer.type)
    return layer.type == "Dense" or (kind is not None and kind.family == "convolutional")


def _recomputes_its_input_in_backward(layer, max_too: bool) -> bool:
    """Whether a call keeps nothing of a normalised ReLU's output that its backward would
    not recompute anyway: a convolution or Dense product (it keeps the output for its
    kernel's gradient), a global average pooling, and where ``max_too`` a global max
    pooling (their backward's fusion recomputes the input from the normalisation's kept
    input and statistics)."""
    return _keeps_input_for_kernel(layer) or layer.type.startswith("GlobalAveragePool") \
        or max_too and _is_global_max_pooling(layer)


def _writes_relu(layer) -> bool:
    """Whether a call's output is ``max(x, 0)``: a plain ReLU layer, ``Activation('relu')``
    or a layer's ``activation="relu"`` (no slope, cap or threshold)."""
    config = layer.config or {}
    if layer.type == "ReLU":
        return not any(config.get(k) for k in ("max_value", "negative_slope", "threshold"))
    return config.get("activation") == "relu"


def _relu_layer(layer) -> bool:
    """A ReLU layer (``ReLU()``, ``Activation("relu")``): ``max(x, 0)`` as a call of its own."""
    kind = REGISTRY.get(layer.type)
    return elementwise_call(layer, kind) and _writes_relu(layer)


def _is_window_pooling(layer, kind) -> bool:
    """A max or average pooling over windows (not a global one)."""
    return kind is not None and kind.family == "pooling" \
        and not layer.type.startswith("Global")


def _is_global_max_pooling(layer) -> bool:
    """A global max pooling (any rank)."""
    return layer.type.startswith("GlobalMaxPool")


def _writes_activation_of_its_own(layer) -> bool:
    """A layer with an ``activation=`` other than linear (not an activation layer)."""
    return layer.type not in ("ReLU", "Activation") \
        and (layer.config or {}).get("activation") not in (None, "linear")


def _scatters_in_place(pooling, shape) -> bool:
    """Whether a max pooling's backward scatters into a map of its input's ``shape``: not
    where ``"same"`` padding puts a row before an axis (it then scatters into a padded map,
    sliced after, whose zero no ReLU shares)."""
    return not pads_before(pooling.config or {}, shape,
                           (as_shape_list(pooling.output_shapes) or [None])[0])


def _dilates_in_a_fusion(layer) -> bool:
    """Whether XLA reads a call's input only in element-wise fusions: a strided transposed
    convolution with one filter convolves a zero-dilated copy of its input, and its kernel's
    gradient reads a batch-minor copy (``Conv2DTranspose.saved``)."""
    config = layer.config or {}
    strides = config.get("strides")
    return layer.type.endswith("Transpose") and layer.type.startswith("Conv") \
        and config.get("filters") == 1 and isinstance(strides, (list, tuple)) \
        and any(isinstance(s, int) and s > 1 for s in strides)


# XLA's GPU rewriter leaves a product whose two operands hold fewer elements than this to its
# own loop emitters (xla_gpu_gemm_rewrite_size_threshold's default), and reduces a product of a
# matrix and a vector (a side of size one) of fewer than MATVEC_LIMIT elements to a reduction.
GEMM_REWRITE_MIN = 100
MATVEC_LIMIT = 10_000_000

# XLA's GPU dot merger joins products that share an operand where one of the two moves at
# most this many bytes (xla_gpu_dot_merger_threshold_mb's default, 32).
DOT_MERGE_LIMIT = 32 << 20


# On a device XLA's autotuner may give a large product to cuBLAS, which reads a written
# operand: the H200 plan of an MLP's predict step at batch 8192 writes the rescaled input
# (25.7 MB) that deviceless plans fuse into the first product; at batch 32 the device's plans
# of MLPs equal the deviceless ones.  Products of up to this many rows are taken to stay Triton
# fusions (a bound between the two measured sizes, itself not measured).
TRITON_PROLOGUE_ROWS = 1024


# A Triton product over operands concatenated along its output's columns reads each piece
# in place where every piece is a whole number of this many columns (its tile).
NESTED_CONCAT_COLUMNS = 64


def concatenated_in_product(widths: list) -> bool:
    """Whether the Triton product XLA merges Dense products into reads their kernels (and,
    for the merged kernel gradient, their output gradients) in place, no concatenation
    written: where every width is a multiple of ``NESTED_CONCAT_COLUMNS`` (H100 plans of
    two Dense(u) on one input at batch 32: a concatenated kernel written for u = 16, 32,
    48, 96 and 100, none for 64 and 128; nor for two Dense(512) on a 256-wide input at 256,
    whose kernel gradients' product reads both output gradients)."""
    return bool(widths) and all(w and w % NESTED_CONCAT_COLUMNS == 0 for w in widths)


def elementwise_call(layer, kind) -> bool:
    """Whether the registry kind ``kind`` (None: no kind) makes ``layer``'s call
    element-wise (a Lambda's from what its function computes)."""
    return kind is not None and kind.is_elementwise(layer.config)


def _moves_only(layer) -> bool:
    """A Lambda whose traced function, or an operation (``ops.transpose``) that only moves,
    joins or computes elements in place (a slice, a concatenation): like a concatenation,
    a loop fusion writes it as it reads."""
    return isinstance(layer.config, dict) and layer.config.get("work") in ("layout",
                                                                           "elementwise")


def loop_fused(layer) -> bool:
    """Whether XLA computes a layer's work in an element-wise loop fusion: a normalisation,
    a sum or merge, or a layer kind that is element-wise."""
    kind = REGISTRY.get(layer.type)
    return layer.type in _FUSIBLE or elementwise_call(layer, kind)


def _units(layer) -> Optional[int]:
    """The output width of a layer's matrix product: its 2-D kernel's last axis."""
    return next((w.shape[-1] for w in layer.weights if len(w.shape) == 2), None)


def _known_input_shape(layer) -> Optional[tuple]:
    """A call's first input shape where every size after the batch is known, else None."""
    shape = layer.input_shapes[0] if layer.input_shapes else None
    if isinstance(shape, tuple) and shape and all(isinstance(d, int) for d in shape[1:]):
        return shape
    return None


def resizes_by_products(layer) -> bool:
    """An UpSampling2D that interpolates (not ``"nearest"``): XLA resizes with a matrix
    product per spatial axis (:meth:`UpSampling2D.saved`)."""
    return layer.type == "UpSampling2D" and REGISTRY["UpSampling2D"].interpolates(
        layer.config or {})


def nearest_upsampling(layer) -> bool:
    """An UpSampling layer that repeats rows (``interpolation="nearest"``): under XLA a
    loop fusion like an element-wise call's, which a padding reader computes as it reads
    (H100 predict plan of UpSampling2D -> Conv2D(16, 2, padding="same"): one pad fusion
    writes the padded, upsampled map; no upsampled copy)."""
    return layer.type in ("UpSampling1D", "UpSampling3D") or (
        layer.type == "UpSampling2D" and not resizes_by_products(layer))


def _not_a_gemm(rows: int, contracting: int, columns: int) -> bool:
    """Whether a Dense product (``[rows, contracting] x [contracting, columns]``) and its
    two backward products run without cuBLAS (T4 plan of ``Dense(3)`` on one feature at
    batch 32: no 4 MiB workspace)."""
    size = rows * contracting + contracting * columns
    return size < GEMM_REWRITE_MIN or (min(rows, contracting, columns) == 1
                                       and size + rows * columns < MATVEC_LIMIT)


class XlaFusion:
    """The XLA decisions of the walk (a mixin: ``self`` is the :class:`Walk`, with its
    profile, graph, consumers, batch and GPU flags)."""

    def pooled_embedding(self, layer, key) -> bool:
        """Whether XLA never writes an embedding's output, its lookup computed inside the
        reductions of the global poolings over steps that alone read it (no mask):
        in training and outside it.  H100 and T4 plans of Embedding(20000, 50) over 400
        tokens -> GlobalAveragePooling1D -> Dense at batch 128: train +38.4% -> +0.0%,
        predict (H100) +237.9% -> -1.2%; into GlobalMaxPooling1D +109% -> +55% (its
        backward's buffers are left over-counted)."""
        return self.profile.sign == "xla" and layer.type == "Embedding" \
            and not (layer.config or {}).get("mask_zero") and self._all_readers(
                key, lambda reader: reader.type in ("GlobalAveragePooling1D",
                                                    "GlobalMaxPooling1D"))

    def padded_in_convolution(self, layer, key) -> bool:
        """Whether XLA folds a zero padding into the convolutions that alone read it, cuDNN
        padding their input itself: as much padding before as after on every axis, channels
        last, read only by ``Conv1D`` / ``Conv2D`` / ``DepthwiseConv2D`` layers with
        ``"valid"`` padding.  The padding is then a view of its input, which the
        convolutions keep for their kernel's gradient (H100 plans of ZeroPadding2D(1) ->
        Conv2D(3, strides=2) twice, Adam: +14.2% -> -0.1% at batch 32, +12.9% -> +2.4% at 4;
        the T4 +3.2% -> +0.4%; ``timeseries_conv1d_rnn``'s ZeroPadding1D(2) -> Conv1D(5) on
        the H100 +16..23% -> +13..19%).  Uneven padding is written: cuDNN pads evenly only."""
        if self.profile.sign != "xla" or not layer.type.startswith("ZeroPadding"):
            return False
        config = layer.config or {}
        pairs = config.get("padding")
        if config.get("data_format") == "channels_first" or not isinstance(pairs, tuple) \
                or not all(isinstance(p, tuple) and len(p) == 2 and p[0] == p[1]
                           for p in pairs):
            return False

        def padded_by_cudnn(reader) -> bool:
            kind = REGISTRY.get(reader.type)
            return kind is not None and kind.class_name in _CUDNN_PADDED \
                and (reader.config or {}).get("padding") == "valid"

        return self._all_readers(key, padded_by_cudnn, 1)

    def pads_in_producer(self, t: "_Tensor") -> bool:
        """Whether XLA writes a convolution's padded input in the fusion that makes it, in
        place of the input: an element-wise result (not a library call's, not the data)
        that only this call reads (H100 predict plan of strided Conv2D -> BN -> ReLU blocks:
        the ReLU writes ``f32[32, 33, 33, 16]``, no unpadded copy beside it)."""
        return self.profile.sign == "xla" and not t.materialized and t not in self.data \
            and t.uses == 1 and t.holds == 0 and not t.output

    def time_major_output(self, layer, kind, ins: list) -> bool:
        """Whether a call's output is a convolutional recurrence's or a generic RNN's stacked
        steps, time-major under XLA (the transpose back to batch-major and the next
        recurrence's transpose cancel), or an element-wise function of such a tensor: the
        next recurrence makes no time-major copy of it (H100 predict plans of ConvLSTM2D ->
        [BatchNormalization ->] ConvLSTM2D: two sequence-sized buffers while the second
        runs, not three; of RNN(StackedRNNCells) -> RNN(StackedRNNCells): the first loop's
        ``f32[12, 32, 12]`` outputs are the second's input)."""
        if self.profile.sign != "xla":
            return False
        if layer.type.startswith("ConvLSTM") or layer.type == "RNN":
            return bool((layer.config or {}).get("return_sequences"))
        passes = layer.type in _FUSIBLE or elementwise_call(layer, kind)
        return passes and len(ins) == 1 and ins[0].time_major

    def steps_beside_output(self, layer, ins: list, li: int, ci: int,
                            sizes: list) -> Optional[tuple]:
        """A TimeDistributed(Dense) whose output is the predict step's: XLA computes its
        steps apart from the step's output buffer and copies them into it last.  Linear,
        the steps' products are one product over the steps' inputs concatenated, alive
        with that input and the output (H100 predict plans of LSTM(64) and of Conv1D(64)
        into TimeDistributed(Dense(200)) over 12 steps, batches 32 and 256: ``f32[384,
        200]`` and ``f32[12, 32, 64]`` beside the output); with a softmax, one result per
        step, the input gone after the last step's product (the same with Dense(200,
        softmax): twelve ``f32[32, 200]`` beside the output; a GRU decoder of the same
        width: -16.9% without them).  Other activations are not measured.  Where the
        output is not the step's, the next layer reads the steps as they are: no copy.  The
        (per sample, fixed) bytes of the steps, or None."""
        if self.profile.sign != "xla" or self.train or layer.type != "TimeDistributed" \
                or self.step_outputs is None or not sizes or sizes[0] is None \
                or not self.is_output(layer, li, ci, 0):
            return None
        inner = (layer.config or {}).get("layer")
        if not isinstance(inner, dict) or inner.get("class_name") != "Dense":
            return None
        activation = (inner.get("config") or {}).get("activation")
        per_sample, fixed = sizes[0]
        if activation == "softmax":  # the input dies before the output is written
            read = min((t.buf.per_sample, t.buf.fixed) for t in ins) if ins else (0, 0)
            per_sample -= min(read[0], per_sample)
            fixed -= min(read[1], fixed)
        elif activation not in (None, "linear"):
            return None
        return per_sample, fixed

    def on_this_gpu(self, s: Saved) -> bool:
        """Scratch XLA makes only on some GPUs: the bilinear gathers of an affine
        augmentation are materialised before Hopper, their int32 index planes on Ampere."""
        if s.what == "gathered corners":
            return self.nchw_float32
        if s.what == "corner indices":
            return self.nchw_float32 and not self.gemm_workspace
        if s.what == "unfused product":  # float32 NHWC (Hopper) only
            return not self.nchw_float32 and self.compute_bytes == 4
        return True

    def no_kernel_of_its_own(self, layer, kind, t: _Tensor, out_key) -> bool:
        """Whether XLA runs no fusion of its own for an element-wise call reading a library
        call's output ``t`` (so the output stays in the library call's buffer): the call does
        nothing in this step (Identity; dropout and noise layers outside training), cuDNN
        applies it inside the convolution (a ReLU right on a convolution's output), or
        XLA fuses it into the window pooling that reads it (through further element-wise
        calls).  A global pooling's reduction does not take it in: the H100 predict plan of
        Conv2D -> BatchNormalization -> ReLU -> GlobalAveragePooling2D writes the ReLU's
        output beside the convolution's (-38.0% -> +0.0% once the call has a buffer of its
        own there)."""
        if layer.type == "Identity" or (kind is not None and kind.family == "regularization"
                                        and not self.train):
            return True
        producer = REGISTRY.get(t.producer)
        if producer is not None and producer.family == "convolutional" and (
                layer.type == "ReLU" and not layer.config.get("max_value")
                and not layer.config.get("negative_slope")
                or layer.type == "Activation" and layer.config.get("activation") == "relu"):
            return True
        return out_key is not None and self.fused_into_window_pooling(out_key)

    def side_input_sum(self, layer, ins, t: _Tensor) -> bool:
        """Whether XLA adds the other operand of a two-operand sum into the convolution that
        wrote ``t`` (cuDNN's side input), so the sum is written in the convolution's
        buffer: a forward convolution with no activation of its own (not a depthwise or
        transposed one, which XLA runs as other cuDNN calls).  A ReLU over the sum then
        keeps that buffer for its sign, no mask (H100 and T4 plans of
        Conv2D(relu) -> Conv2D(1) added back, ReLU, Conv2D, the sum also read by a second
        1x1 convolution: +17.8% -> +0.1% at batch 32; keras.io's U-Net-like segmenter, whose
        upsampling stages add a 1x1 convolution's output: -13.5% -> -9.6% on the H100)."""
        producer = REGISTRY.get(t.producer)
        return self.profile.sign == "xla" and layer.type == "Add" and len(ins) == 2 \
            and producer is not None and producer.takes_side_input and not t.activated

    def fused_into_pooling(self, key, depth: int) -> bool:
        """Whether every reader of the tensor ``key`` is a pooling layer, or an element-wise
        call (a normalisation, a sum) or a concatenation whose own output is only read by
        pooling layers: XLA fuses the element-wise work into the pooling's kernel."""
        return self._read_through_elementwise(
            key, depth, lambda reader, kind: kind is not None and kind.family == "pooling")

    def fused_into_reader(self, layer, kind, key, ins=(), depth: int = 8) -> bool:
        """Whether XLA never writes the output ``key`` of an element-wise call or a
        concatenation outside training, its readers computing it as they read it: every
        reader is a window pooling (max or average) or a Dense product XLA emits itself (a
        Triton GEMM on Ampere and later, or a matrix-vector reduction), or such a call
        whose own output only they read.  H100 predict plans: two convolution branches
        added, concatenated, normalised and max-pooled (one ``reduce_window`` fusion reads
        the convolutions' outputs; +31.1% -> -0.1%); Dense(relu) pairs merged by add,
        subtract, multiply, average and maximum, concatenated into Dense(1) (one reduction
        fusion reads the two products; +188.7% -> +1.1%).  A global pooling's reduction
        does not (H100 plans of Conv2D -> BatchNormalization -> ReLU ->
        GlobalAveragePooling2D: the ReLU's output is written, in training and outside it);
        nor does the T4, whose products are cuBLAS calls.  In training the products'
        readers are not followed (Dense layers between PReLU, tanh, LeakyReLU and ELU
        layers at batch 32: -12.6% -> -30.7% with them), except a one-unit Dense that XLA
        reduces itself (:meth:`reduced_product`), whose forward and kernel-gradient
        reductions both compute the operand (the same merges into Dense(1) in training:
        +99.4% -> +51.0% at batch 32, +81.0% -> +23.8% at 256, the forward no longer above
        the plan's whole step), or a concatenation, also through reshapes (its loop fusion
        computes them as it writes: a ReLU and two nested concatenations flattened into
        one, +45.6% -> +2.2% at batch 32, +63.8% -> +1.0% at 256).  In training too, an
        element-wise call on the batch alone (a Rescaling of the input), read only by Dense
        products that compute it as they read it: the batch is a step argument, alive anyway
        (Rescaling(1/255) -> Dense(256, relu) -> Dense(10), H100: +3.3% -> +0.6% at batch
        32, +15.2% -> +3.7% at 256).  In training too, a chain of element-wise calls
        read only by a one-filter strided transposed convolution (:func:`_dilates_in_a_fusion`),
        whose zero-dilated operand's pad fusion computes the chain as it writes (H100 plans
        of the TensorFlow tutorial's DCGAN generator, BatchNormalization -> LeakyReLU ->
        Conv2DTranspose(1, 5, strides=2): no normalisation output at the forward's end, the
        convolution's output and statistics kept for its backward; its T4 and A100 rows
        within 1.1% at batches 4 and 32, the T4's at 256 +40.3% -> +32.1%).
        A window pooling is computed
        where every reader (through reshapes) is a call of a merged product: the operand
        XLA concatenates for it reads the pooling's input, also through reshapes and
        element-wise calls such as a batch normalisation (H100 predict plans of siamese
        towers: one tower's last convolution output waits, unpooled, for the other).  In
        training, only where every reader is a global max pooling, whose reduction and
        backward select compute it (H100 and T4 plans of Conv2D -> ReLU ->
        GlobalMaxPooling2D: the convolution's result the only buffer; the select writes the
        gradient of the ReLU's input).  A slice, in training too, where its readers' loop
        fusions slice their operand (:meth:`_slice_fusing_reader`); ``ins`` are the call's
        input tensors.  A nearest upsampling that only croppings read, in training too: the
        cropping's fusion repeats the rows it keeps as it writes (H100 predict plan of
        keras.io-style U-Net inputs upsampled, cropped back and convolved: no upsampled
        map; +17.1% with it)."""
        if self.profile.sign == "xla" and nearest_upsampling(layer) and self._all_readers(
                key, lambda reader: reader.type.startswith("Cropping"), 1):
            return True
        if not self.train and self.profile.sign == "xla" and _is_window_pooling(layer, kind):
            return self._all_calls_read(key, self._merged_or_fused_into_one)
        if self.profile.sign == "xla" and layer.type in SLICES:
            return self._all_calls_read(key, self._slice_fusing_reader)
        if self.pooled_embedding(layer, key):
            return True
        if not (self.profile.sign == "xla" and (
                layer.type in _FUSIBLE or layer.type == "Concatenate" or _moves_only(layer)
                or elementwise_call(layer, kind))):
            return False
        # a GEMM computes an element-wise operand as it reads (Triton's), never a
        # concatenation: one that joins its operand is written for it (H100 plans, train
        # and predict, of a Lambda concatenating features with their squares into a
        # Dense(32)); a product XLA reduces itself computes either
        if not elementwise_call(layer, kind) and (
                layer.type == "Concatenate" or _moves_only(layer)) and any(
                self._gemm(reader) for reader in self.readers(key)):
            return False
        if self.train and ins and all(t in self.data for t in ins) and self._all_readers(
                key, self.product_reads_fused):
            return True
        if self.train and self.pooled_normalization(key):
            return True
        if self.train and self.relu_of_written_sum_into_max_pooling(key):
            return True
        if self.train and self.averaged_concatenation(key):
            return True
        if self.train:
            return self._read_through_elementwise(
                key, depth, lambda reader, k: _is_global_max_pooling(reader)
                or self.reduced_product(reader) or reader.type == "Concatenate"
                or _dilates_in_a_fusion(reader), reshapes=True)
        # a concatenation of slices is written for a product (H100 predict plan of six
        # slices of one input concatenated into a Dense: one fusion slices and writes the
        # concatenation, which the product reads); of never-written Lambdas alike (H100
        # predict plan of Lambdas concatenating an input with itself and its square)
        products = not any((t.producer in SLICES or t.producer == "Lambda")
                           and t.sources is not None for t in ins)
        return self._read_through_elementwise(
            key, depth, lambda reader, k: _is_window_pooling(reader, k)
            or products and self.product_reads_fused(reader))

    def idempotent_relu(self, layer, ins: list) -> bool:
        """Whether a ReLU layer reads a ReLU's output: XLA's simplifier makes ``max(max(x,
        0), 0)`` the inner one, so the layer writes nothing and keeps nothing, its backward's
        select fused with the inner one's (keras.io's Xception-style model, whose first
        block opens with a ReLU over the stem's ReLU: H100 and T4 plans of Conv2D ->
        BatchNormalization -> ReLU -> ReLU -> Conv2D, no second map and no mask)."""
        return self.profile.sign == "xla" and len(ins) == 1 and ins[0].relu \
            and _writes_relu(layer) and not _writes_activation_of_its_own(layer)

    def pooled_normalization(self, key: tuple) -> bool:
        """Whether, in training, the output ``key`` of a batch normalisation of a
        convolution's output is never written because only max poolings read it, directly:
        the pooling's ``reduce_window`` and its backward's window-index fusion both normalise
        the input as they read it, the input being kept for the normalisation's backward
        anyway (H100 and T4 plans of Conv2D -> BatchNormalization -> MaxPooling2D and of
        keras.io's Xception-style blocks, SeparableConv2D -> BatchNormalization ->
        MaxPooling2D(3, 2, "same"): no normalised map; +26.5% over on the H100 with it).
        Where a ReLU of the map's shape exists, the scatter's zero is its
        (:attr:`shared_pool_zeros`).  Only a convolution's output is taken as the input:
        over a concatenation of a sum and a convolution's output
        (``functional_two_branch``) the plans write a map of that size (-23% without it)."""
        return self._normalises_a_convolution(key) and self._all_readers(
            key, lambda reader: reader.type.startswith("MaxPool"), 1)

    def _slice_fusing_reader(self, call: tuple) -> bool:
        """A call whose loop fusion computes a slice operand as it reads it: a
        concatenation, a sum, another slice, an activation whose backward reads its output;
        outside training any element-wise call (in training the others may keep their
        input for the backward).  H100 plans of six slices of one input, one through a
        sigmoid, flattened and concatenated into a Dense: only the concatenation written in
        training (+54.1% at batch 32, +65.6% at 256 with every slice counted)."""
        reader = self.graph.layers[call[0]]
        if reader.type in SLICES or reader.type in _SUMS or reader.type == "Concatenate":
            return True
        if reader.type == "Activation" and activation_need(
                (reader.config or {}).get("activation")) == "output":
            return True
        kind = REGISTRY.get(reader.type)
        return not self.train and (reader.type in _FUSIBLE
                                   or elementwise_call(reader, kind))

    def activated_in_pooling(self, key) -> bool:
        """Whether, outside training, the function a convolution's result needs (one cuDNN
        does not apply) is applied by the window poolings that alone read its output: the
        result is then the only buffer (H100 predict plan of keras.io's siamese MNIST
        network, batch 1024: ``f32[1024, 24, 24, 4]`` of a tanh Conv2D read by an
        AveragePooling2D, no second buffer; +22.5% with one)."""
        return not self.train and self.profile.sign == "xla" and self._all_readers(
            key, lambda reader: _is_window_pooling(reader, REGISTRY.get(reader.type)), 1)

    def relu_of_written_sum_into_max_pooling(self, key: tuple) -> bool:
        """Whether the tensor ``key`` is a ReLU over a two-operand sum one of whose operands
        is a linear convolution's output (cuDNN's side input, :meth:`side_input_sum`: the sum
        is written in that convolution's buffer and kept for the ReLU's sign), read only by
        max poolings: their forward reduction applies the ReLU as it reads the sum, so the
        ReLU's output is never written (H100 and T4 plans of Conv1D residual blocks into
        MaxPool1D, keras.io's speaker-recognition network: no buffer of the ReLU's in the
        forward).  Static: the graph's calls, not the walk's tensors."""
        if not isinstance(key[0], int) or not _writes_relu(self.graph.layers[key[0]]):
            return False
        ins = self.call_inputs(self.graph.layers[key[0]], key[1])
        if len(ins) != 1 or not isinstance(ins[0][0], int):
            return False
        total = self.graph.layers[ins[0][0]]
        operands = self.call_inputs(total, ins[0][1])
        return total.type == "Add" and len(operands) == 2 and any(
            isinstance(o[0], int) and _linear_side_input(self.graph.layers[o[0]])
            for o in operands) and self._all_readers(
                key, lambda reader: reader.type.startswith("MaxPool"))

    def fused_into_window_pooling(self, key, depth: int = 8) -> bool:
        """:meth:`fused_into_pooling` for window poolings (max or average) only."""
        return self._read_through_elementwise(key, depth, _is_window_pooling)

    def _read_through_elementwise(self, key, depth: int, final,
                                  reshapes: bool = False) -> bool:
        """Whether every reader of the tensor ``key`` is one ``final(layer, kind)`` accepts,
        or an element-wise call or a concatenation (XLA fuses both into their reader), with
        ``reshapes`` a Flatten or Reshape, whose own output only such readers read
        (``depth`` calls deep at most)."""
        readers = self.consumers.get(key, [])
        if not readers or depth <= 0:
            return False
        for li, ci in readers:
            reader = self.graph.layers[li]
            kind = REGISTRY.get(reader.type)
            if final(reader, kind):
                continue
            if (reader.type in _FUSIBLE or reader.type == "Concatenate"
                    or reshapes and reader.type in _RESHAPES
                    or elementwise_call(reader, kind)) \
                    and self._read_through_elementwise((li, ci, 0), depth - 1, final,
                                                       reshapes):
                continue
            return False
        return True

    def activation_in_product(self, layer, key) -> bool:
        """Whether XLA never writes the output ``key`` of a layer's own activation whose
        backward reads the pre-activation (ReLU, GELU, swish, ...) in training, only the
        kernel's result (the pre-activation, kept for the backward): on Ampere and later,
        where every reader (through reshapes) is a Dense product that
        :meth:`product_reads_fused`, whose fusion applies the function as it reads its
        operand in the forward product and in the kernel's gradient, or a one-filter strided
        transposed convolution, whose zero-dilated and batch-minor copies are fusions (H100
        plans of Dense(512, relu) -> Dense(512, relu) -> Dense(10), of Conv2D(relu) ->
        Flatten -> Dense and of Dense(relu) -> Reshape -> Conv2DTranspose(1, strides=2):
        only the products' results alive; a ConvNeXt block's Dense(gelu) -> Dense at batch
        4, +21.5% -> +0.8% with GELU counted too; the T4's cuBLAS calls read a written
        output).  What the function's backward keeps besides (GELU's products) stays.
        On every target a ReLU whose output only global max poolings read (their reduction
        and their backward's select apply it: Conv2D(relu) -> GlobalMaxPooling2D, H100 and
        T4), or only batch normalisations whose output no max pooling reads (their
        statistics, their output and their backward recompute it: Conv2D(relu) ->
        BatchNormalization -> Conv2D at batch 32, the same buffers as without the ReLU,
        +31.0% -> +0.0% on the H100, +22.7% -> +0.0% on the T4; before a max pooling XLA
        writes it beside the scatter's zeros, and so where it writes a later pooling's
        zero, :meth:`_writes_shared_zero`).  On every target too an output only
        element-wise merges read (add, subtract, average, multiply, maximum, minimum),
        whose fusions apply the function, in the forward and in their backward (H100 plan
        of two Dense(1024, relu) multiplied into Dense(8) at batch 256: +27.8% -> +9.0%)."""
        if not (self.profile.sign == "xla" and self.train) \
                or not _writes_activation_of_its_own(layer):
            return False
        if self._all_readers(key, _is_global_max_pooling) or _writes_relu(layer) and \
                self._all_calls_read(key, self._normalised_for_a_non_pooling) and \
                not self._writes_shared_zero(layer):
            return True
        if self._all_readers(key, lambda reader: reader.type in _ELEMENTWISE_MERGES):
            return True
        if _writes_relu(layer) and self._all_calls_read(
                key, lambda call: self.averaged_concatenation(tuple(call[:2]) + (0,))):
            return True
        return not self.gemm_workspace and self._all_readers(
            key, lambda reader: self.product_reads_fused(reader)
            or _dilates_in_a_fusion(reader))

    def _writes_shared_zero(self, layer) -> bool:
        """Whether ``layer``'s ReLU is the first of its shape in :attr:`shared_pool_zeros`:
        its fusion writes the max pooling's broadcast zero and its own output both, so the
        output is written even where only batch normalisations read it (H100 and T4 plans of
        Conv2D(relu) -> BatchNormalization -> Conv2D(relu) -> BatchNormalization ->
        MaxPooling2D -> Flatten -> Dense: -7.0% / -8.4% -> +1.6% / -0.0% at batch 32, the
        H100 at 128 -11.3% -> -0.7%)."""
        shape = (as_shape_list(layer.output_shapes) or [None])[0]
        return isinstance(shape, tuple) and tuple(shape[1:]) in self.shared_pool_zeros \
            and tuple(shape[1:]) not in self.zeros_kept

    def averaged_concatenation(self, key) -> bool:
        """Whether the output ``key`` is a concatenation that, in an XLA training step on
        Hopper, only global average poolings read: never written, the pooling's reduction
        computing it (and a ReLU of a layer's own that only it reads) as it reads the
        operands' kept results, and the pooling's gradient, a broadcast, read by the
        operands' selects in their fusions (H100 plans of an inception block, four
        branches of ReLU convolutions concatenated into GlobalAveragePooling2D, Adam, batch
        32: only the convolutions' results alive, +60.7% -> -0.0%; three branches at batch
        4 / 32 +86.5% / +105.3% -> -0.0% / +6.5%).  Not where float32 convolutions are
        NCHW (before Hopper): the T4's plan of the inception block differentiates sibling
        branches' ReLUs in one fusion, and memlint would be 7.9% under there with the rule
        (+31.9% over without it)."""
        if not (self.profile.sign == "xla" and self.train and not self.nchw_float32
                and key[0] in range(len(self.graph.layers))):
            return False
        return self.graph.layers[key[0]].type == "Concatenate" and self._all_readers(
            key, lambda reader: reader.type.startswith("GlobalAveragePooling"))

    def select_reads_output(self, layer, key) -> bool:
        """Whether, in an XLA training step, a layer's own ReLU whose output max poolings
        read is differentiated by a select that reads that output (the convolution's
        result) and the ReLU's broadcast zero, and writes the gradient of the
        pre-activation to a buffer of its own (beside the pooling's scattered gradient,
        fused with the bias gradient's reduction)."""
        return self.profile.sign == "xla" and self.train and _writes_relu(layer) \
            and _writes_activation_of_its_own(layer) and self._all_readers(
                key, lambda reader: reader.type.startswith("MaxPool"), 1)

    def select_written_apart(self, layer, kind, key) -> bool:
        """Whether, in an XLA training step, a convolution's own biased ReLU whose output
        only convolutions read is differentiated by a select written to a buffer of its own
        beside the output's gradient: the select is fused with the bias gradient's
        reduction, a fusion that does not write over what it reads, and the gradient, a
        cuDNN input gradient, dies only once the select is written (H100 and T4 plans of a
        small U-Net whose last Conv2D(16, relu) feeds a 1x1 Conv2D: ``f32[32, 64, 64, 16]``
        twice at the select, memlint 8.0% under at batches 4 to 256 without the moment; of
        VGG blocks: every select at its own offset).  Where a global average pooling reads
        the output, XLA computes the pooling's broadcast gradient inside the select's fusion
        and there is no such moment (two strided ReLU convolutions into one: 12% over with
        the moment); other readers are left as they were (not compiled)."""
        def convolution(reader) -> bool:
            other = REGISTRY.get(reader.type)
            return other is not None and other.family == "convolutional"

        config = layer.config or {}
        return self.profile.sign == "xla" and self.train and kind is not None \
            and kind.family == "convolutional" and config.get("use_bias", True) \
            and _writes_relu(layer) and _writes_activation_of_its_own(layer) \
            and self._all_readers(key, convolution)

    def broadcast_into_normalization(self, layer, t) -> bool:
        """Whether, in an XLA training step, the input gradient of a global average pooling
        (``layer``, a broadcast of its output's) over a batch normalisation's output ``t``
        is never written: the normalisation's backward reads it inside its own fusions (its
        two reductions and the element-wise input gradient, which a ReLU's select before it
        joins).  H100 plans of Conv(relu) -> BatchNormalization -> GlobalAveragePooling ->
        Dense at batch 4 (Conv1D over 8,192 steps, Conv2D on 256x32 and 64x128 maps of 16 or
        64 channels): +45% to +49% with the broadcast written, within 0.1% without; T4 plans
        alike (the 64-channel map +47.6% -> +0.1%).  Not over a 3-D convolution's maps, which
        XLA lays out channels-first (NCDHW) on every GPU: its plans there keep the ReLU's
        output or the centred input instead (16 or 64 channels on 8x32x32 clips: 28-32%
        under without the broadcast)."""
        shapes = as_shape_list(layer.input_shapes)
        return self.profile.sign == "xla" and self.train \
            and t.producer == "BatchNormalization" and bool(shapes) \
            and isinstance(shapes[0], tuple) and len(shapes[0]) <= 4

    def no_batch_minor_copy(self, layer, s: Saved) -> bool:
        """Whether a strided transposed convolution's kernel gradient reads its output's
        gradient in place, with no batch-minor copy (``Conv2DTranspose.saved``): on Hopper
        at batches under ``BATCH_MINOR_FROM``, with ``"same"`` padding where the gradient
        needs none (kernel minus stride even) (H100 plans of two Conv2DTranspose(4,
        strides=2, "same") layers into ReLUs, Adam: no copy at batches 4, 8 and 12, memlint
        +10.5% / +15.6% / +18.7% with it; the copy at 16 and 32, exact; T4 plans make it at
        4 and 8 too, exact; with kernel 3 the padding fusion writes the padded gradient and
        its batch-minor copy at batch 8 as at 32)."""
        out = (as_shape_list(layer.output_shapes) or [None])[0]
        return s.what == "output gradient, batch-minor" and self.profile.sign == "xla" \
            and not self.nchw_float32 and self.batch < BATCH_MINOR_FROM \
            and (layer.config or {}).get("padding") == "same" \
            and isinstance(out, tuple) and isinstance(s.shape, tuple) \
            and tuple(s.shape[1:]) == tuple(out[1:])

    def differentiated_in_transposed_backward(self, call, t) -> Optional["_Tensor"]:
        """The output of the transposed convolution in whose backward's first fusion an
        XLA training step differentiates ``call``, an element-wise call or a batch
        normalisation that reads ``t``, that convolution's output or the output of a chain
        of such calls from it, each the only reader of the last (None where it does not).
        That fusion writes the convolution's scratch for the kernel's gradient (the output
        gradient padded, and its batch-minor copy: ``Conv2DTranspose.saved``) and computes
        the chain's input gradients as it reads, so they are never written on their own,
        and the chain's output gradient and what each call's backward reads live until it
        has run (H100 plans of keras.io's DCGAN generator, Dense -> Reshape -> two
        Conv2DTranspose(4, strides=2, "same") each into a LeakyReLU or a ReLU, Adam, batch
        32: the peak holds the LeakyReLU's output gradient, its kept input, the select and
        the batch-minor copy; 14.8% / 16.1% under on the H100 / T4 without it, exact with
        it; with a BatchNormalization before each LeakyReLU -14.2% / -18.3% -> +5.6% /
        +0.6%, the H100 reading the LeakyReLU's sign off the recomputed normalisation where
        memlint keeps a one-byte mask; with kernel 3, where the padding is uneven, -11.7%
        -> +9.6%: XLA keeps a one-byte mask for the LeakyReLU there, memlint its input).
        Only where the convolution trains (its backward runs)."""
        kind = REGISTRY.get(call.layer.type)
        if not (self.profile.sign == "xla" and self.train and (
                elementwise_call(call.layer, kind)
                or call.layer.type == "BatchNormalization")):
            return None
        for _ in range(8):  # down a chain of such calls, each the only reader of the last
            if t is None or t.readers != 1 or t.made_by not in self.by_name:
                return None
            producer = self.graph.layers[self.by_name[t.made_by]]
            other = REGISTRY.get(producer.type)
            if other is None or not producer.input_shapes or not producer.output_shapes:
                return None
            if not (elementwise_call(producer, other)
                    or producer.type == "BatchNormalization"):
                break
            keys = self.call_inputs(producer, 0)
            t = self.tensor(keys[0], producer, 0, 0) if len(keys) == 1 else None
        else:
            return None
        if not any(w.trainable for w in producer.weights):
            return None
        saved = self.saved_list(producer, other, as_shape_list(producer.input_shapes)[0],
                                as_shape_list(producer.output_shapes)[0], 1)
        return t if any(s.what == "output gradient, batch-minor" and s.when == "backward"
                        for s in saved) else None

    def _normalised_for_a_non_pooling(self, call: tuple) -> bool:
        """A batch normalisation call whose statistics take more than one pass
        (:meth:`statistics_in_one_pass`) and whose output no max pooling reads."""
        layer = self.graph.layers[call[0]]
        if layer.type != "BatchNormalization" or not layer.input_shapes:
            return False
        shapes = as_shape_list(layer.input_shapes)
        shape = shapes[call[1]] if call[1] < len(shapes) else None
        if self.statistics_in_one_pass(layer, shape):
            return False
        return not any(reader.type.startswith("MaxPool")
                       for reader in self.readers(call + (0,)))

    def statistics_in_one_pass(self, layer, in_shape) -> bool:
        """Whether XLA computes a batch normalisation's statistics in one fusion that also
        writes the element-wise input it reads (a ReLU's output): over at most
        ``ONE_PASS_REDUCTION_ROWS`` rows channels last; in float32 NCHW (before Hopper) for
        batches of at most ``NCHW_ONE_PASS_BATCH`` and at most ``NCHW_ONE_PASS_ROWS`` rows
        (T4 plans of Conv2D(relu) -> BatchNormalization -> Conv2D: the ReLU written at
        batch 8 on 32x32 and 16x16 maps, not at 12 or 16, nor at 4 on 64x64 maps; the A100
        alike at 4 and 8, not at 12 or 16; H100 at 4,096 rows, not at 6,144)."""
        if self.one_pass_reduction(layer, in_shape):
            return True
        if not (self.nchw_float32 and self.compute_bytes == 4) \
                or not isinstance(in_shape, tuple) or len(in_shape) < 3:
            return False
        rows = shape_size(in_shape[:-1], self.batch)
        return self.batch <= NCHW_ONE_PASS_BATCH and rows is not None \
            and rows <= NCHW_ONE_PASS_ROWS

    def product_reads_fused(self, layer) -> bool:
        """Whether ``layer`` is a Dense whose product XLA emits as a fusion that computes an
        element-wise producer of its operand as it reads it: a Triton GEMM on Ampere and
        later, for at most ``TRITON_PROLOGUE_ROWS`` rows, or a product XLA reduces itself
        (``_not_a_gemm``)."""
        shape = _known_input_shape(layer)
        if layer.type != "Dense" or self.gemm_workspace or shape is None:
            return False
        rows, units = self.product_rows(shape), _units(layer)
        return rows <= TRITON_PROLOGUE_ROWS or bool(units and _not_a_gemm(rows, shape[-1],
                                                                       units))

    def _gemm(self, layer) -> bool:
        """Whether XLA runs the Dense ``layer``'s product as a GEMM (Triton's, or a
        library's before Ampere), not as a reduction of its own (``_not_a_gemm``)."""
        shape = _known_input_shape(layer)
        units = _units(layer)
        return shape is not None and bool(units) and not _not_a_gemm(
            self.product_rows(shape), shape[-1], units)

    def merges_products(self, layer) -> bool:
        """Whether XLA's dot merger runs ``layer``'s product with those of the other Dense
        layers that read the same tensor, as Triton products (Ampere and later)."""
        return self.profile.sign == "xla" and not self.gemm_workspace \
            and layer.type == "Dense"

    def merged_siblings(self, li: int, ci: int, key) -> list:
        """The Dense calls (``(layer index, call)``, call ``ci`` of layer ``li`` among
        them) whose products XLA's dot merger runs as one, over the kernels concatenated:
        calls of Dense layers that read the same tensor ``key``, on every GPU target (the
        pass runs before products are given to cuBLAS or Triton).  A call joins while it
        or the product merged so far moves at most ``DOT_MERGE_LIMIT`` bytes (operand,
        kernel and result).  The merged product's result is one buffer, alive while any
        call's slice of it is: T4 and H100 plans of a residual block's Dense(512) shortcut
        and Dense(512, relu) branch on one input (``f32[256,1024]`` alive from the forward
        to the branch's backward, the shortcut's part with it)."""
        if self.profile.sign != "xla" or key is None or not self._merges_as_dense(li, ci):
            return []
        readers = [(lj, cj) for lj, cj in self.consumers.get(key, [])
                   if self._merges_as_dense(lj, cj)]
        if (li, ci) not in readers:
            return []
        groups: list = []  # [calls, bytes moved]
        for call in readers:
            size = self._product_bytes(*call)
            if size is None:
                return []
            into = next((g for g in groups if g[1] <= DOT_MERGE_LIMIT
                         or size <= DOT_MERGE_LIMIT), None)
            if into is None:
                groups.append([[call], size])
            else:
                into[0].append(call)
                into[1] += size
        group = next(g[0] for g in groups if (li, ci) in g[0])
        return group if len(group) > 1 else []

    def _merges_as_dense(self, li: int, ci: int) -> bool:
        """Whether call ``ci`` of layer ``li`` is a Dense product of one input."""
        layer = self.graph.layers[li]
        inbound = layer.inbound[ci] if ci < len(layer.inbound) else []
        return layer.type == "Dense" and bool(_units(layer)) and len(inbound) == 1 \
            and ci < len(layer.output_shapes) and layer.batches_of(ci) == 1

    def _product_bytes(self, li: int, ci: int) -> Optional[int]:
        """The bytes a Dense call's product reads and writes at the step's batch (its
        operand, kernel and result, in the compute dtype), None where a size is open."""
        layer = self.graph.layers[li]
        shape = layer.input_shapes[ci] if ci < len(layer.input_shapes) else None
        units = _units(layer)
        if not isinstance(shape, (list, tuple)) or not shape or not units or any(
                not isinstance(d, int) for d in shape[1:]):
            return None
        rows = self.product_rows(shape)
        return (rows * shape[-1] + shape[-1] * units + rows * units) * self.compute_bytes

    def reduced_product(self, layer) -> bool:
        """Whether ``layer`` is a Dense of one unit whose product XLA reduces itself
        (``_not_a_gemm``): a multiply and a reduction, in the forward and in the kernel's
        gradient, each computing an element-wise operand as it reads it."""
        shape = _known_input_shape(layer)
        if layer.type != "Dense" or _units(layer) != 1 or shape is None:
            return False
        return _not_a_gemm(self.product_rows(shape), shape[-1], 1)

    def location_mask_written(self, in_shape, out_shape) -> bool:
        """Whether XLA writes a global max pooling's comparison of its input with the
        maxima (a one-byte mask of the input's shape) for the backward's select and the
        count of maxima to share: on Hopper, where each maximum is over more than
        ``MASKED_REDUCTION`` elements (H100 plans of Conv1D(32, relu) ->
        GlobalMaxPooling1D at batch 32: a mask over 384, 512 and 1,024 steps, none over 40,
        128 and 256; of Conv2D over 32x32 maps, none over 8x8); the T4 and A100 plans of
        the 32x32 and 64x64 maps fuse it into both."""
        if self.nchw_float32 or self.gemm_workspace:
            return False
        inner, outer = shape_size(in_shape, 1), shape_size(out_shape, 1)
        return bool(inner and outer) and inner > MASKED_REDUCTION * outer

    def sibling_selects(self, call) -> list:
        """(layer name, input tensor) of the global max poolings whose backward XLA runs in
        the same fusion as ``call``'s, a global max pooling's: poolings of inputs of one
        shape concatenated, whose concatenation only element-wise calls read (a Dropout's
        backward, computed once for all of them), make their input gradients in one
        multi-output fusion before either input's producer runs its backward (H100 plans of
        two Conv1D(relu) -> GlobalMaxPooling1D branches concatenated into Dropout -> Dense at
        batch 256: both input gradients beside both convolutions' outputs, -15.8% with one
        at a time; without the Dropout, one select at a time)."""
        if not (self.profile.sign == "xla" and self.train
                and _is_global_max_pooling(call.layer) and call.inputs and call.outputs):
            return []
        join = self._elementwise_join(call.outputs[0])
        if join is None:
            return []
        shape = call.inputs[0].shape
        out = []
        for other in self.later_calls:
            if not _is_global_max_pooling(other.layer) or not other.inputs \
                    or not other.outputs or other.outputs[0].grad is None \
                    or self._elementwise_join(other.outputs[0]) != join:
                continue
            t = other.inputs[0]
            if t.shape == shape and t.requires_grad and t.grad is None \
                    and t not in self.data and not t.freed:
                out.append((other.layer.name, t))
        return out

    def _elementwise_join(self, t) -> Optional[tuple]:
        """The Concatenate call that alone reads the tensor ``t``, when only element-wise
        calls read its own output (None otherwise)."""
        key = next((k for k, v in self.tensors.items() if v is t), None)
        readers = self.consumers.get(key, []) if key is not None else []
        if len(readers) != 1 or self.graph.layers[readers[0][0]].type != "Concatenate":
            return None
        after = self.readers(readers[0] + (0,))
        kinds = [(reader, REGISTRY.get(reader.type)) for reader in after]
        if after and all(reader.type in _FUSIBLE or elementwise_call(reader, kind)
                         or kind is not None and kind.family == "regularization"
                         for reader, kind in kinds):
            return readers[0]
        return None

    def activation_done(self, call, selected: list) -> None:
        """Under XLA a global max pooling's backward select also applies the backward of the
        activation its input's producer computes (:meth:`activation_in_product`): the
        producer's hold of its pre-activation ends there, not at its own backward (H100 plan
        of two Conv1D(relu) -> GlobalMaxPooling1D branches: the convolutions' results die
        at the select fusion that makes both gradients)."""
        if not (self.profile.sign == "xla" and self.train
                and _is_global_max_pooling(call.layer)):
            return
        for t in selected:
            producer = next((c for c in self.later_calls if t in c.outputs), None)
            if producer is None or len(producer.outputs) != 1 \
                    or not _writes_activation_of_its_own(producer.layer):
                continue
            for entry in [h for h in producer.holds if h[0] is t and not h[1]]:
                producer.holds.remove(entry)
                self.unhold(t)

    def _merged_or_fused_into_one(self, call: tuple, depth: int = 8) -> bool:
        """A call of a merged product, or an element-wise call whose output only such calls
        read (through reshapes and further element-wise calls)."""
        if call in self.merged_calls:
            return True
        return depth > 0 and loop_fused(self.graph.layers[call[0]]) \
            and self._all_calls_read(call + (0,), lambda c: self._merged_or_fused_into_one(
                c, depth - 1))

    def _all_calls_read(self, key, accept, depth: int = 8) -> bool:
        """Whether every call reading the tensor ``key``, or a reshape of it (views,
        ``depth`` deep at most), is one ``accept((layer index, call))`` takes."""
        readers = self.consumers.get(key, [])
        if not readers or depth <= 0:
            return False
        for li, ci in readers:
            if self.graph.layers[li].type in ("Flatten", "Reshape"):
                if not self._all_calls_read((li, ci, 0), accept, depth - 1):
                    return False
            elif not accept((li, ci)):
                return False
        return True

    def _all_readers(self, key, accept, depth: int = 8) -> bool:
        """Whether every call reading the tensor ``key``, or reading a reshape of it (views,
        ``depth`` deep at most), is one ``accept(layer)`` takes."""
        return self._all_calls_read(key, lambda call: accept(self.graph.layers[call[0]]),
                                    depth)

    def recomputed_sum(self, layer, ins, key: tuple, written: bool = False) -> bool:
        """Whether XLA fuses a sum into the LayerNormalization that reads it and recomputes it
        there in the backward, so that the sum's operands stay alive until then (H100 plan of
        two Dense outputs added into a LayerNormalization: both ``f32[512, 64]`` products
        alive at its backward; batch normalisation after a residual sum does not, measured
        on a wide ResNet), or into a float32 ReLU that reads the sum unless a convolution
        wrote it (``written``, :meth:`side_input_sum`; :meth:`relu_of_sum`)."""
        if self.profile.sign != "xla" or layer.type not in _SUMS or not self.train:
            return False
        return any(reader.type == "LayerNormalization" or (
            not written and self.relu_of_sum(reader)) for reader in self.readers(key))

    def sums_a_normalisation(self, layer, ins, out: "_Tensor") -> bool:
        """Whether ``out`` is a float32 sum XLA never writes of a batch normalisation's
        never-written output (a ReLU over it writes its sign in the backward,
        :meth:`sign_mask`)."""
        return layer.type in _SUMS and not out.materialized and self.compute_bytes == 4 \
            and any(not t.materialized and t.recomputable
                    and t.producer == "BatchNormalization" for t in ins)

    def sign_mask(self, call: "_Call") -> None:
        """A float32 ReLU over a sum of a never-written batch normalisation: XLA's backward
        writes the sign as a one-byte mask beside the sum's gradient, and keeps it as long
        as that gradient, which the other operands' gradients are read from (H100 and T4
        plans of Conv2D(relu) -> Conv2D -> BatchNormalization added back, ReLU, Conv2D at
        batch 32: ``pred[32, 64, 64, 32]`` from the normalisation's backward to the first
        convolution's; -3.9% without it)."""
        t = call.inputs[0] if call.inputs else None
        if t is None or not t.normalised_sum or t.grad is None or t.grad.companions \
                or not _relu_layer(call.layer):
            return
        t.grad.companions = (self.alloc(t.buf.per_sample // 4, t.buf.fixed // 4, "grad",
                                        f"{call.layer.name} sign mask", call.layer.name),)

    def relu_of_sum(self, reader) -> bool:
        """Whether ``reader`` is a float32 ReLU layer (``max(x, 0)``, no slope or cap) whose
        backward recomputes the sign of a sum it reads from the sum's operands, keeping no
        mask from the forward (H100 and T4 plans of a sum of a ReLU convolution's output and
        a depthwise or transposed convolution's, read by a ReLU, at batch 32: the second
        operand alive until the ReLU's backward, no mask; -12.4% with the mask; the fixtures'
        ResNets, whose blocks end in a ReLU over a sum of batch normalisations, +5% -> +1.5%
        at batch 32 on the H100 and the T4)."""
        return self.compute_bytes == 4 and _relu_layer(reader)

    def table_made_at_backward(self, layer) -> bool:
        """Whether XLA makes an embedding's zero table at the embedding's backward: its
        outputs are read, and only by convolutions, directly or through zero padding (cuDNN
        calls whose input gradients the layer's backward reads), or by dropouts (the
        scatter applies their masks as it reads their output gradients: H100 and T4 plans of
        an Embedding(20000, 128) -> Dropout into Conv1D, an LSTM, a global average pooling
        or a Flatten -> Dense, at batch 32: every table made right before its scatter), or
        by global poolings that look it up (:meth:`pooled_embedding`; H100 and T4 plans of
        Embedding -> GlobalAveragePooling1D classifiers at batches 32 and 128, alone and
        beside a Dense branch of numeric features: within 0.3% on 7 of 8, the table at the
        embedding's backward; the eighth -4.7%, a Dense kernel gradient's split-K partial
        sums kept late, which the walk does not place, beside it; +15.1% on the T4 with the
        table made as the backward starts)."""
        li = self.by_name.get(layer.name)
        keys = [key for key in self.consumers if key[0] == li]

        def late(key) -> bool:
            readers = self.consumers.get(key, ())
            return bool(readers) and all(
                self.library_output(REGISTRY.get(self.graph.layers[r].type))
                or _masks_gradient(self.graph.layers[r]) or (
                    self.graph.layers[r].type.startswith("ZeroPadding")
                    and late((r, c, 0))) for r, c in readers)

        return bool(keys) and all(late(key) or self.pooled_embedding(layer, key)
                                  for key in keys)

    def readers(self, key: tuple) -> list:
        """The layers whose calls read the tensor ``key``."""
        return [self.graph.layers[li] for li, _ in self.consumers.get(key, ())]

    def _pooled_shapes(self, accept) -> frozenset:
        """The shapes (batch first dropped) of the tensors of known shape that
        ``accept(producer, key, shape, readers)`` takes."""
        shapes = set()
        for key in self.consumers:
            if not isinstance(key[0], int):
                continue
            producer = self.graph.layers[key[0]]
            outputs = producer.output_shapes
            shape = outputs[key[1]] if key[1] < len(outputs) else None
            if isinstance(shape, tuple) and all(d is None or isinstance(d, int)
                                                for d in shape) \
                    and accept(producer, key, shape, self.readers(key)):
                shapes.add(tuple(shape[1:]))
        return frozenset(shapes)

    def _normalises_a_convolution(self, key: tuple) -> bool:
        """Whether the tensor ``key`` is a batch normalisation's output over a
        convolution's."""
        if not isinstance(key[0], int):
            return False
        layer = self.graph.layers[key[0]]
        if layer.type != "BatchNormalization":
            return False
        ins = self.call_inputs(layer, key[1])
        return len(ins) == 1 and isinstance(ins[0][0], int) and self.library_output(
            REGISTRY.get(self.graph.layers[ins[0][0]].type))

    @cached_property
    def pool_zeros(self) -> frozenset:
        """The shapes (batch first dropped) of the broadcast zeros XLA materialises in the
        forward pass for max poolings' scatters, shared with ``max(x, 0)`` (XLA's common
        subexpression elimination makes one broadcast of each shape): the inputs a ReLU
        writes for a max pooling, and :attr:`shared_pool_zeros`."""
        return self._pooled_shapes(
            lambda producer, key, shape, readers: _writes_relu(producer) and any(
                reader.type.startswith("MaxPooling") for reader in readers)) \
            | self.shared_pool_zeros

    @cached_property
    def shared_pool_zeros(self) -> frozenset:
        """The shapes of max poolings' inputs that a batch normalisation writes (never
        written: :meth:`pooled_normalization`; only where the scatter works on the input's
        shape, :func:`_scatters_in_place`) and a ReLU elsewhere in the model writes
        too: the ReLU's fusion writes the zero as a second output, its
        backward's select reads it (no mask), and the scatter works on a copy, so the zero
        stays from the first such ReLU's forward to its backward (H100 and T4 plans of
        Conv2D -> BatchNormalization -> ReLU -> Conv2D -> BatchNormalization ->
        MaxPooling2D and of keras.io's Xception-style blocks: ``f32[32, 90, 90, 256]``
        from the block's ReLU to its backward)."""
        if not (self.profile.sign == "xla" and self.train):
            return frozenset()
        relu_shapes = set()
        for layer in self.graph.layers:
            if _writes_relu(layer):
                relu_shapes.update(tuple(shape[1:]) for shape in as_shape_list(
                    layer.output_shapes) if isinstance(shape, tuple))
        unwritten = self._pooled_shapes(
            lambda producer, key, shape, readers: (
                self.pooled_normalization(key)
                or self.relu_of_written_sum_into_max_pooling(key)) and all(
                _scatters_in_place(reader, shape) for reader in readers))
        return unwritten & frozenset(relu_shapes)

    def sign_without_mask(self, layer, ins, out_shape, key: tuple) -> bool:
        """Whether XLA reads a float32 ReLU's sign in the backward off what is kept anyway,
        keeping no mask: the ReLU reads a sum no convolution wrote (:meth:`relu_of_sum`), or
        it is ``max(x, 0)`` over a batch normalisation's output (which
        the backward recomputes from the normalisation's kept input and statistics), and
        either the normalisation keeps its centred input (the sign is read off it: H100
        plans of ResNets and a wide ResNet at batch 4, +13.3% -> +9.0%), or a max pooling's
        broadcast zero of the ReLU's shape is materialised (H100
        plans of Conv2D -> BatchNormalization -> ReLU blocks into MaxPooling2D: no mask for
        a ReLU of the pooled shape, a one-byte mask for one of another shape) or, where
        float32 convolutions are NCHW (before Hopper), only convolutions and Dense products
        read the ReLU's output, which they keep for their kernel's gradient (T4 and A100
        plans of such blocks into Conv2D: no mask, the comparison recomputed in the
        backward's fusions; a wide ResNet on the T4 +10.4% -> +1.5% at batch 32), or global
        average poolings, or on the T4 global max poolings, whose backward's fusion
        recomputes the ReLU from the normalisation (T4 plans of Conv1D -> BatchNormalization
        -> ReLU -> GlobalMaxPooling1D over 128 to 2,048 steps of 32 to 256 channels at batch
        32: 15 of 15 with no mask, memlint 8-11% over with it; A100 plans: 4 of 15 write the
        pooling's comparison as a one-byte mask, which memlint does not place, so the ReLU's
        mask is still counted there; into GlobalAveragePooling1D 6 of 6 with no mask).
        Where the ReLU's output feeds a sum or an average of layers, the plans of those
        targets keep values memlint does not (a fractal network's joins on the A100: -8.8%
        without the masks), so the masks are still counted there."""
        if self.profile.sign == "xla" and self.train and bool(ins) \
                and ins[0].producer in _SUMS and not ins[0].materialized \
                and self.relu_of_sum(layer):
            return True
        if not (self.profile.sign == "xla" and self.train and self.compute_bytes == 4
                and bool(ins) and ins[0].producer == "BatchNormalization"
                and ins[0].recomputable and _writes_relu(layer)
                and isinstance(out_shape, tuple)):
            return False
        return tuple(out_shape[1:]) in self.pool_zeros or ins[0].centred or (
            self.nchw_update and self._all_readers(key, lambda reader: (
                _recomputes_its_input_in_backward(reader, bool(self.gemm_workspace)))))

    def batch_minor_in_backward(self, input_key, ins) -> bool:
        """Whether a one-filter strided transposed convolution's batch-minor copy of its input
        (``Conv2DTranspose.saved``, its kernel gradient's operand) is made in the backward,
        where float32 convolutions are NHWC (Hopper): its input is never written (an
        element-wise chain over a batch normalisation), and the copy's fusion recomputes the
        chain from what the normalisation keeps (its input and statistics), so nothing of it
        stays from the forward.  H100 plans (Adam) of DCGAN generators, Dense ->
        BatchNormalization -> LeakyReLU -> Reshape -> Conv2DTranspose (strides 2 and 1) ->
        ... -> LeakyReLU -> Conv2DTranspose(1, 3 or 5, strides=2), latents of 64 to 128,
        at batches 32 and 256: ``f32[64, 27, 27, 256]`` made as the layer's backward starts
        (TensorFlow's tutorial model, batch 256), memlint 21-52% over with it kept from the
        forward, 2-12% over with it made there and the chain never written
        (:meth:`fused_into_reader`).  The T4's NCHW plans keep a copy from the forward
        (-5% to -14% with the rule there); an input a kernel wrote (Dense -> Reshape) is
        copied in the forward on some Hopper plans and in the backward on others: the copy
        stays counted from the forward there, except over a Dense's own activation that is
        never written, from batch ``LATE_COPY_FROM`` on, on Ampere too
        (:meth:`_over_own_activation`)."""
        return self.profile.sign == "xla" and self.train and bool(ins) and (
            not self.nchw_float32 and not ins[0].materialized
            and self._over_normalization(input_key)
            or self.batch >= LATE_COPY_FROM and self._over_own_activation(input_key))

    def _over_own_activation(self, key, depth: int = 8) -> bool:
        """Whether the tensor ``key``, or what a reshape of it reads, is the output of a
        Dense layer's own activation that XLA never writes (:meth:`activation_in_product`:
        the pre-activation kept, the function applied by its readers), from which the
        copy's fusion recomputes it, where the Dense contracts at most
        ``UNSPLIT_CONTRACTING`` features (its product writes the pre-activation itself).
        From batch ``LATE_COPY_FROM`` on: H100 plans (Adam) of Dense(units, relu) ->
        Reshape -> Conv2DTranspose(1, 3 or 5, strides=2, sigmoid) on 32 features, four
        sizes (7x7x32 to 16x16x16) at batches 16 to 256, the copy made as the layer's
        backward starts (memlint +36% to +50% over at batch 64 keeping it from the forward,
        -0.0% to +7.6% after; on 16, 48 and 64 features at batch 32, +4.7% to +7.3%); A100
        plans of the same at batches 24 to 64 likewise (-0.0% to +7.7%); at batches 8 and
        12 (and 16 on the A100), and on 80 to 128 features, the copy is kept from the
        forward (13-20% under with it made in the backward); the fixture's autoencoder (32
        features) at batch 32 +24.9% -> +4.0% on the H100, its 18 precision and optimizer
        rows 13-34% -> 0.4-5.5% over."""
        if depth <= 0 or not isinstance(key[0], int):
            return False
        layer = self.graph.layers[key[0]]
        if layer.type in _RESHAPES:
            inputs = self.call_inputs(layer, key[1])
            return len(inputs) == 1 and self._over_own_activation(inputs[0], depth - 1)
        shape = _known_input_shape(layer)
        return layer.type == "Dense" and shape is not None \
            and shape[-1] <= UNSPLIT_CONTRACTING \
            and _writes_activation_of_its_own(layer) and self.activation_in_product(layer, key)

    def _over_normalization(self, key, depth: int = 8) -> bool:
        """Whether the tensor ``key`` is a batch normalisation's output, or an element-wise
        call's or a reshape's over one (``depth`` calls deep at most)."""
        if depth <= 0 or not isinstance(key[0], int):
            return False
        layer = self.graph.layers[key[0]]
        if layer.type == "BatchNormalization":
            return True
        kind = REGISTRY.get(layer.type)
        if not (layer.type in _RESHAPES
                or elementwise_call(layer, kind)):
            return False
        inputs = self.call_inputs(layer, key[1])
        return len(inputs) == 1 and self._over_normalization(inputs[0], depth - 1)

    def resolve_sign(self, ins, out_shape) -> Saved:
        """What a ReLU-like function keeps: XLA keeps its input when a kernel of its own
        wrote it (a convolution or matmul output), else a one-byte mask in float32 and its
        16-bit output under a mixed policy (H100 and T4 plans of a ResNet and of
        Conv2D -> BatchNormalization -> ReLU -> Conv2D under mixed_float16: no mask, the ReLU's
        output alive until its backward); TensorFlow and PyTorch keep its output."""
        if self.profile.sign == "xla":
            if ins and ins[0].materialized and ins[0] not in self.data:
                return Saved("input", needed_for="inputs")
            if self.compute_bytes == 2:  # a 16-bit output is kept, its sign read off it
                return Saved("output", needed_for="inputs")
            shape = tuple(out_shape) if isinstance(out_shape, tuple) else ()
            return Saved("mask", shape, "bool", needed_for="inputs")
        return Saved("output", needed_for="inputs")

    def recomputed_normalization(self, layer, kind, t: "_Tensor") -> bool:
        """Under XLA an element-wise layer reading a batch normalisation's output does not
        keep it for its backward: the normalisation is fused into the layer, and its
        output is recomputed from what the normalisation keeps (its input and statistics)
        (H100 plans of Conv2D -> BatchNormalization -> swish, float32 and mixed_float16,
        and of EfficientNetB0: no normalisation output alive, the convolution's output
        and the activation's).  A group normalisation too on Hopper (the H100 plan of a 1-D
        autoencoder of Conv1D -> GroupNormalization -> GELU blocks: +39.5% -> +15.0% at
        batch 32, +17.0% -> -0.5% at batch 4); the float32 NCHW plans before Hopper keep
        it (the same model on the A100: +13.6% -> -6.4% with the rule there)."""
        if self.profile.sign != "xla" or not elementwise_call(layer, kind) or t.materialized:
            return False
        return t.producer == "BatchNormalization" or (
            t.producer == "GroupNormalization" and not self.nchw_update)

    def kept_exponential(self, layer, t: "_Tensor", out_key: tuple) -> bool:
        """Whether XLA keeps a swish's exponential (``exp(-x)``, in the compute dtype, the
        input's size) for its backward, where the normalisation fused into it is
        recomputed: with a 16-bit compute dtype, when the normalisation kept no centred
        input and a global pooling reads the swish (its forward is then a fusion of its own
        with two outputs).  Measured on H100 and T4 plans of Conv2D -> BatchNormalization ->
        swish -> GlobalAveragePooling2D at batch 32 under mixed_float16 (the exponential
        beside the output; none in float32, none when a convolution reads the swish) and
        of EfficientNetB0 (its squeeze-and-excitation blocks on 32x32 maps and larger at
        batch 32; none on the smaller maps, whose normalisations keep the centred input)."""
        function = (layer.config or {}).get("activation") if layer.type == "Activation" \
            else None
        return self.compute_bytes == 2 and not self.nchw_float32 and not t.centred \
            and function in ("swish", "silu") \
            and any(reader.type.startswith("Global") and "Pooling" in reader.type
                    for reader in self.readers(out_key))

    def group_centred(self, layer, out_key: tuple) -> bool:
        """Whether XLA keeps a group normalisation's centred input (``x - mean`` in float32,
        grouped) for its backward: where a ReLU reads it (its sign is read off the centred
        values) and the two are not fused into a pooling.  H100 plan of Conv3D ->
        GroupNormalization(2) -> ReLU -> Conv3D at batch 4: ``f32[4, 2, 4, 16, 16, 16]``
        from the forward to the normalisation's backward (-15.3% -> -8.5% with it); none
        into a global pooling, none before a GELU (the 1-D autoencoder's blocks: +15% ->
        +47% with it)."""
        readers = self.readers(out_key)
        return self.profile.sign == "xla" and bool(readers) \
            and all(_writes_relu(reader) for reader in readers) \
            and not self.fused_into_pooling(out_key, 8)

    def one_pass_reduction(self, layer, in_shape) -> bool:
        """Whether XLA reduces a batch normalisation's statistics in one pass, keeping the
        centred input: a column reduction (channels last, with steps or pixels; float32 in
        NCHW before Hopper is not one) over at most 4,096 rows (32 threads x 128 rows per
        tile; XLA splits longer reductions in two and recomputes the centred values)."""
        nchw = self.nchw_float32 and self.compute_bytes == 4
        if self.profile.sign != "xla" or nchw or not isinstance(in_shape, tuple) \
                or len(in_shape) < 3:
            return False  # (a (batch, features) input: measured not kept)
        axis = layer.config.get("axis", -1)
        axes = {a % len(in_shape) for a in (axis if isinstance(axis, (list, tuple)) else [axis])
                if isinstance(a, int)}
        rows = self.batch
        for i, d in enumerate(in_shape[1:], start=1):
            if i in axes:
                continue
            if not isinstance(d, int):
                return False
            rows *= d
        return axes == {len(in_shape) - 1} and rows <= ONE_PASS_REDUCTION_ROWS

    def over_library_gradient(self, layer, dy) -> bool:
        """Under XLA an element-wise layer's backward does not write its input gradient over
        an output gradient cuDNN wrote (a convolution's backward-data result), as no fusion
        writes over a library call's output in the forward (:meth:`library_output`): H100
        plan of Conv3D -> GroupNormalization -> ReLU -> Conv3D, the ReLU's masked gradient
        beside the second convolution's input gradient."""
        kind = REGISTRY.get(layer.type)
        return self.profile.sign == "xla" and dy.library and elementwise_call(layer, kind)

    def fused_select_and_scatter(self, call: "_Call") -> bool:
        """Under XLA a max pooling whose output gradient is a broadcast (a global average
        pooling's) and whose input no activation function wrote scatters in one fusion,
        with no window scratch (H100 plans of Conv2D or Conv2D + LayerNormalization, then
        MaxPooling2D and GlobalAveragePooling2D: exact without it; after a ReLU, tanh,
        sigmoid or ELU the scratch is there).  Not over a batch normalisation that is never
        written (:meth:`pooled_normalization`): the scratch is there (Conv2D ->
        BatchNormalization -> MaxPooling2D -> GlobalAveragePooling2D, H100 and T4: five
        maps of the pooled size beside the convolution's output)."""
        return self.profile.sign == "xla" and bool(call.inputs) \
            and not call.inputs[0].activated and call.inputs[0].sources is None and any(
                t.grad is not None and t.grad.broadcast for t in call.outputs)

    def summed_lazily(self, call: "_Call", t: "_Tensor", dy) -> bool:
        """Whether XLA keeps the cuDNN input gradient ``dy`` that a view or element-wise
        call hands on to ``t``, whose gradient another path has made already, and adds the
        two only in the fusion that reads ``t``'s gradient, which writes a buffer of its own
        (H100 and T4 plans of Conv2D -> ReLU -> ReLU -> Conv2D added back into the first
        ReLU's output, into GlobalAveragePooling2D, at batch 32: the first ReLU's backward
        select reads the pooling's broadcast gradient and the second convolution's input
        gradient and writes a third map beside them; -23.1% summed in place)."""
        return self.profile.sign == "xla" and call.passthrough and dy is not None \
            and dy.library and t.grad is not None and dy is not t.grad \
            and t.requires_grad and t not in self.data and not t.grad.companions

    def added_where_read(self, layer, t: "_Tensor") -> bool:
        """Whether XLA keeps the cuDNN input gradient a convolution ``layer`` makes for
        ``t``, whose gradient another reader has made already, until the fusion that reads
        ``t``'s gradient, which adds them (H100 and T4 plans of a Conv1D(relu) read by three
        Conv1D branches at batch 32: the three input gradients beside each other until the
        ReLU's select, which writes a fourth, -5.3% summed in place; keras.io-style text
        CNNs of three kernel sizes over a dropout of an embedding: until the scatter).
        Where float32 convolutions are NCHW, only for a convolution's output: the gradient
        of anything else is transposed back to the model's layout as the gradients are
        summed (T4 plans of the text CNNs: one summed map before the scatter)."""
        return self.profile.sign == "xla" and self.train and t.grad is not None \
            and t.requires_grad and t not in self.data \
            and self.library_output(REGISTRY.get(layer.type)) \
            and (t.buf.library or not self.nchw_update)

    def library_output(self, kind) -> bool:
        """Whether XLA writes the call's output as a library call's (a convolution: a cuDNN
        custom call, whose result is a tuple of the output and its scratch).  XLA's buffer
        assignment never lets a fusion write over such an output (measured on H100 and T4
        plans: no fusion shares a buffer with a cuDNN output, while fusions do write over
        other fusions' and Triton GEMMs' outputs), so a normalisation, sum or element-wise
        layer after a convolution gets a buffer of its own even where the convolution's
        output dies there (ResNet's projection blocks: both branches and the sum alive)."""
        return self.profile.sign == "xla" and kind is not None \
            and kind.family == "convolutional"

    def cublas_product(self, layer) -> bool:
        """Whether ``layer``'s matrix products are cuBLAS calls: on a target whose GEMMs go
        to cuBLAS, unless the product is small enough for an XLA loop or a matrix-vector
        product XLA reduces itself."""
        if not self.gemm_workspace:
            return False
        if resizes_by_products(layer):  # the last axis's product is the largest
            shape = layer.output_shapes[0] if layer.output_shapes else None
            inner = layer.input_shapes[0] if layer.input_shapes else None
            if not isinstance(shape, tuple) or not isinstance(inner, tuple) or len(shape) != 4 \
                    or not all(isinstance(d, int) for d in shape[1:] + inner[1:]):
                return True
            w = 3 if (layer.config or {}).get("data_format") == "channels_first" else 2
            rows = self.batch * math.prod(shape[1:]) // shape[w]
            return not _not_a_gemm(rows, inner[w], shape[w])
        nested = REGISTRY.get(layer.type) is None and any(
            len(w.shape) == 2 for w in layer.weights)  # a model used as a layer, with Dense
        if layer.type not in GEMM_LAYERS and not nested:
            return False
        shape = layer.input_shapes[0] if layer.input_shapes else None
        if (nested or layer.type in ("Dense", "EinsumDense")) and isinstance(shape, tuple) \
                and shape \
                and all(isinstance(d, int) for d in shape[1:]):
            rows, units = self.product_rows(shape), _units(layer)
            if layer.type == "Dense" and units and _not_a_gemm(rows, shape[-1], units):
                return False
        return True

    def product_rows(self, in_shape: tuple) -> int:
        """The rows of a Dense product over an input of ``in_shape``: the batch times every
        axis but the last."""
        rows = self.batch
        for d in in_shape[1:-1]:
            rows *= d
        return rows

    def in_donated_kernel(self, layer, size: int) -> bool:
        """Whether XLA puts a training step's kernel copy (``size`` bytes) into the donated
        buffer of another layer's kernel.  Once a trained kernel is copied into cuDNN's
        layout, every later read (the products, the update) reads the copy, so the donated
        buffer of the original holds nothing until the update writes the new kernel there;
        XLA's buffer assignment places other values of at most its size in it.  A copy that
        dies before that update takes it: the copy of a layer fed, through the graph, by the
        buffer's layer, whose backward and update come first where the updates interleave
        with the backward, which XLA's schedule does where the kernel gradient does not
        outweigh what its product keeps (the layer's input and its output's gradient; else
        the walk defers it, and so do XLA's plans of convolution stacks on small maps, where
        every copy took a temporary).  The first two copies made take temporaries (XLA makes
        the copies in an order of its own).  Measured on H100 plans: a wide ResNet's 128- and
        64-filter kernels' copies in the buffers of earlier kernels; a VGG-style stack of
        eight 3x3x256 convolutions on 8x8 maps at batch 24, +38% -> +8% (at batch 4, where
        the stack's updates follow the backward in layer order, no copy moves); six
        3x3x64x64 convolutions at batch 4: four of six copies in donated buffers.  The
        float32 NCHW plans before Hopper reuse those buffers for the optimizer slots'
        transposed copies instead (a T4 plan with Adam: 11.8% over without the rule, 5.5%
        under with it): not there."""
        if not (self.train and self.profile.sign == "xla" and not self.nchw_float32):
            return False
        made = self.kernel_copies
        self.kernel_copies += 1
        taken = None
        if made >= 2 and not self.defers_kernel_gradient(layer):
            feeding = self.feeding_layers(layer.name)
            fits = [i for i, (free, name) in enumerate(self.freed_kernels)
                    if free >= size and name in feeding]
            if fits:
                taken = min(fits, key=lambda i: self.freed_kernels[i][0])
                self.freed_kernels.pop(taken)
        own = sum(w.size * (w.itemsize or self.prec.variable_bytes) for w in layer.weights
                  if w.trainable and len(w.shape) >= 3)
        if own:
            self.freed_kernels.append((own, layer.name))
        return taken is not None

    def defers_kernel_gradient(self, layer) -> bool:
        """Whether the walk will make ``layer``'s kernel gradient after the rest of the
        backward (:meth:`deferrable`, from the layer's shapes at this batch): the gradient
        and its update buffers outweigh the layer's input and output, which its product
        keeps."""
        shapes = [as_shape_list(layer.input_shapes[0]) if layer.input_shapes else [],
                  as_shape_list(layer.output_shapes[0]) if layer.output_shapes else []]
        kept = 0
        for shape in (s for group in shapes for s in group):
            size = self.shape_size(shape, self.prec.compute_bytes)
            if size is None:
                return True
            kept += size[0] * self.batch + size[1]
        return kept < self.trainable_bytes(layer) * self.gradient_copies(layer)

    def feeding_layers(self, name: str) -> set:
        """The names of the layers whose outputs reach layer ``name`` through the graph."""
        seen: set = set()
        stack = [name]
        while stack:
            li = self.by_name.get(stack.pop())
            if li is None:
                continue
            layer = self.graph.layers[li]
            for ci in range(max(len(layer.inbound), 1)):
                for key in self.call_inputs(layer, ci):
                    if isinstance(key[0], int) and self.graph.layers[key[0]].name not in seen:
                        seen.add(self.graph.layers[key[0]].name)
                        stack.append(self.graph.layers[key[0]].name)
        return seen
