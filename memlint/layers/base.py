"""What every layer kind provides, and the helpers they share.

A layer kind mirrors one Keras layer class.  It owns three things, the way the Keras class
owns ``__init__``, ``build`` and ``compute_output_shape``:

* :meth:`LayerKind.configure` turns constructor arguments (any Keras spelling, Keras 1 to 3)
  into a normalised config dict using Keras 3 argument names;
* :meth:`LayerKind.output_shape` computes the output shape from the input shape(s);
* :meth:`LayerKind.weights` lists the variables Keras would create in ``build``.

For the memory model each kind also says what its backward pass keeps
(:meth:`LayerKind.saved`, a list of :class:`Saved`), the way the layer's ``call`` decides what
autodiff must remember: its input for a weight gradient, its output for a sigmoid, a one-byte
mask for dropout, statistics for normalisation, every step's gates for a recurrent layer.

Shapes include the batch dimension first (usually ``None``).  Layers taking several inputs
set ``multi_input = True`` and receive a list of shapes.  Problems Keras would reject at
build time raise :class:`LayerError`; arguments whose value is not known statically raise
:class:`UnresolvedArgument`.
"""

from __future__ import annotations

from dataclasses import field, replace
from importlib import import_module
from typing import Any, ClassVar, Optional

from memlint.ir import Weight
from memlint.records import record

MISSING = object()


class LayerError(Exception):
    """The layer cannot be built with these inputs (Keras would raise at build time)."""


class UnresolvedArgument(Exception):
    """An argument the layer needs has no statically known value."""

    def __init__(self, name: str, reason: str = "its value is not known statically"):
        super().__init__(f"argument '{name}': {reason}")
        self.name = name
        self.reason = reason


class Unknown:
    """A value the frontend could not determine; carries the reason.

    Frontends pass it inside :class:`Args` wherever an argument could not be evaluated.
    """

    def __init__(self, reason: str):
        self.reason = reason

    def __repr__(self) -> str:
        return f"Unknown({self.reason!r})"


@record
class Context:
    """Global settings of the analysed code that change how layers behave."""

    data_format: str = "channels_last"  # keras.backend.image_data_format()


@record
class Args:
    """The arguments of one layer constructor call, as Python values.

    Values are plain Python (int, float, str, bool, None, tuple, list, dict), nested
    :class:`LayerInstance` objects (for wrappers such as Bidirectional), or :class:`Unknown`.
    """

    positional: list = field(default_factory=list)
    keywords: dict = field(default_factory=dict)
    context: Context = field(default_factory=Context)

    def get(self, name: str, default: Any = MISSING, *, pos: Optional[int] = None,
            aliases: tuple = ()) -> Any:
        """The argument ``name`` (or one of its older ``aliases``), given by keyword or at ``pos``.

        Raises :class:`UnresolvedArgument` when the value is unknown, or when the argument is
        required (no default) and absent.
        """
        for key in (name, *aliases):
            if key in self.keywords:
                return self._known(name, self.keywords[key])
        if pos is not None and pos < len(self.positional):
            return self._known(name, self.positional[pos])
        if default is MISSING:
            raise UnresolvedArgument(name, "required argument is missing")
        return default

    def has(self, name: str, *, pos: Optional[int] = None, aliases: tuple = ()) -> bool:
        """Whether the argument was given at all (by keyword or position)."""
        if any(key in self.keywords for key in (name, *aliases)):
            return True
        return pos is not None and pos < len(self.positional)

    @staticmethod
    def _known(name: str, value: Any) -> Any:
        if isinstance(value, Unknown):
            raise UnresolvedArgument(name, value.reason)
        return value


@record
class LayerInstance:
    """A layer object created in the analysed code (before or after it is called)."""

    kind: "LayerKind"
    config: dict
    name: Optional[str] = None
    trainable: bool = True
    location: Any = None


