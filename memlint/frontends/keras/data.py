"""Data sources as abstract values: what a model is fed, batch by batch.

Real scripts put the batch size and the input size in their data pipelines far more often
than in ``fit(batch_size=...)``.  A :class:`Dataset` carries the structure of one element
(NumPy-like :class:`Array` leaves, unbatched), the batch size once ``batch()`` (or a Keras
dataset utility) fixed it, and where each came from.  ``tf.data`` sources and
transformations, Keras's ``*_dataset_from_*`` utilities, ``ImageDataGenerator`` flows,
``PyDataset`` / ``Sequence`` subclasses and generator functions of the analysed file all
become one.  Nothing is read from disk and nothing of the analysed code runs: functions given
to ``map`` are interpreted on the element's shapes.
"""

from __future__ import annotations

from dataclasses import field, replace
from typing import Any, Optional

from memlint.frontends.keras import arrays, frames
from memlint.frontends.keras.devices import PerReplica
from memlint.frontends.keras.values import Array, Ref, Unknown, flatten_structure, is_unknown
from memlint.frontends.keras.values import call_arg as _arg
from memlint.ir import HostData, Location
from memlint.records import record

NOT_DATA = object()  # call() answers this for names that are not data sources

_CHANNELS = {"grayscale": 1, "rgb": 3, "rgba": 4}
_PASSTHROUGH = frozenset({"shuffle", "repeat", "cache", "prefetch", "take", "skip", "filter",
                          "with_options", "shard", "ignore_errors", "assert_cardinality",
                          "take_while"})


@record(eq=False)
class Dataset:
    """A pipeline: one element's structure (unbatched), its batch size, and their origins."""

    element: Any  # structure (tuple / dict / single) of Array or Unknown leaves
    batch: Any = None  # int once batched; None unbatched; Unknown when not known
    origin: str = ""  # where the element's shapes come from
    batch_origin: str = ""  # where the batch size comes from
    host: list = field(default_factory=list)  # HostData of arrays it holds in memory
    # split over a strategy's replicas (experimental_distribute_dataset): a loop over it
    # sees one replica's share of each batch
    distributed: bool = False


@record(eq=False)
class Splits:
    """``tfds.load(name)`` without ``split=``: the catalogue's splits by name, each a dataset
    of the same (undescribed) elements; which names exist is not known."""

    dataset: Any


@record(eq=False)
class ImageGenerator:
    """``ImageDataGenerator(...)``: augmentation settings; its flows are datasets."""

    data_format: str = "channels_last"


@record(eq=False)
class Generator:
    """A call of a generator function of the analysed file (``def gen(): ... yield x, y``):
    its first yielded value is what one batch looks like."""

    fn: Any
    args: list
    kwargs: dict
    node: Any


def dtype_name(value: Any) -> Optional[str]:
    """A dtype as NumPy names it, or ``"string"`` for TensorFlow's string tensors."""
    if value == "string" or (isinstance(value, Ref) and value.name == "tensorflow.string"):
        return "string"
    return arrays.dtype_name(value)


# ---------------------------------------------------------------------- sources

def call(interp, name: str, args: list, kwargs: dict, node) -> Any:
    """The value of a call of a data-source function, or NOT_DATA for other names."""
    loc = interp.location(node)
    short = name.rsplit(".", 1)[-1]
    if name.startswith("tensorflow.data.Dataset.") or name.startswith(
            "tensorflow.data.experimental.") or name == "tensorflow.data.TFRecordDataset" \
            or name == "tensorflow.data.TextLineDataset":
        return _tf_data_source(interp, short, args, kwargs, loc)
    if name in ("tensorflow.TensorSpec", "tensorflow.io.FixedLenFeature",
                "tensorflow.io.FixedLenSequenceFeature", "tensorflow.io.VarLenFeature"):
        return _spec(short, args, kwargs)
    if name in ("tensorflow.io.parse_single_example", "tensorflow.io.parse_example"):
        return _parse_example(short, args, kwargs)
    if short in ("image_dataset_from_directory", "text_dataset_from_directory",
                 "audio_dataset_from_directory", "timeseries_dataset_from_array") and (
            name.startswith("keras.utils.") or name.startswith("keras.preprocessing.")):
        return _keras_utility(interp, short, args, kwargs, loc)
    if name == "tensorflow_datasets.load":
        return _tfds_load(args, kwargs, loc)
    if name in _TORCH_LOADERS:
        return _torch_loader(interp, args, kwargs, loc, node)
    if name in _TORCH_TENSOR_DATASETS:
        return _tensor_dataset(args, loc)
    if name in ("keras.preprocessing.image.ImageDataGenerator",
                "keras.src.legacy.preprocessing.image.ImageDataGenerator"):
        fmt = kwargs.get("data_format")
        return ImageGenerator(fmt if fmt in ("channels_first", "channels_last")
                              else interp.state.context.data_format)
    return NOT_DATA


