"""MEM006 dataset-in-host-memory: a whole data set held in host memory and handed over at once.

The frontend records every in-memory array of known size that the code gives to ``fit``,
``predict`` or ``tf.data.Dataset.from_tensor_slices`` (``TrainingSetup.host_data``).  One
warning per array over ``host-bytes``, at the place it is handed over, saying how much host
memory it takes, that ``from_tensor_slices`` embeds arrays as graph constants outside eager
execution (TensorFlow refuses those of 2 GiB or more), and what streams the data instead.
When no single array is over the limit but the arrays a model is fed add up to more, one warning names them all.  The
same array at the same place (a model trained twice, several models fed the same data) is
reported once.  No GPU budget is needed.
"""

from __future__ import annotations

from typing import Iterable

from memlint.checks.base import Rule, RuleContext, register
from memlint.diagnostics import Diagnostic
from memlint.units import format_bytes, parse_size

DEFAULT_LIMIT = "2GiB"
GRAPH_CONSTANT_LIMIT = 1 << 31  # TensorFlow refuses a constant of this many bytes or more
STREAMING = ("stream it instead: a generator or a `keras.utils.PyDataset` that loads one batch "
             "at a time, or a `tf.data` pipeline that reads files (`tf.data.TFRecordDataset`, "
             "`keras.utils.image_dataset_from_directory`) or a memory-mapped array "
             "(`np.load(..., mmap_mode='r')`)")


@register
class DatasetInHostMemory(Rule):
    code = "MEM006"

    def check(self, ctx: RuleContext) -> Iterable[Diagnostic]:
        limit = _limit(ctx.options.get("host-bytes", DEFAULT_LIMIT))
        seen = set()
        for graph in ctx.models:
            entries, counts = [], {}
            for data in graph.setup.host_data:
                base = _key(data)  # the n-th equal array at one place in this model's list
                counts[base] = counts.get(base, 0) + 1
                key = base + (counts[base],)
                if key not in seen:
                    seen.add(key)
                    entries.append(data)
            over = [d for d in entries if d.bytes > limit]
            for data in over:
                yield self._one(ctx, graph, data, limit)
            total = sum(d.bytes for d in entries)
            if not over and len(entries) > 1 and total > limit:
                yield self._together(ctx, graph, entries, total, limit)

    def _one(self, ctx, graph, data, limit: int) -> Diagnostic:
        why = _constants(data.bytes, _slices(data))
        message = (f"{describe(data)} in host memory ({data.what}), over the "
                   f"{format_bytes(limit)} host-bytes limit; {why}; {STREAMING}.")
        return self.diagnostic(
            ctx, data.location or graph.setup.location or graph.location, message,
            model=graph.name,
            data={"what": data.what, "bytes": data.bytes, "shape": list(data.shape),
                  "dtype": data.dtype, "limit": limit})

    def _together(self, ctx, graph, entries, total: int, limit: int) -> Diagnostic:
        each = "; ".join(f"{describe(d)} ({d.what})" for d in entries)
        message = (f"the arrays model '{graph.name}' is fed take {format_bytes(total)} of host "
                   f"memory together, over the {format_bytes(limit)} host-bytes limit ({each}); "
                   f"{_constants(total, any(_slices(d) for d in entries))}; {STREAMING}.")
        first = next((d.location for d in entries if d.location), None)
        return self.diagnostic(
            ctx, first or graph.setup.location or graph.location, message, model=graph.name,
            data={"bytes": total, "limit": limit, "what": [d.what for d in entries]})


def describe(data) -> str:
    """``50,000 x 224 x 224 x 3 float32 = 28 GiB``."""
    dims = " x ".join(f"{d:,}" if isinstance(d, int) else "?" for d in data.shape)
    return f"{dims} {data.dtype} = {format_bytes(data.bytes)}"


def _constants(size: int, slices: bool) -> str:
    """Why holding it hurts: host memory for the whole run, and the graph-constant limit that
    ``from_tensor_slices`` runs into (it is the call at hand, or the usual next step)."""
    over = " (this data is over it)" if size >= GRAPH_CONSTANT_LIMIT else ""
    refusal = ("TensorFlow refuses a constant of 2 GiB or more (\"Cannot create a tensor proto "
               f"whose content is larger than 2GB\"){over}")
    if slices:
        return ("it stays in host memory for the whole run, and `from_tensor_slices` copies it "
                "into a tensor and, outside eager execution (TF1 graphs, inside a "
                f"`tf.function`), embeds it in the graph as a constant: {refusal}")
    return ("it stays in host memory for the whole run, and wrapping it in "
            "`tf.data.Dataset.from_tensor_slices` would, outside eager execution (TF1 graphs, "
            f"inside a `tf.function`), embed it in the graph as a constant: {refusal}")


def _slices(data) -> bool:
    return "from_tensor_slices" in data.what


def _key(data) -> tuple:
    loc = data.location
    where = (loc.path, loc.line, loc.column) if loc else None
    return (data.what, tuple(data.shape), data.dtype, where)


def _limit(value) -> int:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    try:
        return parse_size(str(value))
    except ValueError:
        return parse_size(DEFAULT_LIMIT)
