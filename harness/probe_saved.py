"""Calibration probes for memory model v2: what each layer kind's backward pass keeps.

Each probe is a small Keras model written once as source text.  The script compiles its Keras 3
JAX train step for described GPUs (H100, T4) without a GPU, exactly as the GPU-plan oracle does
(``harness/gpu_plan.py``: ``jax.experimental.topologies``, the state donated), and puts XLA's
buffer plan beside memlint's estimate of the same source (the ``xla`` profile with the
target's compute capability).  With ``--dump`` it also lists the buffers alive at the peak of
XLA's temporary allocation, named by the operation that wrote them (``jvp(conv2d)/...``,
``transpose(jvp(dense))/...``), which is how the rules in docs/memory-model-v2.md were read.

    python -m harness.probe_saved                 # every probe, h100 and t4, float32
    python -m harness.probe_saved --precision mixed_float16 --target h100 conv_relu
    python -m harness.probe_saved --dump lstm     # what XLA keeps for one probe

Harness only: memlint never imports it; jax, the CUDA plugin and Keras are test dependencies.
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

HEADER = "import keras\nfrom keras import layers as L\n"

# name -> (model source defining ``model``, input shape without batch, batch, what it shows)
PROBES = {
    "conv_chain": ("model = keras.Sequential([keras.Input((32, 32, 3))] + [L.Conv2D(32, 3, "
                   "padding='same') for _ in range(4)] + [L.GlobalAveragePooling2D(), "
                   "L.Dense(10)])", (32, 32, 3), 64,
                   "a convolution keeps its input; nothing else"),
    "conv_relu": ("model = keras.Sequential([keras.Input((32, 32, 3))] + [L.Conv2D(32, 3, "
                  "padding='same', activation='relu') for _ in range(4)] + "
                  "[L.GlobalAveragePooling2D(), L.Dense(10)])", (32, 32, 3), 64,
                  "activation='relu' keeps the convolution's output as well as its own"),
    "conv_bn_relu": ("model = keras.Sequential([keras.Input((32, 32, 3)), L.Conv2D(32, 3, "
                     "padding='same'), L.BatchNormalization(), L.ReLU(), L.Conv2D(32, 3, "
                     "padding='same'), L.GlobalAveragePooling2D(), L.Dense(10)])",
                     (32, 32, 3), 64,
                     "BatchNormalization keeps its input; a ReLU after it a one-byte mask"),
    "conv_dropout": ("model = keras.Sequential([keras.Input((32, 32, 3)), L.Conv2D(32, 3, "
                     "padding='same'), L.Dropout(0.5), L.Conv2D(32, 3, padding='same'), "
                     "L.GlobalAveragePooling2D(), L.Dense(10)])", (32, 32, 3), 64,
                     "Dropout keeps a one-byte mask"),
    "conv_maxpool": ("model = keras.Sequential([keras.Input((32, 32, 3)), L.Conv2D(32, 3, "
                     "padding='same'), L.MaxPooling2D(), L.Conv2D(32, 3, padding='same'), "
                     "L.GlobalAveragePooling2D(), L.Dense(10)])", (32, 32, 3), 64,
                     "max pooling keeps input and output; its backward holds int32 indices"),
    "conv_avgpool": ("model = keras.Sequential([keras.Input((32, 32, 3)), L.Conv2D(32, 3, "
                     "padding='same'), L.AveragePooling2D(2), L.Conv2D(32, 3, "
                     "padding='same'), L.GlobalAveragePooling2D(), L.Dense(10)])",
                     (32, 32, 3), 64, "average pooling keeps nothing"),
    "conv_sigmoid": ("model = keras.Sequential([keras.Input((32, 32, 3)), L.Conv2D(32, 3, "
                     "padding='same'), L.Activation('sigmoid'), L.Conv2D(32, 3, "
                     "padding='same'), L.GlobalAveragePooling2D(), L.Dense(10)])",
                     (32, 32, 3), 64, "sigmoid keeps its output"),
    "conv_gelu": ("model = keras.Sequential([keras.Input((32, 32, 3)), L.Conv2D(32, 3, "
                  "padding='same'), L.Activation('gelu'), L.Conv2D(32, 3, padding='same'), "
                  "L.GlobalAveragePooling2D(), L.Dense(10)])", (32, 32, 3), 64,
                  "gelu keeps its input"),
    "conv_layernorm": ("model = keras.Sequential([keras.Input((32, 32, 3)), L.Conv2D(32, 3, "
                       "padding='same'), L.LayerNormalization(), L.Conv2D(32, 3, "
                       "padding='same'), L.GlobalAveragePooling2D(), L.Dense(10)])",
                       (32, 32, 3), 64,
                       "LayerNormalization keeps its input and two float32 statistics per row"),
    "residual_add": ("inp = keras.Input((32, 32, 32))\nx = L.Conv2D(32, 3, padding='same')(inp)"
                     "\ny = L.Conv2D(32, 3, padding='same')(x)\nz = L.Add()([x, y])\n"
                     "z = L.Conv2D(32, 3, padding='same')(z)\n"
                     "z = L.GlobalAveragePooling2D()(z)\n"
                     "model = keras.Model(inp, L.Dense(10)(z))", (32, 32, 32), 64,
                     "a sum keeps nothing and passes its gradient on"),
    "concatenate": ("inp = keras.Input((32, 32, 32))\nx = L.Conv2D(32, 3, padding='same')(inp)"
                    "\ny = L.Conv2D(32, 3, padding='same')(x)\nz = L.Concatenate()([x, y])\n"
                    "z = L.Conv2D(32, 3, padding='same')(z)\n"
                    "z = L.GlobalAveragePooling2D()(z)\n"
                    "model = keras.Model(inp, L.Dense(10)(z))", (32, 32, 32), 64,
                    "a concatenation keeps nothing"),
    "mlp": ("model = keras.Sequential([keras.Input((800,)), L.Dense(1000), L.Dense(1200), "
            "L.Dense(1400), L.Dense(16)])", (800,), 640, "a Dense layer keeps its input"),
    "mlp_relu": ("model = keras.Sequential([keras.Input((800,)), L.Dense(1000, activation="
                 "'relu'), L.Dense(1200, activation='relu'), L.Dense(1400, activation="
                 "'relu'), L.Dense(16)])", (800,), 640,
                 "Dense(activation='relu') chains recompute the activation inside the next "
                 "matrix product"),
    "lstm": ("model = keras.Sequential([keras.Input((50, 40)), L.LSTM(96), L.Dense(10)])",
             (50, 40), 64, "an LSTM under lax.scan keeps 13 (batch, steps, units) buffers"),
    "gru": ("model = keras.Sequential([keras.Input((50, 40)), L.GRU(96), L.Dense(10)])",
            (50, 40), 64, "a GRU keeps 9 unit-sized and 2 gate-sized buffers per step"),
    "simple_rnn": ("model = keras.Sequential([keras.Input((50, 40)), L.SimpleRNN(96), "
                   "L.Dense(10)])", (50, 40), 64, "a SimpleRNN keeps 3 per step"),
    "conv_lstm": ("model = keras.Sequential([keras.Input((10, 16, 16, 3)), L.ConvLSTM2D(16, 3, "
                  "padding='same', return_sequences=True), L.GlobalAveragePooling3D(), "
                  "L.Dense(10)])", (10, 16, 16, 3), 16,
                  "ConvLSTM2D keeps 13 buffers of every step's output size"),
    "attention": ("inp = keras.Input((128, 64))\nx = L.MultiHeadAttention(4, 16)(inp, inp)\n"
                  "x = L.GlobalAveragePooling1D()(x)\nmodel = keras.Model(inp, L.Dense(10)(x))",
                  (128, 64), 64, "attention keeps projections and probabilities; its "
                  "backward holds two more score-sized buffers"),
    "embedding": ("inp = keras.Input((128,), dtype='int32')\nx = L.Embedding(5000, 64)(inp)\n"
                  "x = L.GlobalAveragePooling1D()(x)\nmodel = keras.Model(inp, L.Dense(10)(x))",
                  (128,), 64, "an embedding's backward holds two table-sized buffers"),
    "separable": ("model = keras.Sequential([keras.Input((32, 32, 16)), L.SeparableConv2D(32, 3,"
                  " padding='same'), L.SeparableConv2D(32, 3, padding='same'), "
                  "L.GlobalAveragePooling2D(), L.Dense(10)])", (32, 32, 16), 32,
                  "a separable convolution keeps its input and the depthwise result"),
    "conv3d": ("model = keras.Sequential([keras.Input((8, 32, 32, 3)), L.Conv3D(16, 3, "
               "padding='same', activation='relu'), L.Conv3D(16, 3, padding='same', "
               "activation='relu'), L.MaxPooling3D(2), L.GlobalAveragePooling3D(), "
               "L.Dense(10)])", (8, 32, 32, 3), 32, "Conv3D with ReLU and 3D max pooling"),
    "relu_stack": ("model = keras.Sequential([keras.Input((8, 8, 64))] + [L.Conv2D(256, 3, "
                   "padding='same', activation='relu') for _ in range(6)] + "
                   "[L.GlobalAveragePooling2D(), L.Dense(10)])", (8, 8, 64), 4,
                   "with slots (--optimizer adam) the new slot values of kernel gradients "
                   "made after the input gradients wait for the end of the step"),
}

TARGETS = ("h100", "t4")
CAPABILITY = {"h100": (9, 0), "t4": (7, 5), "a100": (8, 0)}
FAST = ("--xla_gpu_disable_gpuasm_optimizations=true --xla_backend_optimization_level=0 "
        "--xla_llvm_disable_expensive_passes=true")


def _setup_jax():
    os.environ.setdefault("KERAS_BACKEND", "jax")
    os.environ["JAX_PLATFORMS"] = "cpu"  # the CUDA plugin then only compiles
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + FAST).strip()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def build(source: str, policy: str):
    """The Keras model a probe's source defines, under a dtype policy."""
    import keras

    keras.backend.clear_session()
    keras.config.set_dtype_policy(policy)
    namespace: dict = {}
    exec(compile(HEADER + source, "<probe>", "exec"), namespace)  # noqa: S102 - our probes
    return namespace["model"]


