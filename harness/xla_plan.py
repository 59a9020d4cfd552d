"""Child process (JAX backend, CPU is enough): XLA's memory plan of each fixture model's
compiled Keras train step, without running it.

stdin: ``{"files": [...], "batch": 4, "mode": "train", "input_shapes": {"path::variable":
[shape, ...]}}`` (input shapes without the batch dimension, for subclassed models); stdout: JSON
``{"jax_version", "keras_version", "results": {path: {variable: plan or error}}}``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

os.environ["KERAS_BACKEND"] = "jax"
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import keras  # noqa: E402

from harness.fixture_exec import load_models  # noqa: E402
from harness.keras_step import (compile_for, jax_predict_step, jax_train_step,  # noqa: E402
                                memory_plan, random_batch)


def plan(model, batch: int, mode: str, input_shapes=None) -> dict:
    """The memory plan of one model's compiled train (or predict) step at ``batch``."""
    name, options = compile_for(model, None)
    x, y = random_batch(model, batch, input_shapes=input_shapes)
    if mode == "train":
        step, state, data = jax_train_step(model, x, y)
    else:
        step, state, data = jax_predict_step(model, x)
    started = time.perf_counter()
    compiled = step.lower(state, data).compile()
    result = memory_plan(compiled)
    result.update(optimizer=name, optimizer_options=options, batch=batch, mode=mode,
                  dtype_policy=keras.config.dtype_policy().name,
                  compile_s=round(time.perf_counter() - started, 2))
    return result


def main() -> None:
    request = json.load(sys.stdin)
    results = {}
    for path in request["files"]:
        print(f"[xla_plan] {path}", file=sys.stderr, flush=True)
        keras.backend.clear_session()
        keras.config.set_dtype_policy("float32")
        # a fixture that set channels_first (and failed before setting it back) must not
        # build the next one so, as in harness/keras_step.fixture_model
        keras.config.set_image_data_format("channels_last")
        entry = results[path] = {}
        try:
            models = load_models(path)
        except Exception as exc:  # noqa: BLE001 - one fixture's failure is data
            entry["__error__"] = f"{type(exc).__name__}: {exc}"
            continue
        for variable, model in models.items():
            try:
                shapes = request.get("input_shapes", {}).get(f"{path}::{variable}")
                entry[variable] = plan(model, request.get("batch", 4),
                                       request.get("mode", "train"), shapes)
            except Exception as exc:  # noqa: BLE001
                entry[variable] = {"error": f"{type(exc).__name__}: {exc}",
                                   "traceback": traceback.format_exc()[-1500:]}
    json.dump({"jax_version": jax.__version__, "keras_version": keras.__version__,
               "platform": jax.devices()[0].platform, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
