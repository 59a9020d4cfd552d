"""Memory model v2: one training (or inference) step walked tensor by tensor.

The walk replays what a backend does with memory during one step, in execution order:

* **state** (alive all step): the variables, the optimizer's slots, the input batch and the
  targets (step arguments under XLA, device tensors elsewhere);
* **forward**: each layer call allocates its outputs (a reshape is a view of its input; an
  element-wise layer writes over a dying input where the profile allows it) and the buffers
  its backward needs that are not tensors of the model (masks, statistics, gates, attention
  probabilities: :meth:`memlint.layers.base.LayerKind.saved`); an input dies after its last
  consumer unless a layer keeps it for backward.  Under a mixed policy each weight is cast
  to the compute dtype for the call;
* **backward**, in reverse: the loss gradient first, then per call the weight gradients
  (and any scratch its backward needs), then the gradients of its inputs; each call's saved
  tensors are released when its backward is done, each activation gradient when the call
  that produced the activation is done with it.  Layers that do not train and have nothing
  trainable before them save nothing and run no backward (a frozen backbone at the bottom).
  Under XLA a layer's own activation is differentiated before its weight gradient, and a
  Dense kernel's gradient larger than what its product reads is made after the rest of the
  backward, as XLA's scheduler places it;
* **update**: the profile decides whether the weight gradients were consumed by the update as
  they were produced (XLA) or all wait for it (TensorFlow graph mode, PyTorch's ``.grad``).

Each buffer's size is ``per_sample * batch + fixed`` bytes, so every moment of the walk is a
linear function of the batch size and the peak is the largest of them: piecewise linear, which
makes the largest batch that fits exact (:attr:`WalkResult.curve`).  Nothing here imports a
frontend; the layer registry supplies what each kind keeps.
"""

from __future__ import annotations

import heapq
from dataclasses import field, replace
from typing import Optional

from memlint.ir import ModelGraph, TrainingSetup, as_shape_list
from memlint.layers.base import REGISTRY, Saved, activation_need
from memlint.memory.dtypes import Precision
from memlint.memory.gemm_split import (padded_left_bytes, partial_bytes, partial_sum_bytes,
                                       split_k)
from memlint.memory.losses import backward_buffers
from memlint.memory.optimizers import (optimizer_elements, slots_per_variable,
                                       update_temporary_elements)
from memlint.memory.tensors import INPUT_TYPES, SLICES, VIEW_LAYERS, output_bytes
from memlint.memory.xla_fusion import (_FUSIBLE, XlaFusion, _masks_gradient, _units, _writes_relu,
                                       concatenated_in_product, elementwise_call, loop_fused,
                                       nearest_upsampling, resizes_by_products)
from memlint.records import record


# What a buffer is, for the breakdown's parts (name, JSON category) and the reports.
KINDS = {
    "weights": ("weights", "weights"),
    "optimizer": ("optimizer slots", "optimizer"),
    "gradients": ("weight gradients", "gradients"),
    "saved": ("saved activations", "activations"),
    "live": ("live activations", "activations"),
    "data": ("input batch", "other"),
    "targets": ("targets", "other"),
    "predictions": ("predictions", "other"),
    "grad": ("activation gradients", "other"),
    "scratch": ("backward scratch", "other"),
    "casts": ("16-bit weight copies", "other"),
    "relayouts": ("copies in cuDNN's layout", "other"),
    "work": ("matrix-product scratch", "other"),
    "tables": ("pointer tables", "other"),
}


POINTER_TABLE_SLOT = 256  # XLA GPU: a multi-output kernel's pointer table, in its own slot
ALL_REDUCE_COMBINE_BYTES = 30 * 2 ** 20  # XLA's all-reduce combine threshold (GPU default)
# forward scratch XLA computes for every call of its kind at the first one (merged products)
MERGED_SCRATCH = frozenset({"sampling coordinates"})


