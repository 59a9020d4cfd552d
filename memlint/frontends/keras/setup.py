"""The training setup of a model from how the code uses it (compile, fit, predict, ...)."""

from __future__ import annotations

import copy
import math

from memlint.frontends.keras.calls import optimizer_spec
from memlint.frontends.keras.devices import PerReplica
from memlint.frontends.keras.losses import loss_name, output_losses
from memlint.frontends.keras.data import (Dataset, feed, host_arrays, input_names,
                                          input_shapes)
from memlint.frontends.keras.training_loops import (INPUT_GRADIENT, SHARED_STEP, STATE_KEPT,
                                                    TRAIN_CALL, applied_optimizer, applies_to)
from memlint.frontends.keras.values import Array, Optimizer, flatten_structure
from memlint.ir import OptimizerSpec, TrainingSetup

KERAS_DEFAULT_BATCH = 32  # fit(), predict() and evaluate() without batch_size
ASSUMED_OPTIMIZER = "adam"  # when no compile() is found
DEFAULT_BATCH_SOURCE = "Keras's default for"  # a call's batch the code does not state


def training_setup(model, state, fixed_batch=None) -> TrainingSetup:
    """Mode, batch size, optimizer and dtype policy, each with where it came from.

    ``fixed_batch`` is the batch dimension the model's input declares, if it declares one:
    Keras accepts no other, so it wins over Keras's default batch size.
    """
    usage = model.usage
    policy, source = model.dtype_policy or (state.dtype_policy, state.dtype_source)
    setup = TrainingSetup(dtype_policy=policy, dtype_source=source,
                          given_values=list(state.given_used))
    setup.optimizer, *setup.later_optimizers = _optimizers(usage)
    if TRAIN_CALL in usage and "compile" not in usage:  # a custom loop's own optimizer
        setup.optimizer = applied_optimizer(state) or setup.optimizer
    setup.jit_compile = _jit_compile(usage)
    setup.loss, setup.loss_source = _loss(usage)
    setup.output_losses = _output_losses(usage)

    calls = [(method, call) for method in ("train_on_batch", "fit", "fit_generator")
             for call in usage.get(method, [])]
    if calls:
        return _largest_training_call(setup, calls, fixed_batch)
    for args, kwargs, loc in usage.get(TRAIN_CALL, []):
        setup.mode, setup.location = "train", loc
        setup.mode_source = f"a training loop's call on a batch at line {loc.line} (under " \
                            "GradientTape, with training=True, or before a torch backward())"
        _batch_from_call(setup, TRAIN_CALL, args, kwargs, loc, fixed_batch)
        setup.shared_step, setup.shared_calls = next(iter(usage.get(SHARED_STEP, [])),
                                                     ("", []))
        setup.state_kept = next((why for why in usage.get(STATE_KEPT, []) if why), "")
        _input_gradient(setup, usage, state)
        return setup
    for method in ("predict", "predict_on_batch", "predict_generator"):
        for args, kwargs, loc in usage.get(method, []):
            setup.mode, setup.mode_source, setup.location = "infer", f"{method}() at line " \
                                                                     f"{loc.line}", loc
            _batch_from_call(setup, method, args, kwargs, loc, fixed_batch)
            return setup
    setup.mode, setup.mode_source = "train", "assumed (no fit/predict call found)"
    if fixed_batch is not None:
        setup.batch_size = fixed_batch
        setup.batch_source = "fixed batch dimension of the model input"
        return setup
    setup.batch_size = KERAS_DEFAULT_BATCH
    setup.batch_source = f"assumed ({KERAS_DEFAULT_BATCH}, Keras's default; no fit/predict " \
                         "call found)"
    return setup


