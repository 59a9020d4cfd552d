"""Run by the exporter tests in a subprocess: build models and export them to ONNX.

Reads ``{"out": folder, "exporters": [...], "models": [...]}`` on stdin and writes one
``<model>.<exporter>.onnx`` per pair into ``out``.  Exporters:

* ``torch-dynamo``: ``torch.onnx.export`` with its default (``dynamo=True``) path;
* ``torch-legacy``: ``torch.onnx.export(..., dynamo=False)``, the TorchScript exporter;
* ``keras``: the Keras fixture itself, executed with training stubbed (as the Keras oracle
  does), then ``model.export(path, format="onnx")`` (tf2onnx under the TensorFlow backend).

The PyTorch models are written here to match the Keras fixtures layer for layer (channels
first).  Every model gets a dynamic batch axis.  Writes JSON on stdout: for each export its
path, the source framework's parameter counts, the opset, or the error.
"""

import contextlib
import json
import os
import sys
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "fixtures")

# model name -> (Keras fixture file, variable holding the model)
KERAS_FIXTURES = {
    "small_cnn": ("small_cnn_fits.py", "model"),
    "mnist_mlp": ("mnist_mlp_sgd.py", "model"),
    "lstm_bidirectional": ("lstm_sentiment_bidirectional.py", "model"),
    "transformer": ("transformer_text_classifier.py", "model"),
    "unet": ("unet_small.py", "unet"),
    "resnet_mini": ("cifar_resnet_mini.py", "resnet"),
}


# ------------------------------------------------------------------------- PyTorch models

