"""What the code says about GPUs: the memory its process may use, how many GPUs it sees, and
how a distribution strategy spreads the model and the batch over them.

Memory caps (each kept with the line that sets it, as a :class:`~memlint.ir.MemoryCap`):
TF1 ``ConfigProto`` / ``GPUOptions`` ``per_process_gpu_memory_fraction`` given to a
``Session``; TF2 ``memory_limit`` of logical (virtual) devices; ``XLA_PYTHON_CLIENT_MEM_FRACTION``
/ ``XLA_CLIENT_MEM_FRACTION``, ``XLA_PYTHON_CLIENT_PREALLOCATE`` and
``XLA_PYTHON_CLIENT_ALLOCATOR`` set through ``os.environ``;
``torch.cuda.set_per_process_memory_fraction``; ``CUDA_VISIBLE_DEVICES``.

Strategies (:class:`Strategy`): ``tf.distribute.MirroredStrategy`` (``devices=``),
``MultiWorkerMirroredStrategy``, ``OneDeviceStrategy``, Keras 2's ``multi_gpu_model``, and
Keras 3's ``keras.distribution.DataParallel`` / ``ModelParallel`` with ``DeviceMesh`` and
``LayoutMap``.  ``strategy.num_replicas_in_sync`` is the replica count when it is known, else
a :class:`Replicas` value, so ``64 * strategy.num_replicas_in_sync`` stays "64 per replica".
``strategy.run(step, args=...)`` runs the step, and ``experimental_distribute_dataset(ds)``
is ``ds`` marked distributed: a loop over it sees one replica's share of each batch.
"""

from __future__ import annotations

from dataclasses import field, replace
from typing import Any, Optional

from memlint.frontends.keras.values import Unknown, is_unknown
from memlint.ir import Location, MemoryCap
from memlint.records import record

NOT_DEVICES = object()  # call() answers this for names that are not about devices

_ENV_CAPS = {
    "XLA_PYTHON_CLIENT_MEM_FRACTION": "jax-fraction",
    "XLA_CLIENT_MEM_FRACTION": "jax-fraction",
    "XLA_PYTHON_CLIENT_PREALLOCATE": "jax-preallocate",
    "XLA_PYTHON_CLIENT_ALLOCATOR": "jax-allocator",
    "CUDA_VISIBLE_DEVICES": "visible-devices",
    "TF_FORCE_GPU_ALLOW_GROWTH": "tf-growth",
}
_SESSIONS = {"tensorflow.Session", "tensorflow.compat.v1.Session",
             "tensorflow.InteractiveSession", "tensorflow.compat.v1.InteractiveSession"}
_CONFIGS = {"tensorflow.ConfigProto", "tensorflow.compat.v1.ConfigProto"}
_GPU_OPTIONS = {"tensorflow.GPUOptions", "tensorflow.compat.v1.GPUOptions"}
_LOGICAL = {"tensorflow.config.LogicalDeviceConfiguration",
            "tensorflow.config.experimental.VirtualDeviceConfiguration"}
_SET_LOGICAL = {"tensorflow.config.set_logical_device_configuration",
                "tensorflow.config.experimental.set_virtual_device_configuration"}
_MIRRORED = {"tensorflow.distribute.MirroredStrategy",
             "tensorflow.distribute.MultiWorkerMirroredStrategy",
             "tensorflow.distribute.experimental.MultiWorkerMirroredStrategy",
             "tensorflow.distribute.OneDeviceStrategy",
             "tensorflow.distribute.get_strategy"}


@record(eq=False)
class SessionConfig:
    """A TF1 ``ConfigProto`` / ``GPUOptions``: the GPU options that matter for memory."""

    options: dict = field(default_factory=dict)  # per_process_gpu_memory_fraction, allow_growth
    where: dict = field(default_factory=dict)  # option -> line
    gpu_options: Optional["SessionConfig"] = None


@record(eq=False)
class LogicalDevice:
    """``tf.config.LogicalDeviceConfiguration(memory_limit=MB)``."""

    memory_limit: Any


@record(eq=False)
class Replicas:
    """``strategy.num_replicas_in_sync`` when the number of GPUs is not known, or
    ``len(jax.devices())`` (``strategy`` None): a product with it is a per-replica amount
    (:class:`PerReplica`)."""

    strategy: Optional["Strategy"]


@record(eq=False)
class Devices:
    """``jax.devices()``, ``keras.distribution.list_devices()``: the devices the process
    sees, a number the code does not state (its ``len()`` is :class:`Replicas`)."""


@record(frozen=True)
class PerReplica:
    """``64 * strategy.num_replicas_in_sync``: 64 per replica, whatever their number."""

    amount: int