def _largest_training_call(setup: TrainingSetup, calls: list, fixed_batch) -> TrainingSetup:
    """The setup of the training call with the largest batch the code states (``fit()``
    again after unfreezing, on other data): one whose batch is not known wins, the estimate
    then gives no verdict rather than one for a smaller phase; Keras's default batch, which
    a call gets when the code states none, does not outrank a stated one."""
    best = None
    for method, (args, kwargs, loc) in calls:
        candidate = copy.copy(setup)
        candidate.mode, candidate.mode_source, candidate.location = \
            "train", f"{method}() at line {loc.line}", loc
        _batch_from_call(candidate, method, args, kwargs, loc, fixed_batch)
        if best is None or _batch_rank(candidate) > _batch_rank(best):
            best = candidate
    sites = {(loc.line, loc.column) for _, (_, _, loc) in calls}
    if len(sites) > 1:
        best.batch_source += f" (the largest batch of the model's {len(sites)} training calls)"
    return best


def _input_gradient(setup: TrainingSetup, usage: dict, state) -> None:
    """A training loop that takes the gradient of what it calls the model on (and may
    apply an optimizer to it)."""
    where = usage.get(INPUT_GRADIENT)
    if not where:
        return
    setup.input_gradient = f"GradientTape.gradient() at line {where[0][0].line}"
    setup.input_optimised = any(applies_to(state, value) for _, value in where)
    setup.mode_source += (f"; the gradient of its input is taken ({setup.input_gradient})"
                          + (", and an optimizer updates the input" if setup.input_optimised
                             else ""))


def _batch_rank(setup: TrainingSetup) -> tuple:
    """How a training call's batch ranks: unknown first, then stated batches by size, then
    Keras's default."""
    if setup.batch_size is None:
        return (2, 0)
    return (0 if setup.batch_source.startswith(DEFAULT_BATCH_SOURCE) else 1, setup.batch_size)