_TORCH_LOADERS = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")
_TORCH_TENSOR_DATASETS = ("torch.utils.data.TensorDataset",
                          "torch.utils.data.dataset.TensorDataset")


def _torch_loader(interp, args: list, kwargs: dict, loc: Location, node) -> Any:
    """``torch.utils.data.DataLoader(dataset, batch_size=1, ...)``, which Keras 3's fit takes
    on the torch backend: batches of ``batch_size`` samples (1 unless given), each sample
    what the dataset's ``__getitem__`` returns (a ``torch.utils.data.Dataset`` subclass of
    the file, called on index 0, or a ``TensorDataset``'s rows)."""
    where = f"DataLoader() at line {loc.line}"
    source = _arg(args, kwargs, 0, "dataset")
    batch = _arg(args, kwargs, 1, "batch_size", 1)
    if isinstance(source, Dataset) and source.batch is None:
        element, origin = source.element, f"{source.origin}, in {where}"
    elif getattr(getattr(source, "cls", None), "data_kind", None) == "torch":
        getitem = source.cls.methods.get("__getitem__")
        sample = interp.call_function(getitem, [source, 0], {}, node) \
            if getitem is not None else None
        element = sample if sample is not None and not _has_unknown(sample) else \
            Unknown(f"the samples of {source.cls.name} are not known statically")
        origin = f"{source.cls.name}.__getitem__(0), in {where}"
    else:
        element, origin = Unknown("the samples of the DataLoader's dataset"), where
    if kwargs.get("batch_sampler") is not None or batch is None:
        batch, batch_origin = Unknown("the batches a batch sampler or batch_size=None "
                                      "makes"), where
    elif isinstance(batch, int) and not isinstance(batch, bool) and batch > 0:
        given = "batch_size" in kwargs or len(args) > 1
        batch_origin = f"DataLoader(batch_size={batch}) at line {loc.line}" if given \
            else f"DataLoader()'s default batch_size=1 at line {loc.line}"
    else:
        batch, batch_origin = Unknown(f"batch_size of {where} not known statically"), where
    return Dataset(element, batch=batch, origin=origin, batch_origin=batch_origin)


def _tensor_dataset(args: list, loc: Location) -> Any:
    """``torch.utils.data.TensorDataset(x, y)``: samples are the tensors' rows."""
    rows = [Array(tuple(a.shape[1:]), a.dtype) if isinstance(a, Array) and a.shape
            else Unknown("a tensor of a TensorDataset not known statically") for a in args]
    element = rows[0] if len(rows) == 1 else tuple(rows)
    return Dataset(element, origin=f"TensorDataset() at line {loc.line}")


def _tfds_load(args: list, kwargs: dict, loc: Location) -> Any:
    """``tfds.load(name, split=..., as_supervised=..., with_info=..., batch_size=...)``: the
    catalogue's datasets are not described here, so their elements' shapes are not known;
    what the code does to them (``.map`` resizing, ``.batch(n)``) still is.  A list of splits
    gives a list of datasets, no ``split=`` the splits by name (:class:`Splits`);
    ``with_info=True`` a pair with the (unknown) info."""
    name = args[0] if args else kwargs.get("name")
    origin = f"tfds.load({name!r}) at line {loc.line}" if isinstance(name, str) \
        else f"tfds.load() at line {loc.line}"
    reason = f"the elements of {origin} (a TensorFlow Datasets catalogue entry, not described)"
    element = (Unknown(reason), Unknown(reason)) if kwargs.get("as_supervised") is True \
        else Unknown(reason)
    batch = kwargs.get("batch_size")
    if isinstance(batch, int) and not isinstance(batch, bool) and batch > 0:
        dataset = Dataset(element, batch=batch, origin=origin,
                          batch_origin=f"tfds.load(batch_size={batch}) at line {loc.line}")
    elif batch is None:
        dataset = Dataset(element, origin=origin)
    else:  # -1: the whole split as tensors; or a size not known
        dataset = Unknown(f"{origin} with batch_size={batch!r} is not modelled")
    split = args[1] if len(args) > 1 else kwargs.get("split")
    if isinstance(split, (list, tuple)):
        datasets: Any = [dataset for _ in split]
    elif isinstance(split, str):
        datasets = dataset
    else:  # every split, as a dict keyed by the catalogue's split names
        datasets = dataset if is_unknown(dataset) else Splits(dataset)
    if kwargs.get("with_info") is True:
        return (datasets, Unknown(f"the info of {origin}"))
    return datasets


