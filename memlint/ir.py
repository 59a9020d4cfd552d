"""The model graph that every frontend produces and every later stage reads.

A frontend (Keras source, later ONNX) turns its input into :class:`ModelGraph` objects:
layers with exact output shapes and weights, the source location of each, and the training
setup it found.  Shapes follow Keras's convention: a tuple whose first entry is the batch
dimension (``None``) and whose other entries are ints, or ``None`` where a dimension is not
known statically.
"""

from __future__ import annotations

from dataclasses import field, replace
from math import prod
from typing import Any, Optional, Union

from memlint.records import record

Shape = tuple  # tuple[int | None, ...], batch dimension first
OutputShape = Union[Shape, list]  # a list of shapes for layers with several outputs


@record(frozen=True)
class Location:
    """Where something is in the analysed file (1-based lines and columns)."""

    path: str
    line: int
    column: int = 1
    end_line: Optional[int] = None
    end_column: Optional[int] = None
    node: Optional[str] = None  # a node of a graph file (ONNX), which has no source lines

    def __str__(self) -> str:
        if self.node is not None:
            return f"{self.path}: node {self.node}"
        return f"{self.path}:{self.line}:{self.column}"


@record(frozen=True)
class Weight:
    """One variable of a layer: its shape and whether the optimizer updates it."""

    name: str
    shape: tuple
    trainable: bool = True
    itemsize: Optional[int] = None  # bytes per element when the source fixes it (ONNX
    #                                 initializers); None: the dtype policy decides

    @property
    def size(self) -> int:
        return prod(self.shape) if self.shape else 1


@record
class Unresolved:
    """Something the analysis could not determine, and why."""

    what: str
    reason: str
    location: Optional[Location] = None

    def as_dict(self) -> dict:
        loc = self.location
        return {
            "what": self.what,
            "reason": self.reason,
            "line": loc.line if loc else None,
            "column": loc.column if loc else None,
        }


@record
class LayerNode:
    """One layer of a model with its resolved shapes and weights.

    ``output_shapes`` holds the output of every call of the layer (a shared layer is called
    more than once; its weights count once, its activations once per call).  ``input_shapes``
    holds the matching inputs.
    """

    name: str
    type: str
    location: Optional[Location]
    config: dict = field(default_factory=dict)
    weights: list = field(default_factory=list)  # list[Weight]
    input_shapes: list = field(default_factory=list)  # per call: Shape or list of Shapes
    output_shapes: list = field(default_factory=list)  # per call: Shape or list of Shapes
    inbound: list = field(default_factory=list)  # per call: list of (layer name, call, output)
    inner_shapes: list = field(default_factory=list)  # tensors kept inside (attention scores,
    #                                                   a nested model's layers), all calls
    unresolved: Optional[str] = None  # why this layer's shapes are unknown, if they are
    # per call of a model used as a layer (or a layer class of the file): the layer calls it
    # runs inside (InnerCalls), None where they are not known
    inner_calls: list = field(default_factory=list)
    # the registry layer class the memory model treats the layer as, when ``type`` is a class
    # of the analysed file derived from it (``class ScaledConv2D(Conv2D)``); "" for such a
    # class that builds itself; None: ``type`` is its kind
    kind: Optional[str] = None
    # per call: how many batches its tensors hold along their first axis (a discriminator
    # run on real and generated images joined: 2; 0: a number not known, its tensors not
    # sized); empty when every call holds one
    call_batches: list = field(default_factory=list)
    # built but never run by the step (a subclassed model's EMA copy or target network, a
    # layer it never calls): its weights count, it makes no tensor
    idle: bool = False

    def batches_of(self, call: int) -> int:
        """How many batches call ``call``'s tensors hold (1 unless ``call_batches`` says;
        0: not known)."""
        return self.call_batches[call] if call < len(self.call_batches) else 1

    @property
    def output_shape(self) -> Optional[OutputShape]:
        return self.output_shapes[0] if self.output_shapes else None

    @property
    def input_shape(self):
        return self.input_shapes[0] if self.input_shapes else None

    @property
    def trainable_params(self) -> int:
        return sum(w.size for w in self.weights if w.trainable)

    @property
    def non_trainable_params(self) -> int:
        return sum(w.size for w in self.weights if not w.trainable)

    @property
    def params(self) -> int:
        return sum(w.size for w in self.weights)