def _batch_from_call(setup: TrainingSetup, method: str, args, kwargs, loc,
                     fixed_batch=None) -> None:
    data = args[0] if args else kwargs.get("x")
    if isinstance(data, Dataset):
        _batch_from_dataset(setup, method, data, loc, fixed_batch)
        return
    target = args[1] if len(args) > 1 else kwargs.get("y")
    arrays = [leaf for leaf in flatten_structure(data) if isinstance(leaf, Array)]
    if method in ("fit", "train_on_batch") and arrays \
            and len(arrays) == len(flatten_structure(data)):
        # arrays and no targets (an add_loss model: fit(x_train)): Keras feeds none
        setup.targets_given = target is not None
    if arrays and len(arrays) == len(flatten_structure(data)):
        shapes = input_shapes([Array(tuple(a.shape[1:]), a.dtype) for a in arrays
                               if a.shape])
        if shapes is not None and len(shapes) == len(arrays):
            setup.data_shapes = shapes
            setup.data_names = input_names(data)
            setup.data_source = f"the batch the model is called on at line {loc.line}" \
                if method == TRAIN_CALL else f"arrays passed to {method}() at line {loc.line}"
        if method != TRAIN_CALL:  # a loop's batch comes from a dataset, not the host's arrays
            setup.host_data = host_arrays([data, target], f"arrays passed to {method}() at "
                                                          f"line {loc.line}", loc)
    rows = _rows(data)
    if rows is None and method != TRAIN_CALL:
        rows = _rows(target)  # Keras needs as many targets as samples
    split = kwargs.get("validation_split")
    if method == "fit" and isinstance(rows, int) and isinstance(split, (int, float)) \
            and not isinstance(split, bool) and 0 < split < 1:
        rows = math.floor(rows * (1 - split))  # Keras holds the last rows out first
        held = f" left after validation_split={split}"
    else:
        held = ""
    if method.endswith("_on_batch") or method == TRAIN_CALL:
        if isinstance(rows, int) and arrays and all(a.per_replica for a in arrays):
            _per_replica(setup, PerReplica(rows), f"the batch each replica's step is called "
                                                  f"on at line {loc.line}")
            return
        if isinstance(rows, int):
            setup.batch_size, setup.batch_source = rows, \
                f"the batch it is called on at line {loc.line}" if method == TRAIN_CALL \
                else f"{method}() input at line {loc.line}"
            return
        if fixed_batch is None:
            # one batch, as given: no batch_size and no default of Keras's applies
            where = f"the batch the model is called on at line {loc.line}" \
                if method == TRAIN_CALL else f"the batch given to {method}() at line {loc.line}"
            setup.batch_size = None
            setup.batch_source = f"unknown: the rows of {where} are not known statically; " \
                                 "pass --batch-size"
            return
    batch = kwargs.get("batch_size")
    if batch is None and method == "fit" and len(args) > 2:
        batch = args[2]  # fit(x, y, batch_size)
    if isinstance(batch, PerReplica):
        _per_replica(setup, batch, f"{method}(batch_size={batch.amount} x "
                                   f"num_replicas_in_sync) at line {loc.line}")
        return
    if isinstance(batch, int) and not isinstance(batch, bool) and batch > 0:
        setup.batch_size, setup.batch_source = batch, f"{method}(batch_size={batch}) at line " \
                                                      f"{loc.line}"
        if isinstance(rows, int) and 0 < rows < batch:  # Keras never batches more than it has
            setup.batch_size = rows
            setup.batch_source = f"all {rows} samples passed to {method}() at line {loc.line}" \
                                 f"{held} (fewer than batch_size={batch})"
        return
    if fixed_batch is not None:
        setup.batch_size = fixed_batch
        setup.batch_source = "fixed batch dimension of the model input"
        return
    if batch is not None:  # given, but not a count memlint knows: not Keras's default
        setup.batch_size = None
        if isinstance(batch, (int, float)):  # batch_size=0, -1 or 32.0: not a count
            why = f"batch_size={batch!r} given to {method}() at line {loc.line} is not a " \
                  "positive int"
        else:
            why = f"the batch_size given to {method}() at line {loc.line} is not known " \
                  "statically"
        setup.batch_source = f"unknown: {why}; pass --batch-size"
        return
    if method == "fit" and target is None and data is not None and not arrays:
        # fit(x) alone on something not known to be arrays: a dataset, generator or
        # PyDataset of a library, whose batches are its own (Keras's default of 32 is for
        # arrays only)
        setup.batch_size = None
        setup.batch_source = f"unknown: fit() at line {loc.line} is fed data whose batches " \
                             "are not known statically (a dataset or generator memlint does " \
                             "not model); pass --batch-size"
        return
    if method.endswith("_generator"):
        setup.batch_size = None
        setup.batch_source = f"unknown: the batches come from a generator not known " \
                             f"statically ({method}() at line {loc.line}); pass --batch-size"
        return
    setup.batch_size = KERAS_DEFAULT_BATCH
    setup.batch_source = f"{DEFAULT_BATCH_SOURCE} {method}() ({KERAS_DEFAULT_BATCH}) at line " \
                         f"{loc.line}"
    if isinstance(rows, int) and rows < KERAS_DEFAULT_BATCH:
        setup.batch_size = rows
        setup.batch_source = f"all {rows} samples passed to {method}() at line {loc.line}{held}"


def _per_replica(setup: TrainingSetup, batch: PerReplica, where: str) -> None:
    setup.batch_size, setup.batch_per_replica = batch.amount, True
    setup.batch_source = f"{batch.amount} per replica ({where})"


def apply_strategy(setup: TrainingSetup, model, state) -> None:
    """The distribution strategy a model is made or trained under: its ``strategy.scope()``,
    ``multi_gpu_model``, or a ``keras.distribution.set_distribution`` before it was made."""
    strategy = getattr(model, "strategy", None)
    if strategy is None and state.distribution is not None:
        chosen, made_before = state.distribution
        index = next((i for i, m in enumerate(state.models) if m is model), None)
        if index is not None and index >= made_before:
            strategy = chosen
    if strategy is None:
        return
    setup.strategy = strategy.kind
    setup.strategy_source = strategy.describe() + (f"; {strategy.note}" if strategy.note
                                                   else "")
    setup.replicas = strategy.replicas
    setup.shards = list(strategy.shards)


def _rows(data) -> object:
    """The number of samples in array data (the first array's first dimension)."""
    leaves = flatten_structure(data)
    first = leaves[0] if leaves else None
    if isinstance(first, Array) and first.shape and isinstance(first.shape[0], int):
        return first.shape[0]
    return None