def _spec(short: str, args: list, kwargs: dict) -> Any:
    """``tf.TensorSpec(shape, dtype)`` / ``tf.io.FixedLenFeature(shape, dtype)``: an Array."""
    shape = args[0] if args else kwargs.get("shape")
    dtype = args[1] if len(args) > 1 else kwargs.get("dtype", "float32")
    if short == "VarLenFeature":
        dtype, shape = (args[0] if args else kwargs.get("dtype")), [None]
    dims = _dims(shape)
    if dims is None:
        return Unknown(f"{short} of a shape not known statically")
    if short == "FixedLenSequenceFeature":
        dims = (None,) + dims
    return Array(dims, dtype_name(dtype))


def _dims(value: Any) -> Optional[tuple]:
    """A shape given as a list / tuple / ``tf.TensorShape`` of ints and None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, (list, tuple)) and all(
            v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in value):
        return tuple(None if v is None or v < 0 else v for v in value)
    return None


def _parse_example(short: str, args: list, kwargs: dict) -> Any:
    serialized = args[0] if args else kwargs.get("serialized")
    features = args[1] if len(args) > 1 else kwargs.get("features")
    if not isinstance(features, dict):
        return Unknown("the feature description of parse_example is not known statically")
    lead = ()
    if short == "parse_example":
        rows = serialized.shape[0] if isinstance(serialized, Array) and serialized.shape \
            else None
        lead = (rows,)
    return {k: (Array(lead + tuple(v.shape), v.dtype) if isinstance(v, Array) else
                Unknown(f"feature '{k}' is not described statically")) for k, v in features.items()}


def _tf_data_source(interp, short: str, args: list, kwargs: dict, loc: Location) -> Any:
    where = f"{short}() at line {loc.line}"
    if short == "from_tensor_slices":
        data = args[0] if args else kwargs.get("tensors")
        host = host_arrays(data, f"arrays given to from_tensor_slices() at line {loc.line}",
                           loc)
        return Dataset(_map_leaves(data, _slice_element), origin=where, host=host)
    if short == "from_tensors":
        data = args[0] if args else kwargs.get("tensors")
        return Dataset(_map_leaves(data, _as_element), origin=where)
    if short == "range":
        return Dataset(Array((), "int64"), origin=where)
    if short == "zip":
        parts = args[0] if len(args) == 1 else tuple(args)
        if isinstance(parts, (tuple, list)) and all(isinstance(p, Dataset) for p in parts):
            batches = {repr(p.batch) for p in parts}
            first = parts[0]
            return Dataset(tuple(p.element for p in parts),
                           batch=first.batch if len(batches) == 1 else Unknown("zip of "
                                                                           "different batches"),
                           origin=where, batch_origin=first.batch_origin,
                           host=[h for p in parts for h in p.host])
        return Unknown("zip of datasets not known statically")
    if short == "from_generator":
        return _from_generator(interp, args, kwargs, where)
    if short in ("TFRecordDataset", "TextLineDataset", "list_files"):  # records, lines, paths
        return Dataset(Array((), "string"), origin=where)
    if short in ("make_csv_dataset", "make_batched_features_dataset"):
        return _batched_files(short, args, kwargs, where, loc)
    return Unknown(f"tf.data {short}() is not modelled")


def _batched_files(short: str, args: list, kwargs: dict, where: str, loc: Location) -> Any:
    """``make_csv_dataset(pattern, batch_size, ..., label_name=...)`` and
    ``make_batched_features_dataset(pattern, batch_size, features, ..., label_key=...)``:
    batches of ``batch_size`` records of files that are not read here, so their columns'
    shapes are not known; a dict of features, paired with the label when one is named."""
    batch = args[1] if len(args) > 1 else kwargs.get("batch_size")
    if not isinstance(batch, int) or isinstance(batch, bool) or batch <= 0:
        return Unknown(f"the batch size of {where} is not known statically")
    features = Unknown(f"the columns of the files read by {where} (not read here)")
    label = kwargs.get("label_name" if short == "make_csv_dataset" else "label_key")
    element = (features, Unknown(f"the label column of {where}")) if label is not None \
        else features
    return Dataset(element, batch=batch, origin=where,
                   batch_origin=f"{short}(batch_size={batch}) at line {loc.line}")


def _from_generator(interp, args: list, kwargs: dict, where: str) -> Any:
    signature = kwargs.get("output_signature")
    if signature is None:
        shapes = kwargs.get("output_shapes", args[2] if len(args) > 2 else None)
        types = kwargs.get("output_types", args[1] if len(args) > 1 else None)
        signature = _signature_from(shapes, types)
    element = _map_leaves(signature, _as_element) if signature is not None else None
    if element is None or _has_open_dims(element):
        # the signature leaves sizes open: what the generator really yields fixes them
        gen = args[0] if args else kwargs.get("generator")
        yielded = first_yield(interp, gen, None)
        found = _map_leaves(yielded, _as_element) if yielded is not None else None
        if found is not None and not _has_unknown(found) and (
                element is None or _same_ranks(element, found)):
            return Dataset(found, origin=f"{where} (the generator's first yield)")
        if element is None:
            return Dataset(Unknown("the generator's elements are not known statically"),
                           origin=where)
    return Dataset(element, origin=f"{where} (output signature)")


def _has_open_dims(value: Any) -> bool:
    return any(not isinstance(leaf, Array) or None in leaf.shape
               for leaf in flatten_structure(value))


def _same_ranks(a: Any, b: Any) -> bool:
    left, right = flatten_structure(a), flatten_structure(b)
    return len(left) == len(right) and all(
        isinstance(x, Array) and isinstance(y, Array) and len(x.shape) == len(y.shape)
        for x, y in zip(left, right))


def _signature_from(shapes: Any, types: Any) -> Any:
    """``output_shapes=`` with ``output_types=`` (the older spelling) as Array leaves."""
    if shapes is None:
        return None
    if isinstance(shapes, tuple) and shapes and all(_dims(s) is not None or isinstance(s, dict)
                                                    for s in shapes) and not _dims(shapes):
        kinds = types if isinstance(types, tuple) else (types,) * len(shapes)
        return tuple(_signature_from(s, t) for s, t in zip(shapes, kinds))
    if isinstance(shapes, dict):
        kinds = types if isinstance(types, dict) else {}
        return {k: _signature_from(v, kinds.get(k)) for k, v in shapes.items()}
    dims = _dims(shapes)
    return Array(dims, dtype_name(types)) if dims is not None else Unknown("output shape")


# ---------------------------------------------------------------------- Keras utilities

def _keras_utility(interp, short: str, args: list, kwargs: dict, loc: Location) -> Any:
    where = f"{short}() at line {loc.line}"
    if short == "timeseries_dataset_from_array":
        return _timeseries(args, kwargs, where)
    batch = kwargs.get("batch_size", 32)
    if short == "image_dataset_from_directory":
        size = kwargs.get("image_size", (256, 256))
        mode = kwargs.get("color_mode", "rgb")
        channels = _CHANNELS.get(mode) if isinstance(mode, str) else None
        if _dims(size) is None or len(size) != 2 or channels is None:
            return Unknown(f"image size or color mode of {short}() not known statically")
        fmt = kwargs.get("data_format") or interp.state.context.data_format
        dims = (channels, *size) if fmt == "channels_first" else (*size, channels)
        inputs = Array(tuple(dims), "float32")
    elif short == "text_dataset_from_directory":
        inputs = Array((), "string")
    else:  # audio: (samples, channels), channels read from the files
        length = kwargs.get("output_sequence_length")
        inputs = Array((length if isinstance(length, int) else None, None), "float32")
    element = _with_labels(inputs, kwargs)
    if not (batch is None or (isinstance(batch, int) and not isinstance(batch, bool))):
        return Unknown(f"batch_size of {short}() not known statically")
    explicit = "batch_size" in kwargs
    dataset = Dataset(element, batch=batch, origin=where,
                      batch_origin=f"{short}(batch_size={batch}) at line {loc.line}" if explicit
                      else f"{short}() default batch_size=32 at line {loc.line}")
    if kwargs.get("subset") == "both":
        return [dataset, Dataset(element, batch, where, dataset.batch_origin)]
    return dataset


def _with_labels(inputs: Array, kwargs: dict) -> Any:
    """The element of a ``*_dataset_from_directory`` dataset: inputs, or (inputs, labels)."""
    mode = kwargs.get("label_mode", "int")
    if kwargs.get("labels", "inferred") is None or mode is None:
        return inputs
    names = kwargs.get("class_names")
    if mode == "int":
        labels = Array((), "int32")
    elif mode == "binary":
        labels = Array((1,), "float32")
    elif mode == "categorical":
        labels = Array((len(names) if isinstance(names, (list, tuple)) else None,), "float32")
    else:
        labels = Unknown("label_mode not known statically")
    return (inputs, labels)


def _timeseries(args: list, kwargs: dict, where: str) -> Any:
    data = args[0] if args else kwargs.get("data")
    targets = args[1] if len(args) > 1 else kwargs.get("targets")
    length = args[2] if len(args) > 2 else kwargs.get("sequence_length")
    batch = kwargs.get("batch_size", 128)
    data = frames.data_of(data)
    if isinstance(data, Array) and data.shape and isinstance(length, int):
        inputs = Array((length,) + tuple(data.shape[1:]), data.dtype)
    else:  # read from a file (a DataFrame's values): the batch size is still the call's
        inputs = Unknown("the data or sequence_length of timeseries_dataset_from_array() "
                         "is not known statically")
    element = inputs if targets is None else (inputs, _slice_element(targets))
    origin = f"timeseries_dataset_from_array(batch_size={batch}) at {where.split(' at ')[1]}" \
        if "batch_size" in kwargs else f"timeseries_dataset_from_array() default " \
                                       f"batch_size=128 at {where.split(' at ')[1]}"
    return Dataset(element, batch=batch, origin=where, batch_origin=origin)


# ---------------------------------------------------------------------- methods

def method(interp, obj: Any, name: str, args: list, kwargs: dict, node) -> Any:
    """``dataset.batch(64)``, ``datagen.flow(x, y)``, ... (Unknown for other methods)."""
    loc = interp.location(node)
    if isinstance(obj, ImageGenerator):
        return _image_generator_method(obj, name, args, kwargs, loc)
    ds: Dataset = obj
    if name in _PASSTHROUGH:
        return ds
    if name in ("batch", "padded_batch", "rebatch"):
        size = args[0] if args else kwargs.get("batch_size")
        if isinstance(size, PerReplica):  # ``.batch(64 * strategy.num_replicas_in_sync)``
            return replace(ds, batch=size, batch_origin=f"{name}({size.amount} x "
                                                        f"num_replicas_in_sync) at line "
                                                        f"{loc.line}")
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            return replace(ds, batch=Unknown(f"{name}() size not known statically"),
                           batch_origin=f"{name}() at line {loc.line}")
        element = ds.element
        if name != "rebatch" and isinstance(ds.batch, int):
            element = _map_leaves(element, lambda a: _prepend(a, ds.batch))  # batch of batches
        if name == "padded_batch":
            element = _padded(element, kwargs.get("padded_shapes",
                                                  args[1] if len(args) > 1 else None))
        if name == "rebatch" and not isinstance(ds.batch, int):
            return ds
        return replace(ds, element=element, batch=size,
                       batch_origin=f"{name}({size}) at line {loc.line}")
    if name == "enumerate":  # (index, element) pairs; the index is a scalar (sized as one
        # of each batch's rows when it comes after batch(): an int64 per row, a few bytes)
        return replace(ds, element=(Array((), "int64"), ds.element))
    if name == "unbatch":
        if isinstance(ds.batch, int):
            return replace(ds, batch=None, batch_origin="")
        return replace(ds, element=_map_leaves(ds.element, _slice_element))
    if name == "map":
        fn = args[0] if args else kwargs.get("map_func")
        return _mapped(interp, ds, fn, node, loc)
    return Unknown(f"dataset method {name}() is not modelled")


def _mapped(interp, ds: Dataset, fn: Any, node, loc: Location) -> Any:
    """``ds.map(fn)``: ``fn`` interpreted on one (batched) element's shapes."""
    from memlint.frontends.keras.calls import call as call_value

    batched = _map_leaves(ds.element, lambda a: _prepend(a, ds.batch)
                          if isinstance(ds.batch, int) else a)
    args = list(batched) if isinstance(batched, tuple) else [batched]
    outer = interp.dataset_map
    interp.dataset_map = loc  # a model the function calls runs in the pipeline (calls.py)
    try:
        result = call_value(interp, fn, args, {}, node)
    finally:
        interp.dataset_map = outer
    if isinstance(ds.batch, int):
        result = _map_leaves(result, _unbatched)
    element = _map_leaves(result, _as_element)
    return replace(ds, element=element, origin=f"map() at line {loc.line} on {ds.origin}")


