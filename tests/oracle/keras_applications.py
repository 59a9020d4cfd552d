"""Run by tests/test_applications_oracle.py in a subprocess: build Keras applications.

Reads ``{"models": [[key, name, {kwargs}], ...]}`` on stdin and, for each, builds
``keras.applications.<name>(**kwargs)`` with real Keras, then reports its layers as
keras_scripts.py does.  Writes JSON.  Nothing is downloaded: importing keras_scripts makes
pretrained weights offline (``weights="imagenet"`` builds what Keras builds for it).
"""

import json
import os
import sys
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import keras  # noqa: E402

from keras_scripts import describe  # noqa: E402  (the same layer description)


def main():
    request = json.load(sys.stdin)
    results = {}
    for key, name, kwargs in request["models"]:
        if isinstance(kwargs.get("input_shape"), list):  # JSON has no tuples
            kwargs["input_shape"] = tuple(kwargs["input_shape"])
        try:
            keras.backend.clear_session()
            model = getattr(keras.applications, name)(**kwargs)
            results[key] = describe(model)
        except Exception as exc:
            results[key] = {"error": f"{type(exc).__name__}: {exc}",
                            "traceback": traceback.format_exc()[-2000:]}
    json.dump({"keras_version": keras.__version__, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
