"""GitHub annotation escaping and ranking."""

from memlint.diagnostics import Diagnostic
from memlint.reporters.github import annotation, escape_data, escape_property, ranked


def _diag(severity="error", line=3, end_line=None, message="m", path="a.py"):
    return Diagnostic("MEM001", "over-budget-parameters", severity, message, path, line, 5,
                      end_line, 9)


def test_escaping():
    assert escape_data("100% \r\n done") == "100%25 %0D%0A done"
    assert escape_property("a:b,c%") == "a%3Ab%2Cc%25"


def test_annotation_single_line_has_columns():
    text = annotation(_diag(message="uses 50%\nof GPU", path="dir,x/m:1.py"))
    assert text == ("::error file=dir%2Cx/m%3A1.py,line=3,col=5,endColumn=9,"
                    "title=MEM001 over-budget-parameters::uses 50%25%0Aof GPU")


def test_annotation_multi_line_has_no_columns():
    text = annotation(_diag(end_line=7))
    assert "col=" not in text and "endLine=7" in text


def test_info_becomes_notice_and_errors_rank_first():
    diags = [_diag("info", 1), _diag("warning", 2), _diag("error", 9)]
    assert [d.severity for d in ranked(diags)] == ["error", "warning", "info"]
    assert annotation(_diag("info")).startswith("::notice ")


def test_sarif_document_structure():
    from memlint.reporters.sarif import document

    class Report:
        diagnostics = [_diag("warning", 4, message="too big: 3 GiB")]

    doc = document([Report()])
    assert doc["version"] == "2.1.0"
    run = doc["runs"][0]
    assert run["tool"]["driver"]["name"] == "memlint"
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert "MEM001" in ids and all(r["shortDescription"]["text"]
                                   for r in run["tool"]["driver"]["rules"])
    (result,) = run["results"]
    assert result["ruleId"] == "MEM001" and result["level"] == "warning"
    assert ids[result["ruleIndex"]] == "MEM001"
    loc = result["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "a.py"
    assert loc["region"] == {"startLine": 4, "startColumn": 5, "endColumn": 9}
    assert result["partialFingerprints"]["memlintFingerprint/v1"]


def test_within_a_level_memory_verdicts_rank_before_style():
    style = Diagnostic("MEM004", "missing-allow-growth", "warning", "m", "a.py", 1)
    memory = Diagnostic("MEM002", "oversized-feature-map", "warning", "m", "z.py", 99)
    assert ranked([style, memory]) == [memory, style]
