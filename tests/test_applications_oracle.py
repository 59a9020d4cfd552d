"""Keras's own application models, read from the installed Keras source by memlint and built
by real Keras: every layer's name, class, output shape and parameters must agree.

The applications are real, library-style model code (factories with keyword defaults, helper
blocks, closures, config tables, ``imagenet_utils`` helpers, error guards), so this checks the
frontend on code nobody wrote for memlint.  memlint reads ``keras/src/applications/*.py``
with ``--entry 'Name(weights=None)'``; it never imports it.  Real Keras builds the same call in
a subprocess.  Building all of them takes a few minutes, so the tier is slow, and a
rotating third runs each day (``MEMLINT_SWEEP_EVERY``, as the Keras-source sweep; 1: all):
what user code gets is checked on every factory by tests/test_applications_replay_oracle.py.
"""

from __future__ import annotations

import pytest

from memlint.analysis import analyze_file
from memlint.config import Settings
from tests.conftest import require_keras, run_oracle
from tests.test_fixtures_oracle import _as_lists
from tests.test_robustness_sweep import keras_root, sweep_every, sweep_offset

pytestmark = [pytest.mark.oracle, pytest.mark.slow]

# (application, its module under keras/src/applications, arguments).  Not here: ResNet*V2,
# whose module calls the ResNet builder of another Keras module (a library import, which
# memlint does not read).
APPLICATIONS = [
    ("VGG16", "vgg16", {}), ("VGG19", "vgg19", {}),
    ("ResNet50", "resnet", {}), ("ResNet101", "resnet", {}), ("ResNet152", "resnet", {}),
    ("InceptionV3", "inception_v3", {}), ("InceptionResNetV2", "inception_resnet_v2", {}),
    ("Xception", "xception", {}), ("MobileNet", "mobilenet", {}),
    ("MobileNetV2", "mobilenet_v2", {}),
    ("MobileNetV3Small", "mobilenet_v3", {}), ("MobileNetV3Large", "mobilenet_v3", {}),
    ("DenseNet121", "densenet", {}), ("DenseNet169", "densenet", {}),
    ("NASNetMobile", "nasnet", {}),
    ("EfficientNetB0", "efficientnet", {}), ("EfficientNetB3", "efficientnet", {}),
    ("EfficientNetV2B0", "efficientnet_v2", {}), ("EfficientNetV2S", "efficientnet_v2", {}),
    ("ConvNeXtTiny", "convnext", {}), ("DenseNet201", "densenet", {}),
    ("EfficientNetV2B2", "efficientnet_v2", {}),
    ("MobileNetV3Small", "mobilenet_v3", {"minimalistic": True, "alpha": 0.75}),
    # the forms transfer learning uses: no top, another input size, pooling
    ("MobileNetV2", "mobilenet_v2", {"include_top": False, "input_shape": (160, 160, 3),
                                     "pooling": "avg"}),
    ("ResNet50", "resnet", {"include_top": False, "input_shape": (96, 128, 3)}),
    ("EfficientNetB0", "efficientnet", {"include_top": False, "input_shape": (128, 128, 3),
                                        "pooling": "max"}),
    ("DenseNet121", "densenet", {"include_top": False, "input_shape": (64, 64, 3)}),
    ("MobileNet", "mobilenet", {"alpha": 0.5, "input_shape": (128, 128, 3)}),
    ("VGG16", "vgg16", {"classes": 10, "input_shape": (32, 32, 3), "include_top": False}),
]


APPLICATIONS = APPLICATIONS[sweep_offset(sweep_every())::sweep_every()]


def _key(name: str, kwargs: dict) -> str:
    arguments = {"weights": None, **kwargs}
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in sorted(arguments.items()))})"


@pytest.fixture(scope="module")
def keras_models():
    require_keras()
    models = [[_key(name, kwargs), name, {"weights": None, **kwargs}]
              for name, _, kwargs in APPLICATIONS]
    return run_oracle("keras_applications.py", {"models": models})["results"]


@pytest.mark.parametrize("name,module,kwargs", APPLICATIONS,
                         ids=[_key(n, k) for n, _, k in APPLICATIONS])
def test_application_matches_keras(name, module, kwargs, keras_models):
    expected = keras_models[_key(name, kwargs)]
    assert "error" not in expected, expected.get("traceback", expected.get("error"))
    source = keras_root() / "src" / "applications" / f"{module}.py"
    arguments = ", ".join(f"{k}={v!r}" for k, v in {"weights": None, **kwargs}.items())
    report = analyze_file(str(source), Settings(entry=f"{name}({arguments})"))
    (graph,) = report.models
    ours = [(l.name, l.type, _as_lists(l.output_shape), l.trainable_params,
             l.non_trainable_params) for l in graph.layers]
    theirs = [(l["name"], l["type"], l["output_shape"], l["trainable"], l["non_trainable"])
              for l in expected["layers"]]
    assert len(ours) == len(theirs), (len(ours), len(theirs))
    for mine, keras_layer in zip(ours, theirs):
        assert mine == keras_layer
    assert graph.params == expected["total"]
