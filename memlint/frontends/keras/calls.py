"""What calls and attribute look-ups on library objects evaluate to.

Keras layers, models, optimizers, precision and image-format settings, NumPy array
constructors and a few builtins are modelled here; any other call evaluates to an
:class:`Unknown` value that says what was not evaluated.
"""

from __future__ import annotations

import math
import re
from typing import Any, Optional

import libcst as cst

from memlint.frontends.keras import (classes, data, devices, keras_utils, models, nested,
                                    plain_objects, shape_attrs, tensor_ops, training_loops,
                                    variables)
from memlint.frontends.keras import application_preprocessing, applications, arrays, batches
from memlint.frontends.keras import frames, transformers
from memlint.frontends.keras.names import canonical, layer_class
from memlint.frontends.keras.layer_isinstance import layer_isinstance
from memlint.frontends.keras.values import (INPUT_SHAPE_UNKNOWN, Array, Batches, BoundMethod,
                                            FunctionalModel, LayerRef, ModelLayer, ModuleValue,
                                            OpaqueLayer, Optimizer, Partial, Policy, Ref, Rows,
                                            SequentialModel, Tensor, Unknown, UserFunction,
                                            flatten_structure, is_hashable, is_unknown)
from memlint.frontends.keras.state import MAX_SEQUENCE
from memlint.ir import OptimizerSpec

BUILTINS = frozenset({
    "range", "len", "int", "float", "str", "bool", "min", "max", "sum", "abs", "round",
    "list", "tuple", "dict", "print", "zip", "enumerate", "sorted", "reversed", "isinstance",
    "divmod", "map", "getattr", "any", "all", "chr", "ord", "type", "set", "frozenset",
})

# Keras 2 functional merge helpers: keras.layers.add([a, b]) -> Add()([a, b])
_MERGE_FUNCTIONS = {
    "add": "Add", "subtract": "Subtract", "multiply": "Multiply", "average": "Average",
    "maximum": "Maximum", "minimum": "Minimum", "concatenate": "Concatenate", "dot": "Dot",
}
# Keras 1 merge(mode=...) -> Keras 3 layer
_KERAS1_MERGE_MODES = {"sum": "Add", "mul": "Multiply", "concat": "Concatenate",
                       "ave": "Average", "max": "Maximum", "dot": "Dot"}

_MATH = {"math.ceil": math.ceil, "math.floor": math.floor, "math.sqrt": math.sqrt,
         "math.log2": math.log2}
_DEVICE_LISTS = {"tensorflow.config.list_physical_devices",
                 "tensorflow.config.experimental.list_physical_devices",
                 "tensorflow.config.list_logical_devices",
                 "tensorflow.config.experimental.list_logical_devices"}
_NUMPY_SIZE_FUNCS = {"numpy.zeros", "numpy.ones", "numpy.empty", "numpy.full"}
# TensorFlow tensor constructors whose first argument is the shape
_TF_SHAPE_FUNCS = {"tensorflow.zeros", "tensorflow.ones", "tensorflow.fill",
                   "tensorflow.random.normal", "tensorflow.random.uniform",
                   "tensorflow.random.truncated_normal"}
# Keras's own constructors of random or filled tensors, shape first: on a shape with the
# batch dimension (``ops.shape(x)[0]`` in a layer's call()) a batch-sized symbolic tensor
_KERAS_SHAPE_FUNCS = {"keras.random.normal", "keras.random.uniform",
                      "keras.random.truncated_normal", "keras.random.randint",
                      "keras.ops.zeros", "keras.ops.ones", "keras.ops.full"}
_LIKE_FUNCS = {"numpy.zeros_like", "numpy.ones_like", "numpy.empty_like", "numpy.full_like",
               "numpy.asarray", "numpy.array", "tensorflow.zeros_like", "tensorflow.ones_like",
               "tensorflow.convert_to_tensor", "tensorflow.constant", "tensorflow.cast",
               "torch.from_numpy", "torch.as_tensor", "torch.tensor",
               "keras.ops.convert_to_numpy", "keras.ops.convert_to_tensor", "keras.ops.cast"}
_NUMPY_DIMS_FUNCS = {"numpy.random.rand", "numpy.random.randn"}
_NUMPY_SIZE_KW_FUNCS = {"numpy.random.random", "numpy.random.random_sample",
                        "numpy.random.uniform", "numpy.random.normal", "numpy.random.randint",
                        "numpy.random.standard_normal", "numpy.random.sample"}


# ---------------------------------------------------------------------- attributes