def _image_generator_method(gen: ImageGenerator, name: str, args: list, kwargs: dict,
                            loc: Location) -> Any:
    batch = kwargs.get("batch_size", 32)
    origin = f"{name}(batch_size={batch}) at line {loc.line}" if "batch_size" in kwargs \
        else f"{name}() default batch_size=32 at line {loc.line}"
    if not isinstance(batch, int) or isinstance(batch, bool):
        return Unknown(f"batch_size of {name}() not known statically")
    if name == "flow":
        x = args[0] if args else kwargs.get("x")
        y = args[1] if len(args) > 1 else kwargs.get("y")
        inputs = _slice_element(x) if isinstance(x, Array) else Unknown("flow() data")
        if isinstance(inputs, Array):
            inputs = Array(inputs.shape, "float32")  # the generator yields float32 batches
        element = inputs if y is None else (inputs, _slice_element(y))
        return Dataset(element, batch=batch, origin=f"{name}() at line {loc.line}",
                       batch_origin=origin,
                       host=host_arrays(x, f"array given to flow() at line {loc.line}", loc))
    if name in ("flow_from_directory", "flow_from_dataframe"):
        size = kwargs.get("target_size", (256, 256))
        channels = _CHANNELS.get(kwargs.get("color_mode", "rgb"))
        if _dims(size) is None or len(size) != 2 or channels is None:
            return Unknown(f"target_size or color_mode of {name}() not known statically")
        dims = (channels, *size) if gen.data_format == "channels_first" else (*size, channels)
        images = Array(tuple(dims), "float32")
        mode = kwargs.get("class_mode", "categorical" if name == "flow_from_directory"
                          else "categorical")
        classes = kwargs.get("classes")
        labels = {"binary": Array((), "float32"), "sparse": Array((), "float32"),
                  "categorical": Array((len(classes) if isinstance(classes, list) else None,),
                                       "float32")}.get(mode)
        if mode is None or mode == "input":
            element = images if mode is None else (images, images)
        else:
            element = (images, labels if labels is not None else Unknown("class_mode"))
        return Dataset(element, batch=batch, origin=f"{name}() at line {loc.line}",
                       batch_origin=origin)
    if name in ("fit", "standardize"):
        return None
    return Unknown(f"ImageDataGenerator.{name}() is not modelled")