class LayerKind:
    """Base class of every layer kind; subclasses override what differs."""

    name: ClassVar[str] = ""  # the Keras 3 class name
    aliases: ClassVar[tuple] = ()  # older class names resolving to this kind (Keras 1/2)
    family: ClassVar[str] = ""
    multi_input: ClassVar[bool] = False  # receives a list of input shapes
    keras_class: ClassVar[str] = ""  # the Keras 3 class a legacy-spelling kind builds, if not name

    @property
    def class_name(self) -> str:
        """The Keras 3 class this kind stands for (what ``model.summary()`` shows)."""
        return self.keras_class or self.name

    def configure(self, args: Args) -> dict:
        """Normalise constructor arguments into a config dict (Keras 3 names)."""
        return {}

    def output_shape(self, config: dict, input_shape):
        """Output shape for the given input shape (a list of shapes if ``multi_input``)."""
        return input_shape

    def weights(self, config: dict, input_shape) -> list[Weight]:
        """Variables created when the layer is built on ``input_shape``."""
        return []

    # An element-wise layer (an activation, dropout, noise, rescaling): a compiler can write
    # its output over a dying input, and its gradient over its output's gradient.
    elementwise: ClassVar[bool] = False

    def is_elementwise(self, config) -> bool:
        """Whether a call with ``config`` is element-wise (``elementwise``): the kind's,
        unless its config says what the call computes (a Lambda's traced function)."""
        return self.elementwise

    # A forward convolution cuDNN runs as one call: XLA adds a tensor summed with its
    # result inside that call (a side input), so the sum is written where the result was.
    takes_side_input: ClassVar[bool] = False
    # A dropout: its input gradient is the output gradient times the keep mask it saved,
    # element-wise work XLA computes inside the fusion that reads it.
    masks_gradient: ClassVar[bool] = False

    def saved_tensors(self, config: dict, input_shape) -> list:
        """Shapes (batch first) of tensors a call keeps for the backward pass besides its
        output, such as attention score matrices.  The frontend records them on the layer
        (``LayerNode.inner_shapes``); :meth:`saved` is the memory model's finer account."""
        return []

    def not_modelled(self, config: dict, profile: Optional[str]):
        """What one call of this layer holds that the memory model does not count (a
        sentence), or None: a GPU library's memory under ``profile`` (None where Keras takes
        no GPU code path), or what the layer runs untraced.  A model with such a layer gets
        no "fits" verdict: the estimate is a lower bound there."""
        return None

    def saved(self, config: dict, input_shape, output_shape) -> list:
        """What one call keeps for its backward pass (list of :class:`Saved`).

        The default follows the common case: a layer with weights keeps its input (a weight
        gradient is input x output gradient), plus whatever its ``activation=`` needs; a
        layer without weights keeps nothing (reshapes, padding, sums, average pooling: their
        gradient needs only shapes).  Kinds override it where their ``call`` needs more."""
        saved = []
        try:
            has_weights = bool(self.weights(config, input_shape))
        except Exception:  # noqa: BLE001 - a kind that cannot say keeps its input
            has_weights = True
        if has_weights:
            saved.append(Saved("input", needed_for="weights"))
        return saved + activation_saves(config.get("activation"), output_shape) + \
            bias_add_scratch(config, output_shape)


# The backend profiles' names (memlint.memory.profiles; "default": no backend stated).
PROFILE_NAMES = ("xla", "tf-graph", "torch", "default")
# every profile but torch's (eager Keras on PyTorch keeps its own tensors: torch-only entries)
NOT_TORCH = tuple(name for name in PROFILE_NAMES if name != "torch")


def instead_of_input(saved: list, profile: str, entries: list) -> list:
    """``saved`` where ``profile`` keeps ``entries`` in place of the call's saved input (a
    copy the backend makes: a padded or re-laid-out input); the other profiles still keep the
    input itself."""
    out, replaced = [], False
    for s in saved:
        if s.what == "input" and s.when == "saved" and profile in (s.profiles or PROFILE_NAMES):
            replaced = True
            others = tuple(p for p in (s.profiles or PROFILE_NAMES) if p != profile)
            if others:
                out.append(replace(s, profiles=others))
            continue
        out.append(s)
    if not replaced:
        return saved
    return out + [replace(e, profiles=(profile,)) for e in entries]


