"""keras.applications models as user code gets them (replayed from memlint's data, no Keras
source read) against real Keras: every layer's name, class, output shape and parameters.

The variants: for each of the 40 factories, its defaults, a top-less backbone on another
input size with pooling (imagenet weights, as transfer learning uses it), a top-less one with
an open input size, and each shipped value of the arguments that change the architecture
(``alpha``, ``minimalistic``, ``include_preprocessing``); a classifier with another class
count and activation on an odd input size.  About 200 builds take too long for every CI run:
a rotating sixteenth runs each day (``MEMLINT_APPLICATIONS_EVERY``, default 16; 1: all of them).
"""

from __future__ import annotations

import datetime as dt
import os

import pytest

from memlint.analysis import analyze_text
from memlint.config import Settings
from memlint.frontends.keras import applications
from tests.conftest import require_keras, run_oracle
from tests.test_fixtures_oracle import _as_lists

pytestmark = [pytest.mark.oracle, pytest.mark.slow]

ODD = (197, 181, 3)


def all_variants() -> list:
    """(factory, arguments) of every variant checked, in a fixed order."""
    out = []
    for name, info in sorted(applications.index().items()):
        params = dict(info["params"])
        out.append((name, {"weights": None}))
        size = 160 if name not in ("NASNetLarge",) else 331
        out.append((name, {"include_top": False, "weights": "imagenet",
                           "input_shape": (size, size, 3), "pooling": "avg"}))
        out.append((name, {"include_top": False, "weights": None, "pooling": "max"}))
        if "name" not in info.get("fixed", ()):
            top = {"weights": None, "classes": 7, "input_shape": ODD}
            if "classifier_activation" in params:
                top["classifier_activation"] = None
            out.append((name, top))
        for key in info["variants"]:
            parsed = applications._parse_key(key)
            for arg in ("alpha", "minimalistic", "include_preprocessing"):
                if arg in parsed and parsed[arg] != params.get(arg):
                    variant = (name, {"weights": "imagenet" if arg == "alpha" else None,
                                      arg: parsed[arg]})
                    if variant not in out:
                        out.append(variant)
    return out


def todays_share(variants: list) -> list:
    every = max(int(os.environ.get("MEMLINT_APPLICATIONS_EVERY", "16") or 16), 1)
    offset = dt.date.today().toordinal() % every
    return variants[offset::every]


def _key(name: str, kwargs: dict) -> str:
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in sorted(kwargs.items()))})"


VARIANTS = todays_share(all_variants())


@pytest.fixture(scope="module")
def keras_models():
    require_keras()
    models = [[_key(name, kwargs), name, kwargs] for name, kwargs in VARIANTS]
    return run_oracle("keras_applications.py", {"models": models})["results"]


def test_the_variants_cover_every_factory():
    names = {name for name, _ in all_variants()}
    assert names == set(applications.index())
    assert len(all_variants()) >= 150


@pytest.mark.parametrize("name,kwargs", VARIANTS, ids=[_key(n, k) for n, k in VARIANTS])
def test_replayed_application_matches_keras(name, kwargs, keras_models):
    expected = keras_models[_key(name, kwargs)]
    assert "error" not in expected, expected.get("traceback", expected.get("error"))
    arguments = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    report = analyze_text(f"import keras\n\nmodel = keras.applications.{name}({arguments})\n",
                            "user_model.py", Settings())
    assert not report.internal_errors
    (graph,) = report.models
    ours = [(l.name, l.type, _as_lists(l.output_shape), l.trainable_params,
             l.non_trainable_params) for l in graph.layers]
    theirs = [(l["name"], l["type"], l["output_shape"], l["trainable"], l["non_trainable"])
              for l in expected["layers"]]
    assert graph.name == expected["name"]
    assert len(ours) == len(theirs), (len(ours), len(theirs))
    for mine, keras_layer in zip(ours, theirs):
        assert mine == keras_layer
    assert graph.params == expected["total"]


def test_stored_traces_are_what_the_frontend_records_today():
    """Regenerate today's two stored traces from Keras's source (memlint's frontend reading
    the factory, each trace checked by replaying it) and compare with the data: a change to
    the frontend or to Keras that changes what is recorded fails here.  ``python -m
    harness.applications_data --update`` rewrites the data."""
    require_keras()
    from harness import applications_data as generator

    folder = generator.keras_applications_dir()
    found = generator.factories(folder)
    assert sorted(found) == sorted(applications.index())
    stored = [(name, key) for name, info in sorted(applications.index().items())
              for key in info["variants"]]
    every = max(len(stored) // 2, 1)
    offset = dt.date.today().toordinal() % every
    with generator.readable_sources(folder) as source_dir:
        for name, key in stored[offset::every][:2]:
            combo = {k: v for k, v in applications._parse_key(key).items() if k != "weights"}
            fresh = generator.generate(name, found[name], source_dir, only=[combo])
            assert fresh["traces"][key] == applications.stored_trace(name, key), (name, key)
            assert fresh["params"] == applications.index()[name]["params"]