# ---------------------------------------------------------------------- feeding a model

def first_yield(interp, gen: Any, node) -> Any:
    """The first value a generator function of the file yields (None when unknown)."""
    if isinstance(gen, Generator):
        return interp.first_yield(gen.fn, gen.args, gen.kwargs, gen.node)
    from memlint.frontends.keras.values import UserFunction
    if isinstance(gen, UserFunction):  # from_generator(gen): called without arguments
        return interp.first_yield(gen, [], {}, node)
    return None


def batches_of(interp, data: Any, node) -> Optional[Dataset]:
    """What feeding ``data`` to fit()/predict() gives, batch by batch, as a Dataset (None
    when ``data`` is an array or something not known to be a data source)."""
    from memlint.frontends.keras import plain_objects

    if isinstance(data, Dataset):
        return data
    if isinstance(data, Generator):
        yielded = first_yield(interp, data, node)
        return _from_batch(yielded, f"the first batch the generator "
                                    f"'{data.fn.name}' yields")
    kind = getattr(getattr(data, "cls", None), "data_kind", None) \
        if isinstance(data, plain_objects.PlainObject) else None
    if kind == "torch":  # Keras takes a DataLoader over it, not the dataset itself
        return Dataset(Unknown(f"a torch Dataset ({data.cls.name}) fed without a DataLoader"),
                       batch=Unknown("a torch Dataset fed without a DataLoader"),
                       origin=data.cls.name)
    if kind:
        return _from_pydataset(interp, data, node)
    return None