@record
class ModelNode(LayerNode):
    """A functional model used as a layer. Keras reports its own output (``layer.output``,
    from the model's own inputs: (None, None, 8) even when called on a sequence of 12); the
    calls' real outputs stay in ``output_shapes`` for the memory model."""

    own_output: Any = None

    @property
    def output_shape(self):
        return self.own_output if self.own_output is not None else super().output_shape


@record
class InnerCalls:
    """What one call of a model used as a layer (or of a layer class of the file) runs
    inside: one node per layer call, in execution order, each with one call whose ``inbound``
    names the nodes inside by ``(name, call id, output)``; ``ids`` holds each node's call id.
    A reference to ``inputs`` (or an empty ``inbound``) reads the outer call's inputs;
    ``outputs`` says which tensor inside is each output of the outer call."""

    nodes: list  # list[LayerNode], one call each
    ids: list  # the call id of each node's call
    inputs: dict = field(default_factory=dict)  # (name, call id) -> outer input position
    outputs: list = field(default_factory=list)  # per outer output: (name, call id, output)
    # a Functional or Sequential model's call: its tensor map holds every output made inside
    # until the call returns (a layer class's call() holds only what its locals name)
    mapped: bool = False


@record
class OptimizerSpec:
    """The optimizer found in the code, with the arguments that change its memory."""

    name: str = "sgd"  # canonical lower-case Keras name: sgd, adam, adamw, rmsprop, ...
    options: dict = field(default_factory=dict)  # momentum, amsgrad, centered, use_ema, ...
    source: str = "default"  # where it came from: "compile()", "--optimizer", "default"


@record
class TrainingSetup:
    """How the model is used: mode, batch size, optimizer, precision, and where each came from."""

    mode: str = "train"  # "train" or "infer"
    mode_source: str = "default"
    batch_size: Optional[int] = None
    batch_source: str = "unknown"
    optimizer: OptimizerSpec = field(default_factory=OptimizerSpec)
    # the optimizers of the model's later compile() calls (a recompile for fine-tuning):
    # the analysis keeps the one with the most state (memlint.memory.optimizers.heaviest)
    later_optimizers: list = field(default_factory=list)  # list[OptimizerSpec]
    dtype_policy: str = "float32"  # float32, float16, mixed_float16, mixed_bfloat16, ...
    dtype_source: str = "default"
    location: Optional[Location] = None  # the call (fit, train_on_batch, predict) that set the mode
    backend: Optional[str] = None  # tf, jax, torch (None: not known; v1 model, no profile)
    backend_source: str = "not stated in the code"
    jit_compile: Optional[bool] = None  # compile(jit_compile=...) when the code sets it
    # the loss compile() names, as Keras's canonical function name (None: not known, a
    # custom function, or no compile), and where it came from
    loss: Optional[str] = None
    loss_source: str = ""
    # where compile() gives one loss per output: a list in the model's output order, or a
    # dict by output name, of canonical names ("" for an output given no loss, None for one
    # not known); None where one loss serves every output
    output_losses: Optional[object] = None
    # what the model is fed: one element shape per model input, batch dimension excluded
    # (None: not known from the code), and where it came from (with the line)
    data_shapes: Optional[list] = None
    data_names: Optional[list] = None  # dict keys of the data, matched to input names
    data_source: str = ""
    # False where the training call is given arrays and no targets (fit(x) of a model whose
    # loss is its own add_loss): the step gets none; None where not known
    targets_given: Optional[bool] = None
    # where the step also differentiates the model's input (a style transfer's image, an
    # adversarial example's input): every layer between it and the loss runs its backward,
    # frozen or not; and whether an optimizer updates that input (its slots)
    input_gradient: str = ""
    input_optimised: bool = False
    host_data: list = field(default_factory=list)  # list[HostData]: data held in host memory
    # distribution over several GPUs: the strategy (None: one device), how many replicas
    # share the batch (None: as many as there are GPUs, a number the code does not state),
    # whether ``batch_size`` is already per replica (``64 * num_replicas_in_sync``), the
    # global batch, and variables sharded by a layout map: (regex, devices sharing each)
    strategy: Optional[str] = None
    strategy_source: str = ""
    replicas: Optional[int] = 1
    batch_per_replica: bool = False
    global_batch_size: Optional[int] = None
    shards: list = field(default_factory=list)
    # the models that run this one (as a layer, or holding all its layers), where nothing
    # runs it on its own (no compile, fit, predict, training call): its memory is theirs,
    # and the report leaves it out
    part_of: list = field(default_factory=list)
    part_idle: bool = False  # those models hold it, and their steps never run it
    part_shares: bool = False  # those models run its layers, not the model itself
    # where nothing else runs it, the tf.data map() calls that run it on the pipeline's data
    # ("map() at line 35"): the input pipeline runs on the host, so it has no GPU step, and
    # the report leaves it out
    pipeline: str = ""
    # values the code leaves unknown that the user gave (``--dim vocab_size=20000``), as
    # "vocab_size = 20000 (--dim, line 15)"
    given_values: list = field(default_factory=list)
    # a custom training loop's step that runs this model with others, or several times,
    # under one GradientTape ("the step under the GradientTape at line 85 calls encoder once
    # and decoder 10 times"): the estimate, of one call alone, is a lower bound ("": none)
    shared_step: str = ""
    # that step's calls: [(model name, how many times it calls it)] (memory/shared_steps.py)
    shared_calls: list = field(default_factory=list)
    # a JAX training step of the code's own that does not donate the state it is given
    # (``jax.jit`` without ``donate_argnums``, or no jit): why; its old and new variables and
    # slots are alive at once at the update ("": donated, as Keras's trainer does)
    state_kept: str = ""