@record(frozen=True)
class Saved:
    """One tensor a layer call keeps from its forward pass for its backward pass.

    ``what`` names it: ``"input"`` and ``"output"`` are the call's own tensors (kept alive, not
    copied; ``index`` says which one), ``"sign"`` is what a ReLU-like function needs (a
    one-byte mask, its output or its input: the backend profile decides), anything else is a
    buffer of its own (``"mask"``, ``"statistics"``, ``"gates"``, ``"scores"``,
    ``"preactivation"``...) of ``shape`` (batch first, None for the batch; with
    ``per_batch=False`` a fixed shape such as a weight's).

    ``dtype``: ``"compute"`` (the policy's activation dtype), ``"float32"``, ``"variable"``
    (the variables' dtype), ``"bool"``, ``"int32"`` or ``"int64"``; for input/output, the
    tensor's own.
    ``needed_for``: ``"weights"`` (only a weight gradient needs it: a frozen layer drops it),
    ``"inputs"`` (only the input gradient: dropped when nothing before the layer trains) or
    ``"both"``.  ``when``: ``"saved"`` (from the forward pass to the layer's backward),
    ``"backward"`` (scratch that exists only while the layer's backward runs, such as the
    gradients of attention scores), ``"forward"`` (scratch while the call runs, in
    training and inference alike; not counted twice when a saved entry of the same name is
    kept), ``"before"`` (scratch made as the call starts and gone before it writes its
    outputs: the first of two copies of the input) or ``"training"`` (scratch while the
    call runs in training only: an augmentation does nothing in inference).
    ``profiles``: the backend profiles whose schedule keeps it (names of
    :mod:`memlint.memory.profiles`; empty: every profile).
    """

    what: str
    shape: tuple = ()
    dtype: str = "compute"
    needed_for: str = "both"
    index: int = 0
    when: str = "saved"
    per_batch: bool = True
    count: int = 1  # identical buffers of this shape (the steps' gates of a recurrent layer)
    profiles: tuple = ()


# What the gradient of each activation function needs (Keras 3 names; ``activations.get``
# spellings): "sign" (ReLU-like: which elements were positive), "output" (sigmoid, tanh,
# softmax: f'(x) is a function of f(x)) or "input" (gelu, swish, softplus, ...).  Unknown
# functions keep their input.
ACTIVATION_NEEDS = {
    "linear": None, "relu": "sign", "relu6": "sign", "leaky_relu": "sign",
    "sigmoid": "output", "tanh": "output", "softmax": "output", "log_softmax": "output",
    "hard_sigmoid": "input", "hard_silu": "input", "hard_swish": "input", "elu": "input",
    "selu": "input", "gelu": "input", "silu": "input", "swish": "input", "softplus": "input",
    "softsign": "input", "mish": "input", "exponential": "output", "celu": "input",
    "glu": "input", "sparse_plus": "input", "squareplus": "input", "tanh_shrink": "input",
    "hard_tanh": "sign", "soft_shrink": "sign", "hard_shrink": "sign", "threshold": "sign",
    "log_sigmoid": "input", "sparsemax": "output",
}


def activation_need(name) -> Optional[str]:
    """``"sign"``, ``"output"``, ``"input"`` or None (linear) for an activation name (None:
    no activation; an unknown or unresolved one keeps its input)."""
    if name is None:
        return None
    if not isinstance(name, str):
        return "input"
    return ACTIVATION_NEEDS.get(name.lower(), "input")


# Functions whose gradient also keeps a product of the forward pass, of the input's size:
# the exact GELU's x * Phi(x) factors (H100 plans: Dense(64, activation="gelu"),
# Activation("gelu") and Conv2D(activation="gelu") each keep one more tensor of the output's
# size until their backward; swish does not).
ACTIVATION_PRODUCTS = {"gelu": 1}