_MESHES: dict = {}


def compile_step(model, input_shape, batch: int, target: str, optimizer: str,
                 dump: str | None = None) -> dict:
    """XLA's plan of the model's train step (argument, output, alias, temp, peak)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import topologies
    from jax.sharding import NamedSharding, PartitionSpec

    from harness.gpu_targets import target_config

    if target not in _MESHES:
        topology = topologies.get_topology_desc(platform="cuda",
                                                target_config=target_config(target),
                                                topology="1x1x1")
        _MESHES[target] = topologies.make_mesh(topology, (1,), ("x",))
    sharding = NamedSharding(_MESHES[target], PartitionSpec())

    def spec(a):
        return jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding)

    dtype = "int32" if "int" in str(model.inputs[0].dtype) else "float32"
    x = jnp.zeros((batch,) + tuple(input_shape), dtype)
    y = jnp.zeros((batch,) + tuple(model.outputs[0].shape[1:]), "float32")
    model.compile(optimizer=optimizer, loss="mse")
    model._symbolic_build(data_batch=(x, y, None))
    model.optimizer.build(model.trainable_variables)
    state = model._get_jax_state(trainable_variables=True, non_trainable_variables=True,
                                 optimizer_variables=True, metrics_variables=True)
    options = {}
    if dump:
        options = {"xla_dump_to": dump, "xla_dump_hlo_as_text": True,
                   "xla_dump_hlo_module_re": ".*train_step.*"}
    lowered = jax.jit(model.train_step, donate_argnums=0).lower(
        jax.tree.map(spec, state), jax.tree.map(spec, (x, y, None)))
    stats = lowered.compile(options).memory_analysis()
    plan = {"argument": stats.argument_size_in_bytes, "output": stats.output_size_in_bytes,
            "alias": stats.alias_size_in_bytes, "temp": stats.temp_size_in_bytes}
    plan["peak"] = plan["argument"] + plan["output"] - plan["alias"] + plan["temp"]
    return plan


def memlint_peak(source: str, batch: int, optimizer: str, policy: str, target: str):
    """memlint's breakdown of the same source (xla profile, the target's capability)."""
    from dataclasses import replace

    from memlint.frontends.keras import analyze_source
    from memlint.ir import OptimizerSpec
    from memlint.memory import estimate
    from memlint.memory.profiles import XLA

    result = analyze_source(HEADER + source + "\n", "probe.py")
    graph = result.models[-1]
    setup = replace(graph.setup, batch_size=batch, mode="train", dtype_policy=policy,
                    optimizer=OptimizerSpec(optimizer, {}, "probe"))
    return estimate(graph.for_memory(), setup, XLA, compute_capability=CAPABILITY[target],
                    gpu_code_paths=False)  # compiled without a device: the scan loop


def alive_at_peak(dump: str, top: int = 20) -> list:
    """(bytes, shape, writing operation) of the buffers alive at the peak of XLA's temporary
    allocation, read from the dump's buffer assignment and live ranges (entry computation)."""
    files = sorted(glob.glob(f"{dump}/*train_step*gpu_after_optimizations-buffer-assignment.txt"))
    if not files:
        return []
    assignment = Path(files[-1]).read_text()
    ranges_text = Path(files[-1].replace("-buffer-assignment.txt", "-live-range.txt")).read_text()
    hlo = Path(files[-1].replace("-buffer-assignment.txt", ".txt")).read_text()
    temps = []
    for block in re.split(r"\nallocation ", assignment):
        if "preallocated-temp" in block.split("\n", 1)[0]:
            temps += [(m.group(1), int(m.group(2)), m.group(3)) for m in re.finditer(
                r"value: <\d+ (\S+) @0> \(size=(\d+),offset=\d+\): (\S+)", block)]
    ranges = {m.group(1): (int(m.group(2)), int(m.group(3))) for m in
              re.finditer(r"^\s+(\S+):(\d+)-(\d+)$", ranges_text, re.M)}
    ops = {m.group(1): m.group(2) for m in re.finditer(
        r"^\s+(?:ROOT )?%(\S+) = .*?op_name=\"([^\"]+)\"", hlo, re.M)}
    spans = [(name, size, shape, ranges.get(name) or ranges.get(name + "{}"))
             for name, size, shape in temps]
    spans = [s for s in spans if s[3] is not None]
    if not spans:
        return []
    end = max(r[1] for *_, r in spans)
    live = collections.Counter()
    for _, size, _, (a, b) in spans:
        for t in range(a, b + 1):
            live[t] += size
    peak = max(range(end + 1), key=lambda t: live[t])
    alive = sorted(((size, shape, ops.get(name.split("{")[0], "")) for name, size, shape, (a, b)
                    in spans if a <= peak <= b), reverse=True)
    return alive[:top]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m harness.probe_saved",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("probes", nargs="*", help=f"probes to run (all: {', '.join(PROBES)})")
    parser.add_argument("--target", action="append", choices=("h100", "t4", "a100"))
    parser.add_argument("--precision", default="float32",
                        choices=("float32", "mixed_float16", "mixed_bfloat16"))
    parser.add_argument("--optimizer", default="sgd")
    parser.add_argument("--dump", action="store_true",
                        help="list what is alive at the peak of XLA's plan")
    args = parser.parse_args(argv)
    _setup_jax()
    names = args.probes or list(PROBES)
    print(f"{'probe':<16}{'target':<7}{'XLA temp':>13}{'XLA peak':>13}{'memlint':>13}"
          f"{'error':>8}  what it shows")
    for name in names:
        source, shape, batch, what = PROBES[name]
        for target in args.target or TARGETS:
            dump = tempfile.mkdtemp(prefix="probe_saved_") if args.dump else None
            try:
                model = build(source, args.precision)
                plan = compile_step(model, shape, batch, target, args.optimizer, dump)
                breakdown = memlint_peak(source, batch, args.optimizer, args.precision, target)
                error = (breakdown.peak - plan["peak"]) / plan["peak"]
                print(f"{name:<16}{target:<7}{plan['temp']:>13,}{plan['peak']:>13,}"
                      f"{breakdown.peak:>13,}{error:>+8.1%}  {what}", flush=True)
                if dump:
                    for size, buffer_shape, op in alive_at_peak(dump):
                        print(f"      {size:>13,}  {buffer_shape[:40]:<40} {op[:90]}")
            finally:
                if dump:
                    shutil.rmtree(dump, ignore_errors=True)
    import keras
    keras.config.set_dtype_policy("float32")


if __name__ == "__main__":
    main(sys.argv[1:])