def get_attribute(interp, base: Any, attr: str, node) -> Any:
    """``base.attr`` for an abstract value."""
    if isinstance(base, Ref):
        return Ref(canonical(f"{base.name}.{attr}"))
    if isinstance(base, ModuleValue):
        if attr in base.names:
            return base.names[attr]
        return Unknown(f"'{attr}' is not defined (statically) in module '{base.name}'")
    if isinstance(base, classes.ClassLayer):
        base = base.obj
    if isinstance(base, (classes.ClassObject, classes.SuperProxy)):
        return classes.get_attribute(base, attr)
    if isinstance(base, (plain_objects.PlainObject, plain_objects.PlainClass)):
        return plain_objects.get_attribute(interp, base, attr, node)
    found = devices.get_attribute(base, attr)
    if found is not devices.NOT_DEVICES:
        return found
    if isinstance(base, (plain_objects.ArgumentParser, training_loops.Tape)) or (
            isinstance(base, Optimizer) and attr in training_loops.APPLYING):
        return BoundMethod(base, attr)
    found = shape_attrs.get_attribute(base, attr)  # x._keras_shape, x.get_shape(), ...
    if found is not shape_attrs.NOT_SHAPE:
        return found
    if isinstance(base, Array):
        return arrays.get_attribute(base, attr)
    if isinstance(base, frames.Frame):  # pandas: df.values, df.shape, df.iloc, ...
        return frames.get_attribute(base, attr)
    if isinstance(base, transformers.Transformer):  # scaler.fit_transform, ...
        return transformers.get_attribute(base, attr)
    if isinstance(base, (Tensor, Array)):
        if attr == "shape":
            if isinstance(base, Tensor) and base.shape is None:
                return Unknown(base.reason or "tensor shape not known statically")
            return tuple(base.shape)
        if attr == "ndim":
            return len(base.shape) if base.shape is not None else Unknown("unknown rank")
    if isinstance(base, LayerRef):
        if attr == "output" and base.calls:
            return models.output_tensors(base, len(base.calls) - 1)
        if attr == "trainable":
            return base.instance.trainable
        if attr == "name":
            return base.name
        if attr in ("input_shape", "output_shape") and len(base.calls) == 1:
            # Keras 2's layer attributes (a layer called once); Keras 3 has none
            found = base.calls[0].input_shapes if attr == "input_shape" \
                else base.calls[0].output_shape
            return found if found is not None else Unknown(
                f"the {attr} of layer '{base.name}' is not known statically")
    if isinstance(base, ModelLayer):
        base = base.model
    if isinstance(base, (SequentialModel, FunctionalModel)):
        if attr == "layers":
            return nested.model_layers(base)
        if attr in ("name", "trainable"):
            return getattr(base, attr)
        if attr in ("input_shape", "output_shape"):
            return nested.shape_attribute(base, attr)
    if isinstance(base, SequentialModel) and attr in ("input", "inputs", "output", "outputs"):
        return Unknown(f"the symbolic {attr} of Sequential model '{base.name}', which memlint "
                       "does not model (build the part it comes from with keras.Input and "
                       "the functional API)")
    if isinstance(base, FunctionalModel):
        if attr in ("input", "inputs"):
            return base.inputs if attr == "inputs" or len(base.inputs) != 1 else base.inputs[0]
        if attr in ("output", "outputs"):
            return base.outputs if attr == "outputs" or len(base.outputs) != 1 else base.outputs[0]
    if isinstance(base, (SequentialModel, FunctionalModel, LayerRef, list, dict, Array, Tensor,
                         data.Dataset, data.ImageGenerator)):
        return BoundMethod(base, attr)
    if isinstance(base, str) and attr in _STR_METHODS:
        return BoundMethod(base, attr)
    return Unknown(f"attribute '{attr}' of a value not known statically")


def set_attribute(obj: Any, attr: str, value: Any, location=None) -> None:
    """``obj.attr = value`` where it matters to the model (``layer.trainable = False``)."""
    if isinstance(obj, classes.ClassLayer):
        obj = obj.obj
    if isinstance(obj, classes.ClassObject):
        classes.set_attribute(obj, attr, value)
    elif isinstance(obj, plain_objects.PlainObject):
        plain_objects.set_attribute(obj, attr, value)
    elif devices.set_attribute(obj, attr, value, location):
        pass
    elif attr == "trainable" and isinstance(value, bool):
        nested.set_trainable(obj, value)


def subscript(base: Any, key: Any, failed=None) -> Any:
    """``base[key]`` on plain containers and known shapes; ``failed(error name)`` is told
    when Python would raise (it may raise into the analysed code's own ``try``)."""
    if is_unknown(key):
        return Unknown("index not known statically")
    if is_unknown(base) and base.reason == INPUT_SHAPE_UNKNOWN:
        return base  # inputs.shape[-1] of an Input whose shape is not known: say so
    if isinstance(base, (list, tuple, str, dict)):
        try:
            return base[key]
        except (IndexError, KeyError) as exc:
            if failed is not None:
                failed(type(exc).__name__)
            return Unknown("index out of range or missing key in the analysed code")
        except TypeError:
            return Unknown("index out of range or missing key in the analysed code")
    if isinstance(base, Array):
        return arrays.getitem(base, key)
    if frames.is_frame(base):
        return frames.getitem(base, key)
    if isinstance(base, data.Splits) and isinstance(key, str):  # tfds.load(name)["train"]
        return base.dataset
    return Unknown("subscript of a value not known statically")


def _vocabulary(layer: LayerRef, args: list, kwargs: dict) -> Any:
    """``lookup.get_vocabulary(include_special_tokens=True)`` of a StringLookup,
    IntegerLookup or TextVectorization given a literal vocabulary (keras.io's OCR models
    size their output ``len(char_to_num.get_vocabulary()) + 1``)."""
    listed = layer.instance.config.get("vocabulary")
    if listed is None:
        return Unknown(f"the vocabulary of {layer.type} '{layer.name}' is not known "
                       "statically (adapt() or a file gives it at run time)")
    if (args[0] if args else kwargs.get("include_special_tokens", True)) is not True:
        return Unknown("the vocabulary without its special tokens is not evaluated")
    return list(listed)


def _data_called_on(interp, func: Any, args: list, kwargs: dict) -> Optional[Array]:
    """The data a layer or model is called on, where it is data: an array (for a model, a
    list of arrays too, one per input), or for a model a training step takes, a tensor of
    values no layer made of a known shape (a style transfer's
    ``tf.Variable(tf.zeros((1, 224, 224, 3)))``); None otherwise."""
    if not args or not isinstance(func, (LayerRef, SequentialModel, FunctionalModel)):
        return None
    value = args[0]
    if isinstance(value, Array):
        return value
    if isinstance(value, (list, tuple)) and value and not isinstance(func, LayerRef) \
            and all(isinstance(leaf, Array) and leaf.shape for leaf in value):
        return list(value)  # a model of several inputs: pix2pix's discriminator([x, y])
    if isinstance(value, Tensor) and value.producer is None and value.shape \
            and None not in value.shape and not isinstance(func, LayerRef) \
            and training_loops.trains(interp, kwargs):
        return Array(tuple(value.shape), "float32")
    return None


# ---------------------------------------------------------------------- calls