def bias_add_scratch(config: dict, output_shape) -> list:
    """Keras adds a layer's bias as an operation of its own (``ops.add(x, self.bias)``);
    eager torch then holds the product and the biased sum at once while the layer runs (a
    torch step of three biased 3x3 convolutions into a global pooling: the last one's
    ``convolution`` and ``add`` results both alive at the peak, -12% without it; unbiased,
    exact).  With an activation the walk already holds two output-sized buffers there."""
    if not config.get("use_bias") or activation_need(config.get("activation")) is not None \
            or not isinstance(output_shape, tuple):
        return []
    return [Saved("unbiased product", tuple(output_shape), when="forward",
                  profiles=("torch",))]


def activation_saves(name, output_shape) -> list:
    """What a layer's own ``activation=`` keeps: the pre-activation values (a buffer of the
    output's shape, which the layer's kernel writes before the function is applied) when the
    function's gradient needs its input or a sign, the output when it needs its output."""
    need = activation_need(name)
    if need is None or output_shape is None or isinstance(output_shape, list):
        return []
    # eager torch runs the function's backward as an op of its own: the pre-activation's
    # gradient is a new tensor beside the output's
    out = [Saved("activation gradient", tuple(output_shape), when="backward",
                 profiles=("torch",))] if isinstance(output_shape, tuple) else []
    if need == "output":
        return [Saved("output")] + keras_logits(name, output_shape) + out
    if need == "sign":  # the walk's profile decides: the pre-activation or the output
        return [Saved("sign preactivation", tuple(output_shape))] + out
    return [Saved("preactivation", tuple(output_shape))] + activation_products(
        name, output_shape) + out


# Functions whose Keras implementation stores its input on its output tensor
# (``output._keras_logits = x``, for the cross-entropy losses): a torch tensor takes the
# attribute, so the logits live as long as the output (XLA's tracers and TensorFlow's
# tensors refuse it).
LOGITS_KEPT = frozenset({"sigmoid", "softmax"})


def keras_logits(name, output_shape) -> list:
    """The logits a sigmoid or softmax output keeps alive under torch (``LOGITS_KEPT``)."""
    if not isinstance(name, str) or name.lower() not in LOGITS_KEPT \
            or not isinstance(output_shape, tuple):
        return []
    return [Saved("logits", tuple(output_shape), profiles=("torch",))]


def activation_products(name, output_shape) -> list:
    """The forward products a function's gradient keeps (``ACTIVATION_PRODUCTS``)."""
    count = ACTIVATION_PRODUCTS.get(name.lower(), 0) if isinstance(name, str) else 0
    if not count or not isinstance(output_shape, tuple):
        return []
    return [Saved("activation products", tuple(output_shape), count=count)]


def activation_arg(args: "Args", pos: Optional[int] = None) -> Optional[str]:
    """The ``activation=`` of a layer as a lower-case name for :meth:`LayerKind.saved` (None
    for none or "linear"; ``"unknown"`` when it is not a plain name: a function of the file,
    an unresolved value).  Never raises: it changes no shape or weight."""
    try:
        value = args.get("activation", None, pos=pos)
    except UnresolvedArgument:
        return "unknown"
    if value is None:
        return None
    if isinstance(value, str):
        value = value.lower()
        return None if value == "linear" else value
    name = getattr(value, "name", None)  # a canonical reference such as keras.activations.relu
    if isinstance(name, str):
        leaf = name.rsplit(".", 1)[-1].lower()
        return None if leaf == "linear" else leaf
    return "unknown"


def nested_layer(value: Any, what: str, expected: str) -> dict:
    """A layer passed as an argument (the layer inside Bidirectional, TimeDistributed, an RNN
    cell) as a plain description: ``{"class_name", "config", "trainable"}``.

    Accepts a :class:`LayerInstance` or a frontend object holding one as ``.instance``.  An
    object the frontend could not model (it has a ``reason``) makes the argument unresolved;
    anything else is a :class:`LayerError` saying ``what`` must be ``expected``.
    """
    instance = getattr(value, "instance", value)
    if not isinstance(instance, LayerInstance):
        reason = getattr(value, "reason", None)
        if isinstance(reason, str):
            raise UnresolvedArgument(what, f"the {expected} is not modelled: {reason}")
        raise LayerError(f"{what} must be {expected}, got {brief(value)}")
    return {"class_name": instance.kind.name, "config": dict(instance.config),
            "trainable": instance.trainable}