def torch_models():
    """name -> (builder, example inputs builder, input names); imported lazily."""
    import torch
    from torch import nn

    class SmallCnn(nn.Module):
        """fixtures/small_cnn_fits.py: two conv/pool stages, dropout, dense softmax."""

        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = nn.Conv2d(1, 32, 3), nn.Conv2d(32, 64, 3)
            self.drop, self.dense = nn.Dropout(0.5), nn.Linear(64 * 5 * 5, 10)

        def forward(self, x):
            x = nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
            x = nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
            return torch.softmax(self.dense(self.drop(torch.flatten(x, 1))), -1)

    class MnistMlp(nn.Module):
        """fixtures/mnist_mlp_sgd.py: rescaling, three hidden dense layers, softmax."""

        def __init__(self):
            super().__init__()
            sizes = [784, 512, 256, 128]
            self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
            self.drop, self.out = nn.Dropout(0.2), nn.Linear(128, 10)

        def forward(self, x):
            x = x * (1.0 / 255)
            for layer in self.hidden:
                x = self.drop(torch.relu(layer(x)))
            return torch.softmax(self.out(x), -1)

    class BiRnn(nn.Module):
        """fixtures/lstm_sentiment_bidirectional.py: embedding, LSTM, bidirectional LSTM
        (concatenated), bidirectional GRU (summed), mean over time, sigmoid."""

        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(20000, 128)
            self.lstm = nn.LSTM(128, 64, batch_first=True)
            self.bilstm = nn.LSTM(64, 64, batch_first=True, bidirectional=True)
            self.bigru = nn.GRU(128, 32, batch_first=True, bidirectional=True)
            self.dense = nn.Linear(32, 1)

        def forward(self, tokens):
            x, _ = self.lstm(self.embed(tokens))
            x, _ = self.bilstm(x)
            x, _ = self.bigru(x)
            x = x[..., :32] + x[..., 32:]
            return torch.sigmoid(self.dense(x.mean(1)))

    class Transformer(nn.Module):
        """fixtures/transformer_text_classifier.py: token + position embeddings, one encoder
        block with 2 heads of key_dim 32 (Keras MultiHeadAttention), pooled classifier."""

        def __init__(self, dim=32, heads=2, key_dim=32, ff=32):
            super().__init__()
            self.heads, self.key_dim = heads, key_dim
            self.tokens, self.positions = nn.Embedding(20000, dim), nn.Embedding(200, dim)
            self.q, self.k, self.v = (nn.Linear(dim, heads * key_dim) for _ in range(3))
            self.o = nn.Linear(heads * key_dim, dim)
            self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
            self.ff1, self.ff2 = nn.Linear(dim, ff), nn.Linear(ff, dim)
            self.head1, self.head2 = nn.Linear(dim, 20), nn.Linear(20, 2)

        def split(self, t):
            return t.reshape(t.shape[0], t.shape[1], self.heads, self.key_dim).transpose(1, 2)

        def forward(self, tokens, positions):
            x = self.tokens(tokens) + self.positions(positions)
            q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
            scores = torch.softmax(q @ k.transpose(-1, -2) / self.key_dim ** 0.5, -1)
            ctx = (scores @ v).transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)
            x = self.norm1(x + self.o(ctx))
            x = self.norm2(x + self.ff2(torch.relu(self.ff1(x))))
            x = torch.relu(self.head1(x.mean(1)))
            return torch.softmax(self.head2(x), -1)

    class Unet(nn.Module):
        """fixtures/unet_small.py: three conv stages, ConvTranspose upsampling with skips,
        a zero-padded valid-conv branch and an upsampled, cropped branch."""

        def __init__(self, filters=(16, 32, 64)):
            super().__init__()
            chans, self.down = 3, nn.ModuleList()
            for f in filters:
                self.down.append(nn.ModuleList([nn.Conv2d(chans, f, 3, padding=1),
                                                nn.Conv2d(f, f, 3, padding=1)]))
                chans = f
            self.bottom = nn.Conv2d(chans, filters[-1] * 2, 3, padding=1)
            chans, self.up = filters[-1] * 2, nn.ModuleList()
            for f in reversed(filters):
                self.up.append(nn.ModuleList([nn.ConvTranspose2d(chans, f, 2, stride=2),
                                              nn.Conv2d(2 * f, f, 3, padding=1)]))
                chans = f
            self.side, self.wide = nn.Conv2d(3, 8, 5), nn.Conv2d(3, 8, 1)
            self.out = nn.Conv2d(chans + 16, 1, 1)

        def forward(self, image):
            x, skips = image, []
            for first, second in self.down:
                x = torch.relu(second(torch.relu(first(x))))
                skips.append(x)
                x = nn.functional.max_pool2d(x, 2)
            x = torch.relu(self.bottom(x))
            for (transpose, conv), skip in zip(self.up, reversed(skips)):
                x = torch.relu(conv(torch.cat([transpose(x), skip], 1)))
            side = nn.functional.pad(self.side(image), (2, 2, 2, 2))
            wide = nn.functional.interpolate(image, scale_factor=2.0, mode="nearest")
            wide = self.wide(wide[:, :, 32:96, 32:96])
            return torch.sigmoid(self.out(torch.cat([x, side, wide], 1)))

    class ResnetMini(nn.Module):
        """fixtures/cifar_resnet_mini.py: conv-BN-ReLU stem, residual stages with BatchNorm
        and projection shortcuts, global pooling, dense softmax."""

        def __init__(self, stages=((16, 2), (32, 2), (64, 2))):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False),
                                      nn.BatchNorm2d(16), nn.ReLU())
            self.blocks, chans = nn.ModuleList(), 16
            for stage, (f, blocks) in enumerate(stages):
                for block in range(blocks):
                    stride = 2 if block == 0 and stage > 0 else 1
                    self.blocks.append(Residual(chans, f, stride))
                    chans = f
            self.dense = nn.Linear(chans, 10)

        def forward(self, image):
            x = self.stem(image)
            for block in self.blocks:
                x = block(x)
            return torch.softmax(self.dense(x.mean((2, 3))), -1)

    class Residual(nn.Module):
        """One residual block of ResnetMini."""

        def __init__(self, chans, f, stride):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(chans, f, 3, stride, 1, bias=False), nn.BatchNorm2d(f), nn.ReLU(),
                nn.Conv2d(f, f, 3, 1, 1, bias=False), nn.BatchNorm2d(f))
            self.short = (nn.Sequential(nn.Conv2d(chans, f, 1, stride, bias=False),
                                        nn.BatchNorm2d(f))
                          if stride != 1 or chans != f else nn.Identity())

        def forward(self, x):
            return torch.relu(self.body(x) + self.short(x))

    def images(c, h, w):
        return lambda b: (torch.randn(b, c, h, w),)

    def tokens(b):
        return (torch.randint(0, 20000, (b, 200)),)

    def text(b):
        return (torch.randint(0, 20000, (b, 200)), torch.arange(200).repeat(b, 1))

    return {
        "small_cnn": (SmallCnn, images(1, 28, 28), ["image"]),
        "mnist_mlp": (MnistMlp, lambda b: (torch.rand(b, 784),), ["digits"]),
        "lstm_bidirectional": (BiRnn, tokens, ["tokens"]),
        "transformer": (Transformer, text, ["tokens", "positions"]),
        "unet": (Unet, images(3, 64, 64), ["image"]),
        "resnet_mini": (ResnetMini, images(3, 32, 32), ["image"]),
    }


def torch_counts(module) -> dict:
    """The PyTorch parameter and buffer counts, with the parts exporters treat specially."""
    from torch import nn
    counts = {"parameters": sum(p.numel() for p in module.parameters()),
              "buffers": sum(b.numel() for b in module.buffers()),
              "batchnorm_affine": 0, "batchnorm_stats": 0, "batchnorm_counters": 0}
    for sub in module.modules():
        if isinstance(sub, nn.modules.batchnorm._BatchNorm):
            counts["batchnorm_affine"] += sub.weight.numel() + sub.bias.numel()
            counts["batchnorm_stats"] += sub.running_mean.numel() + sub.running_var.numel()
            counts["batchnorm_counters"] += sub.num_batches_tracked.numel()
    return counts