def call(interp, func: Any, args: list, kwargs: dict, node) -> Any:
    """The value of ``func(*args, **kwargs)``."""
    if isinstance(func, Ref):
        return call_ref(interp, func.name, args, kwargs, node)
    if isinstance(func, BoundMethod):
        return call_method(interp, func.obj, func.method, args, kwargs, node)
    if isinstance(func, _LAYER_LIKE) and batches.has_batches([args, kwargs]) and not (
            isinstance(func, LayerRef) and func.type == "Concatenate"):  # (models.call_layer)
        # a discriminator run on real and generated images joined
        return batches.run_on([args, kwargs], lambda both: call(
            interp, func, both[0], both[1], node), f"a call of {type(func).__name__}")
    if isinstance(func, (SequentialModel, FunctionalModel)) and args and is_unknown(args[0]) \
            and not getattr(interp, "tracing", 0) and training_loops.trains(interp, kwargs):
        # a training loop's step on data memlint cannot size (a reinforcement-learning
        # agent's state from its environment): its batch is not known, not Keras's default
        training_loops.record_call(interp, func.usage, args, kwargs, node, func.name)
    batch = _data_called_on(interp, func, args, kwargs)
    if batch is not None:  # preprocessing data (``ds.map(augment)``), or a training step
        if isinstance(func, (SequentialModel, FunctionalModel)) and \
                training_loops.trains(interp, kwargs):  # a custom training loop's step
            training_loops.record_call(interp, func.usage, args, kwargs, node, func.name,
                                       batch)
        elif isinstance(func, (SequentialModel, FunctionalModel)) and \
                interp.dataset_map is not None:
            func.mapped_by.append(interp.dataset_map)
        return data.apply_to_data(func, batch)
    if isinstance(func, (LayerRef, OpaqueLayer)):
        return models.call_layer(interp, func, args, kwargs, node)
    if isinstance(func, UserFunction):
        return interp.call_function(func, args, kwargs, node)
    if isinstance(func, Partial):
        return call(interp, func.func, [*func.args, *args], {**func.kwargs, **kwargs}, node)
    if isinstance(func, variables.Initializer):  # initializer(shape): its first value
        return variables.initial_value(func, args, kwargs)
    if isinstance(func, training_loops.Differentiated):  # jax.value_and_grad(f)(...)
        return training_loops.run_differentiated(
            interp, func, lambda: call(interp, func.fn, args, kwargs, node),
            interp.location(node).line)
    if isinstance(func, plain_objects.PlainClass):
        return plain_objects.construct(interp, func, args, kwargs, node)
    if isinstance(func, plain_objects.PlainMethod):
        return interp.call_function(func.fn, [func.obj, *args], kwargs, node)
    if isinstance(func, plain_objects.PlainObject) and "__call__" in func.cls.methods:
        # an object of the file called: its __call__ (a tf.Module's step, DeepDream's)
        return interp.call_function(func.cls.methods["__call__"], [func, *args], kwargs, node)
    if isinstance(func, classes.UserClass):
        return classes.construct(interp, func, args, kwargs, node)
    if isinstance(func, classes.ObjMethod):
        return classes.call_method(interp, func, args, kwargs, node)
    if isinstance(func, classes.SuperCall):
        return classes.SuperProxy(func.obj)
    if isinstance(func, classes.ClassObject):
        return classes.call_object(interp, func, args, kwargs, node)
    if isinstance(func, classes.ClassLayer):
        return models.call_layer(interp, func, args, kwargs, node)
    if isinstance(func, (SequentialModel, FunctionalModel)):
        return models.call_layer(interp, nested.model_as_layer(func), args, kwargs, node)
    if isinstance(func, ModelLayer):
        return models.call_layer(interp, func, args, kwargs, node)
    if is_unknown(func):
        if getattr(func, "constructed", None) and _has_tensor(args, kwargs):
            # an object of a class memlint does not know, called on tensors: a custom layer
            layer = models.opaque_layer_from(interp, func)
            return models.call_layer(interp, layer, args, kwargs, node)
        if not getattr(func, "runs_no_layer", False):
            _note_hidden_calls(interp, args, kwargs)
        result = Unknown(f"call of a value not known statically ({func.reason})")
        class_name = getattr(func, "class_name", None)
        if class_name:  # a class defined in the analysed file: maybe a custom layer
            result.constructed = (class_name, interp.location(node),
                                  "a class defined in this file, not evaluated")
        return result
    return Unknown("call of a value that is not callable statically")


# what, called on a tensor, is a layer call (runs on each part of a tensor of several batches)
_LAYER_LIKE = (LayerRef, OpaqueLayer, SequentialModel, FunctionalModel, ModelLayer,
               classes.ClassObject, classes.ClassLayer)


def _reduce(interp, args: list, node) -> Any:
    """``functools.reduce(fn, items[, initial])`` over a sequence known statically (a
    ``compose(*funcs)`` helper folding layers into one function, as Keras 2 YOLO code
    does); each step is a call of ``fn``."""
    fn, items = args[0], args[1]
    if not isinstance(items, (list, tuple, range)):
        return Unknown("reduce() over a sequence not known statically")
    items = list(items)
    if len(args) == 3:
        items.insert(0, args[2])
    if not items:
        interp.lookup_failed("TypeError")
        return Unknown("reduce() of an empty sequence with no initial value")
    if len(items) > MAX_SEQUENCE or not interp.state.allocate(len(items)):
        return Unknown("reduce() over a sequence too large to evaluate")
    acc = items[0]
    for item in items[1:]:
        acc = call(interp, fn, [acc, item], {}, node)
    return acc


def _note_hidden_calls(interp, args: list, kwargs: dict) -> None:
    """Inside a traced call() or train_step(), a call memlint does not evaluate, given a
    tensor, a layer or a function (``ops.vectorized_map(self.encoder, x)``): a layer may run
    there unseen (``FileState.hidden_calls``).  A model's attribute (``tape.gradient(loss,
    model.trainable_weights)``) is none of these."""
    if getattr(interp, "tracing", 0) and any(
            isinstance(v, Tensor) and (v.shape is None or len(v.shape) > 0)
            or isinstance(v, _LAYER_LIKE + (UserFunction, Partial, classes.ObjMethod))
            for v in flatten_structure([args, kwargs])):
        interp.state.hidden_calls += 1


def _has_tensor(args: list, kwargs: dict) -> bool:
    values = list(args) + list(kwargs.values())
    return any(isinstance(v, Tensor) or (isinstance(v, (list, tuple))
                                         and any(isinstance(t, Tensor) for t in v))
               for v in values)