def brief(value: Any) -> str:
    """A short name for a value in a message: its class, and its layer name when it has one."""
    name = getattr(value, "name", None)
    kind = getattr(value, "type", None)  # a frontend layer: its Keras class
    if not isinstance(kind, str):
        kind = getattr(getattr(value, "cls", None), "name", None)  # a class of the file
    if not isinstance(kind, str):
        kind = type(value).__name__
    return f"{kind} '{name}'" if isinstance(name, str) else kind


# A frontend's own layer-like objects (a model, a layer class of the analysed file) that a
# wrapper accepts as its inner layer: each adapter maps a value to an object with
# ``class_name``, ``output_shape(shape)``, ``weights(shape)`` and ``saved_tensors(shape)``,
# or to None when the value is not its kind.
NESTED_ADAPTERS: list = []


def nested_object(value: Any) -> Optional[dict]:
    """The description of a frontend object a wrapper applies (see ``NESTED_ADAPTERS``):
    ``{"class_name", "config", "trainable", "object"}``, or None for anything else."""
    for adapt in NESTED_ADAPTERS:
        found = adapt(value)
        if found is not None:
            return {"class_name": found.class_name, "config": {}, "trainable": True,
                    "object": found}
    return None


def nested_call(inner: dict, method: str, input_shape) -> Any:
    """``output_shape`` / ``weights`` / ``saved_tensors`` of a nested layer description,
    through the registry or through the frontend object it holds."""
    found = inner.get("object")
    if found is not None:
        return getattr(found, method)(input_shape)
    return getattr(REGISTRY[inner["class_name"]], method)(inner["config"], input_shape)


class LayerRegistry(dict):
    """Layer kinds by Keras class name.  A family module (``memlint/layers/core.py``, ...)
    registers its kinds when imported; it is imported the first time one of its names is
    looked up (``memlint/layers/index.py`` says which family has which name), and every
    family when the registry is listed."""

    def __init__(self):
        super().__init__()
        self._family: Optional[dict] = None  # name -> family module not imported yet

    def _load(self, key) -> bool:
        """Import the family that registers ``key``; False when no family does."""
        if self._family is None:
            from memlint.layers.index import FAMILIES

            self._family = {name: family for family, names in FAMILIES.items()
                            for name in names}
        family = self._family.pop(key, None)
        if family is None:
            return False
        import_module(f"memlint.layers.{family}")
        return True

    def load_all(self) -> "LayerRegistry":
        if self._family == {}:  # every family imported already
            return self
        from memlint.layers.index import FAMILIES

        for family in FAMILIES:
            import_module(f"memlint.layers.{family}")
        self._family = {}
        return self

    def __getitem__(self, key):
        if not dict.__contains__(self, key):
            self._load(key)
        return dict.__getitem__(self, key)

    def get(self, key, default=None):
        if not dict.__contains__(self, key) and not self._load(key):
            return default
        return dict.get(self, key, default)

    def __contains__(self, key) -> bool:
        return dict.__contains__(self, key) or (self._load(key) and
                                                dict.__contains__(self, key))

    def __iter__(self):
        return dict.__iter__(self.load_all())

    def __len__(self) -> int:
        return dict.__len__(self.load_all())

    def keys(self):
        return dict.keys(self.load_all())

    def values(self):
        return dict.values(self.load_all())

    def items(self):
        return dict.items(self.load_all())


REGISTRY = LayerRegistry()


def register(cls: type) -> type:
    """Class decorator: register a :class:`LayerKind` under its name and aliases."""
    kind = cls()
    for key in (cls.name, *cls.aliases):
        if dict.__contains__(REGISTRY, key):
            raise ValueError(f"layer kind {key!r} registered twice")
        dict.__setitem__(REGISTRY, key, kind)
    return cls


# ---------------------------------------------------------------- shared argument helpers

