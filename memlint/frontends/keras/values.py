"""Abstract values the Keras frontend computes with.

Plain Python values (int, float, str, bool, None, tuple, list, dict) stand for themselves.
Everything else the analysed code can produce is one of the classes below, or
:class:`~memlint.layers.base.Unknown` when it cannot be determined statically.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Optional

from memlint.ir import Location, OptimizerSpec
from memlint.layers.base import LayerInstance, Unknown
from memlint.records import record

__all__ = ["Ref", "Tensor", "Array", "LayerRef", "OpaqueLayer", "TensorOp", "UserFunction",
           "ModelLayer", "ModuleValue", "SequentialModel",
           "FunctionalModel", "Optimizer", "BoundMethod", "Policy", "Partial", "Unknown",
           "flatten_structure", "is_hashable", "is_unknown", "OPEN", "LoopIndex", "Rows"]


def is_unknown(value: Any) -> bool:
    return isinstance(value, Unknown)


# a slice bound of NumPy or pandas data not known statically (``x[:split]``): the axis it
# slices has an open length, the others keep theirs
OPEN = Unknown("slice bound not known statically")


@record(frozen=True)
class LoopIndex:
    """The index of a loop of unknown length, plus ``offset`` (``i - 60``), while its body
    runs once for the rows it appends (:mod:`.row_loops`): two such bounds of one slice
    fix its length (``x[i - 60:i]``: 60)."""

    offset: int = 0


@record(eq=False)
class Rows:
    """A list a loop of unknown length filled, one ``element`` an iteration (sliding
    windows of a series): ``np.array`` of it has open rows of the element's shape."""

    element: Any


def call_arg(args: list, kwargs: dict, index: int, key: str, default: Any = None) -> Any:
    """A call's argument given by position ``index`` or keyword ``key`` (else ``default``)."""
    return args[index] if len(args) > index else kwargs.get(key, default)


@record(frozen=True)
class Ref:
    """A module, class or function of a library, by canonical dotted name."""

    name: str

    def attr(self, attribute: str) -> "Ref":
        return Ref(f"{self.name}.{attribute}")


# why a tensor's shape is not known where its model's Input has no shape known
INPUT_SHAPE_UNKNOWN = "model input shape unknown"


@record
class Tensor:
    """A symbolic tensor of the functional API: its shape and the layer call that produced it."""

    shape: Optional[tuple]  # batch first; None when unknown
    producer: Optional[tuple] = None  # (LayerRef, call index, output index)
    reason: str = ""  # why the shape is unknown


@record(eq=False)
class Batches:
    """A tensor of several batches along its first axis (``tf.concat([fake, real], axis=0)``):
    a tensor of one batch's shape and how many batches it holds (:mod:`.batches`)."""

    tensor: Tensor
    count: int


@record
class Array:
    """A NumPy array whose shape is known (``np.random.rand(1, 16, 16, 1)``), with its
    dtype where the code fixes it (None: not known; NumPy's float64 for most constructors)."""

    shape: tuple
    dtype: Optional[str] = None
    # one replica's share of a distributed dataset's batch (``for x in
    # strategy.experimental_distribute_dataset(ds)`` of ``batch(64 * num_replicas_in_sync)``)
    per_replica: bool = False


@record(eq=False)
class LayerRef:
    """A layer created in the analysed code, with everything the graph needs about it."""

    instance: LayerInstance
    type: str
    name: str
    location: Location
    input_hint: Optional[tuple] = None  # from input_shape= / batch_input_shape= / input_dim=
    calls: list = field(default_factory=list)  # list of (input shapes, output shapes, inbound)
    weights: Optional[list] = None  # set when first built, all trainable; see instance.trainable
    error: Optional[str] = None  # LayerError message from building it
    dtype_policy: Optional[tuple] = None  # (global policy, where it was set) when created
    # input_shape= / input_dim= given: Keras 3 makes an InputLayer for the Sequential it starts
    # (input_length= and batch_input_shape= are Keras 1/2 only and do not)
    keras3_input_arg: bool = False
    # functions given to the layer that decide its shape (Lambda's function and callable
    # output_shape), evaluated on each call's input by the interpreter
    callables: dict = field(default_factory=dict)
    # runs those functions on a Tensor (models.resolve_lambda, bound to the interpreter):
    # a Sequential's layers are run after the code that made them
    trace: Optional[Any] = None
    # weights the __init__ of a file's subclass of a registry layer makes itself
    # (``self.tau = keras.Variable(...)``, ``self.add_weight``), before its parent's
    init_weights: list = field(default_factory=list)


@record(eq=False)
class OpaqueLayer:
    """A layer memlint cannot model (unregistered type or unresolved argument)."""

    type: str
    name: str
    location: Location
    reason: str
    input_hint: Optional[tuple] = None
    calls: list = field(default_factory=list)
    keras3_input_arg: bool = False