@record
class MemoryCap:
    """A setting in the code that limits the GPU memory its process may use or sees, with
    where it is: ``tf-fraction`` / ``jax-fraction`` / ``torch-fraction`` (share of the card),
    ``tf-limit`` (bytes), ``jax-preallocate`` (bool), ``jax-allocator`` (name),
    ``visible-devices`` / ``logical-devices`` (count), ``tf-growth`` (bool)."""

    kind: str
    value: object
    source: str  # e.g. "per_process_gpu_memory_fraction = 0.6 (line 12), given to a Session"
    location: Optional[Location] = None


@record
class HostData:
    """Data the code holds in host memory and hands to Keras at once (an in-memory array
    given to ``fit``/``predict``/``from_tensor_slices``): what it is, its size, where."""

    what: str  # e.g. "x_train passed to fit()" or "arrays given to from_tensor_slices()"
    bytes: int
    shape: tuple  # the array's full shape (samples first)
    dtype: str
    location: Optional[Location] = None


@record
class ModelGraph:
    """A model found in the input: its layers in Keras's order and its training setup."""

    name: str
    location: Optional[Location]
    kind: str = "Sequential"  # Sequential, Functional
    variable: Optional[str] = None  # the name the model was assigned to, if any
    layers: list = field(default_factory=list)  # list[LayerNode]
    input_shapes: list = field(default_factory=list)  # model inputs, batch dimension first
    setup: TrainingSetup = field(default_factory=TrainingSetup)
    unresolved: list = field(default_factory=list)  # list[Unresolved]
    # the same model with the unknown input dimensions taken from the data it is fed (as
    # Keras builds it at fit time); its layers carry the fed shapes for the memory model,
    # while ``layers`` keep Keras's own shapes (None where Keras shows None)
    sized: Optional["ModelGraph"] = None
    # why the sizes the data (or --input-shape) gives could not be carried through the
    # model, when they could not: the estimate then has the unknown sizes it had without
    unsized_because: str = ""
    # an exported graph's symbolic input dimensions no --dim binds (ONNX), sorted
    open_dims: tuple = ()
    # the layers the memory model's opened graph took from inside models used as layers
    # (memlint.memory.nesting): a tensor of theirs that nothing reads is not a model output
    opened_inner: tuple = ()  # (a tuple: the result cache stores graphs as JSON)
    # of those, the layers run by a layer class's call() (or a subclassed model's), not by a
    # Functional or Sequential model: no tensor map holds their outputs
    opened_unmapped: tuple = ()
    # operations on tensors the layers read (``x + y``, ``keras.ops.relu``): not layers of
    # the model (no table shows them), but the memory model's gradients flow through them
    operations: list = field(default_factory=list)  # list[LayerNode], one call each
    # a Functional model's outputs, each (layer name, call of the layer in the model, output
    # of the call), where all are layers' (empty: its outputs are the tensors no layer reads)
    outputs: tuple = ()

    def for_memory(self) -> "ModelGraph":
        """The graph the memory model and the budget rules read: sized by its data if it
        can be, else as declared, and with a batch its shapes recorded opened again (the
        step runs at the batch it is fed)."""
        return with_open_batch(self.sized if self.sized is not None else self)

    @property
    def trainable_params(self) -> int:
        return sum(layer.trainable_params for layer in self.layers)

    @property
    def non_trainable_params(self) -> int:
        return sum(layer.non_trainable_params for layer in self.layers)

    @property
    def params(self) -> int:
        return self.trainable_params + self.non_trainable_params


