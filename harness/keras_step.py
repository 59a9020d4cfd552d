"""Keras-side helpers shared by the child processes: random data shaped like a model's
inputs and outputs, compiling with a chosen optimizer, and the stateless JAX train and
predict steps with their state (what ``model.fit`` jits on the JAX backend)."""

from __future__ import annotations

import numpy as np

# Harness optimizer names -> (Keras class, constructor arguments, memlint name, options).
OPTIMIZERS = {
    "sgd": ("SGD", {}, "sgd", {}),
    "sgd_momentum": ("SGD", {"momentum": 0.9}, "sgd", {"momentum": 0.9}),
    "adam": ("Adam", {}, "adam", {}),
    "adamw": ("AdamW", {}, "adamw", {}),
    "rmsprop": ("RMSprop", {}, "rmsprop", {}),
    "adagrad": ("Adagrad", {}, "adagrad", {}),
}


def _shapes(tensors):
    items = tensors if isinstance(tensors, (list, tuple)) else [tensors]
    return [(tuple(t.shape), str(getattr(t, "dtype", "float32"))) for t in items]


def _array(shape, dtype, batch, rng):
    dims = [batch] + [d if d is not None else 8 for d in shape[1:]]
    if "int" in dtype:
        return rng.integers(0, 2, size=dims).astype(dtype)
    return rng.uniform(0.1, 1.0, size=dims).astype("float32")  # random, never zeros


def random_batch(model, batch: int, seed: int = 0, input_shapes=None):
    """(x, y): random inputs (the model's own input shapes, with the sizes they leave open
    taken from ``input_shapes``; else ``input_shapes`` without the batch dimension) and random targets shaped like one forward pass's outputs."""
    rng = np.random.default_rng(seed)
    if getattr(model, "inputs", None):
        specs = _shapes(model.inputs)
        if input_shapes and len(input_shapes) == len(specs):
            # sizes the model leaves open (Input((None, None, 3))) come from what it is fed
            specs = [((shape[0],) + tuple(d if d is not None else f
                                          for d, f in zip(shape[1:], fed)), dtype)
                     if len(shape) == len(fed) + 1 else (shape, dtype)
                     for (shape, dtype), fed in zip(specs, input_shapes)]
    elif input_shapes:
        specs = [((None,) + tuple(s), "float32") for s in input_shapes]
    else:
        raise ValueError("the model has no known input shape")
    xs = [_array(s, d, batch, rng) for s, d in specs]
    x = xs[0] if len(xs) == 1 else xs
    outs = _shapes(model.outputs) if getattr(model, "outputs", None) else None
    if outs is None or any(None in shape[1:] for shape, _ in outs):
        # sizes the outputs leave open follow the inputs (a decoder's steps): one forward
        outs = _shapes(model(x))
    ys = [_array(s, "float32", batch, rng) for s, _ in outs]
    return x, (ys[0] if len(ys) == 1 else ys)


def fixture_model(path, name: str, precision: str, optimizer: str | None) -> tuple:
    """The fixture's model ``name`` built in a fresh Keras session under ``precision``
    (channels-last: a fixture that set channels_first and failed before setting it back
    must not build the next one so), compiled by :func:`compile_for`: (model, optimizer
    name, options, dtype policy, loss scaling).  A fixture that fails raises
    ``harness.fixture_exec.FixtureError``."""
    import keras

    from harness.fixture_exec import load_model

    keras.backend.clear_session()
    keras.config.set_dtype_policy(precision)
    keras.config.set_image_data_format("channels_last")
    keras.utils.set_random_seed(0)
    model = load_model(path, name)
    optimizer_name, options = compile_for(model, optimizer)
    # the policy the model was built under: a fixture may set the global policy before
    # building and set it back afterwards
    policy = getattr(getattr(model, "dtype_policy", None), "name", None) \
        or keras.config.dtype_policy().name
    return (model, optimizer_name, options, policy,
            isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer))


def compile_for(model, optimizer: str | None):
    """Compile with the harness optimizer (None: keep the fixture's own, Adam when it has
    none) and an MSE loss on every output; returns (optimizer name, options) for memlint."""
    import keras

    current = getattr(model, "optimizer", None)
    if optimizer is None and current is not None:
        inner = getattr(current, "inner_optimizer", current)
        name = type(inner).__name__.lower()
        options = {k: getattr(inner, k) for k in ("momentum", "amsgrad", "centered",
                                                  "use_ema") if getattr(inner, k, None)}
        opt = inner.__class__.from_config(inner.get_config())
    else:
        cls, kwargs, name, options = OPTIMIZERS[optimizer or "adam"]
        opt = getattr(keras.optimizers, cls)(**kwargs)
    model.compile(optimizer=opt, loss="mse")
    return name, dict(options)


def jax_train_step(model, x, y):
    """(jitted stateless train step, state, data): the function ``fit`` runs on JAX."""
    import jax

    model._symbolic_build(data_batch=(x, y, None))
    model.optimizer.build(model.trainable_variables)
    state = model._get_jax_state(trainable_variables=True, non_trainable_variables=True,
                                 optimizer_variables=True, metrics_variables=True)
    return jax.jit(model.train_step, donate_argnums=0), state, (x, y, None)


def jax_predict_step(model, x):
    """(jitted stateless predict step, state, data)."""
    import jax

    state = (tuple(v.value for v in model.trainable_variables),
             tuple(v.value for v in model.non_trainable_variables))
    return jax.jit(model.predict_step), state, (x,)


def memory_plan(compiled) -> dict:
    """XLA's buffer assignment totals of a compiled executable, and the peak they imply
    (arguments + outputs - donated aliases + temporaries)."""
    stats = compiled.memory_analysis()
    keys = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
            "temp_size_in_bytes", "generated_code_size_in_bytes")
    out = {k.replace("_size_in_bytes", ""): int(getattr(stats, k, 0) or 0) for k in keys}
    out["peak"] = out["argument"] + out["output"] - out["alias"] + out["temp"]
    return out