def _batch_from_dataset(setup: TrainingSetup, method: str, dataset: Dataset, loc,
                        fixed_batch) -> None:
    """A dataset, generator or PyDataset fed to ``method``: its batches decide the batch
    size (``batch_size=`` is not used with them) and its elements the input size."""
    inputs, batch = feed(dataset)
    if batch is None:  # an unbatched dataset: Keras takes each element as a batch
        leaves = flatten_structure(inputs)
        rows = {leaf.shape[0] for leaf in leaves if isinstance(leaf, Array) and leaf.shape}
        batch = rows.pop() if len(rows) == 1 else None
        inputs = [Array(tuple(leaf.shape[1:]), leaf.dtype) if isinstance(leaf, Array)
                  and leaf.shape else leaf for leaf in leaves]
        origin = f"the elements of an unbatched dataset ({dataset.origin})"
    else:
        origin = dataset.batch_origin
    setup.data_shapes = input_shapes(inputs)
    setup.data_names = input_names(inputs)
    setup.data_source = f"{dataset.origin}, fed to {method}() at line {loc.line}"
    setup.host_data = list(dataset.host)
    if fixed_batch is not None:
        setup.batch_size = fixed_batch
        setup.batch_source = "fixed batch dimension of the model input"
    elif isinstance(batch, PerReplica):
        _per_replica(setup, batch, f"{origin}, fed to {method}() at line {loc.line}")
    elif isinstance(batch, int) and not isinstance(batch, bool) and batch > 0:
        setup.batch_size = batch
        setup.batch_source = f"{origin}, fed to {method}() at line {loc.line}"
    else:
        setup.batch_size = None
        why = getattr(batch, "reason", "") or "the batches' size is not known statically"
        setup.batch_source = f"unknown: {why} (data fed to {method}() at line {loc.line}); " \
                             "pass --batch-size"


def _jit_compile(usage: dict):
    """``compile(jit_compile=True/False)`` as the code states it (None: not stated)."""
    for _args, kwargs, _loc in usage.get("compile", []):
        value = kwargs.get("jit_compile")
        if isinstance(value, bool):
            return value
    return None


def _loss(usage: dict) -> tuple:
    """The loss of the first compile() and where it came from (None: not known)."""
    for args, kwargs, loc in usage.get("compile", []):
        value = args[1] if len(args) > 1 else kwargs.get("loss")
        if value is None:
            return None, f"no loss in compile() at line {loc.line}"
        name, what = loss_name(value)
        return name, f"{what} in compile() at line {loc.line}"
    return None, "no compile() found"


def _output_losses(usage: dict):
    """Each output's loss where the first compile() gives one per output (a list or a
    dict, :func:`output_losses`), else None."""
    for args, kwargs, _loc in usage.get("compile", []):
        return output_losses(args[1] if len(args) > 1 else kwargs.get("loss"))
    return None


def _optimizers(usage: dict) -> list:
    """The optimizer of each compile() call of the model, in order (one assumed when there
    is none)."""
    specs = []
    for args, kwargs, loc in usage.get("compile", []):
        specs.append(_compiled_optimizer(args, kwargs, loc))
        # a GAN's compile() of its own: every optimizer it was given (classes._own_compile)
        specs += [_compiled_optimizer([other], {}, loc)
                  for other in kwargs.get("optimizers_given", ())]
    return specs or [OptimizerSpec(ASSUMED_OPTIMIZER, {}, f"assumed ({ASSUMED_OPTIMIZER}; no "
                                                          "compile() found)")]


def _compiled_optimizer(args: list, kwargs: dict, loc) -> OptimizerSpec:
    value = args[0] if args else kwargs.get("optimizer")
    where = f"compile() at line {loc.line}"
    if value is None:
        return optimizer_spec("rmsprop", [], {}, f"Keras's default: {where} is given none")
    if isinstance(value, str):
        return optimizer_spec(value, [], {}, where)
    if isinstance(value, Optimizer):
        spec = value.spec
        return OptimizerSpec(spec.name, dict(spec.options), where)
    return OptimizerSpec(ASSUMED_OPTIMIZER, {}, f"assumed ({ASSUMED_OPTIMIZER}): the "
                                               f"optimizer in {where} is not known statically")