def call_ref(interp, name: str, args: list, kwargs: dict, node) -> Any:
    state = interp.state
    cls = layer_class(name)
    if cls is not None:
        return models.create_layer(interp, cls, args, kwargs, node)
    short = name.rsplit(".", 1)[-1]
    if name == "keras.Input":
        return models.create_input(interp, args, kwargs, node)
    if name == "keras.Sequential":
        return models.create_sequential(interp, args, kwargs, node)
    if name == "keras.Model":
        return models.create_functional(interp, args, kwargs, node)
    if name == "keras.models.clone_model":
        return models.clone_model(interp, args, kwargs, node)
    if name.startswith("keras.layers.") and short in _MERGE_FUNCTIONS:
        layer = models.create_layer(interp, _MERGE_FUNCTIONS[short], [], _without(kwargs, "inputs"), node)
        inputs = args[0] if args else kwargs.get("inputs")
        return models.call_layer(interp, layer, [inputs], {}, node)
    if name == "keras.layers.merge":
        return _keras1_merge(interp, args, kwargs, node)
    if short == "LossScaleOptimizer" and name.startswith("keras."):
        # (mixed precision's wrapper: the optimizer it wraps keeps the slots; the loss scale
        # is the policy's, memory.optimizers)
        inner = args[0] if args else kwargs.get("inner_optimizer", kwargs.get("optimizer"))
        if isinstance(inner, Optimizer):
            return inner
        if isinstance(inner, str):
            return Optimizer(optimizer_spec(inner, [], {}, "optimizer object"))
        return Unknown("the optimizer a LossScaleOptimizer wraps is not known statically")
    if name.startswith("tensorflow_addons.optimizers.") and short.lower() in TFA_OPTIMIZERS:
        return Optimizer(optimizer_spec(short, args, kwargs, "optimizer object"))
    if name.startswith("keras.optimizers.") and (
            short[:1].isupper() or short in KERAS2_OPTIMIZER_ALIASES):
        return Optimizer(optimizer_spec(short, args, kwargs, "optimizer object"))
    if name.startswith("keras.losses.") and short[:1].isupper():
        return Ref(name)  # a loss object: compile() needs only which loss it is
    if name == "tensorflow.Variable":  # a constant to Keras 3, none of the layer's weights
        return variables.variable(args, kwargs)
    if training_loops.is_tape(name):
        return training_loops.Tape()
    if name == "keras.Variable":  # a weight of the layer that keeps it (classes.track)
        return variables.keras_variable(args, kwargs)
    if name == training_loops.JIT and args:  # ``train_step = jax.jit(train_step)``
        return training_loops.jitted(args[0], kwargs, interp.location(node).line)
    made = variables.initializer(name) or training_loops.differentiated(name, args, kwargs)
    if made is not None:
        return made
    if name == "keras.mixed_precision.set_global_policy":
        policy = _policy_name(args[0] if args else kwargs.get("policy"))
        if policy is not None:
            state.dtype_policy = policy
            # named as the code spells it (Keras 3's keras.config.set_dtype_policy too)
            from memlint.frontends.keras.interpreter import _dotted
            spelled = _dotted(getattr(node, "func", None)).rsplit(".", 1)[-1] \
                or "set_global_policy"
            state.dtype_source = f"{spelled} at line {interp.location(node).line}"
        return None
    if name == "keras.mixed_precision.Policy":
        return Policy(args[0]) if args and isinstance(args[0], str) else Unknown("policy name")
    if name == "keras.backend.set_floatx":
        if args and isinstance(args[0], str):
            state.dtype_policy = args[0]
            state.dtype_source = f"set_floatx at line {interp.location(node).line}"
        return None
    if name in ("keras.backend.set_image_data_format", "keras.backend.set_image_dim_ordering"):
        value = args[0] if args else None
        value = {"th": "channels_first", "tf": "channels_last"}.get(value, value)
        if value in ("channels_first", "channels_last"):
            state.context.data_format = value
        return None
    if name == "keras.backend.int_shape":  # K.int_shape(x): the static shape, batch first
        tensor = args[0] if args else kwargs.get("x")
        if isinstance(tensor, Tensor) and tensor.shape is not None:
            return tuple(tensor.shape)
        return Unknown("int_shape of a tensor whose shape is not known statically")
    if name in ("keras.backend.is_keras_tensor", "keras.utils.is_keras_tensor"):
        value = args[0] if args else kwargs.get("x")
        if isinstance(value, (Tensor, Array)):  # a symbolic tensor, or NumPy data
            return isinstance(value, Tensor)
        return Unknown("is_keras_tensor() of a value not known statically")
    if name == "keras.backend.ndim":  # K.ndim(x): the rank, batch included
        tensor = args[0] if args else kwargs.get("x")
        if isinstance(tensor, Tensor) and tensor.shape is not None:
            return len(tensor.shape)
        return Unknown("ndim of a tensor whose shape is not known statically")
    if name == "keras.backend.image_data_format":
        return state.context.data_format
    if name == "keras.backend.image_dim_ordering":
        return "th" if state.context.data_format == "channels_first" else "tf"
    value = data.call(interp, name, args, kwargs, node)
    if value is not data.NOT_DATA:
        return value
    if name in ("os.environ.get", "os.getenv"):
        return plain_objects.environment_value(interp, name, args, kwargs, node)
    value = devices.call(interp, name, args, kwargs, node)
    if value is not devices.NOT_DEVICES:
        return value
    if name in _DEVICE_LISTS:
        # the machine's devices: one stands for all, so `for gpu in gpus:` bodies and
        # `if gpus:` branches (memory-growth settings) are followed without a note
        return [Unknown("a device of the machine that runs the code")]
    if frames.handles(name):  # pd.read_csv, pd.DataFrame, ...
        return frames.call(name, args, kwargs)
    if transformers.handles(name):  # StandardScaler(), PCA(n_components=8), ...
        return transformers.create(name, args, kwargs)
    if name == "sklearn.model_selection.train_test_split" and any(
            isinstance(a, frames.Frame) for a in args):
        return frames.train_test_split(args, kwargs)
    if name in ("numpy.array", "numpy.asarray") and args and isinstance(args[0], frames.Frame):
        dtype = kwargs.get("dtype")
        return frames.to_array(args[0], arrays.dtype_name(dtype) if dtype is not None else None)
    if arrays.handles(name, args, kwargs):  # keras.datasets, to_categorical, tf.image, ...
        return arrays.call(state, name, args, kwargs)
    if name in _LIKE_FUNCS and args and isinstance(args[0], Array):
        return arrays.like(name, args, kwargs)
    if name in _TF_SHAPE_FUNCS or name in _KERAS_SHAPE_FUNCS:
        given = args[0] if args else kwargs.get("shape", kwargs.get("dims"))
        dims = _as_dims(given)
        if dims is not None and name in _TF_SHAPE_FUNCS:
            return Array(dims, arrays.constructor_dtype(name, kwargs, args))
        symbolic = _symbolic_dims(given)
        return Tensor(symbolic) if symbolic is not None else \
            Unknown(f"{name} of a shape not known")
    if name in classes.TENSOR_FUNCTIONS:
        return classes.tensor_function(name, args, kwargs)
    if name.startswith("numpy."):
        return _numpy(name, args, kwargs)
    value = keras_utils.utility(name, args, kwargs, state.context.data_format)
    if value is not None:
        if keras_utils.is_refusal(value):
            state.note_error(interp.location(node), f"{short}(): {value.reason}")
        return value
    factory = applications.factory_of(name)
    if factory is not None:
        return applications.call_factory(interp, factory, name, args, kwargs, node)
    if applications.is_model_zoo(name):
        return applications.zoo_note(interp, name, node)
    if name in _SAVED_MODEL_LOADERS:
        return _saved_model_note(interp, name, args, kwargs, node)
    if name.startswith(("keras_tuner.", "kerastuner.")):
        return _tuner_note(interp, name, args, kwargs, node)
    module = application_preprocessing.preprocessing_module(name)
    if module is not None:
        value = application_preprocessing.preprocess_input(interp, module, args, kwargs, node)
        if value is not None:
            return value
    if name in ("types.SimpleNamespace", "argparse.Namespace") and not args:
        return plain_objects.namespace(kwargs)
    if name == "argparse.ArgumentParser":
        return plain_objects.ArgumentParser(location=interp.location(node))
    if name in ("copy.copy", "copy.deepcopy") and len(args) == 1:
        return _copied(args[0], deep=name == "copy.deepcopy")
    if name == "functools.partial" and args:
        return Partial(args[0], tuple(args[1:]), dict(kwargs))
    if name == "functools.reduce" and len(args) in (2, 3) and not kwargs:
        return _reduce(interp, args, node)
    if name == "builtins.getattr" and len(args) in (2, 3) and isinstance(args[1], str):
        return get_attribute(interp, args[0], args[1], node)
    if name == "builtins.map" and len(args) == 2 and isinstance(args[1], (list, tuple, range)):
        if len(args[1]) > MAX_SEQUENCE or not state.allocate(len(args[1])):
            return Unknown("map() over a sequence too large to evaluate")
        return [call(interp, args[0], [item], {}, node) for item in args[1]]
    if name == "math.prod" and len(args) == 1 and isinstance(args[0], (list, tuple)) \
            and all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args[0]):
        return math.prod(args[0])
    if name.startswith("builtins."):
        found = _builtin(state, short, args, kwargs)
        return _given_length(interp, node, found) if short == "len" else found
    if name in _MATH and args and all(isinstance(a, (int, float)) for a in args):
        try:
            return _MATH[name](*args)
        except (ValueError, OverflowError, TypeError):
            return Unknown(f"{name}() failed on these arguments")
    if tensor_ops.is_operation(name):
        if any(isinstance(v, (Tensor, Batches)) for v in flatten_structure([args, kwargs])):
            return models.apply_operation(interp, name, args, kwargs, node)
        constant = tensor_ops.constant(name, args, kwargs)
        if constant is not None:  # ops.arccos(0.95): a tensor, run at once, in no graph
            return constant
        if name.startswith("keras.ops.") and any(
                isinstance(v, Array) for v in flatten_structure([args, kwargs])):
            return arrays.keras_op(tensor_ops.OPERATIONS[name][0], args, kwargs)
    _note_hidden_calls(interp, args, kwargs)
    result = Unknown(f"call to {name} is not evaluated")
    if short[:1].isupper():  # a class: if it is used as a layer, it is a custom layer
        result.constructed = (short, interp.location(node),
                              f"{name} is not a layer memlint knows (custom or third-party?)")
    return result