@record(eq=False)
class Strategy:
    """A distribution strategy: how many replicas share the batch (None: all the GPUs the
    process sees, a number the code does not state), how weights are sharded."""

    kind: str  # MirroredStrategy, DataParallel, ModelParallel, multi_gpu_model, ...
    replicas: Optional[int]
    location: Location
    # ModelParallel: (regex of variable paths, shard factor) from the LayoutMap
    shards: list = field(default_factory=list)
    note: str = ""

    def describe(self) -> str:
        return f"{self.kind} at line {self.location.line}"


@record(eq=False)
class StrategyScope:
    """``strategy.scope()``: models made inside are distributed by ``strategy``."""

    strategy: Strategy


@record(eq=False)
class DeviceMesh:
    """``keras.distribution.DeviceMesh(shape, axis_names, devices)``."""

    shape: tuple
    axis_names: tuple


@record(eq=False)
class LayoutMap:
    """``keras.distribution.LayoutMap(mesh)``: variable-path patterns -> layouts."""

    mesh: Optional[DeviceMesh]
    layouts: dict = field(default_factory=dict)


# ---------------------------------------------------------------------- calls

def call(interp, name: str, args: list, kwargs: dict, node) -> Any:
    """The value of a device-related call, or NOT_DEVICES."""
    state = interp.state
    loc = interp.location(node)
    if name in _CONFIGS or name in _GPU_OPTIONS:
        config = SessionConfig()
        for key, value in kwargs.items():
            if key == "gpu_options" and isinstance(value, SessionConfig):
                config.gpu_options = value
            elif not is_unknown(value):
                config.options[key] = value
                config.where[key] = loc.line
        return config
    if name in _SESSIONS:
        config = kwargs.get("config", args[2] if len(args) > 2 else None)
        if isinstance(config, SessionConfig):
            _session_caps(state, config, loc)
        return Unknown("a TensorFlow session")
    if name in _LOGICAL:
        return LogicalDevice(kwargs.get("memory_limit", args[0] if args else None))
    if name in _SET_LOGICAL:
        configs = args[1] if len(args) > 1 else kwargs.get("logical_devices",
                                                         kwargs.get("virtual_devices"))
        _logical_caps(state, configs, loc)
        return None
    if name == "torch.cuda.set_per_process_memory_fraction":
        fraction = args[0] if args else kwargs.get("fraction")
        if isinstance(fraction, (int, float)) and not isinstance(fraction, bool):
            add_cap(state, MemoryCap("torch-fraction", float(fraction),
                                     f"torch.cuda.set_per_process_memory_fraction({fraction})"
                                     f" at line {loc.line}", loc))
        return None
    if name in ("os.environ.setdefault", "os.putenv") and len(args) == 2:
        set_env(state, args[0], args[1], loc, only_if_unset=name.endswith("setdefault"))
        return None
    if name == "os.environ.update" and len(args) == 1 and isinstance(args[0], dict):
        for key, value in args[0].items():
            set_env(state, key, value, loc)
        return None
    if name in _MIRRORED:
        return _tf_strategy(state, name.rsplit(".", 1)[-1], args, kwargs, loc)
    if name in ("keras.utils.multi_gpu_model", "keras.utils.training_utils.multi_gpu_model"):
        return _multi_gpu_model(interp, args, kwargs, loc)
    if name.startswith("keras.distribution."):
        return _keras_distribution(interp, name.rsplit(".", 1)[-1], args, kwargs, loc)
    if name in ("jax.devices", "jax.local_devices"):
        return Devices()
    return NOT_DEVICES


def add_cap(state, cap: MemoryCap) -> None:
    if not state.quiet:
        state.memory_caps.append(cap)


def set_env(state, key: Any, value: Any, loc: Location, only_if_unset: bool = False) -> None:
    """``os.environ[key] = value``: kept for the code's own reads of it, and a cap for the
    variables that decide GPU memory."""
    if isinstance(key, str) and not is_unknown(value) and not (
            only_if_unset and key in state.environment):
        state.environment[key] = str(value)
    kind = _ENV_CAPS.get(key) if isinstance(key, str) else None
    if kind is None or is_unknown(value):
        return
    if only_if_unset and any(c.kind == kind for c in state.memory_caps):
        return
    text = str(value).strip()
    where = f"{key}={text} at line {loc.line}"
    if kind == "jax-fraction":
        try:
            add_cap(state, MemoryCap(kind, float(text), where, loc))
        except ValueError:
            return
    elif kind == "jax-preallocate":
        add_cap(state, MemoryCap(kind, text.lower() not in ("false", "0", "no"), where, loc))
    elif kind == "jax-allocator":
        add_cap(state, MemoryCap(kind, text.lower(), where, loc))
    elif kind == "visible-devices":
        ids = [part for part in text.split(",") if part.strip() not in ("", "-1")]
        add_cap(state, MemoryCap(kind, len(ids), where, loc))
    elif kind == "tf-growth":
        add_cap(state, MemoryCap(kind, text.lower() == "true", where, loc))