def randomized(module):
    """Fresh random values in every float parameter and buffer (0.5 to 1.5, so BatchNorm
    variances stay positive): freshly initialised tensors are often identical (LayerNorm
    ones, zero biases) and exporters store identical constants once."""
    import torch
    with torch.no_grad():
        for tensor in list(module.parameters()) + list(module.buffers()):
            if tensor.is_floating_point():
                tensor.copy_(torch.rand_like(tensor) + 0.5)
    return module


def export_torch(name, exporter, path):
    """Export one PyTorch model with a dynamic batch axis; return its counts."""
    import torch
    torch.manual_seed(0)
    build, inputs, names = torch_models()[name]
    module = randomized(build()).eval()
    example = inputs(2)
    if exporter == "torch-dynamo":
        batch = torch.export.Dim("batch", min=1, max=4096)
        torch.onnx.export(module, example, path, input_names=names,
                          dynamic_shapes=tuple({0: batch} for _ in example))
    else:
        torch.onnx.export(module, example, path, input_names=names, dynamo=False,
                          opset_version=17, dynamic_axes={n: {0: "batch"} for n in names})
    return torch_counts(module)


# --------------------------------------------------------------------------- Keras models

def keras_model(name):
    """Execute the Keras fixture (training stubbed by the Keras oracle's patches)."""
    sys.path.insert(0, HERE)
    import keras_scripts  # noqa: F401 - patches fit/summary/... on import
    import keras
    keras.backend.clear_session()
    filename, variable = KERAS_FIXTURES[name]
    path = os.path.join(FIXTURES, filename)
    namespace = {"__name__": "__main__", "__file__": path}
    with open(path, encoding="utf-8") as handle:
        code = compile(handle.read(), path, "exec")
    with contextlib.redirect_stdout(sys.stderr):
        exec(code, namespace)  # noqa: S102 - our own fixtures, in the test tier only
    return namespace[variable]


def keras_counts(model) -> dict:
    """Trainable / non-trainable counts, BatchNorm parts and optimizer-free totals."""
    import keras
    import numpy as np

    def count(weights):
        return int(sum(int(np.prod(w.shape)) for w in weights))
    counts = {"parameters": count(model.trainable_weights),
              "buffers": count(model.non_trainable_weights),
              "batchnorm_affine": 0, "batchnorm_stats": 0, "batchnorm_counters": 0,
              "lstm_bias": 0}
    for layer in _all_layers(model):
        if isinstance(layer, keras.layers.BatchNormalization):
            counts["batchnorm_affine"] += count(layer.trainable_weights)
            counts["batchnorm_stats"] += count(layer.non_trainable_weights)
        if isinstance(layer, keras.layers.LSTM):
            counts["lstm_bias"] += int(np.prod(layer.cell.bias.shape))
    return counts


def _all_layers(model):
    """Every layer, Bidirectional wrappers opened."""
    for layer in model.layers:
        yield layer
        for inner in ("forward_layer", "backward_layer"):
            if hasattr(layer, inner):
                yield getattr(layer, inner)


def export_keras(name, path):
    """Export the Keras fixture with Keras's own ONNX export."""
    import numpy as np
    model = keras_model(name)
    zeros = [np.zeros((1,) + tuple(t.shape[1:]), dtype=t.dtype) for t in model.inputs]
    model(zeros if len(zeros) > 1 else zeros[0])  # Keras exports only models it has called
    rng = np.random.default_rng(0)  # distinct values: tf2onnx merges identical constants
    model.set_weights([(rng.random(w.shape) + 0.5).astype(w.dtype) for w in model.get_weights()])
    with contextlib.redirect_stdout(sys.stderr):
        model.export(path, format="onnx", verbose=False)
    return keras_counts(model)


# ------------------------------------------------------------------------------- driver

def export_one(name, exporter, out) -> dict:
    """Export one (model, exporter) pair; the record the tests read."""
    path = os.path.join(out, f"{name}.{exporter}.onnx")
    record = {"model": name, "exporter": exporter, "path": path}
    try:
        if exporter == "keras":
            record["source"] = export_keras(name, path)
        else:
            record["source"] = export_torch(name, exporter, path)
        import onnx
        proto = onnx.load(path, load_external_data=False)
        record["opsets"] = {op.domain or "ai.onnx": op.version for op in proto.opset_import}
        record["producer"] = f"{proto.producer_name} {proto.producer_version}"
    except Exception as exc:  # reported to the test, which decides
        record["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        record["traceback"] = traceback.format_exc()[-3000:]
    return record


def versions() -> dict:
    """Versions of the exporters that are importable."""
    found = {}
    for module in ("torch", "onnxscript", "keras", "tf2onnx", "tensorflow", "onnx"):
        try:
            found[module] = __import__(module).__version__
        except Exception:
            found[module] = None
    return found


def main():
    request = json.load(sys.stdin)
    with contextlib.redirect_stdout(sys.stderr):
        records = [export_one(name, exporter, request["out"])
                   for exporter in request["exporters"] for name in request["models"]]
        found = versions()
    json.dump({"versions": found, "exports": records}, sys.stdout)


if __name__ == "__main__":
    main()
