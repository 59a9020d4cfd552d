"""Files that are not ONNX models get one clear error; the onnx package is imported lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("onnx")

from memlint.frontends.onnx import OnnxLoadError, analyze_onnx, load_model  # noqa: E402
from tests import onnx_models as M  # noqa: E402


def _write(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_valid_model_loads(tmp_path):
    model, _ = M.conv()
    path = _write(tmp_path, "m.onnx", model.SerializeToString())
    loaded, notes = load_model(path)
    assert loaded.graph.name == "g" and notes == []


def test_empty_file(tmp_path):
    with pytest.raises(OnnxLoadError, match="^not an ONNX model: empty file$"):
        load_model(_write(tmp_path, "e.onnx", b""))


@pytest.mark.parametrize("fraction", [0.5, 0.9, 0.97])
def test_truncated_model(tmp_path, fraction):
    model, _ = M.attention()
    data = model.SerializeToString()
    path = _write(tmp_path, "t.onnx", data[:int(len(data) * fraction)])
    with pytest.raises(OnnxLoadError) as info:
        load_model(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(("not an ONNX model", "truncated or invalid ONNX model"))


def test_truncated_real_model(tmp_path):
    import glob
    import os
    import onnx
    light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    models = sorted(glob.glob(os.path.join(light, "*resnet50.onnx")))
    if not models:
        pytest.skip("onnx ships no light models")
    data = open(models[0], "rb").read()
    assert load_model(_write(tmp_path, "whole.onnx", data))[0].graph.node
    for cut in (len(data) // 3, len(data) - 100, len(data) - 1):
        with pytest.raises(OnnxLoadError):
            load_model(_write(tmp_path, "cut.onnx", data[:cut]))


def test_tensor_file_is_not_a_model(tmp_path):
    from onnx import numpy_helper
    import numpy as np
    data = numpy_helper.from_array(np.ones((3, 4), np.float32), "t").SerializeToString()
    with pytest.raises(OnnxLoadError, match="^not an ONNX model"):
        load_model(_write(tmp_path, "t.onnx", data))


def test_text_file(tmp_path):
    path = _write(tmp_path, "t.onnx", b"import keras\nmodel = keras.Sequential()\n")
    with pytest.raises(OnnxLoadError, match="^not an ONNX model"):
        load_model(path)


def test_random_bytes(tmp_path):
    import numpy as np
    data = np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes()
    with pytest.raises(OnnxLoadError, match="^not an ONNX model"):
        load_model(_write(tmp_path, "r.onnx", data))


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(OnnxLoadError, match="no such file"):
        load_model(tmp_path / "missing.onnx")
    with pytest.raises(OnnxLoadError, match="is a directory"):
        load_model(tmp_path)


def test_analyze_raises_the_same_error(tmp_path):
    with pytest.raises(OnnxLoadError):
        analyze_onnx(_write(tmp_path, "x.onnx", b"hello"))


def test_onnx_is_imported_lazily():
    code = ("import sys, memlint.frontends.onnx, memlint.frontends.keras; "
            "print('onnx' in sys.modules, 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split()[0] == "False"
