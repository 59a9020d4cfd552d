"""The GTX 960 model against the summary published in the user report it comes from."""

from memlint.analysis import analyze_file
from memlint.config import Settings
from tests.conftest import FIXTURES, ROOT

SUMMARY = ROOT / "tests" / "data" / "seed_gtx960_published_summary.tsv"
KERAS1_TO_KERAS3 = {"Convolution2D": "Conv2D"}


def _published():
    rows, total = [], None
    for line in SUMMARY.read_text().splitlines():
        if line.startswith("# total:"):
            total = int(line.split(":")[1])
        elif line and not line.startswith("#"):
            cls, shape, params = line.split("\t")
            dims = tuple(None if d.strip() == "None" else int(d)
                         for d in shape.strip("()").split(","))
            rows.append((KERAS1_TO_KERAS3.get(cls, cls), dims, int(params)))
    return rows, total


def test_every_layer_matches_the_published_summary():
    rows, total = _published()
    assert len(rows) == 33 and total == 206_538_153
    (graph,) = analyze_file(str(FIXTURES / "seed_gtx960_keras1.py"), Settings()).models
    ours = [(layer.type, layer.output_shape, layer.params) for layer in graph.layers]
    assert ours == rows
    assert graph.params == total