def _session_caps(state, config: SessionConfig, loc: Location) -> None:
    options = dict(config.options)
    where = dict(config.where)
    if config.gpu_options is not None:
        options.update(config.gpu_options.options)
        where.update(config.gpu_options.where)
    fraction = options.get("per_process_gpu_memory_fraction")
    if isinstance(fraction, (int, float)) and not isinstance(fraction, bool) and fraction > 0:
        line = where.get("per_process_gpu_memory_fraction", loc.line)
        add_cap(state, MemoryCap("tf-fraction", float(fraction),
                                 f"per_process_gpu_memory_fraction = {fraction} (line {line}),"
                                 f" given to a Session at line {loc.line}", loc))


def _logical_caps(state, configs: Any, loc: Location) -> None:
    if not isinstance(configs, (list, tuple)) or not configs:
        return
    limits = [c.memory_limit for c in configs if isinstance(c, LogicalDevice)]
    if not limits or not all(isinstance(m, (int, float)) and not isinstance(m, bool)
                             for m in limits):
        return
    # the model runs on the first logical device unless a strategy spreads it
    many = f" (first of {len(limits)} logical devices on the card)" if len(limits) > 1 else ""
    add_cap(state, MemoryCap("tf-limit", int(limits[0]) * 2**20,
                             f"memory_limit={limits[0]} MB at line {loc.line}{many}", loc))
    if len(limits) > 1:
        add_cap(state, MemoryCap("logical-devices", len(limits),
                                 f"{len(limits)} logical devices at line {loc.line}", loc))


# ---------------------------------------------------------------------- strategies

def _tf_strategy(state, kind: str, args: list, kwargs: dict, loc: Location) -> Strategy:
    if kind == "OneDeviceStrategy" or kind == "get_strategy":
        return Strategy(kind, 1, loc)
    devices = kwargs.get("devices", args[0] if args and kind == "MirroredStrategy" else None)
    replicas = len(devices) if isinstance(devices, (list, tuple)) else None
    note = ""
    if kind.startswith("MultiWorker"):
        note = "each worker's GPUs are replicas; the estimate is per GPU of one worker"
    return Strategy(kind, replicas, loc, note=note)


def _multi_gpu_model(interp, args: list, kwargs: dict, loc: Location) -> Any:
    model = args[0] if args else kwargs.get("model")
    gpus = kwargs.get("gpus", args[1] if len(args) > 1 else None)
    count = len(gpus) if isinstance(gpus, (list, tuple)) else gpus
    if not isinstance(count, int) or isinstance(count, bool):
        count = None
    strategy = Strategy("multi_gpu_model", count, loc,
                        note="keras.utils.multi_gpu_model was removed in TensorFlow 2.4; it "
                             "split each batch over the GPUs with a copy of the model on each")
    interp.state.note_info(loc, "multi_gpu_model() was removed in TensorFlow 2.4 (use "
                                "tf.distribute.MirroredStrategy); memlint estimates what it "
                                "did: each GPU holds the model and an equal share of the batch")
    if hasattr(model, "usage"):
        model.strategy = strategy
        return model
    return Unknown("the model multi_gpu_model() wraps is not known statically")


def _keras_distribution(interp, short: str, args: list, kwargs: dict, loc: Location) -> Any:
    state = interp.state
    if short == "DeviceMesh":
        shape = kwargs.get("shape", args[0] if args else None)
        names = kwargs.get("axis_names", args[1] if len(args) > 1 else None)
        if isinstance(shape, int):
            shape = (shape,)
        if isinstance(shape, (list, tuple)) and all(isinstance(d, int) for d in shape) \
                and isinstance(names, (list, tuple)):
            return DeviceMesh(tuple(shape), tuple(names))
        return Unknown("a device mesh whose shape is not known statically")
    if short == "LayoutMap":
        mesh = kwargs.get("device_mesh", args[0] if args else None)
        return LayoutMap(mesh if isinstance(mesh, DeviceMesh) else None)
    if short == "DataParallel":
        mesh = kwargs.get("device_mesh")
        devices = kwargs.get("devices", args[0] if args else None)
        replicas = None
        if isinstance(mesh, DeviceMesh):
            replicas = _product(mesh.shape)
        elif isinstance(devices, (list, tuple)):
            replicas = len(devices)
        return Strategy("DataParallel", replicas, loc)
    if short == "ModelParallel":
        layout = kwargs.get("layout_map", args[0] if args else None)
        mesh = kwargs.get("device_mesh") or (layout.mesh if isinstance(layout, LayoutMap)
                                             else None)
        batch_axis = kwargs.get("batch_dim_name")
        if not isinstance(mesh, DeviceMesh):
            return Strategy("ModelParallel", None, loc, note="the device mesh is not known")
        sizes = dict(zip(mesh.axis_names, mesh.shape))
        replicas = sizes.get(batch_axis, 1) if batch_axis else sizes.get(mesh.axis_names[0], 1)
        shards = []
        if isinstance(layout, LayoutMap):
            for pattern, axes in layout.layouts.items():
                factor = _product(sizes.get(a, 1) for a in axes if isinstance(a, str))
                if factor > 1:
                    shards.append((pattern, factor))
        return Strategy("ModelParallel", replicas, loc, shards=shards)
    if short == "set_distribution":
        strategy = args[0] if args else kwargs.get("value")
        if isinstance(strategy, Strategy):
            state.distribution = (strategy, len(state.models))  # for models made after it
        return None
    if short == "list_devices":
        return Devices()
    return NOT_DEVICES