def call_method(interp, obj: Any, method: str, args: list, kwargs: dict, node) -> Any:
    if training_loops.record_optimizer(interp, obj, method, node, args):
        return None
    if isinstance(obj, training_loops.Tape):
        return training_loops.tape_method(interp, obj, method, args, kwargs, node)
    if isinstance(obj, LayerRef) and method == "get_vocabulary":
        return _vocabulary(obj, args, kwargs)
    if isinstance(obj, (SequentialModel, FunctionalModel)):
        if method == "stateless_call":  # (trainable, non-trainable, inputs...): a call
            return (call(interp, obj, args[2:], kwargs, node),
                    Unknown("the non-trainable variables stateless_call returns"))
        return models.model_method(interp, obj, method, args, kwargs, node)
    if isinstance(obj, (data.Dataset, data.ImageGenerator)):
        return data.method(interp, obj, method, args, kwargs, node)
    if isinstance(obj, devices.Strategy):
        return devices.method(interp, obj, method, args, kwargs, node)
    if isinstance(obj, plain_objects.ArgumentParser):
        if method == "add_argument":
            plain_objects.add_argument(obj, args, kwargs)
            return None
        if method in ("parse_args", "parse_known_args"):
            parsed = plain_objects.parse_args(interp, obj, node)
            return parsed if method == "parse_args" else (parsed, [])
        return Unknown(f"ArgumentParser.{method}() is not evaluated")
    if isinstance(obj, list):
        if method == "append" and len(args) == 1:
            obj.append(args[0])
            return None
        if method == "extend" and len(args) == 1 and isinstance(args[0], (list, tuple)):
            if len(obj) + len(args[0]) > MAX_SEQUENCE or not interp.state.allocate(len(args[0])):
                return Unknown("list too large to evaluate")
            obj.extend(args[0])
            return None
        if method == "pop" and obj:
            try:
                return obj.pop(args[0] if args and isinstance(args[0], int) else -1)
            except IndexError:
                return Unknown("pop index out of range in the analysed code")
        if method == "copy" and not args:
            return list(obj)
        if method in ("index", "count") and len(args) == 1:
            try:
                return getattr(obj, method)(args[0])
            except ValueError:
                return Unknown("value not in list")
    if isinstance(obj, dict):
        if method == "items":
            return list(obj.items())
        if method == "keys":
            return list(obj)
        if method == "values":
            return list(obj.values())
        if method == "get" and args:
            try:
                return obj.get(args[0], args[1] if len(args) > 1 else None)
            except TypeError:
                return Unknown("dict key not known statically")
        if method == "update" and len(args) <= 1 and (not args or isinstance(args[0], dict)):
            obj.update(*args, **kwargs)
            return None
        if method == "copy" and not args:
            return dict(obj)
        if method == "pop" and args and is_hashable(args[0]):
            if args[0] in obj:
                return obj.pop(args[0])
            return args[1] if len(args) > 1 else Unknown("pop of a missing key")
        if method == "setdefault" and args and is_hashable(args[0]):
            return obj.setdefault(args[0], args[1] if len(args) > 1 else None)
    if isinstance(obj, str) and all(not is_unknown(a) for a in args):
        size = _str_result_size(obj, method, args, kwargs)
        if size is None or size > MAX_SEQUENCE or not interp.state.allocate(size):
            return Unknown(f"str.{method} result too large or not known statically")
        try:
            return getattr(obj, method)(*args, **kwargs)
        except Exception:
            return Unknown(f"str.{method} failed on these arguments")
    if isinstance(obj, Array):
        return arrays.call_method(obj, method, args, kwargs)
    if isinstance(obj, frames.Frame):
        return frames.call_method(obj, method, args, kwargs)
    if isinstance(obj, transformers.Transformer):
        return transformers.call_method(obj, method, args, kwargs)
    found = shape_attrs.call_method(obj, method, args, kwargs)
    if found is not shape_attrs.NOT_SHAPE:
        return found
    if isinstance(obj, Tensor) and method == "reshape":
        return Unknown("reshape of data is not evaluated")
    return Unknown(f"method {method}() is not evaluated")