def _from_batch(batch: Any, origin: str) -> Optional[Dataset]:
    """A dataset whose batches look like ``batch`` (x, (x, y) or (x, y, weights))."""
    if batch is None:
        return Dataset(Unknown("a generator whose batches are not known statically"),
                       batch=Unknown("batch size of a generator"), origin=origin)
    leaves = [leaf for leaf in flatten_structure(batch) if isinstance(leaf, Array)]
    rows = {leaf.shape[0] for leaf in leaves if leaf.shape}
    size = rows.pop() if len(rows) == 1 else None
    element = _map_leaves(batch, _slice_element)
    return Dataset(element, batch=size if isinstance(size, int) else Unknown(
        f"the rows of the batches {origin} returns are not known statically"),
                   origin=origin, batch_origin=origin)


def _from_pydataset(interp, obj, node) -> Dataset:
    """A ``PyDataset`` / ``Sequence`` subclass of the file: the arrays ``__getitem__(0)``
    returns, or else its ``batch_size`` attribute."""
    cls = obj.cls
    getitem = cls.methods.get("__getitem__")
    name = cls.name
    if getitem is not None:
        batch = interp.call_function(getitem, [obj, 0], {}, node)
        found = _from_batch(batch, f"{name}.__getitem__(0)")
        if isinstance(found.batch, int) and not _has_unknown(found.element):
            return found
    size = obj.attrs.get("batch_size")
    if isinstance(size, int) and not isinstance(size, bool):
        element = found.element if getitem is not None else Unknown("elements")
        return Dataset(element, batch=size, origin=f"{name}.__getitem__",
                       batch_origin=f"{name}.batch_size ({size})")
    return found if getitem is not None else Dataset(
        Unknown(f"the batches of {name} are not known statically"),
        batch=Unknown("batch size"), origin=name)


