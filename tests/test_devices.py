"""The code's own GPU memory caps, the GPUs it sees and its distribution strategy: what each
process may use, and the batch and weights each GPU holds.  Figures follow the frameworks'
documented behaviour: TensorFlow's per_process_gpu_memory_fraction takes that share of the
card (no system reserve), memory_limit is in MiB, JAX's allocator takes 75% of the card by
default, a strategy splits the global batch evenly over its replicas."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from memlint.analysis import analyze_file, analyze_text
from memlint.budget import resolve_budget
from memlint.config import Settings
from memlint.frontends.keras import analyze_source
from memlint.ir import MemoryCap
from memlint.placement import place, process_budget

GiB = 2**30
MiB = 2**20


def frontend(body: str):
    return analyze_source(textwrap.dedent(body), "d.py")


MODEL = """\
    model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(10)])
    model.compile("adam", "mse")
    model.fit(x, y, batch_size=64)
    """


@pytest.mark.parametrize("setting,kind,value", [
    ("config = tf.compat.v1.ConfigProto()\n"
     "config.gpu_options.per_process_gpu_memory_fraction = 0.6\n"
     "sess = tf.compat.v1.Session(config=config)\n", "tf-fraction", 0.6),
    ("gpu_options = tf.GPUOptions(per_process_gpu_memory_fraction=0.3)\n"
     "sess = tf.Session(config=tf.ConfigProto(gpu_options=gpu_options))\n"
     "keras.backend.set_session(sess)\n", "tf-fraction", 0.3),
    ("gpus = tf.config.list_physical_devices('GPU')\n"
     "tf.config.set_logical_device_configuration(gpus[0], "
     "[tf.config.LogicalDeviceConfiguration(memory_limit=1024)])\n", "tf-limit", 1024 * MiB),
    ("tf.config.experimental.set_virtual_device_configuration(gpu, "
     "[tf.config.experimental.VirtualDeviceConfiguration(memory_limit=512)])\n",
     "tf-limit", 512 * MiB),
    ("os.environ['XLA_PYTHON_CLIENT_MEM_FRACTION'] = '.40'\n", "jax-fraction", 0.4),
    ("os.environ.setdefault('XLA_CLIENT_MEM_FRACTION', '0.5')\n", "jax-fraction", 0.5),
    ("os.environ['XLA_PYTHON_CLIENT_PREALLOCATE'] = 'false'\n", "jax-preallocate", False),
    ("os.environ.update({'XLA_PYTHON_CLIENT_ALLOCATOR': 'platform'})\n", "jax-allocator",
     "platform"),
    ("torch.cuda.set_per_process_memory_fraction(0.5)\n", "torch-fraction", 0.5),
    ("os.environ['CUDA_VISIBLE_DEVICES'] = '0,1,2'\n", "visible-devices", 3),
])
def test_caps_the_code_sets(setting, kind, value):
    result = frontend("import os\nimport torch\nimport tensorflow as tf\nfrom tensorflow "
                      "import keras\n" + setting + textwrap.dedent(MODEL))
    found = [c for c in result.memory_caps if c.kind == kind]
    assert found and found[-1].value == value
    assert "line" in found[-1].source


def test_a_config_never_given_to_a_session_caps_nothing():
    result = frontend("import tensorflow as tf\n"
                      "config = tf.compat.v1.ConfigProto()\n"
                      "config.gpu_options.per_process_gpu_memory_fraction = 0.6\n")
    assert result.memory_caps == []


def test_several_logical_devices_on_one_card():
    result = frontend("import tensorflow as tf\n"
                      "tf.config.set_logical_device_configuration(gpu, ["
                      "tf.config.LogicalDeviceConfiguration(memory_limit=1024), "
                      "tf.config.LogicalDeviceConfiguration(memory_limit=2048)])\n")
    kinds = {c.kind: c.value for c in result.memory_caps}
    assert kinds == {"tf-limit": 1024 * MiB, "logical-devices": 2}


def cap(kind, value):
    return MemoryCap(kind, value, f"{kind} at line 3")


@pytest.mark.parametrize("backend,caps,usable", [
    # TensorFlow: the fraction of the whole card replaces the system reserve
    ("tf", [cap("tf-fraction", 0.5)], 8 * GiB),
    ("tf", [cap("tf-limit", 1024 * MiB)], 1024 * MiB),
    (None, [cap("tf-limit", 1024 * MiB)], 1024 * MiB),
    # JAX: 75% of the card unless the code says otherwise
    ("jax", [], int(16 * GiB * 0.75)),
    ("jax", [cap("jax-fraction", 0.4)], int(16 * GiB * 0.4)),
    ("jax", [cap("jax-preallocate", False)], int(16 * GiB * 0.75)),
    ("jax", [cap("jax-allocator", "platform")], 16 * GiB - 300 * MiB),
    # PyTorch: no reserve, its own fraction when set
    ("torch", [], 16 * GiB - 300 * MiB),
    ("torch", [cap("torch-fraction", 0.25)], 4 * GiB),
    # a cap of another framework does not apply
    ("torch", [cap("tf-fraction", 0.1)], 16 * GiB - 300 * MiB),
])
def test_process_budget(backend, caps, usable):
    budget = process_budget(resolve_budget("16GiB"), caps, backend)
    assert budget.usable == usable


def test_tensorflow_without_caps_keeps_its_reserve():
    plain = resolve_budget("16GiB")
    assert process_budget(plain, [], "tf").usable == plain.usable
    assert plain.usable < 16 * GiB - 300 * MiB


def test_a_cap_above_the_card_is_bounded_by_the_card():
    budget = process_budget(resolve_budget("2GiB"), [cap("tf-limit", 8 * GiB)], "tf")
    assert budget.usable == 2 * GiB - 300 * MiB


STRATEGY = """\
    import tensorflow as tf
    from tensorflow import keras
    strategy = tf.distribute.MirroredStrategy({devices})
    with strategy.scope():
        model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(10)])
        model.compile("adam", "mse")
    model.fit(x, y, batch_size={batch})
    """


def setup_of(devices: str, batch: str, gpus=None, caps=()):
    (graph,) = frontend(STRATEGY.format(devices=devices, batch=batch)).models
    place(graph.setup, gpus, list(caps))
    return graph.setup


def test_mirrored_strategy_splits_the_global_batch():
    setup = setup_of('devices=["/gpu:0", "/gpu:1", "/gpu:2", "/gpu:3"]', "1024")
    assert (setup.batch_size, setup.global_batch_size, setup.replicas) == (256, 1024, 4)
    assert "over 4 replicas" in setup.batch_source


def test_per_replica_batch_from_num_replicas_in_sync():
    setup = setup_of("", "64 * strategy.num_replicas_in_sync")
    assert (setup.batch_size, setup.global_batch_size) == (64, None)
    setup = setup_of("", "64 * strategy.num_replicas_in_sync", gpus=8)
    assert (setup.batch_size, setup.global_batch_size, setup.replicas) == (64, 512, 8)


def test_unknown_gpu_count_leaves_the_per_gpu_batch_unknown():
    setup = setup_of("", "1024")
    assert setup.batch_size is None and "pass --gpus" in setup.batch_source
    setup = setup_of("", "1024", gpus=2)
    assert setup.batch_size == 512
    setup = setup_of("", "1024", caps=[cap("visible-devices", 4)])
    assert setup.batch_size == 256


def test_model_outside_the_scope_is_on_one_device():
    (first, second) = frontend("""\
        import tensorflow as tf
        from tensorflow import keras
        strategy = tf.distribute.MirroredStrategy(["/gpu:0", "/gpu:1"])
        with strategy.scope():
            inside = keras.Sequential([keras.Input((32,)), keras.layers.Dense(10)])
        outside = keras.Sequential([keras.Input((32,)), keras.layers.Dense(10)])
        """).models
    assert first.setup.strategy == "MirroredStrategy" and second.setup.strategy is None


def test_keras3_data_parallel_and_model_parallel():
    (graph,) = frontend("""\
        import keras
        devices = ["gpu:0", "gpu:1", "gpu:2", "gpu:3", "gpu:4", "gpu:5", "gpu:6", "gpu:7"]
        keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
        model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(10)])
        model.fit(x, y, batch_size=256)
        """).models
    place(graph.setup, None, [])
    assert (graph.setup.strategy, graph.setup.batch_size) == ("DataParallel", 32)
    (graph,) = frontend("""\
        import keras
        mesh = keras.distribution.DeviceMesh((2, 4), ["batch", "model"], devices=devs)
        layout_map = keras.distribution.LayoutMap(mesh)
        layout_map["dense.*kernel"] = (None, "model")
        keras.distribution.set_distribution(keras.distribution.ModelParallel(
            layout_map=layout_map, batch_dim_name="batch"))
        model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(4096),
                                  keras.layers.Dense(10)])
        model.fit(x, y, batch_size=64)
        """).models
    place(graph.setup, None, [])
    assert graph.setup.batch_size == 32  # 2 replicas along "batch"
    assert graph.setup.shards == [("dense.*kernel", 4)]


@pytest.mark.parametrize("listing", ["jax.devices('gpu')", "jax.local_devices()",
                                     "keras.distribution.list_devices('gpu')"])
def test_a_batch_per_device_of_the_listed_devices(listing):
    # Keras's distribution guide: batch_size=16 * len(devices) over DataParallel(devices)
    # is 16 per GPU, whatever their number (it was taken for Keras's default of 32 in all)
    (graph,) = frontend(f"""\
        import jax
        import keras
        devices = {listing}
        keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
        model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(10)])
        model.fit(x, y, batch_size=16 * len(devices))
        """).models
    place(graph.setup, None, [])
    assert (graph.setup.strategy, graph.setup.batch_size, graph.setup.replicas) == \
        ("DataParallel", 16, None)
    assert graph.setup.batch_source.startswith("16 per replica")


def test_a_batch_size_given_but_not_known_is_not_the_default():
    (graph,) = frontend("""\
        import keras
        model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(10)])
        model.fit(x, y, batch_size=config.batch)
        """).models
    assert graph.setup.batch_size is None
    assert graph.setup.batch_source == ("unknown: the batch_size given to fit() at line 3 is "
                                        "not known statically; pass --batch-size")


def test_multi_gpu_model_is_estimated_with_a_note():
    result = frontend("""\
        from keras.utils import multi_gpu_model
        from keras.models import Sequential
        from keras.layers import Dense
        model = Sequential([Dense(10, input_shape=(32,))])
        parallel = multi_gpu_model(model, gpus=4)
        parallel.compile("sgd", "mse")
        parallel.fit(x, y, batch_size=256)
        """)
    (graph,) = result.models
    place(graph.setup, None, [])
    assert graph.setup.batch_size == 64
    assert any("removed in TensorFlow 2.4" in d.message for d in result.diagnostics)


def test_end_to_end_cap_decides_the_verdict():
    source = textwrap.dedent("""\
        import numpy as np
        import tensorflow as tf
        from tensorflow import keras
        gpus = tf.config.list_physical_devices("GPU")
        tf.config.set_logical_device_configuration(gpus[0], [
            tf.config.LogicalDeviceConfiguration(memory_limit=256)])
        model = keras.Sequential([keras.Input((4096,)), keras.layers.Dense(4096),
                                  keras.layers.Dense(4096), keras.layers.Dense(10)])
        model.compile("adam", "mse")
        model.fit(np.zeros((64, 4096)), np.zeros((64, 10)), batch_size=64)
        """)
    capped = analyze_text(source, "c.py", Settings(gpu="16GiB"))
    assert capped.budget.usable == 256 * MiB
    # 33.6M parameters x (weights, gradients, 2 Adam slots) x 4 bytes = 537 MB > 256 MiB
    assert any(d.code == "MEM001" for d in capped.diagnostics)
    assert "memory_limit=256 MB at line 5" in capped.budget.cap_source
    whole = analyze_text(source.replace("memory_limit=256", "memory_limit=16384"), "c.py",
                         Settings(gpu="16GiB"))
    assert not any(d.code == "MEM001" for d in whole.diagnostics)


DEVICE_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "devices"
_SAME = re.compile(r"^#\s*same-estimate-as:\s*(\S+)", re.MULTILINE)
PAIRS = sorted((path, path.parent / match.group(1))
               for path in DEVICE_FIXTURES.glob("*.py")
               for match in [_SAME.search(path.read_text(encoding="utf-8"))] if match)


def test_every_strategy_fixture_has_a_one_device_twin():
    assert len(PAIRS) >= 3


@pytest.mark.parametrize("path,twin", PAIRS, ids=lambda p: p.name)
def test_per_gpu_estimate_equals_the_one_device_twin(path, twin):
    settings = Settings(gpu="16GiB", gpus=4)
    (mine,), (theirs,) = (analyze_file(str(p), settings).breakdowns for p in (path, twin))
    assert mine.batch_size == theirs.batch_size
    assert mine.peak == theirs.peak > 0


@pytest.mark.parametrize("name,usable", [
    ("tf1_session_memory_fraction.py", int(16 * GiB * 0.6)),
    ("tf2_logical_memory_limit.py", 1024 * MiB),
    ("jax_memory_fraction.py", int(16 * GiB * 0.4)),
])
def test_cap_fixtures(name, usable):
    report = analyze_file(str(DEVICE_FIXTURES / name), Settings(gpu="16GiB"))
    assert report.budget.usable == usable


@pytest.mark.parametrize("pattern,sharded_kernel", [
    ("dense.*kernel", False),  # Keras fullmatches the path, which starts with the model name
    ("sequential/dense/kernel", True),
    (".*dense/kernel", True),
])
def test_layout_map_patterns_match_as_keras_matches_them(pattern, sharded_kernel):
    from memlint.ir import LayerNode, ModelGraph, TrainingSetup, Weight
    from memlint.placement import sharded

    layer = LayerNode("dense", "Dense", None, weights=[Weight("kernel", (64, 64))])
    graph = ModelGraph("sequential", None, kind="Sequential", layers=[layer],
                       setup=TrainingSetup(shards=[(pattern, 4)]))
    size = sharded(graph).layers[0].weights[0].size
    assert size == (1024 if sharded_kernel else 4096)


def test_the_largest_batch_under_a_strategy_is_per_gpu_and_global():
    # Keras 2's multi_gpu_model over 8 GPUs: the batch that fits is each GPU's share, and
    # the global batch fit() would take is 8 times it (text, JSON and the job summary)
    from memlint.reporters import json_format, summary, text
    source = textwrap.dedent("""\
        import numpy as np
        from keras.utils import multi_gpu_model
        from keras.models import Sequential
        from keras.layers import Dense
        model = Sequential([Dense(4096, input_shape=(4096,)), Dense(10)])
        parallel = multi_gpu_model(model, gpus=8)
        parallel.compile("sgd", "mse")
        parallel.fit(np.zeros((512, 4096)), np.zeros((512, 10)), batch_size=256)
        """)
    report = analyze_text(source, "p.py", Settings(gpu="2GiB"))
    (doc,) = json_format.document([report], [])["models"]
    per_gpu = doc["largest_batch_size"]
    assert doc["replicas"] == 8 and per_gpu > 32
    assert doc["largest_global_batch_size"] == 8 * per_gpu
    assert f"largest batch size that fits: {per_gpu:,} per GPU (a global batch of " \
           f"{8 * per_gpu:,} over 8 replicas)" in text.render_report([report], [], None)
    assert f"{per_gpu:,} per GPU" in summary.markdown([report], [])
    one = analyze_text(source.replace("parallel = multi_gpu_model(model, gpus=8)",
                                      "parallel = model"), "p.py", Settings(gpu="2GiB"))
    (alone,) = json_format.document([one], [])["models"]
    assert alone["largest_global_batch_size"] is None
    assert "per GPU" not in text.render_report([one], [], None)
    # MEM002's advice alike, for the whole peak and for one layer's output
    over = analyze_text(source.replace("np.zeros((512, 4096)), np.zeros((512, 10))", "x, y")
                        .replace("batch_size=256", "batch_size=524288"), "p.py",
                        Settings(gpu="2GiB"))
    advice = [d.message for d in over.diagnostics if d.code == "MEM002"]
    assert len(advice) == 2 and all(" per GPU (a global batch of " in m for m in advice), \
        advice


def test_mem005s_batch_advice_under_a_strategy_is_per_gpu():
    source = textwrap.dedent("""\
        import sys
        from keras.utils import multi_gpu_model
        from keras.models import Sequential
        from keras.layers import Dense
        model = Sequential([Dense(4096, input_shape=(4096,)), Dense(10)])
        parallel = multi_gpu_model(model, gpus=8)
        parallel.compile("sgd", "mse")
        parallel.fit(x, y, batch_size=int(sys.argv[1]))
        """)
    report = analyze_text(source, "p.py", Settings(gpu="2GiB"))
    (note,) = [d.message for d in report.diagnostics if d.code == "MEM005"]
    assert re.search(r"batch size <= ([\d,]+) per GPU \(a global batch of [\d,]+ over 8 "
                     r"replicas\) fits", note), note