def shape_size(shape: Shape, batch_size: int) -> Optional[int]:
    """Number of elements in a tensor of ``shape`` with the batch dimension set; None if unknown."""
    if shape is None:
        return None
    dims = list(shape)
    if dims and dims[0] is None:
        dims[0] = batch_size
    if any(d is None for d in dims):
        return None
    return prod(dims) if dims else 1


def as_shape_list(shape: Optional[OutputShape]) -> list:
    """A layer output as a list of shapes (one entry for single-output layers)."""
    if shape is None:
        return []
    if isinstance(shape, list):
        return shape
    return [shape]


def recorded_batch(graph) -> Optional[int]:
    """The batch size a Keras graph's shapes carry when its inputs fix one (a subclassed
    model first called on a NumPy batch of 2, ``Input(batch_size=...)``,
    ``batch_input_shape=``); None when the batch dimension is open (or for ONNX graphs, whose
    leading dimensions need not be the batch)."""
    if graph.kind == "ONNX" or not graph.input_shapes:
        return None
    firsts = {shape[0] if shape else None for shape in as_shape_list(graph.input_shapes)}
    if len(firsts) != 1:
        return None
    first = firsts.pop()
    return first if isinstance(first, int) and not isinstance(first, bool) else None


def with_open_batch(graph):
    """``graph`` with the batch dimension its shapes recorded opened again (None), so that
    the step is sized by the batch it really runs at (a model first called on 2 samples and
    trained at 256 keeps 256 samples' activations); ``graph`` itself where nothing is fixed.
    Keras layer outputs are batch first, so the leading dimension equal to the recorded batch
    is the one opened."""
    fixed = recorded_batch(graph)
    if fixed is None:
        return graph

    def open_(value):
        if isinstance(value, tuple):
            if value and all(d is None or isinstance(d, (int, str)) for d in value):
                return (None,) + value[1:] if value[0] == fixed else value
            return tuple(open_(v) for v in value)
        if isinstance(value, list):
            return [open_(v) for v in value]
        return value

    def reopened(layer):
        extra = {"own_output": open_(layer.own_output)} if hasattr(layer, "own_output") else {}
        inner = [None if calls is None else
                 replace(calls, nodes=[reopened(node) for node in calls.nodes])
                 for calls in layer.inner_calls]
        return replace(layer, input_shapes=open_(layer.input_shapes),
                       output_shapes=open_(layer.output_shapes),
                       inner_shapes=open_(layer.inner_shapes), inner_calls=inner, **extra)

    return replace(graph, layers=[reopened(layer) for layer in graph.layers],
                   input_shapes=open_(graph.input_shapes), sized=None)