def resolve_fed(interp, args: list, kwargs: dict, node) -> tuple:
    """``(args, kwargs)`` of a fit()/predict()/... call with its data (``x``) replaced by
    the :class:`Dataset` it amounts to, when it is a generator or a PyDataset.  Keras 2's
    ``fit_generator(generator=...)`` (and ``predict_generator``, ``evaluate_generator``)
    name it ``generator``: it becomes ``x``, as ``fit`` names it."""
    if not args and "x" not in kwargs and "generator" in kwargs:
        kwargs = {**{k: v for k, v in kwargs.items() if k != "generator"},
                  "x": kwargs["generator"]}
    if args:
        fed = batches_of(interp, args[0], node)
        return ([fed, *args[1:]] if fed is not None else args), kwargs
    if "x" in kwargs:
        fed = batches_of(interp, kwargs["x"], node)
        if fed is not None:
            return args, {**kwargs, "x": fed}
    return args, kwargs


def fed_input_shape(data: Any) -> Optional[tuple]:
    """The input shape (batch first, None) that data fed to a one-input model builds it
    with, as Keras builds a Sequential at fit time; None when not known."""
    if isinstance(data, Array):
        if len(data.shape) >= 2:
            return (None,) + tuple(data.shape[1:])
        return None
    if isinstance(data, Dataset):
        inputs, batch = feed(data)
        shapes = input_shapes(inputs)
        if shapes is None or len(shapes) != 1 or not isinstance(inputs, Array):
            return None
        shape = shapes[0]
        if batch is None:  # unbatched: each element is a batch
            return (None,) + tuple(shape[1:]) if shape else None
        return (None,) + tuple(shape)
    return None


def fed_batch_shapes(data: Any) -> Optional[list]:
    """The shapes (batch first, None) of every part of a dataset's tuple element, as a
    train_step() of the model's own receives them (Keras unpacks ``(x, y, sample_weight)``
    only in its own step); None when it is not a tuple of known arrays."""
    if not isinstance(data, Dataset) or not isinstance(data.element, tuple):
        return None
    parts = list(data.element)
    if not parts or not all(isinstance(p, Array) for p in parts):
        return None
    if data.batch is None:  # unbatched: each element is a batch
        return [(None,) + tuple(p.shape[1:]) for p in parts] if all(p.shape for p in parts) \
            else None
    return [(None,) + tuple(p.shape) for p in parts]


def batches(dataset: Dataset) -> Optional[list]:
    """What ``for batch in dataset`` sees, as one representative item: the element with the
    batch dimension in front of every array (a batched dataset), or the element itself
    (an unbatched one); None when the batch size or the element is not known."""
    batch, share = dataset.batch, False
    if isinstance(batch, PerReplica) and dataset.distributed:
        batch, share = batch.amount, True  # each replica's share of the global batch
    if batch is not None and (not isinstance(batch, int) or isinstance(batch, bool)):
        return None
    leaves = flatten_structure(dataset.element)
    if not leaves or not all(isinstance(leaf, Array) for leaf in leaves):
        return None
    if batch is None:
        return [dataset.element]
    return [_map_leaves(dataset.element,
                        lambda a: Array((batch, *a.shape), a.dtype, per_replica=share))]


def feed(dataset: Dataset) -> tuple:
    """(model inputs, batch size) of a dataset given to fit(): the inputs are the first part
    of an ``(x, y)`` / ``(x, y, sample_weight)`` element; a dict is one input per key."""
    element = dataset.element
    if isinstance(element, tuple) and len(element) in (2, 3):
        element = element[0]
    return element, dataset.batch


def input_shapes(inputs: Any) -> Optional[list]:
    """Element shapes of model inputs, one per input in Keras's flattening order (None when
    any is not known)."""
    leaves = flatten_structure(inputs)
    if not leaves or not all(isinstance(leaf, Array) for leaf in leaves):
        return None
    return [tuple(leaf.shape) for leaf in leaves]


def input_names(inputs: Any) -> Optional[list]:
    """The keys of dict inputs in the order :func:`input_shapes` gives them (Keras matches
    them to the model's inputs by name); None for inputs that are not a dict."""
    if not isinstance(inputs, dict):
        return None
    try:
        keys = sorted(inputs)
    except TypeError:
        keys = list(inputs)
    return [str(k) for k in keys] if all(not isinstance(inputs[k], (dict, list, tuple))
                                         for k in keys) else None