def as_tuple(value: Any, n: int, name: str) -> tuple:
    """An int or a sequence of ``n`` ints as a tuple of ``n`` ints (Keras's ``standardize_tuple``)."""
    if isinstance(value, bool):
        raise LayerError(f"'{name}' must be an int or a tuple of {n} ints, got {value!r}")
    if isinstance(value, int):
        return (value,) * n
    if isinstance(value, (tuple, list)) and len(value) == n and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        return tuple(value)
    raise LayerError(f"'{name}' must be an int or a tuple of {n} ints, got {value!r}")


_FORMATS = ("channels_last", "channels_first")
_KERAS1_ORDERINGS = {"th": "channels_first", "tf": "channels_last"}


def data_format(args: Args, pos: Optional[int] = None) -> str:
    """The layer's data format: ``data_format=`` (by keyword or at ``pos``) or Keras 1
    ``dim_ordering=`` ('th', 'tf' or 'default'); the analysed code's default otherwise.
    Case-insensitive, as Keras is."""
    value = args.get("data_format", None, pos=pos, aliases=("dim_ordering",))
    if value is None or value == "default":
        value = args.context.data_format
    if isinstance(value, str):
        value = _KERAS1_ORDERINGS.get(value, value).lower()
    if value not in _FORMATS:
        raise LayerError(f"data_format must be 'channels_last' or 'channels_first', got {value!r}")
    return value


def padding_mode(args: Args, allowed: tuple = ("valid", "same")) -> str:
    """``padding=`` (or Keras 1 ``border_mode=``), lower-cased and validated."""
    value = args.get("padding", "valid", aliases=("border_mode",))
    if not isinstance(value, str) or value.lower() not in allowed:
        raise LayerError(f"padding must be one of {', '.join(allowed)}, got {value!r}")
    return value.lower()


def conv_output_length(length: Optional[int], kernel: int, padding: str, stride: int,
                       dilation: int = 1) -> Optional[int]:
    """Output length of a convolution or pooling window along one axis (None if unknown)."""
    if length is None:
        return None
    effective = (kernel - 1) * dilation + 1
    if padding == "same":
        out = (length + stride - 1) // stride
    elif padding == "causal":
        out = (length + stride - 1) // stride
    else:  # valid
        out = (length - effective + stride) // stride
    return out


def deconv_output_length(length: Optional[int], kernel: int, padding: str, stride: int,
                         output_padding: Optional[int] = None, dilation: int = 1) -> Optional[int]:
    """Output length of a transposed convolution along one axis (None if unknown)."""
    if length is None:
        return None
    kernel = (kernel - 1) * dilation + 1
    if output_padding is None:
        if padding == "valid":
            return length * stride + max(kernel - stride, 0)
        if padding == "full":
            return length * stride - (stride + kernel - 2)
        return length * stride
    pad = {"same": kernel // 2, "valid": 0, "full": kernel - 1}[padding]
    return (length - 1) * stride + kernel - 2 * pad + output_padding


def spatial_axes(rank: int, fmt: str) -> tuple:
    """Indices (in a shape with batch first) of the spatial axes and the channel axis."""
    if fmt == "channels_first":
        return tuple(range(2, 2 + rank)), 1
    return tuple(range(1, 1 + rank)), rank + 1


def check_rank(input_shape, rank: int, layer: str) -> None:
    """Raise :class:`LayerError` unless ``input_shape`` has exactly ``rank`` dims (batch included)."""
    if input_shape is None or len(input_shape) != rank:
        got = "unknown" if input_shape is None else f"{len(input_shape)} ({_fmt(input_shape)})"
        raise LayerError(f"{layer} expects input of rank {rank}, got rank {got}")


def _fmt(shape) -> str:
    return "(" + ", ".join("None" if d is None else str(d) for d in shape) + ")"


def format_shape(shape) -> str:
    """A shape as Keras prints it: ``(None, 16, 16, 256)``; lists of shapes comma-joined."""
    if shape is None:
        return "?"
    if isinstance(shape, list):
        return "[" + ", ".join(format_shape(s) for s in shape) + "]"
    if len(shape) == 1:
        return "(" + ("None" if shape[0] is None else str(shape[0])) + ",)"
    return _fmt(shape)