# Keras 2.0 to 2.2 named each optimizer class in lower case too (``keras.optimizers.rmsprop(
# lr=1e-4, decay=1e-6)`` in its CIFAR-10 example); ``keras.optimizers.get`` and the rest
# of the module's functions are not optimizers
KERAS2_OPTIMIZER_ALIASES = frozenset({"sgd", "rmsprop", "adagrad", "adadelta", "adam",
                                      "adamax", "nadam"})


# TensorFlow Addons' optimizers whose state memlint knows (memory/optimizers.py); its
# wrappers (Lookahead, MovingAverage, SWA) hold another optimizer and stay unknown
TFA_OPTIMIZERS = frozenset({"adamw", "sgdw", "lamb", "lazyadam", "rectifiedadam", "yogi",
                            "adabelief", "novograd"})


# ---------------------------------------------------------------------- helpers

def optimizer_spec(name: str, args: list, kwargs: dict, source: str) -> OptimizerSpec:
    """An OptimizerSpec from an optimizer class name and its constructor arguments."""
    options = {}
    for key in ("momentum", "amsgrad", "centered", "use_ema", "nesterov",
                "gradient_accumulation_steps"):
        value = kwargs.get(key)
        if value is not None and not is_unknown(value):
            options[key] = value
    lowered = name.lower()
    if lowered == "sgd" and len(args) >= 2 and isinstance(args[1], (int, float)):
        options.setdefault("momentum", args[1])  # SGD(lr, momentum) positional
    return OptimizerSpec(name=lowered, options=options, source=source)


def _policy_name(value: Any):
    if isinstance(value, str):
        return value
    if isinstance(value, Policy):
        return value.name
    return None


def _without(kwargs: dict, key: str) -> dict:
    return {k: v for k, v in kwargs.items() if k != key}


def _keras1_merge(interp, args, kwargs, node):
    mode = kwargs.get("mode", "sum")
    layer_type = _KERAS1_MERGE_MODES.get(mode) if isinstance(mode, str) else None
    if layer_type is None:
        if isinstance(mode, str):
            what = f"merge mode {mode!r} is not modelled"
        elif isinstance(mode, UserFunction):  # Keras 1: a function merges the inputs itself
            what = (f"a function as merge mode ({mode.name} at line {mode.location.line}) "
                    "is not modelled: its output shape is not computed")
        else:
            what = "the merge mode is not known statically"
        interp.state.note_unresolved(interp.location(node), "merge()", what)
        return Tensor(None, reason="output of an unmodelled merge")
    layer_kwargs = {}
    if layer_type == "Concatenate" and "concat_axis" in kwargs:
        layer_kwargs["axis"] = kwargs["concat_axis"]
    if layer_type == "Dot":  # Keras 1's dot_axes (default -1) is Dot's axes
        layer_kwargs["axes"] = kwargs.get("dot_axes", -1)
    if "name" in kwargs:
        layer_kwargs["name"] = kwargs["name"]
    layer = models.create_layer(interp, layer_type, [], layer_kwargs, node)
    return models.call_layer(interp, layer, [args[0] if args else kwargs.get("inputs")], {}, node)


def _symbolic_dims(value) -> tuple | None:
    """A shape whose dimensions are ints or None (a tensor's unknown batch dimension read
    with ``ops.shape(x)[0]``), else None."""
    if isinstance(value, (tuple, list)) and value and all(
            v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in value):
        return tuple(value)
    return _as_dims(value)