def apply_to_data(func: Any, array: Any) -> Any:
    """A layer or model called on data (``augment(x)`` inside ``ds.map``; a list of arrays
    for a functional model of several inputs): an array of the output shape (the first
    array's first dimension stands for the batch, as Keras reads it)."""
    import memlint.layers as registry
    from memlint.frontends.keras.nested import nested_output
    from memlint.frontends.keras.values import FunctionalModel, LayerRef, SequentialModel
    from memlint.layers.base import LayerError, UnresolvedArgument

    if isinstance(array, list):  # one array per input of a model
        if not isinstance(func, FunctionalModel):
            return Unknown("a model of one input called on a list of data")
        given: Any = [(None,) + tuple(a.shape[1:]) for a in array]
        shape = tuple(array[0].shape)
    else:
        shape = tuple(array.shape)
        given = (None,) + shape[1:]
    if not shape:
        return Unknown("a layer called on a scalar")
    try:
        if isinstance(func, (SequentialModel, FunctionalModel)):
            out = nested_output(func, given)
        elif isinstance(func, LayerRef):
            out, _ = registry.call(replace(func.instance, trainable=True), (None,) + shape[1:])
        else:
            return Unknown("a layer memlint does not model, called on data")
    except (LayerError, UnresolvedArgument, TypeError, ValueError):
        return Unknown("a layer called on data it does not accept")
    if isinstance(out, list) and isinstance(func, FunctionalModel) \
            and all(isinstance(o, tuple) for o in out):  # a model of several outputs
        return [Array((shape[0],) + tuple(o[1:]), "float32") for o in out]
    if not isinstance(out, tuple):
        return Unknown("a layer with several outputs called on data")
    return Array((shape[0],) + tuple(out[1:]), "float32")


# ---------------------------------------------------------------------- helpers

def host_arrays(data: Any, what: str, loc: Location) -> list:
    """Arrays of known size in ``data`` (a structure) as host-memory records."""
    out = []
    for leaf in flatten_structure(data):
        if isinstance(leaf, Array):
            size = arrays.array_bytes(leaf)
            if size is not None:
                out.append(HostData(what, size, tuple(leaf.shape), leaf.dtype or "float64",
                                    loc))
    return out


def _map_leaves(value: Any, fn, depth: int = 0) -> Any:
    if depth > 16:
        return Unknown("structure nested too deeply")
    if isinstance(value, dict):
        return {k: _map_leaves(v, fn, depth + 1) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_map_leaves(v, fn, depth + 1) for v in value)
    return fn(value)


def _has_unknown(value: Any) -> bool:
    return any(not isinstance(leaf, Array) for leaf in flatten_structure(value))


def _slice_element(value: Any) -> Any:
    """One row of an array (``from_tensor_slices``): its first dimension dropped."""
    value = frames.data_of(value)  # a pandas table or column: its values
    if isinstance(value, Array):
        if not value.shape:
            return Unknown("from_tensor_slices of a scalar")
        return Array(tuple(value.shape[1:]), value.dtype)
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        return Unknown("a scalar")
    return _as_element(value)


def _as_element(value: Any) -> Any:
    value = frames.data_of(value)
    if isinstance(value, Array):
        return value
    if isinstance(value, bool):
        return Array((), "bool")
    if isinstance(value, int):
        return Array((), "int32")
    if isinstance(value, float):
        return Array((), "float32")
    if isinstance(value, str):
        return Array((), "string")
    if is_unknown(value):
        return value
    return Unknown("a dataset element that is not an array")


def _prepend(array: Any, rows: int) -> Any:
    return Array((rows,) + tuple(array.shape), array.dtype) if isinstance(array, Array) \
        else array


def _unbatched(array: Any) -> Any:
    if isinstance(array, Array) and array.shape:
        return Array(tuple(array.shape[1:]), array.dtype)
    return array


def _padded(element: Any, shapes: Any) -> Any:
    """``padded_batch(padded_shapes=...)``: fixed sizes where given (-1 / None: the longest
    in the batch, not known statically)."""
    if shapes is None:
        return _map_leaves(element, lambda a: Array(tuple(None for _ in a.shape), a.dtype)
                           if isinstance(a, Array) else a)
    if isinstance(element, (tuple, list)) and isinstance(shapes, (tuple, list)) \
            and len(element) == len(shapes) and _dims(shapes) is None:
        return type(element)(_padded(e, s) for e, s in zip(element, shapes))
    if isinstance(element, dict) and isinstance(shapes, dict):
        return {k: _padded(v, shapes.get(k)) for k, v in element.items()}
    dims = _dims(shapes)
    if isinstance(element, Array) and dims is not None and len(dims) == len(element.shape):
        return Array(dims, element.dtype)
    return element