@record
class Buffer:
    """One allocation: ``per_sample * batch + fixed`` bytes."""

    per_sample: int
    fixed: int
    kind: str  # a key of KINDS
    label: str
    layer: str = ""
    refs: int = 0
    holds: int = 0  # how many layers keep it for their backward
    # XLA: written by a library call (a cuDNN convolution), one element of the call's tuple
    # result; XLA's fusions never write their output over such a buffer
    library: bool = False
    # XLA: a gradient that is a broadcast of another (a global average pooling's input
    # gradient), which the fusion reading it can recompute
    broadcast: bool = False
    # buffers that die with this one (XLA: the sign mask a ReLU's backward writes beside
    # the gradient of the sum it read; what a fusion reading this gradient computes it from)
    companions: tuple = ()
    # XLA: a gradient others are added to only where it is read (:meth:`summed_lazily`,
    # :meth:`added_where_read`): the fusion reading it writes a buffer of its own
    summed: bool = False

    def at(self, batch: int, round_to: int = 0) -> int:
        size = self.per_sample * batch + self.fixed
        if round_to > 1 and size > 0:
            size = -(-size // round_to) * round_to
        return size


@record
class _Tensor:
    """One tensor of the walk: its buffer, and what still holds it alive."""

    buf: Buffer
    uses: int = 0  # forward consumers still to run
    holds: int = 0
    output: bool = False  # a model output: alive until the loss
    requires_grad: bool = False
    grad: Optional[Buffer] = None
    materialized: bool = True  # XLA: written by its own kernel (not fused away)
    freed: bool = False
    producer: str = ""  # the type of the layer that made it
    made_by: str = ""  # the name of that layer
    relu: bool = False  # written by max(x, 0) (a ReLU, or a layer's activation="relu")
    activated: bool = False  # written by an activation function (a layer or activation=)
    shape: Optional[tuple] = None  # batch first
    strided: bool = False  # not contiguous in its layout: a reshape of it copies
    wide: bool = True  # bfloat16 before Ampere: stored in float32 (a product wrote it)
    centred: bool = False  # a normalisation's output whose centred input is kept
    normalised_sum: bool = False  # XLA: a float32 sum of a normalisation's unwritten output
    recomputable: bool = False  # the call that made it keeps its first input
    sources: Optional[list] = None  # XLA: never written, computed by its reader from these
    storage: Optional[Buffer] = None  # XLA: a slice of this merged product result (shared)
    preactivation: bool = False  # XLA: a kernel's result, its readers apply the activation
    readers: int = 0  # the calls that read it
    time_major: bool = False  # XLA: a scanned recurrence's stacked steps (time-major)
    # an Embedding's output, or a dropout's of one: XLA computes its gradient inside the
    # scatter that writes the table's gradient
    scattered: bool = False
    # torch: channels-last data whose memory is channels-first (a one-axis convolution's
    # output permuted back, and element-wise results of such)
    channels_first_memory: bool = False


@record
class WalkResult:
    """What the walk found: the peak at the batch size, where it is, what is alive there,
    the memory over the step, and every moment as (bytes per sample, fixed bytes)."""

    peak: int = 0
    peak_index: int = -1
    peak_at: dict = field(default_factory=dict)  # phase, layer, bytes, tensors
    parts: dict = field(default_factory=dict)  # kind -> bytes at the peak
    notes: dict = field(default_factory=dict)  # kind -> note for the part
    timeline: list = field(default_factory=list)  # {"phase", "layer", "bytes"}
    curve: list = field(default_factory=list)  # [per_sample, fixed upper bound] per moment
    peak_linear: tuple = (0, 0)  # (per_sample, fixed) of the peak moment
    unknown: list = field(default_factory=list)  # layers whose sizes are unknown


class Walk(XlaFusion):
    """One step of ``graph`` under ``setup`` and ``profile`` (see the module docstring).

    ``stop_at``: the index of the moment to take a snapshot of (the peak, found by a first
    run); the snapshot lists the buffers alive there."""

    def __init__(self, graph: ModelGraph, setup: TrainingSetup, profile, prec: Precision,
                 batch: int, stop_at: Optional[int] = None, gemm_workspace: int = 0,
                 upcast_bfloat16: bool = False, nchw_float32: bool = False,
                 freeing_order: bool = False):
        self.gemm_workspace = gemm_workspace
        # calls ordered as XLA's list scheduler would (outside training, see _order)
        self.freeing_order = freeing_order and profile.sign == "xla"
        # XLA lays float32 convolutions out as NCHW on this GPU (before Hopper)
        self.nchw_float32 = nchw_float32
        # float32 convolutions' kernels, and their updates, in NCHW's layout
        self.nchw_update = nchw_float32 and prec.compute_bytes == 4
        # bfloat16 where the GPU has no bfloat16 arithmetic (before Ampere): convolutions
        # and matrix products run, and write, in float32; a recurrence's loop keeps bfloat16
        self.upcast = upcast_bfloat16
        self.compute_bytes = prec.compute_bytes
        options = setup.optimizer.options or {}
        self.plain_sgd = setup.optimizer.name == "sgd" and not options.get("momentum") \
            and not options.get("use_ema")
        self.graph = graph
        self.setup = setup
        self.profile = profile
        self.prec = prec
        self.batch = batch
        # how many batches the call being walked holds (LayerNode.call_batches): every
        # tensor it sizes holds that many times a batch's rows
        self.factor = 1
        self.train = setup.mode == "train"
        self.round = profile.round_bytes
        self.stop_at = stop_at
        self.live: dict = {}  # id(buffer) -> buffer
        self.value = 0  # bytes alive at the batch size (rounded)
        self.linear = [0, 0, 0]  # per-sample, fixed, buffers alive
        self.result = WalkResult()
        self.snapshot: Optional[list] = None
        self.events = 0
        self.unknown: list = []
        self.unknown_inputs: list = []  # model inputs of open size
        self.tensors: dict = {}
        self.data: list = []
        self.pending: dict = {}
        self.merged_calls: dict = {}  # calls run as one merged product -> their group
        self.kernels_concatenated: set = set()  # tensors whose Dense readers ran merged
        self.merged_results: dict = {}  # a group of merged Dense calls -> its result
        self.merged_first: set = set()  # the calls that run a merged product
        self.partials_kept: set = set()  # merged groups whose result is their partial sums
        # the step differentiates the model's input too (setup.input_gradient)
        self.input_gradient = self.train and bool(self.setup.input_gradient)
        self.trainable_seen = self.input_gradient
        self.kept_grads: list = []
        self.inside = frozenset(graph.opened_inner)  # looked up once per tensor
        self.declared_outputs = frozenset(tuple(key) for key in graph.outputs)
        self.unmapped = frozenset(graph.opened_unmapped)
        self.weight_grads: dict = {}
        self.calls_left: dict = {}
        self.later_calls: list = []  # the calls whose backward is still to come
        self.call_order: list = []
        self.early_scratch: dict = {}  # (layer, call, what) -> scratch allocated before it
        # weight gradients made after the rest of the backward: (layer, bytes, the holds and
        # the output gradients the product reads, the kernel's copy the update reads)
        self.deferred: list = []
        # deferred convolution updates' new slot values, copied into the state at the end
        self.pending_slot_values: list = []
        self.step_outputs: Optional[Buffer] = None  # XLA inference: the predictions' buffer
        self.early_casts: dict = {}  # layer name -> its weights' 16-bit copy, made up front
        # XLA training: donated kernel buffers a cuDNN-layout copy has freed until the
        # kernel's update ((bytes, layer name)), and how many such copies were made
        self.freed_kernels: list = []
        self.kernel_copies = 0
        self.zeros_kept: set = set()  # the shapes of the pooling zeros a ReLU writes
        self.batch_copies: dict = {}  # (batch buffer id, layout, size) -> its copy
        # id of a transposed convolution's output -> the element-wise calls differentiated in
        # its backward's first fusion (XlaFusion.differentiated_in_transposed_backward)
        self.carried: dict = {}
        # eager Keras: a Functional or Sequential model's tensor map holds every output until
        # the forward returns
        self.retained: Optional[list] = [] if profile.forward_keeps_outputs and \
            graph.kind in ("Sequential", "Functional") else None

    # ------------------------------------------------------------------ buffers

    def alloc(self, per_sample: int, fixed: int, kind: str, label: str, layer: str = "",
              refs: int = 1) -> Buffer:
        buf = Buffer(per_sample, fixed, kind, label, layer, refs=refs)
        if per_sample or fixed:
            self._enter(buf)
        return buf

    def _enter(self, buf: Buffer) -> None:
        """Count ``buf`` among what is alive."""
        self.live[id(buf)] = buf
        self.value += buf.at(self.batch, self.round)
        self.linear[0] += buf.per_sample
        self.linear[1] += buf.fixed
        self.linear[2] += 1

    def _leave(self, buf: Buffer) -> None:
        """Stop counting ``buf`` among what is alive."""
        del self.live[id(buf)]
        self.value -= buf.at(self.batch, self.round)
        self.linear[0] -= buf.per_sample
        self.linear[1] -= buf.fixed
        self.linear[2] -= 1

    @staticmethod
    def ref(buf: Optional[Buffer]) -> None:
        if buf is not None:
            buf.refs += 1

    def release(self, buf: Optional[Buffer]) -> None:
        if buf is None or buf.refs <= 0:
            return
        buf.refs -= 1
        if buf.refs == 0 and id(buf) in self.live:
            self._leave(buf)
            for other in buf.companions:
                self.release(other)

    def event(self, phase: str, layer: str) -> None:
        index = self.events
        self.events += 1
        a, c, n = self.linear
        slack = n * (self.round - 1) if self.round > 1 else 0
        self.result.curve.append((a, c + slack))
        self.result.timeline.append({"phase": phase, "layer": layer, "bytes": self.value})
        if self.value > self.result.peak or self.result.peak_index < 0:
            self.result.peak = self.value
            self.result.peak_index = index
            self.result.peak_linear = (a, self.value - a * self.batch)
        if self.stop_at == index:
            self.snapshot = [(buf, "saved" if buf.kind == "live" and buf.holds > 0
                              else buf.kind) for buf in self.live.values()]
            self.result.peak_at = {"phase": phase, "layer": layer}

    # ------------------------------------------------------------------ sizes

    def sizes(self, layer, out, element_bytes: int) -> list:
        """(per sample, fixed) bytes of each tensor of one call's output (None if unknown),
        at the batches the call being walked holds."""
        one = output_bytes(layer, out, 1, element_bytes)
        two = output_bytes(layer, out, 2, element_bytes)
        return [None if x is None or y is None or (self.factor == 0 and y != x)
                else ((y - x) * self.factor, 2 * x - y) for x, y in zip(one, two)]

    def shape_size(self, shape, item: int, per_batch: bool = True) -> Optional[tuple]:
        """(per sample, fixed) bytes of a tensor of ``shape`` (batch first when
        ``per_batch``, at the batches the call being walked holds); None when a dimension
        is unknown."""
        if shape is None:
            return None
        dims = list(shape)
        batched = per_batch and bool(dims) and dims[0] is None
        rest = dims[1:] if batched else dims
        if any(not isinstance(d, int) for d in rest):
            return None
        n = 1
        for d in rest:
            n *= d
        if batched and self.factor == 0:  # a number of batches not known
            return None
        return (n * item * self.factor, 0) if batched else (0, n * item)

    def item(self, dtype: str) -> int:
        return {"compute": self.compute_bytes, "float32": 4,
                "variable": self.prec.variable_bytes, "bool": 1,
                "int32": 4, "int64": 8}.get(dtype, self.prec.compute_bytes)

    # ------------------------------------------------------------------ the step

    def run(self) -> WalkResult:
        graph, prec = self.graph, self.prec
        layers = graph.layers
        self.by_name = {layer.name: i for i, layer in enumerate(layers)}
        order, self.merged_calls = _order(layers, self.by_name,
                                          self.call_writes if self.freeing_order else None)

        # the state: variables, slots, the batch (and, for training, the targets)
        weights = sum(w.size * (w.itemsize or prec.variable_bytes)
                      for layer in layers for w in layer.weights)
        self.alloc(0, weights, "weights", "variables")
        trainable = [w.shape for layer in layers for w in layer.weights if w.trainable]
        if self.train:
            slots = optimizer_elements(self.setup.optimizer, trainable) * prec.variable_bytes
            self.alloc(0, slots, "optimizer", f"{self.setup.optimizer.name} slots")
            if self.input_gradient and self.setup.input_optimised:
                # an optimizer updates the input itself (a style transfer's image)
                per_sample = optimizer_elements(self.setup.optimizer, [
                    tuple(s[1:]) for s in graph.input_shapes
                    if s and None not in s[1:]]) * prec.variable_bytes
                self.alloc(per_sample, 0, "optimizer",
                           f"{self.setup.optimizer.name} slots of the input it updates")
        if not any(layer.type in INPUT_TYPES for layer in layers):  # else the inputs are nodes
            for i, shape in enumerate(graph.input_shapes):
                size = self.shape_size(shape, prec.variable_bytes)
                if size is None:
                    self.unknown_inputs.append(f"input {i + 1}")
                self.data.append(_Tensor(self.alloc(*(size or (0, 0)), "data", f"input {i + 1}"),
                                         requires_grad=self.input_gradient,
                                         shape=tuple(shape) if shape else None))

        self.call_order = order
        inputs_of = {(li, ci): self.call_inputs(layers[li], ci) for li, ci in order}
        self.consumers: dict = {}  # tensor key -> the calls that read it
        for call_key, keys in inputs_of.items():
            for key in keys:
                self.pending[key] = self.pending.get(key, 0) + 1
                self.consumers.setdefault(key, []).append(call_key)
        for li, ci in order:
            layer = layers[li]
            if ci < len(layer.inbound) or ci < len(layer.output_shapes) or ci == 0:
                self.calls_left[li] = self.calls_left.get(li, 0) + 1

        if self.train:  # the targets are step arguments too
            outputs = self.output_tensors(layers, order)
            self.alloc(*self.targets(self.target_sizes(outputs)), "targets", "targets")
            tables = self.pointer_tables(layers, order, len(outputs))
            self.alloc(0, tables * POINTER_TABLE_SLOT, "tables",
                       f"pointer tables of {tables} multi-output kernels")
        if not self.train and self.profile.sign == "xla":
            # the predict step's results are buffers of the program's own, there from its
            # start (H100 predict plans: argument + output - alias + temp, the predictions
            # in "output"; a denoiser's two image outputs, 786 KB, beside its largest
            # temporaries)
            sizes = self.model_outputs(layers, order)
            self.step_outputs = self.alloc(*self.targets(sizes), "predictions",
                                           "the step's output buffers")
        if self.profile.sign == "xla" and self.train:
            # XLA's train step converts the weights to the compute dtype before the first
            # layer runs (H100 plans of a 784-512-256-128-10 MLP under mixed_float16 with
            # SGD, and of nine Dense(1024) with Adam: every kernel's 16-bit copy alive at the
            # first product; the predict step of a CNN with a Dense head casts at the call);
            # a convolution's copy in cuDNN's layout is made at its call
            for li, _ci in order:
                layer = layers[li]
                if layer.name not in self.early_casts and not self.library_output(
                        REGISTRY.get(layer.type)):
                    cast = self.weight_casts(layer)
                    if cast is not None:
                        self.early_casts[layer.name] = cast
        last_grads = None
        if self.train and self.profile.grads_during_forward:
            last_grads = self.alloc(0, self.trainable_bytes(), "gradients",
                                    "the last step's gradients (.grad)")
        calls = [self.forward(layers[li], li, ci, inputs_of[(li, ci)]) for li, ci in order]
        for t in self.retained or ():  # the forward returned: its tensor map is dropped
            t.uses -= 1
            self.maybe_free(t)
        self.release(last_grads)  # zero_grad
        if self.train:
            outputs = [t for t in self.tensors.values() if t.output]
            for t in outputs:
                if t.requires_grad:
                    t.grad = self.alloc(t.buf.per_sample, t.buf.fixed, "grad",
                                        "loss gradient", t.buf.layer)
            self.zero_tables(calls)
            temporaries = self.loss_temporaries(outputs)
            self.event("backward", "loss")
            self.release(temporaries)
            for t in outputs:
                t.output = False
                self.maybe_free(t)
            remaining = [call for call in reversed(calls) if call is not None]
            for i, call in enumerate(remaining):
                self.later_calls = remaining[i + 1:]
                self.backward(call)
            self.deferred_weight_gradients()
            combined = self.all_reduce_copy()
            if combined is not None:
                self.event("update", "all-reduce")
                self.release(combined)
            temporaries = None
            if self.profile.update_temporaries:
                shapes = [w.shape for layer in layers for w in layer.weights if w.trainable]
                temporaries = self.alloc(
                    0, update_temporary_elements(self.setup.optimizer, shapes,
                                                 self.profile.update_temporaries,
                                                 loss_scaled=prec.loss_scaling)
                    * prec.variable_bytes, "scratch", "the update's temporaries")
            elif self.keep_all_grads() and self.profile.sign == "xla":
                temporaries = self.one_update_at_a_time(layers)
            if self.profile.sign == "xla" and self.setup.state_kept:
                # a JAX step of the code's own whose jit donates nothing writes the new
                # variables and slots beside the ones it was given (H100 plan of a
                # 784-4096-4096-10 MLP's step with Adam at batch 48: 481 MB, 309 MB donated)
                self.alloc(0, weights + slots, "weights",
                           f"the new variables and slots ({self.setup.state_kept}: the "
                           "state it was given stays alive)")
            self.event("update", "optimizer")
            self.release(temporaries)
            for buf in self.pending_slot_values:
                self.release(buf)
        else:
            self.event("forward", "end")
        # an input of open size is named only where no layer's size is unknown (a CTC
        # loss layer's labels, read by nothing that sizes a tensor): the batch holds it
        self.result.unknown = list(dict.fromkeys(self.unknown or self.unknown_inputs))
        return self.result

    def loss_temporaries(self, outputs: list) -> Optional[Buffer]:
        """Where the loss's backward runs op by op (torch), the output-sized float32 buffers
        it holds beside the gradient it returns (:mod:`memlint.memory.losses`); with several
        outputs their losses' backwards run one after the other: the largest output's."""
        if not self.profile.eager_backward:
            return None
        graded = [t for t in outputs if t.requires_grad]
        if not graded:
            return None
        largest = max(graded, key=lambda t: t.buf.at(self.batch))
        scale = backward_buffers(self.setup.loss) * (1 if largest.wide else 2)  # in float32
        per_sample, fixed = scale * largest.buf.per_sample, scale * largest.buf.fixed
        if not (per_sample or fixed):
            return None
        loss = self.setup.loss or "a loss not known statically"
        return self.alloc(per_sample, fixed, "scratch", f"the backward of {loss}")

    def weight_casts(self, layer) -> Optional[Buffer]:
        """The copy of a layer's weights in the compute dtype that a mixed policy makes for
        its call (None: no cast)."""
        prec = self.prec
        if not (prec.policy.startswith("mixed_") and layer.weights
                and layer.type not in _NO_CAST):
            return None
        size = sum(w.size for w in layer.weights if w.itemsize is None) * prec.compute_bytes
        if not size:
            return None
        return self.alloc(0, size, "casts", f"{layer.name} weights in "
                          f"{prec.policy[len('mixed_'):]}", layer.name)

    def is_output(self, layer, li: int, ci: int, k: int) -> bool:
        """Whether a call's ``k``-th output is a model output: no layer reads it, nor (for a
        call with several outputs) any other of its outputs (a recurrence's sequence, unused
        where its final states are read, is dropped, not returned)."""
        if layer.type in INPUT_TYPES or layer.name in self.inside:
            return False
        if (layer.name, ci, k) in self.declared_outputs:
            return True  # the model returns it, whoever else reads it
        if self.pending.get((li, ci, k)):
            return False
        others = len(as_shape_list(layer.output_shapes[ci])) \
            if ci < len(layer.output_shapes) else 1
        return not any(self.pending.get((li, ci, j)) for j in range(others) if j != k)

    def model_outputs(self, layers: list, order: list) -> list:
        """(per sample, fixed) bytes of each model output (an output no layer reads), in the
        variables' dtype (the batch's); None where its size is unknown."""
        return [size for _name, _ci, _k, size, _shape in self.output_tensors(layers, order)]

    def output_tensors(self, layers: list, order: list) -> list:
        """Each model output as (layer name, call, output, (per sample, fixed) bytes in the
        variables' dtype or None, shape or None), in call order."""
        out = []
        for li, ci in order:
            layer = layers[li]
            if layer.type in INPUT_TYPES or ci >= len(layer.output_shapes):
                continue
            self.factor = layer.batches_of(ci)
            sizes = self.sizes(layer, layer.output_shapes[ci], self.prec.variable_bytes)
            self.factor = 1
            shapes = as_shape_list(layer.output_shapes[ci])
            out += [(layer.name, ci, k, size, shapes[k] if k < len(shapes) else None)
                    for k, size in enumerate(sizes) if self.is_output(layer, li, ci, k)]
        return out

    def target_sizes(self, outputs: list) -> list:
        """(per sample, fixed) bytes of the target of each of the ``outputs``
        (:meth:`output_tensors`) in a training step (None where unknown): shaped like the
        output, in the variables' dtype, except where compile() names the output's loss:
        none for an output given no loss (Keras feeds it no target), and class ids for a
        sparse categorical cross-entropy, one per position of the output without its class
        axis (int32 under XLA, whose JAX backend keeps no 64-bit integers; int64 elsewhere,
        as NumPy and torch make them): a language model's targets over a 20,000-word
        vocabulary are 80 ids a sequence, not 1.6 M floats.  None at all where the training
        call is given no targets (``setup.targets_given``: an add_loss model's fit(x))."""
        out = []
        for index, (name, ci, k, size, shape) in enumerate(outputs):
            loss = self.output_loss(name, ci, k, index)
            if loss == "" or self.setup.targets_given is False:
                size = (0, 0)
            elif loss == "sparse_categorical_crossentropy" and isinstance(shape, tuple) \
                    and len(shape) >= 2:
                ids = self.shape_size(shape[:-1], 4 if self.profile.sign == "xla" else 8)
                size = ids if ids is not None else size
            out.append(size)
        return out

    def output_loss(self, name: str, ci: int, k: int, index: int):
        """The loss compile() gives the model output ``(name, ci, k)``, the ``index``-th the
        walk meets (``setup.output_losses``; the model's declared outputs give the order of
        a list, the output layer's name a dict's key); the one loss of every output where
        compile() names one (``setup.loss``)."""
        losses = self.setup.output_losses
        if isinstance(losses, dict):
            names = {name, name.split("/")[0], name.split("/")[-1]}
            found = [v for key, v in losses.items() if key in names]
            return found[0] if found else None
        if isinstance(losses, (list, tuple)):
            declared = [tuple(key) for key in self.graph.outputs]
            if (name, ci, k) in declared:
                index = declared.index((name, ci, k))
            return losses[index] if index < len(losses) else None
        return self.setup.loss

    @staticmethod
    def targets(outputs: list) -> tuple:
        """(per sample, fixed) bytes of the targets: one per model output (``outputs``, as
        :meth:`model_outputs` gives them), of its shape."""
        sizes = [size for size in outputs if size is not None]
        return sum(s[0] for s in sizes), sum(s[1] for s in sizes)

    def pointer_tables(self, layers: list, order: list, outputs: int) -> int:
        """How many of XLA's kernels in a training step return several buffers: each such
        result has a pointer table (8 bytes a buffer) that buffer assignment gives a
        256-byte slot of its own for the whole step, never shared (H100 plans of two small
        MLPs under Adam: 13 and 14 such slots, at distinct offsets, 2.8 KB and 3.6 KB of
        temporaries of 4.6 KB and 6.7 KB).  Counted: each variable's update under an
        optimizer with slots (its new value and its slots' written by one fusion), the
        loss and the step counter (two, and three more for each further output), and each
        cuDNN convolution and, where products go to cuBLAS, each matrix product (result and
        scratch): the forward call and its two backward products."""
        if not (self.train and self.profile.sign == "xla"):
            return 0
        count = 2 + 3 * max(outputs - 1, 0)
        if not self.plain_sgd:
            count += sum(1 for layer in layers for w in layer.weights if w.trainable)
        for li, _ in order:
            layer = layers[li]
            if self.library_output(REGISTRY.get(layer.type)) or self.cublas_product(layer):
                count += 3
        return count

    # ------------------------------------------------------------------ forward

    def call_inputs(self, layer, ci: int) -> list:
        """What a call reads: (layer index, call, output) keys, ("data", i) for the model's
        inputs, or ("external", name, call, output) for an operation outside the layers."""
        if layer.type in INPUT_TYPES:
            return []
        inbound = layer.inbound[ci] if ci < len(layer.inbound) else []
        li = self.by_name.get(layer.name, 0)
        if not inbound and li > 0 and self.graph.kind == "Sequential" \
                and self.graph.layers[li - 1].type not in INPUT_TYPES:
            return [(li - 1, 0, 0)]  # a Sequential graph without wiring: the layer before
        if not inbound:  # the first layer of a Sequential model reads the batch
            shapes = as_shape_list(layer.input_shapes[ci]) if ci < len(layer.input_shapes) \
                else []
            return [("data", i) for i in range(min(len(self.data), max(len(shapes), 1)))]
        out = []
        for name, call, index in inbound:
            li = self.by_name.get(name)
            out.append(("external", name, call, index) if li is None else (li, call, index))
        return out

    def tensor(self, key, layer, ci: int, position: int) -> Optional[_Tensor]:
        if key[0] == "data":
            return self.data[key[1]] if key[1] < len(self.data) else None
        found = self.tensors.get(key)
        if found is not None or key[0] != "external":
            return found
        # an operation outside the layer list (keras.ops in a functional model): a tensor of
        # the consumer's input shape, alive until its last consumer
        shapes = as_shape_list(layer.input_shapes[ci]) if ci < len(layer.input_shapes) else []
        shape = shapes[position] if position < len(shapes) else None
        size = self.shape_size(shape, self.prec.compute_bytes) or (0, 0)
        buf = self.alloc(*size, "live", f"{key[1]} output", key[1])
        t = _Tensor(buf, uses=self.pending.get(key, 0),
                    requires_grad=self.train and self.trainable_seen,
                    shape=tuple(shape) if shape else None)
        self.tensors[key] = t
        return t

    def forward(self, layer, li: int, ci: int, input_keys: list):
        self.factor = layer.batches_of(ci)
        try:
            call = self.forward_call(layer, li, ci, input_keys)
        finally:
            self.factor = 1
        if call is not None:
            call.batches = layer.batches_of(ci)
        return call

    def forward_call(self, layer, li: int, ci: int, input_keys: list):
        prec = self.prec
        kind = REGISTRY.get(layer.type)
        ins = [self.tensor(k, layer, ci, p) for p, k in enumerate(input_keys)]
        ins = [t for t in ins if t is not None]
        trains = self.train and any(w.trainable for w in layer.weights)
        needs_dx = self.train and any(t.requires_grad for t in ins)
        requires_grad = trains or needs_dx
        self.trainable_seen = self.trainable_seen or trains
        out_shape = layer.output_shapes[ci] if ci < len(layer.output_shapes) else None
        in_shape = self.input_shape(layer, ci, ins)
        self.compute_bytes = prec.compute_bytes
        element = None
        if self.upcast:
            self.compute_bytes, element = self.upcast_bytes(layer, kind, ins, (li, ci, 0))
        element = prec.variable_bytes if layer.type == "InputLayer" else \
            element or self.compute_bytes
        sizes = self.sizes(layer, out_shape, element) if out_shape is not None else []
        if out_shape is None or None in sizes:
            (self.unknown_inputs if layer.type in INPUT_TYPES else self.unknown).append(
                layer.name)

        # what its backward keeps, resolved against the profile
        specs = []
        idempotent = self.idempotent_relu(layer, ins)
        if requires_grad and not idempotent:
            for s in self.saved_list(layer, kind, in_shape, out_shape, len(ins)):
                if not _needed(s, trains, needs_dx) or (
                        s.profiles and self.profile.name not in s.profiles):
                    continue
                if s.what == "sign":
                    if self.sign_without_mask(layer, ins, out_shape, (li, ci, 0)):
                        continue
                    s = self.resolve_sign(ins, out_shape)
                elif s.what == "scatter zeros" and (not (
                        self.profile.sign == "xla" and ins and ins[0].relu
                        and self.pending.get(input_keys[0], 0) <= 1)
                        or self.zero_kept_elsewhere(in_shape)):
                    continue
                elif s.what == "batch-minor input" and self.batch_minor_in_backward(
                        input_keys[0], ins):
                    s = replace(s, when="backward")  # recomputed there, nothing kept
                elif s.what == "time-major input" and ins and ins[0].time_major:
                    if s.when != "saved":
                        continue  # the input is time-major already: no copy
                    s = Saved("input", needed_for=s.needed_for)
                elif s.what in ("centered input", "centered product") and not (
                        self.group_centred(layer, (li, ci, 0))
                        if layer.type == "GroupNormalization"
                        else self.one_pass_reduction(layer, in_shape)):
                    continue
                elif s.what == "sign preactivation" and self.profile.sign != "xla":
                    s = Saved("output", needed_for=s.needed_for)
                elif s.what == "float32 input" and self.compute_bytes == 4:
                    s = Saved("input", needed_for=s.needed_for)  # no cast: the input
                elif s.what == "layout copy" and ins and ins[0].channels_first_memory \
                        and getattr(kind, "rank", 0) == 1:
                    s = Saved("input", needed_for=s.needed_for)  # contiguous as permuted
                elif s.what == "location mask" and not self.location_mask_written(
                        in_shape, out_shape):
                    continue
                specs.append(s)
        # an input recomputed from a normalisation fused into this call is not kept: the
        # call may write over it
        saved_inputs = {s.index for s in specs if s.what == "input" and s.when == "saved"}
        recomputed = {i for i in saved_inputs
                      if i < len(ins) and self.recomputed_normalization(layer, kind, ins[i])}
        kept_inputs = saved_inputs - recomputed
        kept_names = {s.what for s in specs if s.when == "saved"}
        scratch = []
        unfused = False  # a result of its own beside the output (its epilogue unfused)
        if kind is not None and out_shape is not None and in_shape is not None:
            declared = self.forward_scratch(layer, kind, in_shape, out_shape)
            for s in declared:
                if s.what in kept_names or (s.what == "unfused product" and kept_names & {
                        "preactivation", "sign preactivation", "depthwise output"}):
                    continue  # (what is kept for the backward is that result)
                if s.what == "time-major input" and ins and ins[0].time_major:
                    continue  # the input is time-major already: no copy
                if s.what == "unfused product" and self.activated_in_pooling((li, ci, 0)):
                    continue  # the result is the output's only buffer
                if s.what == "contiguous copy" and ins and ins[0].channels_first_memory:
                    continue  # channels-first in memory: contiguous once permuted
                if s.when == "before":  # gone before the call writes its outputs
                    size = self.before_outputs(s, declared, sizes)
                    if size:
                        scratch.append(self.alloc(*size, "live", f"{layer.name} {s.what}",
                                                  layer.name))
                    continue
                early = self.early_scratch.pop((li, ci, s.what), None)
                if early is not None:  # allocated with an earlier call's (merged)
                    scratch.extend(early)
                    continue
                size = self.shape_size(s.shape, self.item(s.dtype), s.per_batch)
                if size and s.what == "padded input" and ins and self.pads_in_producer(ins[0]):
                    # the element-wise fusion that makes the input writes it padded
                    size = (max(size[0] - ins[0].buf.per_sample, 0),
                            max(size[1] - ins[0].buf.fixed, 0))
                if size:
                    unfused = unfused or s.what in ("unfused product", "padded output")
                    own = self.alloc(size[0] * s.count, size[1] * s.count, "live",
                                     f"{layer.name} {s.what}", layer.name)
                    if s.what in MERGED_SCRATCH and self.profile.sign == "xla":
                        scratch.extend(self.merge_later(li, ci, s, size, own))
                    else:
                        scratch.append(own)

        # weights cast to the compute dtype for the call (mixed precision)
        casts = self.early_casts.pop(layer.name, None) or self.weight_casts(layer)
        if input_keys:
            scratch.extend(self.concatenated_kernels(layer, input_keys[0]))

        # the outputs: a view shares its input's buffer; an element-wise layer may write
        # over an input that dies here
        view = idempotent or (layer.type in VIEW_LAYERS and layer.type not in INPUT_TYPES
                              and bool(ins) and not (ins[0].strided and layer.type in _RESHAPES)) \
            or bool(ins) and self.padded_in_convolution(layer, (li, ci, 0))
        reuse = ins[0] if view else self.dying_input(layer, kind, ins, kept_inputs, sizes,
                                                     (li, ci, 0))
        # the fusions that read the output apply the function to the pre-activation: the
        # kernel's result is the only buffer, kept as the output
        if len(sizes) == 1 and kept_names & {"sign preactivation", "preactivation"} \
                and self.activation_in_product(layer, (li, ci, 0)):
            specs = [Saved("output", needed_for=s.needed_for)
                     if s.what in ("sign preactivation", "preactivation") else s
                     for s in specs]
            output_label = f"{layer.name} pre-activation"
        else:
            output_label = None
        # computed inside the kernel that reads it, unless written over a dying input
        never_written = len(sizes) == 1 and not view and (
            reuse is None or reuse.sources is not None) and self.fused_into_reader(
                layer, kind, (li, ci, 0), ins)
        if never_written:
            reuse = None
        merged = None if reuse is not None or len(sizes) != 1 else self.merged_result(
            li, ci, input_keys)
        outputs = []
        for k, size in enumerate(sizes):
            is_output = self.is_output(layer, li, ci, k)
            into_step_output = self.step_outputs is not None and is_output
            if layer.type in INPUT_TYPES:
                t = _Tensor(self.alloc(*(size or (0, 0)), "data", f"{layer.name}",
                                       layer.name), requires_grad=self.input_gradient)
                self.data.append(t)
            elif reuse is not None and k == 0 and not into_step_output:
                self.ref(reuse.buf)
                t = _Tensor(reuse.buf, materialized=reuse.materialized,
                            storage=reuse.storage)
                self.ref(reuse.storage)
                if view and reuse.sources is not None:  # a view of a never-written tensor
                    t.sources = [reuse]  # holds what that one is computed from
                    reuse.uses += 1
            else:
                label = output_label or f"{layer.name} output" + (
                    f" {k}" if len(sizes) > 1 else "")
                if into_step_output:
                    size = (0, 0)  # written into the step's output buffer
                sources = None
                if never_written:
                    # never written: sized (its gradient is), never alive; what it is
                    # computed from stays until its reader has run
                    buf = Buffer(*(size or (0, 0)), "live", label, layer.name)
                    sources = [i for i in ins if not i.freed]
                    for source in sources:
                        source.uses += 1
                elif merged is not None:  # its slice of the merged product's result
                    buf = Buffer(*(size or (0, 0)), "live", label, layer.name)
                else:
                    buf = self.alloc(*(size or (0, 0)), "live", label, layer.name)
                t = _Tensor(buf, sources=sources, storage=merged,
                            materialized=not (self.profile.sign == "xla" and (
                                layer.type in _FUSIBLE or nearest_upsampling(layer)
                                or elementwise_call(layer, kind))))
                t.buf.library = self.library_output(kind)
            t.requires_grad = requires_grad
            t.preactivation = output_label is not None
            t.wide = element == 4
            t.producer, t.made_by = layer.type, layer.name
            t.relu = _writes_relu(layer)
            t.activated = _writes_activation(layer)
            t.strided = self.profile.pooled_outputs_strided and _window_pooling(layer, kind)
            t.centred = "centered input" in kept_names
            t.recomputable = 0 in kept_inputs
            t.time_major = self.time_major_output(layer, kind, ins)
            t.scattered = layer.type == "Embedding" or bool(
                kind is not None and kind.masks_gradient and ins and ins[0].scattered)
            t.channels_first_memory = self.channels_first_memory(layer, kind, ins, in_shape)
            shapes = as_shape_list(out_shape)
            t.shape = tuple(shapes[k]) if k < len(shapes) and shapes[k] is not None else None
            t.uses = t.readers = self.pending.get((li, ci, k), 0)
            t.output = is_output
            if self.retained is not None and layer.type not in INPUT_TYPES and not view \
                    and layer.name not in self.unmapped:
                t.uses += 1  # held by the model's tensor map until the forward returns
                self.retained.append(t)
            self.tensors[(li, ci, k)] = t
            outputs.append(t)

        call = _Call(layer, ins, outputs, trains, needs_dx,
                     passthrough=view or layer.type in _PASSTHROUGH or bool(
                         elementwise_call(layer, kind)
                         and self.profile.inplace_elementwise))
        call.fused_normalization = bool(recomputed)
        self.keep_shared_zero(call, out_shape)
        if len(outputs) == 1 and requires_grad and output_label is None \
                and kept_names & {"sign preactivation", "preactivation"} \
                and self.select_reads_output(layer, (li, ci, 0)):
            outputs[0].holds += 1  # read by its activation's backward (the select)
            outputs[0].buf.holds += 1
            call.holds.append((outputs[0], False))
            call.select_reads_output = True
        call.select_apart = len(outputs) == 1 and requires_grad \
            and self.select_written_apart(layer, kind, (li, ci, 0))
        for s in specs:
            if s.when == "backward":
                call.scratch.append(s)
                continue
            if s.when in ("forward", "training", "before"):
                continue
            if s.what in ("input", "output"):
                pool = ins if s.what == "input" else outputs
                if s.what == "input" and s.index < len(pool) \
                        and self.recomputed_normalization(layer, kind, pool[s.index]):
                    if self.kept_exponential(layer, pool[s.index], (li, ci, 0)):
                        buf = self.alloc(pool[s.index].buf.per_sample, pool[s.index].buf.fixed,
                                         "saved", f"{layer.name} exponential", layer.name)
                        buf.holds = 1
                        call.holds.append((buf, False))
                    continue
                if s.index < len(pool):
                    t = pool[s.index]
                    t.holds += 1
                    t.buf.holds += 1
                    call.holds.append((t, s.needed_for == "weights"))
                continue
            size = self.shape_size(s.shape, self.item(s.dtype), s.per_batch)
            if size is None:  # a size the shapes leave open: the peak is a lower bound
                self.unknown.append(layer.name)
                continue
            what = s.what.replace("sign preactivation", "preactivation")
            buf = self.alloc(size[0] * s.count, size[1] * s.count, "saved",
                             f"{layer.name} {what.replace('preactivation', 'pre-activation')}",
                             layer.name)
            buf.holds = 1
            call.holds.append((buf, s.needed_for == "weights"))
            if s.what == "scatter zeros":
                call.grad_into = buf
        if outputs:
            outputs[0].normalised_sum = self.sums_a_normalisation(layer, ins, outputs[0])
        if self.recomputed_sum(layer, ins, (li, ci, 0),
                               written=bool(outputs) and outputs[0].materialized):
            for t in ins:  # the operands a kernel wrote stay until the sum's backward
                if t.materialized and t not in self.data:
                    t.holds += 1
                    t.buf.holds += 1
                    call.holds.append((t, False))
        batch_copy = self.batch_relayout(layer, kind, ins, specs, in_shape, trains)
        if batch_copy is not None and trains:
            batch_copy.holds += 1
            call.holds.append((batch_copy, True))
            batch_copy = None
        relayout = self.relayout(layer, kind)
        if relayout is not None and casts is not None:
            self.release(casts)  # the relayout is the 16-bit copy
            casts = None
        if casts is not None and needs_dx:
            casts.holds = 1
            call.holds.append((casts, False))
            casts = None
        if relayout is not None and requires_grad and self.profile.sign == "xla":
            # read again by the backward's products and the update: kept until then
            relayout.holds = 1
            call.holds.append((relayout, False))
            call.relayout = relayout
            relayout = None
        workspace = self.workspace(layer)
        kept_inside = any(isinstance(item, Buffer) and item.label.endswith("inner tensor")
                          for item, _ in call.holds)
        inside = None if kept_inside else self.inner_forward(layer, kind, ins, outputs)
        partials = self.merged_split_partials(layer, li, ci, input_keys, in_shape) \
            if merged is not None else self.split_partials(layer, in_shape, backward=False)
        if partials is not None and requires_grad and sizes and sizes[0]:
            partials = self.keep_partial_sums(call, in_shape, sizes[0], partials,
                                              (li, ci, 0))
        if unfused:
            self.release_before_epilogue(ins, outputs)
        steps = self.steps_beside_output(layer, ins, li, ci, sizes)
        if steps is not None:
            steps = self.alloc(*steps, "live", f"{layer.name} time-major steps", layer.name)
        self.event("forward", layer.name)
        self.release(steps)
        self.release(partials)
        self.release(workspace)
        self.release(inside)
        self.release(relayout)
        self.release(batch_copy)
        for buf in scratch:
            self.release(buf)
        self.release(casts)
        for t in ins:
            t.uses -= 1
            self.maybe_free(t)
        for t in outputs:
            self.maybe_free(t)
        return call if requires_grad else None

    def release_before_epilogue(self, ins: list, outputs: list) -> None:
        """A convolution whose result is finished by an operation of its own (its "unfused
        product", or a transposed convolution's "padded output", cropped): the input the
        convolution read is gone before that operation writes the output, so the call's
        moment is the result and the output.  Done only where the dying inputs are no larger
        than the output, where that moment is the larger one (H100 predict plans of a
        cropped channels-first DepthwiseConv2D: its product and the biased output alive, not
        the crop; of two strided Conv2DTranspose layers: the padded result and the cropped
        output, not the first layer's output)."""
        dying = [t for t in ins if t.uses == 1 and t.holds == 0 and not t.output
                 and not t.freed and t not in self.data and ins.count(t) == 1]
        size = sum(t.buf.at(self.batch) for t in dying)
        if dying and size <= sum(t.buf.at(self.batch) for t in outputs):
            for t in dying:  # (counted down with the other inputs after the call: no-op)
                t.freed = True
                self.release(t.buf)
                self.release(t.storage)

    def merge_later(self, li: int, ci: int, first: Saved, size: tuple,
                    own: Buffer) -> list:
        """XLA merges the matrix products that share an operand into one (its dot merger):
        the sampling coordinates of every affine augmentation of the same image size come
        out of one product at the first of them (measured: ``f32[32, 3072, 9]`` for a
        rotation, a zoom and a translation of 32x32x3 images), allocated now.  The product
        is one buffer that lives until its last direct reader: the last call of the group,
        or this one when the group is two, for the second call reads a copy of its part
        (three image-sized planes, cut out while this call runs, on Hopper), and before
        Hopper the second call's bilinear gathers are made beside this call's.  Where the
        product is a cuBLAS call (T4) its workspace is held beside the product and one
        tiled copy of coordinates.  Measured on H100, T4 and A100 plans of ten chains of one
        to four augmentations at batches 8 to 32; the A100 plans vary with the batch.
        Returns the buffers this call releases."""
        group = []
        later = False
        for lj, cj in self.call_order:
            if (lj, cj) == (li, ci):
                later = True
                continue
            if not later:
                continue
            other = self.graph.layers[lj]
            kind = REGISTRY.get(other.type)
            out_shape = other.output_shapes[cj] if cj < len(other.output_shapes) else None
            in_shape = other.input_shapes[cj] if cj < len(other.input_shapes) else None
            if kind is None or out_shape is None or in_shape is None:
                continue
            scratch = self.forward_scratch(other, kind, in_shape, out_shape)
            if any(s.what == first.what and self.shape_size(
                    s.shape, self.item(s.dtype), s.per_batch) == size for s in scratch):
                group.append((lj, cj, other, scratch))
        name = self.graph.layers[li].name
        product = [own] + [self.alloc(*size, "live", f"{other.name} {first.what}",
                                      other.name) for _lj, _cj, other, _s in group]
        if self.gemm_workspace:
            # the product is a cuBLAS call; its result is tiled into coordinate planes for
            # the next reader while the workspace is held (T4: s8[4194304] beside them)
            reader = group[0][2].name if group else name
            workspace = self.alloc(0, self.gemm_workspace, "scratch", "cuBLAS workspace", name)
            planes = self.alloc(*size, "live", f"{reader} coordinate planes", reader)
            self.event("forward", name)
            self.release(workspace)
            self.release(planes)
        if not group:
            return product
        lj, cj, second, scratch = group[0]
        copied = []
        if not self.nchw_float32:
            copied.append(self.alloc(*size, "live", f"{second.name} coordinate planes",
                                     second.name))
        for s in scratch:
            extra = self.shape_size(s.shape, self.item(s.dtype), s.per_batch) \
                if s.what == "gathered corners" and self.on_this_gpu(s) else None
            if extra:
                copied.append(self.alloc(extra[0] * s.count, extra[1] * s.count, "live",
                                         f"{second.name} {s.what}", second.name))
                self.early_scratch[(lj, cj, s.what)] = []
        self.early_scratch[(lj, cj, first.what)] = copied
        if len(group) == 1:
            return product
        for lk, ck, _other, _s in group[1:-1]:
            self.early_scratch[(lk, ck, first.what)] = []
        lk, ck, _other, _s = group[-1]
        self.early_scratch[(lk, ck, first.what)] = product
        return []

    def zero_tables(self, calls: list) -> None:
        """Under XLA an embedding's table gradient is a scatter-add into a zero table made by
        an operand-free fusion, which the scheduler may place anywhere in the backward.
        Tables of one shape come out of one fusion scheduled as the backward starts
        (measured: two ``f32[10000, 64]`` tables beside both LSTMs' saved steps, H100 and
        T4 plans).  A single table is made there in some plans (the IMDB bidirectional
        LSTM, Keras 2 merge models, a transformer on the T4 at batch 4: up to 19% of the
        peak) and at its layer's backward in others, whichever order XLA's schedulers find
        smallest overall; the walk makes every table as the backward starts, the order
        that never under-estimates (it over-estimates the others by up to 21%), except a
        table whose embedding only convolutions or dropouts read
        (:meth:`table_made_at_backward`): every
        H100, A100 and T4 plan of those makes it at the embedding's backward (Conv1D text
        classifiers at batches 4 to 256: +7.6% / +12.5% / +20.0% -> within 2.4%)."""
        if self.profile.sign != "xla" or self.keep_all_grads():
            return  # (gradients kept for the update are allocated as their layers finish)
        made = set()
        for call in calls:
            if call is None or not call.trains or call.layer.type != "Embedding" \
                    or call.layer.name in made or self.table_made_at_backward(call.layer):
                continue
            layer = call.layer
            made.add(layer.name)
            self.weight_grads[layer.name] = self.alloc(
                0, self.trainable_bytes(layer), "gradients", f"{layer.name} weight gradients",
                layer.name)

    def forward_scratch(self, layer, kind, in_shape, out_shape) -> list:
        when = ("forward", "training", "before") if self.train else ("forward", "before")
        try:
            return [s for s in kind.saved(layer.config, in_shape, out_shape)
                    if s.when in when and (not s.profiles or self.profile.name in s.profiles)
                    and self.on_this_gpu(s)]
        except Exception:  # noqa: BLE001 - saved_list reports the same kind's trouble
            return []

    def before_outputs(self, s: Saved, declared: list, sizes: list) -> Optional[tuple]:
        """Scratch ``s`` made as a call starts and gone before the call writes its outputs
        (``sizes``) and the rest of its ``declared`` forward scratch (torch: the first of a
        convolution's two input copies), held with them in the call's one event as what it
        exceeds them by: the event then holds the larger of the two moments."""
        size = self.shape_size(s.shape, self.item(s.dtype), s.per_batch)
        if not size:
            return None
        later = [self.shape_size(o.shape, self.item(o.dtype), o.per_batch)
                 for o in declared if o.when != "before"] + list(sizes)
        written = (sum(x[0] for x in later if x), sum(x[1] for x in later if x))
        per_sample, fixed = size[0] * s.count - written[0], size[1] * s.count - written[1]
        return (max(per_sample, 0), max(fixed, 0)) if per_sample > 0 or fixed > 0 else None

    def call_writes(self, call: tuple) -> int:
        """Per-sample bytes a call writes in the forward: its outputs (4 bytes an element)
        and the scratch its kind declares for the forward."""
        layer = self.graph.layers[call[0]]
        kind = REGISTRY.get(layer.type)
        out = layer.output_shapes[call[1]] if call[1] < len(layer.output_shapes) else None
        written = sum(x or 0 for x in output_bytes(layer, out, 1, 4)) if out else 0
        ins = layer.input_shapes[call[1]] if call[1] < len(layer.input_shapes) else None
        if kind is None or out is None or ins is None:
            return written
        for s in self.forward_scratch(layer, kind, ins, out):
            size = self.shape_size(s.shape, 4, s.per_batch)
            written += size[0] * s.count if size else 0
        return written

    def input_shape(self, layer, ci: int, ins: list):
        """The call's input shape(s) as its producers made them (a model sized by its data
        carries the fed sizes on its outputs), else as the layer recorded them."""
        recorded = layer.input_shapes[ci] if ci < len(layer.input_shapes) else None
        if isinstance(recorded, list):
            shapes = [t.shape for t in ins]
            if len(shapes) == len(recorded) and all(s is not None for s in shapes):
                return shapes
            return recorded
        # (a recurrence called with its initial states reads them as further inputs: its
        # sequence, the first, carries the sizes)
        if ins and ins[0].shape is not None and (
                recorded is None or len(ins[0].shape) == len(recorded)):
            return ins[0].shape
        return recorded

    def dying_input(self, layer, kind, ins, kept_inputs, sizes,
                    out_key=None) -> Optional[_Tensor]:
        """The input an element-wise layer writes its output over: one of the same size
        that dies here (no later reader, kept by nobody).  XLA does it for normalisations and
        sums too (their fusions write over a dying operand), but never over a buffer a
        library call wrote (:meth:`library_output`)."""
        if not self.profile.inplace_elementwise or len(sizes) != 1 or sizes[0] is None:
            return None
        elementwise = elementwise_call(layer, kind)
        if not elementwise and not (self.profile.sign == "xla" and layer.type in _FUSIBLE):
            return None
        for i, t in enumerate(ins):
            if (t.uses == 1 and t.holds == 0 and i not in kept_inputs and not t.output
                    and t.buf.refs <= 1  # no view of it alive
                    and t not in self.data and ins.count(t) == 1 and t.storage is None
                    and (t.buf.per_sample, t.buf.fixed) == sizes[0]
                    and (not t.buf.library or self.no_kernel_of_its_own(layer, kind, t,
                                                                        out_key)
                         or self.side_input_sum(layer, ins, t))):
                return t
        return None

    def saved_list(self, layer, kind, in_shape, out_shape, n_inputs: int) -> list:
        """What a call keeps: the registry kind's declaration; for a model used as a layer,
        a layer class of the file or an ONNX node, its input when it has weights and the
        tensors it makes inside (or its output when it makes none that are known)."""
        if kind is not None and out_shape is not None and in_shape is not None:
            try:
                return list(kind.saved(layer.config, in_shape, out_shape))
            except Exception:  # noqa: BLE001 - a kind that cannot say keeps its input
                return [Saved("input")]
        if layer.type in INPUT_TYPES or layer.type in VIEW_LAYERS or layer.type in SLICES:
            return []
        out = [Saved("input", index=i, needed_for="weights") for i in range(n_inputs)] \
            if layer.weights else []
        inner = self.inner_shapes(layer)
        if inner:
            out += [Saved("inner tensor", tuple(s)) for s in inner if isinstance(s, tuple)]
        elif self.graph.kind == "ONNX" or not layer.weights:
            out.append(Saved("output", needed_for="inputs"))
        return out

    def upcast_bytes(self, layer, kind, ins, key: tuple) -> tuple:
        """(the call's compute bytes, its outputs' element bytes) for bfloat16 where the GPU
        has no bfloat16 arithmetic (before Ampere): products run and write in float32, and
        XLA keeps float32 through the element-wise layers between them (excess precision);
        what a pooling or normalisation layer reads is stored in bfloat16, and pooling
        writes bfloat16 (T4 plans: ``Conv2D(activation='relu')`` into ``MaxPooling2D`` or
        ``BatchNormalization`` keeps its float32 convolution output and a bfloat16 ReLU
        output, and scatters the pooling's gradient in bfloat16; convolutions, batch
        normalisations and ReLUs of a ResNet, and Dense layers' ReLU outputs, stay float32);
        recurrences keep bfloat16 (their loop runs in it)."""
        family = kind.family if kind is not None else ""
        narrow = self.prec.compute_bytes
        if family in ("rnn", "convolutional_recurrent", "pooling"):
            return narrow, narrow
        readers = (REGISTRY.get(reader.type) for reader in self.readers(key))
        read_narrow = any(r is not None and r.family in ("pooling", "normalization")
                          for r in readers)
        if family == "convolutional":  # cuDNN writes float32; its activation may narrow
            return 4, narrow if read_narrow and _writes_activation(layer) else 4
        if family in ("merging", "reshaping", "activations", "regularization",
                      "normalization") or elementwise_call(layer, kind):
            wide = (not ins or any(t.wide for t in ins)) and not read_narrow
            return (4, 4) if wide else (narrow, narrow)
        return 4, 4

    def updated_in_place(self, layer, single_call: bool) -> int:
        """Bytes of ``layer``'s weight gradient that never exist: with plain SGD in float32,
        where XLA's matrix products are Triton fusions (compute capability 8 and up), the
        product that makes a once-called Dense kernel's gradient takes the update
        (``w - lr * g``) as its epilogue and writes into the donated weight (H100 and A100
        plans of a 784-1024-1024-10 MLP at batch 8: temp 360,472 and 229,400 bytes with
        SGD, 4.26 MB, a 1024x1024 gradient, with momentum; the T4's cuBLAS keeps it)."""
        if not (self.profile.sign == "xla" and self.plain_sgd and not self.gemm_workspace
                and single_call and layer.type == "Dense"
                and self.prec.compute_bytes == self.prec.variable_bytes == 4):
            return 0
        return sum(w.size * 4 for w in layer.weights
                   if w.trainable and len(w.shape) == 2 and w.itemsize in (None, 4))

    def trainable_bytes(self, layer=None) -> int:
        """Bytes of the trainable variables of ``layer`` (of every layer for None)."""
        layers = self.graph.layers if layer is None else (layer,)
        return sum(w.size * (w.itemsize or self.prec.variable_bytes)
                   for each in layers for w in each.weights if w.trainable)

    def maybe_free(self, t: _Tensor) -> None:
        if t.uses <= 0 and t.holds <= 0 and not t.output and t not in self.data \
                and not t.freed:
            t.freed = True
            self.release(t.buf)
            self.release(t.storage)
            for source in t.sources or ():
                source.uses -= 1
                self.maybe_free(source)

    # ------------------------------------------------------------------ backward

    def backward(self, call: "_Call") -> None:
        self.factor = call.batches
        try:
            self.backward_call(call)
        finally:
            self.factor = 1

    def backward_call(self, call: "_Call") -> None:
        layer = call.layer
        name = layer.name
        li = self.by_name[name]
        self.calls_left[li] = self.calls_left.get(li, 1) - 1
        last = self.calls_left[li] <= 0
        if call.outputs and not any(t.grad is not None for t in call.outputs):
            self.finish_call(call)  # nothing reached this call's outputs
            return
        self.write_select_apart(call)
        scratch = self.transposed_backward(call)
        phased = scratch is not None
        scratch = scratch or []
        fused = self.fused_select_and_scatter(call)
        for s in call.scratch:
            if fused and s.what in _WINDOW_SCRATCH or self.no_batch_minor_copy(layer, s):
                continue
            if s.what in _TRANSPOSED_SCRATCH and (phased or s.what == _DILATED_MINOR):
                continue  # made by transposed_backward (the copy there alone)
            size = self.shape_size(s.shape, self.item(s.dtype), s.per_batch)
            count = s.count
            if self.gemm_workspace and s.what == "score gradients" and not self.partitioned:
                # a one-device XLA program hands cuBLAS transposed copies of the scores
                # (its einsums keep their explicit transposes): two more
                count += 2
            if size:
                scratch.append(self.alloc(size[0] * count, size[1] * count, "scratch",
                                          f"{name} {s.what}", name))
        workspace = self.workspace(layer)
        relayout = None if call.relayout is not None else \
            self.relayout(layer, REGISTRY.get(layer.type))
        scratch.extend(self.activation_backward(call))
        if call.trains and name in self.weight_grads and self.profile.eager_backward:
            # autograd sums this call's weight gradient into the one a later call made: the
            # two products and their sum exist at once (a torch step of a Dense(256) shared
            # by two inputs of 4096 features: two `mm` results and the `add`)
            scratch.append(self.alloc(0, 2 * self.trainable_bytes(layer), "scratch",
                                      f"{name} weight gradient of another call", name))
        kernel_partials = None
        if call.trains and name not in self.weight_grads:
            size = self.trainable_bytes(layer)
            keep = self.profile.weight_gradients == "kept" or self.keep_all_grads()
            if keep and self.keep_all_grads() and self.profile.weight_gradients != "kept":
                # loss scaling: the scaled gradients wait, in the compute dtype, for the
                # check that all of them are finite
                size = size * self.prec.compute_bytes // self.prec.variable_bytes
            elif not keep:
                size = size * self.gradient_copies(layer) - self.updated_in_place(layer, last)
            # under loss scaling alone a gradient may wait for the finiteness check made
            # late (one reduced over replicas is made where its layer's backward runs:
            # T4 and H100 plans of data-parallel MLPs, 12-18% under when made late)
            waits = keep and self.profile.weight_gradients != "kept" \
                and not self.data_parallel
            if (not keep or waits) and self.deferrable(call, size, last):
                grads_out = [t.grad for t in call.outputs if t.grad is not None]
                for buf in grads_out:
                    self.ref(buf)  # the product reads the output's gradient too
                # the update reads the kernel's copy in cuDNN's layout: kept until then
                carried = [h for h in call.holds if h[1] or h[0] is call.relayout]
                self.deferred.append((layer, size, carried, grads_out, call.relayout, waits))
                call.holds = [h for h in call.holds if h not in carried]
            else:
                grads = self.alloc(0, size, "gradients", f"{name} weight gradients", name)
                self.weight_grads[name] = grads
                if keep:
                    self.kept_grads.append(grads)
                kernel_partials = self.merged_kernel_gradients(call)
                if kernel_partials is None and not call.kernel_merged:
                    kernel_partials = self.kernel_gradient_partials(layer)
        self.event("backward", name)
        for t in call.outputs:  # their backward ran in the fusion that wrote the scratch
            for reader in self.carried.pop(id(t), ()):
                self.finish_call(reader)
        self.release(kernel_partials)  # the product is done before the input gradient's
        self.release(relayout)
        grads = self.weight_grads.get(name)
        waiting = None  # the weight gradient, until the input gradient has read the weights
        if grads is not None and last and grads not in self.kept_grads:
            if self.profile.sign == "xla":
                waiting = grads
            else:
                self.release(grads)  # consumed by the update
        # differentiated in a transposed convolution's backward, which then finishes it
        convolved = self.differentiated_in_transposed_backward(call, call.inputs[0]) \
            if len(call.inputs) == 1 else None
        if convolved is None:
            for entry in [h for h in call.holds if h[1]]:  # only the weight gradient read it
                self.unhold(entry[0])
            call.holds = [h for h in call.holds if not h[1]]
        dy = next((t.grad for t in call.outputs if t.grad is not None), None)
        made = carried = False
        for t in call.inputs:
            if self.summed_lazily(call, t, dy):
                self.ref(dy)  # alive until the fusion reading t's gradient adds it in
                t.grad.companions += (dy,)
                t.grad.summed = True
            if self.added_where_read(layer, t):
                # cuDNN's input gradient, kept beside the one there is until t's gradient
                # is read: the fusion reading it adds them
                extra = self.alloc(t.buf.per_sample, t.buf.fixed, "grad",
                                   f"gradient of {name}'s input", name)
                extra.library = True
                t.grad.companions += (extra,)
                t.grad.summed = True
                continue
            if not t.requires_grad or t.grad is not None or (
                    t in self.data and not self.input_gradient):
                continue  # no gradient wanted, or accumulated into the one there is
            if convolved is not None:
                # never written on its own: the transposed convolution's first backward
                # fusion computes it as it writes its scratch
                t.grad = self.alloc(0, 0, "grad", f"gradient of {name}'s input", name)
                self.carried.setdefault(id(convolved), []).append(call)
                carried = True
                continue
            if self.profile.sign == "xla" and t.scattered and _masks_gradient(layer):
                # a dropout's masking, computed by the embedding's scatter as it reads
                t.grad = self.alloc(0, 0, "grad", f"gradient of {name}'s input", name)
                self.read_by_fusion(t.grad, call, dy)
                continue
            if call.passthrough and dy is not None and not (
                    (call.fused_normalization and not dy.broadcast)
                    or self.over_library_gradient(layer, dy)
                    or dy.summed):
                t.grad = dy
                self.ref(dy)
                continue
            # a pooling's broadcast gradient its never-written concatenation's operands read
            averaged = layer.type in _BROADCAST_BACKWARD and t.sources is not None \
                and self.averaged_concatenation((self.by_name.get(t.made_by, -1), 0, 0))
            if self.profile.sign == "xla" and (
                    layer.type in _BROADCAST_BACKWARD and (
                        t.scattered or self.broadcast_into_normalization(layer, t) or averaged)
                    or t.preactivation and t.readers == 1 and self.reduced_product(layer)):
                # a broadcast XLA fuses into the embedding's scatter, a batch normalisation's
                # backward or the selects of a concatenation's operands, or the outer product
                # of a one-unit Dense's output gradient and kernel, which the activation's
                # select reads: never materialised
                t.grad = self.alloc(0, 0, "grad", f"gradient of {name}'s input", name)
                t.grad.broadcast = t.preactivation or averaged
                continue
            into = call.grad_into
            if into is not None and (into.per_sample, into.fixed) == (t.buf.per_sample,
                                                                      t.buf.fixed):
                t.grad = into  # scattered into the zeros it kept
                self.ref(into)
                call.grad_into = None
                continue
            t.grad = self.alloc(t.buf.per_sample, t.buf.fixed, "grad",
                                f"gradient of {name}'s input", name)
            t.grad.broadcast = layer.type in _BROADCAST_BACKWARD
            t.grad.library = self.library_output(REGISTRY.get(layer.type))  # cuDNN's dX
            made = True
        self.sign_mask(call)
        if made:
            selected = [t for t in call.inputs if t.grad is not None]
            for other, t in self.sibling_selects(call):  # their gradients made at once
                t.grad = self.alloc(t.buf.per_sample, t.buf.fixed, "grad",
                                    f"gradient of {other}'s input", other)
                selected.append(t)
            self.activation_done(call, selected)
            shape = layer.input_shapes[0] if layer.input_shapes else None
            self.split_input_gradient(call, shape, scratch)
        # under XLA the update writes the donated weights in place, so it runs (and frees
        # the gradient) only once the input gradient's product has read them (H100 plan of
        # a 32-128-128-5 MLP: dense_1's kernel gradient beside its input gradient's split-K
        # partial sums)
        self.release(waiting)
        self.release(workspace)
        for buf in scratch:
            self.release(buf)
        if not carried:
            self.finish_call(call)

    def transposed_backward(self, call: "_Call") -> Optional[list]:
        """Under XLA, the first moments of the backward of a transposed convolution whose
        kernel's gradient reads a batch-minor copy of its dilated input
        (``Conv2DTranspose.saved``; None for any other call, and where element-wise calls
        after it are differentiated in its scratch fusion, ``carried``).  Its own ReLU's
        mask is made with the bias gradient and the pre-activation dies; after such a mask
        the copy of the input is made next where the input then dies (nothing else keeps
        it); the fusion that pads the output's gradient through the mask writes it and its
        batch-minor copy, a moment with the output's gradient, which then dies; the copy of
        the input is made there otherwise; the kernel's gradient frees both copies.  What it returns
        (the padded gradient) is kept until the input's gradient is made (H100 and T4 plans
        of Conv2DTranspose(64, 5, relu, strides=2) -> Conv2DTranspose(32, 5, relu,
        strides=2) -> Conv2D(1, 3), Adam, batches 32 and 128: 15.2% / 9.6% under at 32
        with the copies made at once beside the kept pre-activation and its gradient, -1.3%
        / +5.1% in this order; with tanh, whose output the layer before keeps, the copy
        after the padding: -6.7% / -1.4% -> -0.2% / +6.6%; a tanh on the second alone,
        behind an encoder: -12.5% / -3.2% -> -0.7% / +10.8%).  Behind a 5x5-kernel encoder
        XLA defers the kernel's gradient, and the copy, past the encoder's backward, a lower
        peak (`denoiser_wide_kernels` +9.7% on the H100 at 32; -3.3% with the copies
        beside the pre-activation): the order that never under-estimates is kept."""
        if self.profile.sign != "xla" or not call.outputs or call.outputs[0].grad is None \
                or id(call.outputs[0]) in self.carried \
                or not any(s.what == "dilated input, batch-minor" for s in call.scratch):
            return None
        name, out = call.layer.name, call.outputs[0]

        def scratch(what: str) -> Buffer:
            s = next(s for s in call.scratch if s.what == what)
            size = self.shape_size(s.shape, self.item(s.dtype), s.per_batch) or (0, 0)
            return self.alloc(*size, "scratch", f"{name} {what}", name)
        pre = [h for h in call.holds if isinstance(h[0], Buffer)
               and h[0].label == f"{name} pre-activation"]
        mask = None
        if pre and _writes_relu(call.layer):
            width = 4 if out.wide else 2
            mask = self.alloc(out.buf.per_sample // width, out.buf.fixed // width,
                              "scratch", f"{name} activation mask", name)
            self.event("backward", name)
            for entry in pre:
                self.unhold(entry[0])
            call.holds = [h for h in call.holds if h not in pre]
        source = call.inputs[0] if call.inputs else None
        held = [h for h in call.holds if h[1] and h[0] is source]
        copy = None
        if mask is not None and held and source.holds == len(held) and source.uses <= 0 \
                and source not in self.data:
            copy = scratch("dilated input, batch-minor")  # the input dies with it
            for entry in held:
                self.unhold(entry[0])
            call.holds = [h for h in call.holds if h not in held]
        padded = scratch("padded output gradient")
        minor = scratch("output gradient, batch-minor")
        self.event("backward", name)
        self.release(mask)
        dy = out.grad  # read by the padding fusion alone: gone
        out.grad = self.alloc(0, 0, "grad", dy.label, dy.layer)
        out.grad.broadcast, out.grad.summed, out.grad.library = \
            dy.broadcast, dy.summed, dy.library
        self.release(dy)
        if copy is None:
            copy = scratch("dilated input, batch-minor")
            self.event("backward", name)
        self.release(copy)
        self.release(minor)
        return [padded]

    def deferrable(self, call: "_Call", size: int, single_call: bool) -> bool:
        """Under XLA a Dense kernel's gradient product and its update depend on nothing the
        rest of the backward needs: the memory-minimising scheduler runs them once the
        larger activations are gone, keeping the layer's input and its output's gradient
        until then (T4 and H100 plans of VGG blocks into a 4608x256 Dense: no kernel
        gradient beside the convolutions' activations).  So does a convolution's kernel
        gradient, whose update also reads the kernel's copy in cuDNN's layout (H100 plans of
        six 3x3x512x512 convolutions at batch 4: every input gradient first).  Deferred when
        the gradient outweighs what it keeps (XLA defers those convolutions' gradients
        under plain SGD too, where the kernel copy outweighs the gradient: not followed).
        Never a transposed convolution's without strides, whose kernel gradient and update
        XLA runs at the layer's backward (H100 plan of the TensorFlow tutorial's DCGAN
        generator at batch 32: the 5x5x128x256 kernel's gradient and new slot values at its
        layer, a strided layer's deferred; six Conv2DTranspose(256, 3) on 8x8 maps at
        batches 4 and 32 on the H100 and the T4: memlint 10% to 60% over deferring them,
        5% to 21% over without)."""
        convolution = self.library_output(REGISTRY.get(call.layer.type))  # a cuDNN call
        if not (self.profile.sign == "xla" and single_call and size > 0
                and (call.layer.type == "Dense" or convolution) and self.train):
            return False
        if call.layer.type.endswith("Transpose") and all(
                s == 1 for s in (call.layer.config or {}).get("strides") or (1,)):
            return False
        kept = sum((item.at(self.batch) if isinstance(item, Buffer)
                    else item.buf.at(self.batch)) for item, weights in call.holds
                   if weights or item is call.relayout)
        kept += sum(t.grad.at(self.batch) for t in call.outputs if t.grad is not None)
        return kept < size

    def deferred_weight_gradients(self) -> None:
        """The deferred weight gradients, one layer at a time, after the rest of the
        backward (the last layer's first: XLA runs them in layer order in the plans below,
        which changes only which layer's product meets the values already waiting).
        Where every gradient waits for loss scaling's finiteness check, a deferred gradient
        is made there and waits too (T4 and H100 plans of the mixed-precision guide's CNN:
        its Dense(256) kernel gradient after the convolutions' backward).

        A deferred convolution's update writes its slots' new values (and, where
        :meth:`gradient_copies` counts one, the new kernel) to buffers of their own, and
        XLA copies them into the donated state only at the end of the step: they wait there,
        every deferred convolution's together (H100 plans of 3 to 12 equal convolutions with
        Adam at batch 4, every kernel gradient after the input gradients: two such buffers
        per layer alive beside the last update, their copies into the slots at the end of
        the program).  The update comes after the gradient's product, once the layer's input
        and output gradient are gone.  A float32 update before Hopper runs in NCHW's kernel
        layout, from transposed copies of the slots, whose donated buffers XLA then reuses
        for the new values (T4 plan of six 3x3x256x256 convolutions with Adam: 10 new slot
        values waiting, 6.8 kernels of temporaries in all): not counted there."""
        for layer, size, holds, grads_out, kernel_copy, waits in self.deferred:
            pending = 0
            if waits:  # waits with the others for loss scaling's finiteness check
                grads = self.alloc(0, size, "gradients", f"{layer.name} weight gradients",
                                   layer.name)
                self.weight_grads[layer.name] = grads
                self.kept_grads.append(grads)
                self.event("backward", layer.name)
                for buf in grads_out:
                    self.release(buf)
                for item, _ in holds:
                    self.unhold(item)
                continue
            if self.library_output(REGISTRY.get(layer.type)) and not self.nchw_update:
                pending = self.trainable_bytes(layer) * (self.gradient_copies(layer) - 1)
            grads = self.alloc(0, size - pending, "gradients",
                               f"{layer.name} weight gradients", layer.name)
            workspace = self.workspace(layer)
            partials = self.kernel_gradient_partials(layer)
            self.event("backward", layer.name)
            self.release(partials)
            self.release(workspace)
            for buf in grads_out:
                self.release(buf)
            for item, _ in holds:
                if item is not kernel_copy:
                    self.unhold(item)
            if pending:
                self.pending_slot_values.append(self.alloc(
                    0, pending, "gradients", f"{layer.name} new slot values", layer.name))
                self.event("update", layer.name)
            self.release(grads)
            if any(item is kernel_copy for item, _ in holds):
                self.unhold(kernel_copy)
        self.deferred = []

    def zero_kept_elsewhere(self, in_shape) -> bool:
        """Whether a max pooling's scatter zeros are the broadcast zero a ReLU of the same
        shape keeps (:meth:`keep_shared_zero`): the scatter then works on a copy made at the
        pooling's backward, its input's gradient."""
        return isinstance(in_shape, tuple) and tuple(in_shape[1:]) in self.shared_pool_zeros

    def keep_shared_zero(self, call: _Call, out_shape) -> None:
        """Under XLA, the first ReLU of a shape in :attr:`shared_pool_zeros` writes the
        pooling's broadcast zero beside its output, kept until its backward."""
        if len(call.outputs) != 1 or not call.outputs[0].relu \
                or not call.outputs[0].requires_grad or not isinstance(out_shape, tuple):
            return
        shape = tuple(out_shape[1:])
        if shape not in self.shared_pool_zeros or shape in self.zeros_kept:
            return
        self.zeros_kept.add(shape)
        t = call.outputs[0]
        buf = self.alloc(t.buf.per_sample, t.buf.fixed, "saved",
                         f"{call.layer.name} broadcast zero", call.layer.name)
        buf.holds = 1
        call.holds.append((buf, False))

    def write_select_apart(self, call: "_Call") -> None:
        """The select of a call whose activation's backward XLA writes to a buffer of its own
        (:meth:`select_written_apart`): a moment with the output's gradient and the select
        alive, before anything else of the call's backward; the select is the output's
        gradient from then on."""
        out = call.outputs[0] if call.select_apart else None
        dy = out.grad if out is not None else None
        if dy is None or not (dy.per_sample or dy.fixed):
            return
        out.grad = self.alloc(dy.per_sample, dy.fixed, "grad",
                              f"gradient of {call.layer.name}'s pre-activation",
                              call.layer.name)
        self.event("backward", call.layer.name)
        self.release(dy)

    def activation_backward(self, call: "_Call") -> None:
        """Under XLA a layer's own activation is differentiated first: the incoming gradient
        times the function's derivative, read off the kept pre-activation, which then dies
        before the weight gradient is made (H100 plan of two 256-filter ReLU convolutions:
        the peak holds the pre-activation and the masked gradient, not the kernel's
        gradient, made after it).  A moment of its own, then the pre-activation goes, and
        so do the partial sums kept in its place (:meth:`keep_partial_sums`).  Where the
        output's gradient was never written (a one-unit Dense's outer product) and the
        output is the kept pre-activation, the select writes the pre-activation's gradient
        to a buffer of its own, the output's gradient from then on, and the output goes."""
        if self.profile.sign != "xla":
            return []
        early = [h for h in call.holds if isinstance(h[0], Buffer)
                 and h[0].label in (f"{call.layer.name} pre-activation",
                                    f"{call.layer.name} kept split-K partial sums")]
        dy = next((t.grad for t in call.outputs if t.grad is not None), None)
        unwritten = dy is not None and dy.broadcast and not (dy.per_sample or dy.fixed)
        if unwritten and call.outputs[0].preactivation:
            # the select computes the output's gradient as it reads it and writes the
            # pre-activation's to a buffer of its own; the pre-activation (the output) then
            # dies (H100 plan of Dense(256, relu) -> Dense(1) at batch 256: the masked
            # gradient beside the kernel gradient's partial sums, no pre-activation)
            early += [h for h in call.holds if h[0] is call.outputs[0] and not h[1]]
        if not early:
            return []
        made = []
        out = call.outputs[0] if call.outputs else None
        if unwritten and out.preactivation:
            # the output's gradient from here on: what the layer's products read
            self.release(out.grad)
            out.grad = self.alloc(out.buf.per_sample, out.buf.fixed, "grad",
                                  f"gradient of {call.layer.name}'s pre-activation",
                                  call.layer.name)
        elif dy is not None and (call.select_reads_output or dy.summed):
            made.append(self.alloc(dy.per_sample, dy.fixed, "grad",
                                   f"gradient of {call.layer.name}'s pre-activation",
                                   call.layer.name))
            early += [h for h in call.holds if h[0] is call.outputs[0] and not h[1]]
        self.event("backward", call.layer.name)
        for item, _ in early:
            self.unhold(item)
        call.holds = [h for h in call.holds if h not in early]
        return made

    @staticmethod
    def inner_shapes(layer) -> list:
        """The tensors one call makes inside (the frontend lists those of every call)."""
        calls = max(len(layer.output_shapes), 1)
        shapes = list(layer.inner_shapes)
        if calls > 1 and len(shapes) % calls == 0:
            return shapes[:len(shapes) // calls]
        return shapes

    def inner_forward(self, layer, kind, ins, outputs) -> Optional[Buffer]:
        """What a model used as a layer (or a layer class of the file) holds while its call
        runs, beyond its input and output: the largest pair of consecutive tensors it makes
        inside (each layer's input and output), as its own inference would."""
        if kind is not None or not layer.inner_shapes:
            return None
        chain = [(t.buf.per_sample, t.buf.fixed) for t in ins[:1]]
        for shape in self.inner_shapes(layer):
            size = self.shape_size(shape, self.prec.compute_bytes)
            if size is not None:
                chain.append(size)
        chain += [(t.buf.per_sample, t.buf.fixed) for t in outputs[:1]]
        best = (0, 0)
        for i in range(len(chain) - 1):
            pair = chain[i:i + 2]
            extra = [c for j, c in enumerate(pair) if not (
                (i + j == 0 and ins) or (i + j == len(chain) - 1 and outputs))]
            total = (sum(c[0] for c in extra), sum(c[1] for c in extra))
            if total[0] * self.batch + total[1] > best[0] * self.batch + best[1]:
                best = total
        if not any(best):
            return None
        return self.alloc(*best, "live", f"{layer.name} inner tensors", layer.name)

    def batch_relayout(self, layer, kind, ins, specs, in_shape, trains) -> Optional[Buffer]:
        """The copy of the input batch a convolution that reads it (or a reshape of it: a
        clip's frames folded into the batch axis) keeps for the kernel's gradient under XLA:
        transposed to NCHW for a float32 convolution on a GPU before Hopper, to NCDHW for a
        3-D one on any GPU, and cast to 16 bits under a mixed policy (measured on T4 plans:
        ``f32[32,16,32,32]`` beside the ``[32,32,32,16]`` batch; H100: ``f32[4,3,8,32,32]``
        beside an 8x32x32x3 clip, and ``f16[32,32,32,16]`` beside a
        float32 ``[32,32,32,16]`` batch under mixed_float16).  Not where the batch has one
        channel (a bitcast), is channels-first, or is padded first (the padded copy is
        written in NCHW).  One copy of a batch serves every convolution that reads it (XLA
        makes it once: T4 plans of three convolutions of one batch, +8.3% with a copy each;
        `unet_small`'s and a recursive-blocks CNN's T4 rows 0.4 to 1.9 points closer)."""
        volumetric = self.profile.sign == "xla" and isinstance(in_shape, tuple) \
            and len(in_shape) == 5
        nchw = self.nchw_float32 and self.compute_bytes == 4
        cast = self.profile.sign == "xla" and self.compute_bytes == 2
        if not ((nchw or volumetric or cast)
                and kind is not None and kind.family == "convolutional" and ins
                and any(ins[0].buf is data.buf for data in self.data)  # or a view of it
                and layer.config.get("data_format", "channels_last") == "channels_last"):
            return None
        if any(s.what == "padded input" for s in specs) or not isinstance(in_shape, tuple) \
                or len(in_shape) < 3 or in_shape[-1] == 1:
            return None
        size = self.shape_size(in_shape, self.compute_bytes)  # a 16-bit step casts it too
        if size is None:
            return None
        what = "in NCDHW" if volumetric else "in NCHW" if nchw else \
            f"in {self.prec.policy[len('mixed_'):]}"
        shared = self.batch_copies.get((id(ins[0].buf), what, size))
        if shared is not None and shared.refs > 0:  # one copy, read by each
            self.ref(shared)
            return shared
        copy = self.alloc(*size, "relayouts", f"{layer.name} input batch {what}", layer.name)
        self.batch_copies[(id(ins[0].buf), what, size)] = copy
        return copy

    def relayout(self, layer, kind) -> Optional[Buffer]:
        """The kernel copied into cuDNN's layout under XLA.  XLA makes the copy once and
        reads it in the forward's product, the backward's products and the update, so in
        training it is kept from the layer's forward until its backward is done (H100 and T4
        plans of stacks of 2 to 22 equal convolutions at small batches: every layer's copy
        alive at the peak, XLA's temporaries growing by one kernel a layer), unless it
        takes the donated buffer of a kernel already copied (:meth:`in_donated_kernel`)."""
        if self.profile.sign != "xla" or kind is None or kind.family != "convolutional":
            return None
        kernel = sum(w.size for w in layer.weights if len(w.shape) >= 3)
        if not kernel:
            return None
        size = kernel * self.prec.compute_bytes
        if self.in_donated_kernel(layer, size):
            return self.alloc(0, 0, "relayouts",
                              f"{layer.name} kernel in cuDNN's layout, in a donated buffer",
                              layer.name)
        return self.alloc(0, size, "relayouts",
                          f"{layer.name} kernel in cuDNN's layout", layer.name)

    def gradient_copies(self, layer) -> int:
        """How many buffers of its size a weight gradient takes while XLA consumes it: one
        for a matrix product (the update reads it in its own layout and writes the donated
        weights in place; plain SGD sometimes writes it straight into the weights, at small
        batches: not counted on).  A convolution's kernel gradient comes out of cuDNN in
        cuDNN's layout and the update reads it transposed: each optimizer slot's new value
        is written to a buffer of its own before it is copied into the donated slot, and on
        Hopper a transposed convolution's new kernel too (H100 and T4 plans of two
        3x3x512x512 kernels, beside the kernel's copy in cuDNN's layout: Conv2D 2 / 3 / 4
        buffers with SGD / RMSprop / Adam on both; Conv2DTranspose 3 / 4 / 5 on the H100,
        2 / 3 / 4 on the T4)."""
        kind = REGISTRY.get(layer.type)
        if kind is not None and kind.family == "convolutional":
            transposed = layer.type.endswith("Transpose") and not self.nchw_float32
            return 1 + slots_per_variable(self.setup.optimizer) + int(transposed)
        if layer.type == "LSTM":
            # the scan's backward adds each step's kernel gradients (one product over the
            # step's input and state, [features + units, 4 units]) into accumulators
            # carried through the loop: two buffers of their size while it runs (H100
            # plan of an LSTM(256) over 20 steps of 93 features at batch 4)
            return 2
        return 1

    def workspace(self, layer) -> Optional[Buffer]:
        """cuBLAS's workspace while a matrix product runs (where the target's GEMMs go to
        cuBLAS rather than to fused Triton kernels: compute capability below 8)."""
        if not self.cublas_product(layer):
            return None
        size = self.gemm_workspace
        if resizes_by_products(layer) and layer.output_shapes:
            # held while the last axis's product is made beside the first axis's (the
            # output over the last axis's factor), before the output of the product's size
            # is written: it adds what the two exceed the output by (T4 plans of bilinear
            # UpSampling2D, 3 MiB to 64 MiB outputs)
            out = self.shape_size(layer.output_shapes[0], 4, True)
            out = out[0] * self.batch + out[1] if out else 0
            factor = (layer.config or {}).get("size") or (1, 1)
            size = max(0, size + out // max(factor[-1], 1) - out)
        return self.alloc(0, size, "scratch", "cuBLAS workspace", layer.name)

    def keep_partial_sums(self, call: "_Call", in_shape, out_size: tuple,
                          partials: Buffer, key: tuple) -> Buffer:
        """A split Dense product whose own activation's backward reads the pre-activation
        (GELU, swish), or whose activation only Dropout reads: XLA computes the activation
        from the partial sums, summing them in the activation's fusion, and keeps the
        partial sums, not their sum, until the activation's backward (H100 plans of
        784-512-512-10 MLPs with SGD at batches 32 to 1024: each split layer's ``f32[split,
        batch, 512]`` from its forward to its activation's backward; memlint's error at
        batches 32-512, GELU +2.6 / +4.5 / -6.9 / -10.7 / -7.8% -> +1.3 / +2.2 / +3.2 / +5.4
        / +11.8%, swish +1.3 / +2.3 / -10.1 / -21.4 / -15.4% -> +0.0 / +0.0 / -3.2 / -5.3 /
        +5.6%; with ReLU or tanh the sum is written and the partials die), and any
        activation whose output only Dropout layers read, where products are split on
        Hopper: the dropout's fusion sums the partials as it reads them and the activation's
        backward reads them again (H100 plans of the same MLPs with Dropout(0.2) and Adam at
        batch 256: ReLU -13.0% -> -2.6%, tanh -10.3% -> -0.0%; the A100 splits these
        products in fewer slices). The walk holds the partial sums beyond the
        pre-activation's bytes (it keeps the pre-activation) and leaves the product's padded
        operand copies a transient; returns the transient."""
        layer = call.layer
        activation = (layer.config or {}).get("activation")
        if activation in (None, "linear"):
            return partials
        if activation_need(activation) != "input" and not self.dropout_reads(key):
            return partials
        call.sums_in_activation = True  # (its backward reads them: split_input_gradient)
        sums = partial_sum_bytes(self.product_rows(in_shape), in_shape[-1], _units(layer),
                                 not self.nchw_float32)
        kept = sums - (out_size[0] * self.batch + out_size[1])
        if kept <= 0:
            return partials
        self.release(partials)
        held = self.alloc(0, kept, "saved", f"{layer.name} kept split-K partial sums",
                          layer.name)
        held.holds = 1
        call.holds.append((held, False))
        return self.alloc(0, max(partials.at(self.batch) - sums, 0), "work",
                          f"{layer.name} split-K padded operands", layer.name)

    def dropout_reads(self, key: tuple) -> bool:
        """Whether only Dropout layers read the tensor ``key``, on a GPU whose float32
        products split as Hopper's do (:meth:`keep_partial_sums`)."""
        return not self.nchw_float32 and self._all_readers(
            key, lambda reader: reader.type == "Dropout")

    def merged_result(self, li: int, ci: int, input_keys: list) -> Optional[Buffer]:
        """The one result of the product XLA merges this Dense call's into
        (:meth:`merged_siblings`), of which the call's output is a slice: made at the first
        call of the group to run, with a reference for each call's output, so that it lives
        until the last of them dies.  None where the call is merged with none, a size is
        open, or a call writes a prediction (the step's output)."""
        group = self.merged_siblings(li, ci, input_keys[0]) if len(input_keys) == 1 else []
        if not group:
            return None
        key = tuple(group)
        found = self.merged_results.get(key)
        if found is not None:
            return found
        layers = [self.graph.layers[lj] for lj, _ in group]
        if self.step_outputs is not None and any(
                self.is_output(layer, lj, cj, 0) for layer, (lj, cj) in zip(layers, group)):
            return None
        sizes = [self.sizes(layer, layer.output_shapes[cj], self.compute_bytes)
                 for layer, (_, cj) in zip(layers, group)]
        if any(len(one) != 1 or one[0] is None for one in sizes):
            return None
        names = " and ".join(layer.name for layer in layers)
        per_sample = sum(one[0][0] for one in sizes)
        fixed = sum(one[0][1] for one in sizes)
        kept = self.kept_merged_partials(group, layers)
        label = f"{names} outputs (one merged product)"
        if kept > per_sample * self.batch + fixed:
            per_sample, fixed = 0, kept
            label = f"{names} split-K partial sums (one merged product, kept)"
            self.partials_kept.add(key)
        found = self.alloc(per_sample, fixed, "live", label, layers[0].name,
                           refs=len(group))
        self.merged_results[key] = found
        self.merged_first.add((li, ci))
        return found

    def kept_merged_partials(self, group: list, layers: list) -> int:
        """The bytes of a split merged product's partial sums where XLA keeps them as its
        result: where every call's output is read only by element-wise calls (sums,
        activations, normalisations), whose loop fusions sum the partials as they read them,
        in the forward and again in the backward (H100 plan of three residual blocks of
        Dense(512) + Dense(512, relu) on one input, added into LayerNormalization, at batch
        256: each merged product's ``f32[4, 256, 1024]`` kept from its forward to the
        branch's backward, no sum written; -21.1% with the sums counted).  0 elsewhere."""
        shape = layers[0].input_shapes[group[0][1]] if layers[0].input_shapes else None
        if not (self.train and not self.gemm_workspace and not self.nchw_float32
                and self.compute_bytes in (2, 4) and isinstance(shape, tuple) and shape
                and all(isinstance(d, int) for d in shape[1:])):
            return 0  # (Hopper's splits: the A100 splits these products less or not at all)
        if not all(self._all_readers((lj, cj, 0), loop_fused) for lj, cj in group):
            return 0
        units = sum(_units(layer) for layer in layers)
        return partial_sum_bytes(self.product_rows(shape), shape[-1], units,
                                 not self.nchw_float32)

    def merged_split_partials(self, layer, li: int, ci: int, input_keys: list,
                              in_shape) -> Optional[Buffer]:
        """The split-K partial sums of a merged product (:meth:`merged_result`), as one
        product of the calls' summed widths, at the call that runs it (the first of them);
        the others run no product of their own (H100 plan of Dense(512) and
        Dense(512, relu) on a 256-wide input at batch 256: one 1024-wide product, not
        split, where each alone splits in four)."""
        group = self.merged_siblings(li, ci, input_keys[0])
        if (li, ci) not in self.merged_first or tuple(group) in self.partials_kept:
            return None  # (kept partial sums: the result itself)
        units = sum(_units(self.graph.layers[lj]) for lj, _ in group)
        return self.split_partials(layer, in_shape, backward=False, units=units)

    def concatenated_kernels(self, layer, key) -> list:
        """Dense layers that read the same tensor: XLA runs their products as one, over
        their kernels concatenated (written, then read by the merged product) at the first
        of them (H100 plans of two Dense(32) heads on a Dense(64): ``f32[64, 64]`` beside
        the product)."""
        if not self.merges_products(layer) or key in self.kernels_concatenated:
            return []
        readers = [self.graph.layers[li] for li, _ in self.consumers.get(key, [])]
        readers = [r for r in readers if r.type == "Dense" and _units(r)]
        if len(readers) < 2 or concatenated_in_product([_units(r) for r in readers]):
            return []
        self.kernels_concatenated.add(key)
        size = sum(w.size for r in readers for w in r.weights if len(w.shape) == 2)
        return [self.alloc(0, size * self.compute_bytes, "work",
                           f"{layer.name} and its siblings' concatenated kernels", layer.name)]

    def merged_kernel_gradients(self, call: "_Call") -> Optional[Buffer]:
        """Dense layers that read the same tensor, whose output gradients are all made: XLA
        merges their kernel gradients' products (``x.T @ dy``, which share ``x``) into one,
        over the output gradients concatenated (written), split as a product of the summed
        widths; the later layers' backward makes none.  Returns the concatenation and the
        partial sums, one transient (None where no sibling qualifies)."""
        if not (self.merges_products(call.layer) and call.inputs) \
                or self.keep_all_grads() or self.profile.weight_gradients == "kept":
            return None
        x = call.inputs[0]
        siblings = [c for c in self.later_calls
                    if c.layer.type == "Dense" and c.trains and not c.kernel_merged
                    and c.inputs and c.inputs[0] is x and c.layer.name not in self.weight_grads]
        group = [call] + siblings
        grads = [t.grad for c in group for t in c.outputs]
        if not siblings or any(g is None for g in grads):
            return None
        widths = [_units(c.layer) for c in group]
        if not all(widths):
            return None
        for c in siblings:  # their gradients come out of the same product, now
            c.kernel_merged = True
            self.weight_grads[c.layer.name] = self.alloc(
                0, self.trainable_bytes(c.layer), "gradients",
                f"{c.layer.name} weight gradients", c.layer.name)
        if concatenated_in_product(widths):  # the product reads the gradients as they are
            per_sample, fixed = 0, 0
        else:
            per_sample = sum(g.per_sample for g in grads)
            fixed = sum(g.fixed for g in grads)
        shape = call.layer.input_shapes[0] if call.layer.input_shapes else None
        partials = None if self.nchw_float32 else self.split_partials(
            call.layer, shape, backward=False, kernel=True, units=sum(widths))
        size = partials.at(self.batch) if partials is not None else 0
        self.release(partials)
        return self.alloc(per_sample, fixed + size, "work",
                          f"{call.layer.name} and its siblings' concatenated output "
                          "gradients", call.layer.name)

    def kernel_gradient_partials(self, layer) -> Optional[Buffer]:
        """The partial sums of a Dense kernel gradient's product ``x.T @ dy``, which XLA
        splits along its contracting dimension, the rows (the batch), as it splits the
        forward's (:meth:`split_partials`), and done before the input gradient's product:
        H100 plans of 784-512-512-10 MLPs at batch 1024, the second layer's
        ``f32[4, 512, 512]`` at its kernel gradient's moment (a ReLU MLP: memlint 12.8%
        under without it, exact with it), of Dense layers over 8 x 20 inputs at batch 32
        (``f32[8, 64, 64]``: -12.6% -> -6.1%).  Not on the A100, whose float32 plans split
        these products in fewer slices or not at all (+0.1% -> +7.5% there)."""
        if self.nchw_float32:  # the A100 splits these in fewer slices or not at all
            return None
        shape = layer.input_shapes[0] if layer.input_shapes else None
        return self.split_partials(layer, shape, backward=False, kernel=True)

    def split_partials(self, layer, in_shape, backward: bool, kernel: bool = False,
                       units: int = 0) -> Optional[Buffer]:
        """The partial sums of a Dense product XLA splits along its contracting dimension
        (:mod:`memlint.memory.gemm_split`) where products are Triton fusions (Ampere and
        Hopper): float32 and 16-bit products, the forward's ``x @ W`` and the backward's
        ``dy @ W.T``, and with ``kernel`` the kernel gradient's ``x.T @ dy``."""
        if self.split_partials_skipped(layer, in_shape):
            return None
        units = units or _units(layer)
        if not units:
            return None
        rows, features = self.product_rows(in_shape), in_shape[-1]
        # mixed precision casts the kernel for the product: the cast is the padded copy
        cast = self.prec.policy.startswith("mixed_")
        # before Hopper (the A100) short contracting sizes are taken as not split
        short = not self.nchw_float32
        if kernel:
            size = partial_bytes(features, rows, units, self.compute_bytes, not cast, short,
                                 transposed=True)
        elif backward:
            size = partial_bytes(rows, units, features, self.compute_bytes, not cast, short)
        else:
            size = partial_bytes(rows, features, units, self.compute_bytes, not cast, short)
        if not size:
            return None
        what = "kernel gradient's split-K partial sums" if kernel else "split-K partial sums"
        return self.alloc(0, size, "work", f"{layer.name} {what}", layer.name)

    def split_input_gradient(self, call: "_Call", in_shape, scratch: list) -> None:
        """The moments of a Dense's input gradient ``dy @ W.T`` (:meth:`split_partials`).
        Where XLA splits it (a Triton product) and the output's gradient ``dy`` has no
        reader after it (the kernel's gradient, made at the layer, not deferred, has read
        it), the product's slices are written while it reads ``dy``, then ``dy`` dies and
        the slices are summed into the input's gradient: ``dy`` and the input's gradient
        are never alive at once.  Where the contracting size (the units) is padded
        (:func:`~memlint.memory.gemm_split.padded_left_bytes`), the product reads a padded
        copy of ``dy``, which dies as the copy is written: a moment with both, then the
        copies and the slices.  H100 plans at batch 32 (Adam): Dense(128, relu) ->
        Dense(1000, softmax) over 20 positions, the padded ``f32[640, 1024]`` copy, the
        kernel's padded copy and ``f32[8, 640, 128]`` slices at the peak with neither
        gradient beside them; with 256 classes (not padded) the slices beside ``dy``, the
        input's gradient only once ``dy`` is gone.  Elsewhere, and under plain SGD where
        the units are not padded, one moment holds ``dy``, the input's gradient and the
        product's partial sums."""
        layer, name = call.layer, call.layer.name
        out = self.read_last_by_input_gradient(call, in_shape, scratch)
        padded = 0
        if out is not None:
            rows, units, features = self.product_rows(in_shape), _units(layer), in_shape[-1]
            short = not self.nchw_float32
            padded = padded_left_bytes(rows, units, features, self.compute_bytes, short=short)
            if self.plain_sgd and not padded:
                # plain SGD updates the kernel in place before this product, which reads a
                # copy of it the forward made (H100 plan of a 784-512-512-10 ReLU MLP at
                # batch 256: f32[512, 512] beside the slices), a copy the walk does not
                # hold: the gradients' moment stands in for it (7.0% under without)
                out = None
        if out is None:
            partials = self.split_partials(layer, in_shape, backward=True)
            self.event("backward", name)
            self.release(partials)
            return
        dy = out.grad
        written = [t.grad for t in call.inputs if t.grad is not None and t.grad.refs == 1
                   and t.grad.label == f"gradient of {name}'s input"]
        for buf in written:  # summed from the slices once the product is done
            self.suspend(buf)
        if padded:
            copy = self.alloc(0, padded, "work", f"{name} padded output gradient", name)
            self.event("backward", name)
            self.release(copy)  # (counted again with the product's other buffers)
            self.release(dy)
        partials = self.split_partials(layer, in_shape, backward=True)
        self.event("backward", name)
        if not padded:
            self.release(dy)
        out.grad = None
        self.release(partials)
        sums = self.alloc(0, partial_sum_bytes(rows, units, features, short), "work",
                          f"{name} split-K partial sums", name)
        for buf in written:
            self.resume(buf)
        self.event("backward", name)
        self.release(sums)

    def read_last_by_input_gradient(self, call: "_Call", in_shape, scratch: list):
        """The output (a tensor) of a Dense call whose gradient XLA's split input-gradient
        product reads last (:meth:`split_input_gradient`), or None."""
        layer = call.layer
        out = call.outputs[0] if len(call.outputs) == 1 else None
        dy = out.grad if out is not None else None
        if dy is None or dy.refs != 1 or dy.companions or not (dy.per_sample or dy.fixed) \
                or not _units(layer) or self.split_partials_skipped(layer, in_shape) \
                or any(b.label == f"gradient of {layer.name}'s pre-activation"
                       for b in scratch):
            return None  # (the product reads a gradient of the pre-activation, if any)
        if call.trains and layer.name not in self.weight_grads:
            return None  # the kernel's gradient, deferred, reads it later
        if call.sums_in_activation:
            # GELU, swish: the activation's backward reads the forward's partial sums
            # again, and the gradients meet (H100 plans of 784-512-512-10 MLPs at batch
            # 256: 10.7% under without them at once)
            return None
        if not split_k(self.product_rows(in_shape), _units(layer), in_shape[-1],
                       not self.nchw_float32):
            return None
        return out

    def suspend(self, buf: Buffer) -> None:
        """Take ``buf`` out of what is alive for a moment (its references kept): a buffer
        a later moment of the same call writes."""
        if id(buf) in self.live:
            self._leave(buf)

    def resume(self, buf: Buffer) -> None:
        """Put a :meth:`suspend`-ed buffer back among what is alive."""
        if buf.refs > 0 and (buf.per_sample or buf.fixed) and id(buf) not in self.live:
            self._enter(buf)

    def split_partials_skipped(self, layer, in_shape) -> bool:
        """Whether :meth:`split_partials` makes nothing for ``layer`` (not a Triton
        product of known shape)."""
        return not (self.profile.sign == "xla" and not self.gemm_workspace
                    and self.compute_bytes in (2, 4) and layer.type == "Dense"
                    and isinstance(in_shape, tuple) and in_shape
                    and all(isinstance(d, int) for d in in_shape[1:]))

    def one_update_at_a_time(self, layers: list) -> Optional[Buffer]:
        """Where XLA updates only after every gradient is made (loss scaling, data
        parallelism), it updates the variables one layer at a time; a convolution's update
        writes the new kernel and each slot's new value, in the variables' dtype, to
        buffers of their own (the update reads cuDNN's gradient transposed, and under loss
        scaling selects between the new and the old values), then copies them into the
        donated state: the largest convolution's are counted.  A matrix product's kernel is
        updated in place (MLPs under mixed_float16 take no such buffers).  H100 plan of
        three 3x3x256x256 ReLU convolutions under mixed_float16 with Adam at batch 4: three
        float32 kernel-sized buffers beside the 16-bit kernel gradients not yet applied
        (memlint was 19% under without them)."""
        size = max((self.trainable_bytes(layer) * self.gradient_copies(layer)
                    for layer in layers if self.library_output(REGISTRY.get(layer.type))),
                   default=0)
        if not size:
            return None
        return self.alloc(0, size, "gradients", "the largest layer's update")

    def keep_all_grads(self) -> bool:
        """Loss scaling (mixed_float16) under XLA checks every gradient before any update;
        data parallelism reduces every gradient over the replicas before any update."""
        return (self.prec.loss_scaling and self.profile.sign == "xla") or self.data_parallel

    @property
    def partitioned(self) -> bool:
        """One XLA program partitioned over several devices (Keras 3's ``keras.distribution``:
        ``DataParallel`` / ``ModelParallel``).  XLA's SPMD partitioner simplifies the
        attention einsums so that cuBLAS reads the scores transposed through its dimension
        numbers instead of through copies (measured: T4 plans of a transformer over 2, 4 and
        8 devices keep three score-sized buffers at the softmax's backward where the
        one-device program keeps five)."""
        strategy = self.setup.strategy or ""
        return self.profile.sign == "xla" and strategy.rsplit(".", 1)[-1] in (
            "DataParallel", "ModelParallel") and (
            (self.setup.replicas or 1) > 1 or bool(self.setup.shards))

    @property
    def data_parallel(self) -> bool:
        return self.train and (self.setup.replicas or 1) > 1

    def all_reduce_copy(self) -> Optional[Buffer]:
        """Data parallelism: the gradients copied into the buffers the all-reduce runs on
        (XLA's all-reduce combiner concatenates every gradient up to 30 MiB; TensorFlow's
        NCCL packing and PyTorch DDP's buckets copy them likewise), alive beside the
        gradients themselves (measured: docs/gpu-verification.md, several GPUs)."""
        if not self.data_parallel:
            return None
        limit = ALL_REDUCE_COMBINE_BYTES if self.profile.sign == "xla" else None
        size = 0
        for layer in self.graph.layers:
            for w in layer.weights:
                if w.trainable:
                    one = w.size * (w.itemsize or self.prec.variable_bytes)
                    if limit is None or one <= limit:
                        size += one
        if not size:
            return None
        return self.alloc(0, size, "scratch", "gradients combined for the all-reduce")

    def unhold(self, item) -> None:
        if isinstance(item, Buffer):
            item.holds = max(0, item.holds - 1)
            self.release(item)
            return
        item.holds -= 1
        item.buf.holds -= 1
        self.maybe_free(item)

    def channels_first_memory(self, layer, kind, ins, in_shape) -> bool:
        """Whether a call's output, channels-last data, lies channels-first in memory under
        torch: Keras's torch backend convolves over one axis the input permuted to
        channels-first and permutes the result back as a view, and element-wise calls keep
        their inputs' strides, so a Conv1D reading such a tensor finds it contiguous once
        permuted and copies nothing (torch steps of keras.io-style Conv1D residual stages:
        autograd keeps the ReLUs' outputs and no copy per convolution).  So does a transposed
        convolution of any rank, which convolves its input's channels-first copy and writes a
        channels-first result (PyTorch's trace of Conv2DTranspose -> LeakyReLU -> Conv2D:
        the Conv2D's input contiguous once permuted, one channels-last copy made of it, not
        two; keras.io's DCGAN generator's torch steps +28.2% / +33.2% -> +12.2% / +8.4%, two
        convolutional autoencoders' +12.7% / +13.8% -> +6.1% / +9.4%)."""
        if self.profile.name != "torch" or kind is None:
            return False
        if kind.family == "convolutional":
            return (layer.config or {}).get("data_format") != "channels_first" \
                and isinstance(in_shape, tuple) and (
                    len(in_shape) == 3 or kind.class_name.endswith("Transpose"))
        elementwise = elementwise_call(layer, kind) or layer.type in _FUSIBLE
        return bool(elementwise and ins and all(t.channels_first_memory for t in ins))

    def read_by_fusion(self, grad: Buffer, call: "_Call", dy: Optional[Buffer]) -> None:
        """Keep what a call's backward reads (its output gradient ``dy`` and the buffers it
        kept) until the fusion that computes its input gradient ``grad`` as it reads it runs:
        XLA's scatter of an embedding's table gradient reads cuDNN's input gradient of the
        convolution after a Dropout and the dropout's mask, after making the zero table (H100
        plan of keras.io's Conv1D text classifier at batch 32: -3.8% with them released at
        the dropout's backward, -0.8% kept)."""
        kept = [item for item, _ in call.holds if isinstance(item, Buffer)]
        for buf in [dy] + kept if dy is not None else kept:
            self.ref(buf)
            grad.companions += (buf,)

    def finish_call(self, call: "_Call") -> None:
        for t in call.outputs:
            if t.grad is not None:
                self.release(t.grad)
                t.grad = None
        for item, _ in call.holds:
            self.unhold(item)
        call.holds = []


_NO_CAST = frozenset({"BatchNormalization", "LayerNormalization", "GroupNormalization",
                      "Normalization"})


# A transposed convolution's backward scratch Walk.transposed_backward makes in order.
_DILATED_MINOR = "dilated input, batch-minor"
_TRANSPOSED_SCRATCH = frozenset({"padded output gradient", "output gradient, batch-minor",
                                 _DILATED_MINOR})
# Max pooling's select-and-scatter scratch (memlint/layers/pooling.py).
_WINDOW_SCRATCH = frozenset({"window indices", "window values"})
# Layers whose input gradient is a broadcast of their output's.
_BROADCAST_BACKWARD = frozenset({
    "GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAveragePooling3D",
    "RepeatVector"})
_RESHAPES = frozenset({"Flatten", "Reshape"})
# Layers whose input gradients are their output's gradient, passed on without a buffer of
# their own (a sum's inputs get its gradient as it is; a concatenation's, slices of it).
_PASSTHROUGH = frozenset({"Add", "Subtract", "Average", "Concatenate"})


class _Call:
    """One walked layer call, kept for its backward."""

    def __init__(self, layer, inputs, outputs, trains, needs_dx, passthrough):
        self.layer = layer
        self.inputs, self.outputs = inputs, outputs
        self.trains, self.needs_dx = trains, needs_dx
        self.passthrough = passthrough  # its input gradients are its output's (no buffer)
        self.holds: list = []  # (tensor or buffer, needed only for the weight gradient)
        # a split Dense product whose activation sums its partial sums (keep_partial_sums)
        self.sums_in_activation = False
        self.scratch: list = []  # Saved entries allocated while its backward runs
        self.grad_into: Optional[Buffer] = None  # a kept buffer its input gradient reuses
        self.relayout: Optional[Buffer] = None  # the kernel's copy kept from the forward
        # its input recomputed from a normalisation fused into it: its input gradient is a
        # buffer of its own (unless the output gradient is a broadcast)
        self.fused_normalization = False
        # XLA: its activation's backward reads its output and writes a buffer of its own
        self.select_reads_output = False
        # XLA: its activation's select written beside the output's gradient, before the rest
        # of its backward (XlaFusion.select_written_apart)
        self.select_apart = False
        self.kernel_merged = False  # its kernel's gradient made by a sibling's product
        self.batches = 1  # how many batches its tensors hold (LayerNode.call_batches)


def _writes_activation(layer) -> bool:
    """Whether a call's output is an activation function's: an activation layer or a
    layer's own ``activation=`` other than linear."""
    kind = REGISTRY.get(layer.type)
    if kind is not None and kind.family == "activations":
        return True
    activation = (layer.config or {}).get("activation")
    return activation not in (None, "linear")


def _window_pooling(layer, kind) -> bool:
    """A max or average pooling over windows of channels-last data."""
    return kind is not None and kind.family == "pooling" \
        and not layer.type.startswith("Global") \
        and (layer.config or {}).get("data_format") != "channels_first"


def _needed(s: Saved, trains: bool, needs_dx: bool) -> bool:
    if s.needed_for == "weights":
        return trains
    if s.needed_for == "inputs":
        return needs_dx
    return trains or needs_dx


def _order(layers: list, by_name: dict, writes=None) -> tuple:
    """(layer index, call) pairs in an execution order, and the calls XLA merges into one
    product (each mapped to its group).  Without ``writes``: producers before consumers,
    else the graph's own order, and no merged calls.  With ``writes`` (a call's per-sample
    bytes written): the order of XLA's list scheduler (``_freeing_order``) with the calls
    of a shared Dense layer merged (``_merged_products``)."""
    calls = []
    for li, layer in enumerate(layers):
        count = 0 if layer.idle else max(len(layer.inbound), len(layer.output_shapes), 1)
        calls += [(li, ci) for ci in range(count)]
    deps: dict = {node: set() for node in calls}
    users: dict = {node: [] for node in calls}
    for li, ci in calls:
        layer = layers[li]
        inbound = layer.inbound[ci] if ci < len(layer.inbound) else []
        for name, call, _ in inbound:
            lj = by_name.get(name)
            if lj is None or (lj, call) not in deps or (lj, call) == (li, ci):
                continue
            if (lj, call) not in deps[(li, ci)]:
                deps[(li, ci)].add((lj, call))
                users[(lj, call)].append((li, ci))
    if writes is None:
        return _graph_order(calls, deps, users), {}
    group_of = _merged_products(layers, calls, {node: set(deps[node]) for node in calls})
    return _freeing_order(layers, calls, deps, users, group_of, writes), group_of


def _graph_order(calls: list, deps: dict, users: dict) -> list:
    """Producers before consumers, ties in the graph's own order."""
    deps = {node: set(d) for node, d in deps.items()}
    ready = [node for node in calls if not deps[node]]
    heapq.heapify(ready)
    out, seen = [], set()
    while ready:
        node = heapq.heappop(ready)
        if node in seen:
            continue
        out.append(node)
        seen.add(node)
        for user in users[node]:
            deps[user].discard(node)
            if not deps[user] and user not in seen:
                heapq.heappush(ready, user)
    out += [node for node in calls if node not in seen and node not in out]
    return out


def _freeing_order(layers: list, calls: list, deps: dict, users: dict,
                   group_of: dict, writes) -> list:
    """Of the ready calls (a merged product's calls count as one, ready when all are), the
    one that frees the most per sample net of what it writes (outputs and forward scratch:
    XLA's list scheduler weighs bytes freed against bytes defined); ties go to a call that
    reads the last one's output, then to the graph's order."""
    producers = {node: set(deps[node]) for node in calls}
    left = {node: len(users[node]) for node in calls}
    waiting = {node: set(d) for node, d in deps.items()}
    done: set = set()
    out: list = []

    def size(n):  # what freeing the call's output gives back (the step's inputs: nothing)
        layer = layers[n[0]]
        if layer.type in INPUT_TYPES:
            return 0
        shape = layer.output_shapes[n[1]] if n[1] < len(layer.output_shapes) else None
        return sum(x or 0 for x in output_bytes(layer, shape, 1, 4)) if shape else 0

    def gain(group):
        return sum(size(p) for n in group for p in producers[n] if left[p] == 1) \
            - sum(writes(n) for n in group)

    runnable = {n for n in calls if not waiting[n]}
    while len(done) < len(calls):
        ready = {group_of.get(n, (n,)) for n in runnable}
        ready = [g for g in ready if all(n in runnable for n in g)]
        if not ready:  # a cycle or a group that cannot run together: graph order
            out += _graph_order([n for n in calls if n not in done],
                                {n: waiting[n] - done for n in calls if n not in done},
                                {n: [u for u in users[n] if u not in done] for n in calls})
            break
        last = out[-1] if out else None
        group = min(ready, key=lambda g: (-gain(g),
                                          not any(last in producers[n] for n in g), g))
        for node in group:
            out.append(node)
            done.add(node)
            runnable.discard(node)
            for producer in producers[node]:
                left[producer] -= 1
            for user in users[node]:
                waiting[user].discard(node)
                if not waiting[user] and user not in done:
                    runnable.add(user)
    return out


def _merged_products(layers: list, calls: list, producers: dict) -> dict:
    """Calls of one Dense layer that do not depend on each other: XLA merges their matrix
    products (which share the kernel) into one, so they run together.  Maps each such call
    to its group."""
    by_layer: dict = {}
    for node in calls:
        if layers[node[0]].type == "Dense":
            by_layer.setdefault(node[0], []).append(node)
    shared = [group for group in by_layer.values() if len(group) > 1]
    if not shared:
        return {}
    ancestors: dict = {}
    for node in calls:  # calls are listed producers first within a layer's own order
        ancestors[node] = set()
    changed = True
    while changed:  # transitive closure over the (small) call graph
        changed = False
        for node in calls:
            new = set(producers[node])
            for p in producers[node]:
                new |= ancestors[p]
            if new - ancestors[node]:
                ancestors[node] |= new
                changed = True
    out = {}
    for group in shared:
        if all(a not in ancestors[b] for a in group for b in group):
            for node in group:
                out[node] = tuple(group)
    return out