def _as_dims(value, open_rows: bool = False) -> tuple | None:
    """A shape of ints; with ``open_rows``, a first dimension not known statically is None
    (``np.empty((self.batch_size, *self.dim, 3))`` after a branch that may shrink the last
    batch: its rows are not known, its samples' shape is)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, (tuple, list)) and all(isinstance(v, int) for v in value):
        return tuple(value)
    if open_rows and isinstance(value, (tuple, list)) and len(value) > 1 \
            and is_unknown(value[0]) and all(isinstance(v, int) for v in value[1:]):
        return (None, *value[1:])
    return None


# loaders of a model saved to a file (.keras, .h5, SavedModel): memlint reads code only
_SAVED_MODEL_LOADERS = frozenset({
    "keras.models.load_model", "keras.saving.load_model",
    "tensorflow.saved_model.load", "keras.models.model_from_json",
    "keras.models.model_from_yaml", "keras.models.model_from_config"})


def _saved_model_note(interp, name: str, args: list, kwargs: dict, node) -> Unknown:
    """A model read from a file is not in the code: say so where it is loaded (the fit or
    predict of it would otherwise pass without a word about its memory)."""
    source = args[0] if args else kwargs.get("filepath", kwargs.get("export_dir"))
    what = f" ({source!r})" if isinstance(source, str) and len(source) < 120 \
        and not name.startswith("keras.models.model_from_") else ""  # (those get the text)
    reason = (f"the model is read from a file{what}, which memlint does not open (it reads "
              "code, and never loads a model): no estimate of it; build its architecture in "
              "the analysed code, or export it to ONNX and run memlint on the .onnx file")
    interp.state.note_unresolved(interp.location(node), f"{name.rsplit('.', 1)[-1]}()",
                                 reason)
    return Unknown(reason)


def _tuner_note(interp, name: str, args: list, kwargs: dict, node) -> Unknown:
    """A Keras Tuner tuner given a build function of the file: the models it tries are
    built with hyperparameters chosen at run time, which memlint never sees."""
    hypermodel = kwargs.get("hypermodel", args[0] if args else None)
    if isinstance(hypermodel, UserFunction):
        interp.state.note_unresolved(
            interp.location(node), f"{name.rsplit('.', 1)[-1]}()",
            f"the tuner builds {hypermodel.name}(hp) with hyperparameters it chooses at run "
            "time, and memlint does not run a search: no estimate of its trials (their sizes "
            "need not grow with any one hyperparameter); to check a configuration, build it "
            "in the file with fixed values and analyse it (--entry)")
        interp.state.tuned_factories.add(hypermodel.name)
    return Unknown(f"a Keras Tuner object ({name})")


def _numpy(name: str, args: list, kwargs: dict):
    if name == "numpy.linspace":
        return _linspace(args, kwargs)
    dims = None
    if name in _NUMPY_DIMS_FUNCS:
        dims = _as_dims(tuple(args)) if args else ()
    elif name in _NUMPY_SIZE_FUNCS:
        dims = _as_dims(args[0] if args else kwargs.get("shape"), open_rows=True)
    elif name in _NUMPY_SIZE_KW_FUNCS:
        size = kwargs.get("size")
        if size is None:
            positional = {"numpy.random.random": 0, "numpy.random.random_sample": 0,
                          "numpy.random.sample": 0, "numpy.random.standard_normal": 0,
                          "numpy.random.uniform": 2, "numpy.random.normal": 2,
                          "numpy.random.randint": 2}[name]
            size = args[positional] if len(args) > positional else None
        dims = _as_dims(size) if size is not None else None
    else:  # casts, reshapes, concatenation, reductions of arrays
        return arrays.numpy_function(name, args, kwargs)
    if dims is None:
        return Unknown(f"{name} is not evaluated")
    return Array(dims, arrays.constructor_dtype(name, kwargs, args))


def _linspace(args: list, kwargs: dict) -> Any:
    """``np.linspace(start, stop, num)`` of plain numbers: its values (drop-path rates and
    other per-block schedules), as a list of floats."""
    start = args[0] if args else kwargs.get("start")
    stop = args[1] if len(args) > 1 else kwargs.get("stop")
    num = args[2] if len(args) > 2 else kwargs.get("num", 50)
    endpoint = kwargs.get("endpoint", True)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (start, stop)) \
            or not isinstance(num, int) or not 0 <= num <= MAX_SEQUENCE \
            or not isinstance(endpoint, bool):
        return Unknown("numpy.linspace of values not known statically")
    if num == 1:
        return [float(start)]
    step = (stop - start) / ((num - 1) if endpoint else num)
    return [float(start + i * step) for i in range(num)]


# Field widths or precisions that could build a huge string: 10,000 or more, or taken from
# the arguments ('%*d', '{:{width}}')
_HUGE_FIELD = re.compile(r"%[-+ #0]*(\*|\d{5,})|%[-+ #0]*\d*\.(\*|\d{5,})"
                         r"|\{[^{}]*:[^{}]*(\{|\d{5,})")
_MATERIALISING = {"zip", "enumerate", "reversed", "sorted", "min", "max", "sum", "list",
                  "tuple", "dict", "set", "frozenset"}


def safe_format(template: str) -> bool:
    """Whether ``template % ...`` / ``template.format(...)`` has no huge field widths."""
    return _HUGE_FIELD.search(template) is None


# String methods evaluated on known strings (results bounded by _str_result_size)
_STR_METHODS = frozenset({
    "format", "lower", "upper", "join", "replace", "split", "rsplit", "startswith",
    "endswith", "strip", "lstrip", "rstrip", "title", "capitalize", "count", "find",
    "isdigit", "isalpha", "zfill", "removeprefix", "removesuffix"})
# ... of which these give a result no longer than the string (or a bool / int)
_STR_SHRINKING = frozenset({
    "lower", "upper", "split", "rsplit", "startswith", "endswith", "strip", "lstrip",
    "rstrip", "title", "capitalize", "count", "find", "isdigit", "isalpha", "removeprefix",
    "removesuffix"})


def _str_result_size(text: str, method: str, args: list, kwargs: dict):
    """An upper bound of the length of ``text.method(*args)``; None when it cannot be bounded."""
    if method in _STR_SHRINKING:
        return len(text)
    if method == "zfill" and args and isinstance(args[0], int):
        return max(len(text), args[0])
    if method == "format":
        if not safe_format(text):
            return None
        values = [*args, *kwargs.values()]
        return len(text) * (1 + len(values)) + sum(len(str(v)) for v in values
                                                   if isinstance(v, (int, float, str)))
    if method == "join" and len(args) == 1 and isinstance(args[0], (list, tuple)):
        items = args[0]
        return sum(len(i) for i in items if isinstance(i, str)) + len(text) * len(items)
    if method == "replace" and len(args) >= 2 and all(isinstance(a, str) for a in args[:2]):
        old, new = args[0], args[1]
        count = text.count(old) if old else len(text) + 1
        return len(text) + count * len(new)
    return None


def _iterable_size(value):
    if isinstance(value, (range, list, tuple, str, dict)):
        return len(value)
    return 0


_PLAIN_TYPES = {"builtins.int": int, "builtins.float": float, "builtins.str": str,
                "builtins.bool": bool, "builtins.list": list, "builtins.tuple": tuple,
                "builtins.dict": dict}


def _copied(value: Any, deep: bool, depth: int = 0) -> Any:
    """``copy.copy`` / ``copy.deepcopy`` of containers (layers and tensors stay themselves:
    deep-copying them is not how model code uses it)."""
    if depth > 32:
        return Unknown("a structure nested too deeply to copy")
    inner = (lambda v: _copied(v, deep, depth + 1)) if deep else (lambda v: v)
    if isinstance(value, list):
        return [inner(v) for v in value]
    if isinstance(value, dict):
        return {k: inner(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(inner(v) for v in value)
    return value


def _isinstance(value: Any, types: Any) -> Any:
    """``isinstance`` for plain Python values, tensors and arrays against the builtin
    types, and for layers against Keras's layer classes (:mod:`.layer_isinstance`)."""
    wanted = types if isinstance(types, tuple) else (types,)
    decided = layer_isinstance(value, wanted)
    if decided is not None:
        return decided
    if not all(isinstance(t, Ref) and t.name in _PLAIN_TYPES for t in wanted):
        return Unknown("isinstance() against a type memlint does not model")
    if isinstance(value, Tensor) or isinstance(value, Array) and value.shape:
        # a tensor, or an array of one or more axes, is no builtin int, list, tuple...
        # (``if isinstance(data, tuple): data = data[0]`` in a train_step given x alone)
        return False
    if not isinstance(value, (int, float, str, list, tuple, dict, type(None))):
        return Unknown("isinstance() of a value that is not a plain Python value")
    return isinstance(value, tuple(_PLAIN_TYPES[t.name] for t in wanted))


