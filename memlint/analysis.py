"""One file through the whole pipeline: frontend -> memory model -> rules -> suppression."""

from __future__ import annotations

from dataclasses import field
from pathlib import Path
from typing import Optional

from memlint.budget import Budget, resolve_budget
from memlint.catalog import default_options
from memlint.checks import RULES, RuleContext
from memlint.config import Settings
from memlint.diagnostics import Diagnostic
from memlint.ir import OptimizerSpec
from memlint.memory import estimate
from memlint.memory.optimizers import heaviest, is_known
from memlint.memory.profiles import profile_for
from memlint.memory.shared_steps import bound_shared_steps
from memlint.placement import place, process_budget, sharded
from memlint.suppression import is_suppressed, suppressions
from memlint.units import parse_size
from memlint.records import record
from memlint.startup import load


class AnalysisError(Exception):
    """The file cannot be analysed at all (unreadable, not text); exit code 2."""


@record
class FileReport:
    """Everything found in one file."""

    path: str
    settings: Settings
    budget: Optional[Budget]
    models: list = field(default_factory=list)  # list[ModelGraph]
    breakdowns: list = field(default_factory=list)  # list[MemoryBreakdown], parallel to models
    diagnostics: list = field(default_factory=list)
    suppressed: int = 0
    definitions: list = field(default_factory=list)
    internal_errors: list = field(default_factory=list)  # bugs in memlint: the run exits 2
    entries: list = field(default_factory=list)  # (factory name, needs arguments) when no model
    # deterministic work units spent on the file (Keras source: FrontendResult.work)
    work: dict = field(default_factory=dict)
    # what the result depends on besides the file and settings (project modules read and
    # looked up): the result cache checks them (memlint/cache.py)
    dependencies: dict = field(default_factory=dict)
    memory_caps: list = field(default_factory=list)  # MemoryCap settings the code makes
    # models that only run inside other models (TrainingSetup.part_of): no estimate of
    # their own, their layers and memory are in those models' steps
    parts: list = field(default_factory=list)  # list[ModelGraph]


def budget_for(settings: Settings) -> Optional[Budget]:
    """The GPU budget from settings (None when no GPU is configured)."""
    if settings.gpu is None:
        return None
    return resolve_budget(
        settings.gpu,
        cuda_context=parse_size(settings.cuda_context, allow_zero=True)
        if settings.cuda_context else None,
        reserve=parse_size(settings.reserve, allow_zero=True) if settings.reserve else None,
        margin=settings.margin,
    )


def apply_overrides(graph, settings: Settings) -> None:
    """Command-line/config values replace what the code said, noting the source."""
    setup = graph.setup
    if settings.batch_size is not None and not setup.batch_source.startswith("fixed by the graph"):
        setup.batch_size = settings.batch_size
        setup.batch_source = "configured batch size (--batch-size or config)"
    if settings.mode is not None:
        setup.mode, setup.mode_source = settings.mode, "configured mode (--mode or config)"
    if settings.optimizer is not None:
        name = settings.optimizer.lower()
        setup.optimizer = OptimizerSpec(name, {}, "configured optimizer (--optimizer or config)")
    else:
        setup.optimizer = heaviest(setup.optimizer, setup.later_optimizers)


def analyze_file(path: str, settings: Settings) -> FileReport:
    """Analyse one Keras source file or ONNX model; raises :class:`AnalysisError` if it
    cannot be read."""
    if str(path).lower().endswith(".onnx"):
        return analyze_onnx_file(path, settings)
    try:
        source = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AnalysisError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise AnalysisError(f"{path}: is a directory") from None
    except UnicodeDecodeError:
        raise AnalysisError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise AnalysisError(f"{path}: cannot read ({exc.strerror})") from None
    return analyze_text(source, path, settings)


def analyze_onnx_file(path: str, settings: Settings) -> FileReport:
    """Analyse an exported ONNX graph (inference unless ``--mode train``); the onnx package
    is imported only here."""
    if not Path(path).is_file():
        raise AnalysisError(f"{path}: no such file" if not Path(path).exists()
                            else f"{path}: is a directory")
    try:
        onnx_frontend = load("memlint.frontends.onnx")
        OnnxLoadError, analyze_onnx = onnx_frontend.OnnxLoadError, onnx_frontend.analyze_onnx
    except ImportError as exc:  # pragma: no cover - onnx is a dependency
        raise AnalysisError(f"{path}: the onnx package is needed for .onnx files ({exc})") \
            from None
    try:
        result = analyze_onnx(path, batch_size=settings.batch_size, dims=settings.dims)
    except OnnxLoadError as exc:
        raise AnalysisError(f"{path}: {exc}") from None
    report = FileReport(path=path, settings=settings, budget=budget_for(settings))
    return _finish(report, result.models, list(result.diagnostics), module=None,
                   positions=None, source="")