def _product(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


# ---------------------------------------------------------------------- attributes

def get_attribute(obj: Any, attr: str) -> Any:
    """Attributes of device values (``config.gpu_options``, ``strategy.num_replicas_in_sync``);
    NOT_DEVICES for other objects."""
    if isinstance(obj, SessionConfig):
        if attr == "gpu_options":
            if obj.gpu_options is None:
                obj.gpu_options = SessionConfig()
            return obj.gpu_options
        return obj.options.get(attr, Unknown(f"session option {attr}"))
    if isinstance(obj, Strategy):
        if attr == "num_replicas_in_sync":
            return obj.replicas if obj.replicas is not None else Replicas(obj)
        if attr in ("scope", "distribute_datasets_from_function",
                    "experimental_distribute_dataset", "run"):
            from memlint.frontends.keras.values import BoundMethod
            return BoundMethod(obj, attr)
        return Unknown(f"strategy attribute {attr}")
    return NOT_DEVICES


def set_attribute(obj: Any, attr: str, value: Any, loc: Location) -> bool:
    """``config.gpu_options.per_process_gpu_memory_fraction = 0.6``; False if not ours."""
    if isinstance(obj, SessionConfig):
        if not is_unknown(value):
            obj.options[attr] = value
            obj.where[attr] = loc.line
        return True
    return False


def set_item(obj: Any, key: Any, value: Any) -> bool:
    """``layout_map["dense.*kernel"] = (None, "model")``; False if not ours."""
    if isinstance(obj, LayoutMap) and isinstance(key, str) and isinstance(value, (tuple, list)):
        obj.layouts[key] = tuple(value)
        return True
    return False


def method(interp, obj: Any, name: str, args: list, kwargs: dict, node) -> Any:
    if isinstance(obj, Strategy) and name == "scope":
        return StrategyScope(obj)
    if isinstance(obj, Strategy) and name == "experimental_distribute_dataset":
        from memlint.frontends.keras.data import Dataset
        if args and isinstance(args[0], Dataset):
            return replace(args[0], distributed=True)
        return args[0] if args else Unknown("a distributed dataset")
    if isinstance(obj, Strategy) and name == "distribute_datasets_from_function":
        return args[0] if args else Unknown("a distributed dataset")
    if isinstance(obj, Strategy) and name == "run":
        # strategy.run(step, args=(batch,)): each replica runs the step on its share
        from memlint.frontends.keras.calls import call
        fn = args[0] if args else kwargs.get("fn")
        given = kwargs.get("args", args[1] if len(args) > 1 else ())
        named = kwargs.get("kwargs", args[2] if len(args) > 2 else None) or {}
        if fn is None or not isinstance(given, (tuple, list)) or not isinstance(named, dict):
            return Unknown("strategy.run() of a step not known statically")
        return call(interp, fn, list(given), dict(named), node)
    return Unknown(f"method {name}() of a strategy is not evaluated")


def multiply(left: Any, right: Any) -> Any:
    """``64 * strategy.num_replicas_in_sync`` (either order): a per-replica amount."""
    for count, factor in ((left, right), (right, left)):
        if isinstance(count, Replicas) and isinstance(factor, int) \
                and not isinstance(factor, bool):
            return PerReplica(factor)
    return NOT_DEVICES


def length(value: Any) -> Any:
    """``len(jax.devices())``: the number of devices, not stated (NOT_DEVICES for others)."""
    return Replicas(None) if isinstance(value, Devices) else NOT_DEVICES


def is_device_value(value: Any) -> bool:
    return isinstance(value, (Replicas, PerReplica))


__all__ = ["Strategy", "StrategyScope", "PerReplica", "Replicas", "call", "get_attribute",
           "set_attribute", "set_item", "method", "multiply", "set_env", "NOT_DEVICES"]