def _type_of(value: Any) -> Any:
    """``type(x)`` of a plain Python value, as the builtin type it is (``type(x) is list``);
    the type of anything else is not modelled."""
    if isinstance(value, (bool, int, float, str, list, tuple, dict, type(None))):
        return Ref(f"builtins.{type(value).__name__}")
    return Unknown("type() of a value that is not a plain Python value")


_DATA_RECORDS = (Array, Rows, frames.Frame, frames.Indexer, transformers.Transformer)


def _given_length(interp, node, found: Any) -> Any:
    """``len(NAME)`` not known statically, where ``--dim 'len(NAME)=SIZE'`` gives it
    (``len(chars)`` of a corpus read from a file)."""
    if not is_unknown(found) or not isinstance(node, cst.Call) or len(node.args) != 1 \
            or not isinstance(node.args[0].value, cst.Name):
        return found
    key = f"len({node.args[0].value.value})"
    if key not in interp.state.given_values:
        return found
    value = interp.state.given_values[key]
    if not any(used.startswith(f"{key} = ") for used in interp.state.given_used):
        interp.state.given_used.append(
            f"{key} = {value} (--dim, first used at line {interp.location(node).line})")
    return value


def _builtin(state, name: str, args: list, kwargs: dict):
    if any(is_unknown(a) for a in args) or any(is_unknown(v) for v in kwargs.values()):
        return Unknown(f"{name}() of a value not known statically")
    if name not in ("len", "isinstance", "type", "print") and any(
            isinstance(a, _DATA_RECORDS) for a in args):
        # an array, a table, a loop's rows, a transformer: what they hold is not known
        # (their repr, truth or elements are not the code's)
        return Unknown(f"{name}() of data not known statically")
    if name in _MATERIALISING:
        size = sum(_iterable_size(a) for a in args)
        if size > MAX_SEQUENCE or not state.allocate(size):
            return Unknown(f"{name}() of a sequence too large to evaluate")
    try:
        if name == "range":
            return range(*args)
        if name == "print":
            return None
        if name == "len":
            if isinstance(args[0], Array):
                return arrays.length(args[0])
            if isinstance(args[0], frames.Frame):
                return frames.length(args[0])
            count = devices.length(args[0])
            return len(args[0]) if count is devices.NOT_DEVICES else count
        if name == "isinstance" and len(args) == 2:
            return _isinstance(args[0], args[1])
        if name == "type" and len(args) == 1 and not kwargs:
            return _type_of(args[0])
        if name in ("zip", "enumerate") and any(isinstance(a, data.Dataset) for a in args):
            # a training loop over a dataset's batches: one representative batch
            args = [data.batches(a) if isinstance(a, data.Dataset) else a for a in args]
            if any(a is None for a in args):
                return Unknown(f"{name}() of a dataset whose batches are not known")
        if name in ("zip", "enumerate", "reversed", "sorted"):
            return list({"zip": zip, "enumerate": enumerate, "reversed": reversed,
                         "sorted": sorted}[name](*args, **kwargs))
        if name in ("min", "max", "sum", "abs", "round", "int", "float", "str", "bool",
                    "list", "tuple", "dict", "divmod", "any", "all", "chr", "ord", "set",
                    "frozenset"):
            fn = {"min": min, "max": max, "sum": sum, "abs": abs, "round": round, "int": int,
                  "float": float, "str": str, "bool": bool, "list": list, "tuple": tuple,
                  "dict": dict, "divmod": divmod, "any": any, "all": all, "chr": chr,
                  "ord": ord, "set": set, "frozenset": frozenset}[name]
            return fn(*args, **kwargs)
    except Exception:
        return Unknown(f"{name}() failed on these arguments")
    return Unknown(f"{name}() is not evaluated")