def analyze_text(source: str, path: str, settings: Settings) -> FileReport:
    """Analyse Keras source text as if it were the file ``path``."""
    # libcst, not needed for ONNX files
    analyze_source = load("memlint.frontends.keras").analyze_source

    budget = budget_for(settings)
    input_shape = (None,) + tuple(settings.input_shape) if settings.input_shape else None
    roots = (str(Path(settings.source).parent),) if settings.source != "defaults" else ()
    result = analyze_source(source, path, input_shape=input_shape, roots=roots,
                            entry=settings.entry, inputs=settings.inputs,
                            values=settings.dims)
    report = FileReport(path=path, settings=settings, budget=budget,
                        definitions=result.definitions, entries=result.entries,
                        internal_errors=list(result.internal_errors),
                        work=dict(result.work), dependencies=dict(result.dependencies),
                        memory_caps=list(result.memory_caps))
    return _finish(report, result.models, list(result.diagnostics), module=result.module,
                   positions=result.positions, source=source)


def _finish(report: FileReport, models: list, diagnostics: list, module, positions,
            source: str) -> FileReport:
    """Overrides, memory estimate, rules and suppressions for the models of one file."""
    settings, path, budget = report.settings, report.path, report.budget
    detected = None  # the backend the source states: one look per file
    # a model that only runs inside others is in their steps (TrainingSetup.part_of)
    # and one only a tf.data map() runs is on the host (TrainingSetup.pipeline)
    report.parts = [graph for graph in models if graph.setup.part_of or graph.setup.pipeline]
    models = [graph for graph in models if not (graph.setup.part_of or graph.setup.pipeline)]
    for graph in models:
        apply_overrides(graph, settings)
        if settings.backend:
            graph.setup.backend = settings.backend
            graph.setup.backend_source = "configured (--backend or config)"
        elif module is not None:  # Keras source (libcst); an ONNX graph names no backend
            if detected is None:
                from memlint.frontends.keras.backend import detect_backend
                detected = detect_backend(module, positions)
            graph.setup.backend, graph.setup.backend_source = detected
        if not is_known(graph.setup.optimizer.name):
            diagnostics.append(Diagnostic(
                "MEM900", "unresolved-value", "info",
                f"optimizer '{graph.setup.optimizer.name}' is not in memlint's table; "
                "assumed 2 slots per parameter (as Adam)", path,
                *(_line_col(graph.location))))
        place(graph.setup, settings.gpus, report.memory_caps)  # per-GPU batch
        report.models.append(graph)
        report.breakdowns.append(estimate(
            memory_graph(graph), graph.setup,
            profile=profile_for(graph.setup.backend, graph.setup.jit_compile),
            compute_capability=budget.compute_capability if budget is not None else None))
    if budget is not None and models:
        # the process's own caps and its backend's reserve decide what each GPU offers
        backend = "onnx" if models[0].kind == "ONNX" else models[0].setup.backend
        budget = report.budget = process_budget(budget, report.memory_caps, backend,
                                                configured_reserve=bool(settings.reserve))
    sized = [memory_graph(graph) for graph in report.models]  # what the rules size
    bound_shared_steps(sized, report.breakdowns)
    for code, rule in sorted(RULES.items()):
        if not settings.enabled(code):
            continue
        ctx = RuleContext(path=path, models=sized, breakdowns=report.breakdowns,
                          budget=budget, module=module, positions=positions,
                          source=source,
                          options=settings.rule_options(code, default_options(code)))
        diagnostics.extend(rule.check(ctx))
    table = suppressions(source)
    kept = []
    for diag in diagnostics:
        if not settings.enabled(diag.code):
            continue
        if is_suppressed(diag, table):
            report.suppressed += 1
            continue
        kept.append(diag)
    report.diagnostics = sorted(kept, key=Diagnostic.sort_key)
    return report


def memory_graph(graph):
    """What one GPU holds of ``graph``: sized by its data, its variables sharded by the
    strategy's layout map."""
    return sharded(graph.for_memory())


def _line_col(location) -> tuple:
    return (location.line, location.column) if location else (1, 1)