@record(eq=False)
class TensorOp:
    """An operation on symbolic tensors that is not a layer (``x + y`` in the functional API).

    Keras 3 records it in the model graph (it takes part in the layer order and takes a name
    such as ``add_1`` from the same counter as the layer of that name) but does not list it
    in ``model.layers``.
    """

    type: str  # the Keras op class: Add, Subtract, Multiply, TrueDivide, ...
    name: str
    location: Location
    calls: list = field(default_factory=list)


@record(eq=False)
class SequentialModel:
    """``Sequential`` under construction: its layers, name and any input shape given."""

    name: str
    location: Location
    layers: list = field(default_factory=list)  # LayerRef | OpaqueLayer | input marker tuples
    input_shape: Optional[tuple] = None  # batch first
    input_source: str = ""
    usage: dict = field(default_factory=dict)  # compile/fit/predict facts
    variable: Optional[str] = None
    variable_is_global: bool = False  # variable is a module-level name
    has_input_layer: bool = False  # Keras 3 has put an InputLayer first in its layer stack
    built: bool = False  # Keras 3 has built it (its internal Functional exists)
    dtype_policy: Optional[tuple] = None  # (global policy, where set) when its layers were made
    trainable: bool = True
    as_layer: Optional["ModelLayer"] = None  # the model used as a layer of another model
    # the tf.data map() calls whose function runs the model on the pipeline's data
    # (Locations): those calls run on the host, in the input pipeline
    mapped_by: list = field(default_factory=list)


@record(eq=False)
class FunctionalModel:
    """``Model(inputs, outputs)``."""

    name: str
    location: Location
    inputs: list
    outputs: list
    usage: dict = field(default_factory=dict)
    variable: Optional[str] = None
    variable_is_global: bool = False  # variable is a module-level name
    dtype_policy: Optional[tuple] = None  # (global policy, where it was set) when created
    trainable: bool = True
    as_layer: Optional["ModelLayer"] = None  # the model used as a layer of another model
    # the tf.data map() calls whose function runs the model on the pipeline's data
    # (Locations): those calls run on the host, in the input pipeline
    mapped_by: list = field(default_factory=list)
    built: bool = True


@record(eq=False)
class ModelLayer:
    """A model used as a layer of another model (added to a Sequential, or called on a tensor).

    Keras lists it in the outer model's layers under the inner model's name and class, with
    all the inner model's weights."""

    model: Any  # SequentialModel | FunctionalModel
    name: str
    type: str  # "Sequential" or "Functional"
    location: Location
    calls: list = field(default_factory=list)
    error: Optional[str] = None
    input_hint: Optional[tuple] = None
    dtype_policy: Optional[tuple] = None
    keras3_input_arg: bool = False


@record(eq=False)
class UserFunction:
    """A function defined in the analysed file; calls to it are inlined by the interpreter."""

    name: str
    node: Any  # the libcst FunctionDef
    defaults: dict  # parameter name -> default value, evaluated where the def was
    closure: tuple  # enclosing function scopes (innermost first) for nested functions
    location: Location
    module_globals: Optional[dict] = None  # the globals of the module that defined it
    # compiled by ``jax.jit``: "" where the jit donates arguments, else why not ("jax.jit at
    # line 30 donates no argument"); None: not jitted (training_loops.jitted)
    jit: Optional[str] = None


@record(eq=False)
class Partial:
    """``functools.partial(func, *args, **kwargs)``: calling it adds the remembered arguments."""

    func: Any
    args: tuple
    kwargs: dict


@record(eq=False)
class ModuleValue:
    """A module of the user's own project, read with libcst and interpreted (never imported).

    ``names`` is its global namespace; while the module is still being loaded (an import
    cycle) it holds only what has been defined so far."""

    name: str  # dotted module name
    path: Optional[str]  # the source file; None for a package folder without __init__.py
    names: dict = field(default_factory=dict)


@record
class Optimizer:
    """An optimizer object created in the code."""

    spec: OptimizerSpec


@record
class Policy:
    """A mixed-precision policy object."""

    name: str


@record
class BoundMethod:
    """``obj.method`` looked up on an abstract value, waiting to be called."""

    obj: Any
    method: str


def flatten_structure(value: Any, depth: int = 0) -> list:
    """The leaves of nested lists, tuples and dicts in the order Keras 3's ``tree.flatten``
    gives them (dict values by sorted key, insertion order when keys do not sort)."""
    if depth > 32:
        return [value]
    if isinstance(value, dict):
        try:
            keys = sorted(value)
        except TypeError:
            keys = list(value)
        value = [value[k] for k in keys]
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in flatten_structure(item, depth + 1)]
    return [value]


def is_hashable(value: Any) -> bool:
    """Whether ``value`` can be a dict key or set member (unknown values never can)."""
    try:
        hash(value)
    except TypeError:
        return False
    return not is_unknown(value)
