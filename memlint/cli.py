"""Command line: ``memlint check``, ``memlint report``, ``memlint rules``, ``memlint explain``.

Exit codes: 0 no findings at or above the failing level, 1 findings, 2 usage error,
unreadable file or internal error (one line on stderr, never a traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from memlint import __version__

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
SOURCE_SUFFIXES = (".py", ".pyi", ".onnx")


class UsageError(Exception):
    """Bad command-line input; printed as one line, exit code 2."""


def _analysis_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="Keras model files, ONNX files, or folders (searched for *.py "
                             "and *.onnx)")
    parser.add_argument("--gpu", help="GPU memory budget: a size (2GiB, 1536MiB, 8GB) or a "
                                      "GPU name (t4, rtx-3090, a100-80gb; see memlint gpus)")
    parser.add_argument("--batch-size", type=int, help="override the batch size found in code")
    parser.add_argument("--gpus", type=int, help="how many GPUs a distribution strategy in the "
                                                 "code spreads the batch over (when the code "
                                                 "does not say)")
    parser.add_argument("--input-shape", help="model input shape without the batch dimension, "
                                              "e.g. 224,224,3")
    parser.add_argument("--input", action="append", metavar="NAME=SHAPE",
                        help="shape of the model input NAME without the batch dimension, "
                             "e.g. --input encoder_inputs=20 (repeatable: models of several "
                             "inputs)")
    parser.add_argument("--mode", choices=("train", "infer"), help="training or inference")
    parser.add_argument("--dim", action="append", metavar="NAME=SIZE",
                        help="size of a symbolic ONNX dimension, e.g. --dim seq=128, or "
                             "the value of a name a Keras script assigns where memlint "
                             "cannot know it, e.g. --dim vocab_size=20000, or of len(NAME) "
                             "in it, e.g. --dim 'len(chars)=57' (repeatable; the batch "
                             "comes from --batch-size)")
    parser.add_argument("--entry", metavar="NAME",
                        help="analyse the model this function or class of the file builds, "
                             "called with its defaults or literal arguments: "
                             "--entry 'build_model(classes=10, input_shape=(32, 32, 3))'")
    parser.add_argument("--optimizer", help="override the optimizer (sgd, adam, ...)")
    parser.add_argument("--backend", choices=("tf", "jax", "torch"),
                        help="memory profile of the backend that runs the model (default: "
                             "from the code: KERAS_BACKEND, set_backend, imports)")
    parser.add_argument("--cuda-context", help="memory taken by the CUDA context (300MiB)")
    parser.add_argument("--reserve", help="memory the framework leaves free (TF default by GPU)")
    from memlint.memory.profiles import DEFAULT, PROFILES
    margins = sorted({p.verdict_margin for p in (*PROFILES.values(), DEFAULT)})
    parser.add_argument("--margin", metavar="PERCENT",
                        help="room the verdict keeps for memlint's own error, in percent of "
                             "the peak (default: the backend's measured margin, "
                             f"{margins[0]:.0%}-{margins[-1]:.0%}; 0: judge the bare "
                             "estimate)".replace("%", "%%"))
    parser.add_argument("--select", help="comma-separated rule codes or prefixes to enable")
    parser.add_argument("--ignore", help="comma-separated rule codes or prefixes to disable")
    parser.add_argument("--output-format",
                        choices=("full", "concise", "text", "json", "github", "sarif"),
                        help="output format (default: full, each finding with its source "
                             "lines; concise: one line each (text is its older name); github "
                             "under GitHub Actions)")
    parser.add_argument("--jobs", "-j", type=_positive_int, metavar="N",
                        help="check files in N processes (default: one per CPU; 1: in this "
                             "process)")
    parser.add_argument("--no-cache", action="store_true",
                        help="do not read or write the result cache")
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="where results are cached (default: $MEMLINT_CACHE_DIR, else "
                             "$XDG_CACHE_HOME/memlint or ~/.cache/memlint)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of processes, got {text!r}") \
            from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more processes, got {value}")
    return value


def _help_width() -> int:
    """The width argparse gives help text (the terminal's columns less 2), found as
    ``shutil.get_terminal_size`` finds it but without importing ``shutil`` (and the
    compression modules it brings): argparse asks at every ``add_argument`` of every run."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return (columns if columns > 0 else 80) - 2


class _Formatter(argparse.HelpFormatter):
    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
        super().__init__(prog, indent_increment, max_help_position,
                         _help_width() if width is None else width)


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors on one line (exit code 2)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        print(f"{self.prog}: error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        raise SystemExit(EXIT_ERROR)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with ``command``, only that command's options are built
    (what a run of it parses; --help without a command lists them all)."""
    parser = _Parser(
        prog="memlint", description="Static GPU-memory linter for Keras model code.")
    parser.add_argument("--version", action="version", version=f"memlint {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    if command in ("check", None):
        _check_parser(sub)
    if command in ("report", None):
        _report_parser(sub)
    if command in ("rules", None):
        rules = sub.add_parser("rules", help="list the rules")
        rules.add_argument("--output-format", choices=("text", "json"), default="text")
    if command in ("explain", None):
        explain = sub.add_parser("explain", help="explain one rule, e.g. memlint explain MEM003")
        explain.add_argument("code")
    if command in ("gpus", None):
        sub.add_parser("gpus", help="list the GPU names --gpu accepts")
    return parser


def _check_parser(sub) -> None:
    check = sub.add_parser("check", help="lint model files and report diagnostics")
    _analysis_options(check)
    check.add_argument("--fail-on", choices=("info", "warning", "error"),
                       help="lowest severity that makes the exit code 1 (default: warning)")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings")
    check.add_argument("--statistics", action="store_true", help="count diagnostics per rule")
    check.add_argument("--diff", metavar="BASE",
                       help="also compare each model's memory with the git revision BASE "
                            "(a branch, tag or commit; read with git, never checked out)")
    check.add_argument("--job-summary", metavar="FILE",
                       help="append a Markdown summary table to FILE (default under GitHub "
                            "Actions: $GITHUB_STEP_SUMMARY)")


def _report_parser(sub) -> None:
    report = sub.add_parser("report", help="per-layer table and memory breakdown per model")
    _analysis_options(report)
    report.add_argument("--html", metavar="FILE",
                        help="write a self-contained HTML page (memory chart, breakdown, "
                             "layer table) to FILE instead of printing the report")


def _cli_settings(args) -> dict:
    def codes(value):
        return tuple(c.strip().upper() for c in value.split(",") if c.strip()) if value else None

    return {
        "gpu": args.gpu, "batch_size": args.batch_size, "gpus": args.gpus,
        "input_shape": args.input_shape, "inputs": args.input,
        "mode": args.mode, "optimizer": args.optimizer, "backend": args.backend,
        "cuda_context": args.cuda_context,
        "reserve": args.reserve, "margin": args.margin,
        "select": codes(args.select), "ignore": codes(args.ignore),
        "fail_on": getattr(args, "fail_on", None), "entry": getattr(args, "entry", None),
        "dims": args.dim,
    }


def collect_files(paths: list) -> tuple:
    """(files to check, error messages for paths that do not exist)."""
    files, errors = [], []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.suffix in SOURCE_SUFFIXES
                            and not any(part.startswith(".")  # hidden below the folder
                                        for part in p.relative_to(path).parts))
        elif path.exists():
            files.append(path)
        else:
            errors.append(f"{raw}: no such file or directory")
    return files, errors


def _validate(settings) -> None:
    """Fail early, with one line, on settings that cannot work."""
    from memlint.analysis import budget_for

    if settings.gpu is not None:
        budget_for(settings)


def run_analysis(args) -> tuple:
    """(reports, error lines) for the files of ``args.paths``, in the sorted file order,
    from the result cache or analysed (in a process pool of ``--jobs`` workers)."""
    from memlint.config import ConfigError, settings_for
    from memlint.parallel import analyse_all, default_jobs

    files, errors = collect_files(args.paths)
    cli = _cli_settings(args)
    tasks = []
    for path in files:
        try:
            settings = settings_for(path, cli)
            _validate(settings)
        except (ConfigError, ValueError) as exc:
            raise UsageError(str(exc)) from None
        tasks.append((path, settings))
    cache = _cache(args)
    jobs = getattr(args, "jobs", None) or default_jobs()
    reports = []
    for report, file_errors in analyse_all(tasks, jobs=jobs, cache=cache):
        if report is not None:
            reports.append(report)
        errors.extend(file_errors)
    if cache is not None:
        from memlint import cache as cache_module
        cache_module.LAST_STATS = cache.stats
        if os.environ.get("MEMLINT_DEBUG"):
            print(f"memlint: cache {cache.directory}: {cache.stats}", file=sys.stderr)
    return reports, errors


def _cache(args):
    """The result cache for this run, or None (``--no-cache``)."""
    if getattr(args, "no_cache", False):
        return None
    from memlint.cache import ResultCache, default_dir

    directory = getattr(args, "cache_dir", None)
    return ResultCache(directory if directory else default_dir())


def _output_format(args) -> str:
    if args.output_format:
        return args.output_format
    return "github" if os.environ.get("GITHUB_ACTIONS") == "true" else "full"


def cmd_check(args) -> int:
    from memlint.diagnostics import severity_rank
    from memlint.reporters import reporter

    reports, errors = run_analysis(args)
    args.sources = _sources(reports)
    if getattr(args, "diff", None):
        _add_memory_diff(args, reports)
    sys.stdout.write(reporter(_output_format(args)).render_check(reports, errors, args))
    _write_job_summary(args, reports, errors)
    if errors:
        for message in errors:
            print(f"memlint: {message}", file=sys.stderr)
        return EXIT_ERROR
    if args.exit_zero:
        return EXIT_CLEAN
    failing = any(severity_rank(d.severity) >= severity_rank(r.settings.fail_on)
                  for r in reports for d in r.diagnostics)
    return EXIT_FINDINGS if failing else EXIT_CLEAN


def _sources(reports: list) -> dict:
    """Path -> text of the checked source files with diagnostics (for source context and
    ``# noqa``); files that cannot be read are left out."""
    out = {}
    for report in reports:  # models too: a --diff finding may point at them
        if (report.diagnostics or report.models) and \
                not str(report.path).lower().endswith(".onnx"):
            try:
                out[report.path] = Path(report.path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
    return out


def _add_memory_diff(args, reports: list) -> None:
    """``--diff BASE``: the models at BASE against these reports (``args.memory_diff``), and
    MEM007 findings added to the reports."""
    from memlint.base_run import RevisionError, memory_diff
    from memlint.diff import DiffOptionError, growth_findings

    try:
        diff = memory_diff(args, reports, run_analysis)
        growth_findings(diff, reports, args.sources)
    except (RevisionError, DiffOptionError) as exc:
        raise UsageError(str(exc)) from None
    args.memory_diff = diff


def _write_job_summary(args, reports: list, errors: list) -> None:
    """Append the Markdown summary to ``--job-summary FILE`` or, under GitHub Actions, to
    ``$GITHUB_STEP_SUMMARY``; a file that cannot be written is a warning on stderr."""
    target = getattr(args, "job_summary", None)
    if not target and os.environ.get("GITHUB_ACTIONS") == "true":
        target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return
    from memlint.reporters.summary import markdown

    try:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(markdown(reports, errors, getattr(args, "memory_diff", None)))
    except OSError as exc:
        print(f"memlint: warning: cannot write the job summary to {target}: "
              f"{exc.strerror or exc}", file=sys.stderr)


def cmd_report(args) -> int:
    from memlint.reporters import reporter

    reports, errors = run_analysis(args)
    if args.html:
        from memlint.reporters.html import page
        try:
            Path(args.html).write_text(page(reports, errors), encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {args.html}: {exc.strerror or exc}") from None
        models = sum(len(r.models) for r in reports)
        print(f"Wrote {args.html}: {models} model{'s' if models != 1 else ''} from "
              f"{len(reports)} file{'s' if len(reports) != 1 else ''}.")
        for message in errors:
            print(f"memlint: {message}", file=sys.stderr)
        return EXIT_ERROR if errors else EXIT_CLEAN
    fmt = _output_format(args)
    sys.stdout.write(reporter("text" if fmt in ("github", "full", "concise") else fmt)
                     .render_report(reports, errors, args))
    for message in errors:
        print(f"memlint: {message}", file=sys.stderr)
    return EXIT_ERROR if errors else EXIT_CLEAN


def cmd_rules(args) -> int:
    import json

    from memlint.catalog import load_catalog

    catalog = load_catalog()
    if args.output_format == "json":
        print(json.dumps([{k: v for k, v in r.items() if k != "examples"}
                          for r in catalog.values()], indent=2))
        return EXIT_CLEAN
    for code, rule in catalog.items():
        print(f"{code}  {rule['name']:<28} {rule['severity']:<8} {rule['summary']}")
    return EXIT_CLEAN


def cmd_explain(args) -> int:
    from memlint.catalog import load_catalog

    rule = load_catalog().get(args.code.upper())
    if rule is None:
        raise UsageError(f"unknown rule {args.code!r} (see `memlint rules`)")
    print(f"{rule['id']} {rule['name']} (default severity: {rule['severity']})\n")
    print(rule["summary"].strip() + "\n")
    print(rule["explanation"].strip() + "\n")
    if rule.get("fix"):
        print("How to fix:\n" + rule["fix"].strip() + "\n")
    if rule.get("options"):
        print("Options:")
        for name, spec in rule["options"].items():
            print(f"  {name} (default {spec.get('default')!r}): {spec.get('description', '')}")
        print()
    examples = rule.get("examples") or {}
    for label, key in (("Example that triggers it", "bad"), ("Example that passes", "good")):
        for example in (examples.get(key) or [])[:1]:
            print(f"{label}:\n")
            print("\n".join("    " + line for line in example["code"].splitlines()) + "\n")
    return EXIT_CLEAN


def cmd_gpus(args) -> int:
    from memlint.budget import catalog

    for key, entry in catalog().items():
        print(f"{key:<14} {entry['memory']:>7}  {entry['name']}")
    return EXIT_CLEAN


COMMANDS = {"check": cmd_check, "report": cmd_report, "rules": cmd_rules,
            "explain": cmd_explain, "gpus": cmd_gpus}


def main(argv: list | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(words[0] if words and words[0] in COMMANDS else None)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed its own one-line usage error
        return EXIT_CLEAN if exc.code == 0 else EXIT_ERROR
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"memlint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_ERROR
    except BrokenPipeError:
        return EXIT_CLEAN
    except Exception as exc:  # noqa: BLE001 - the promise is one line, never a traceback
        from memlint.parallel import error_origin
        where = error_origin(exc)
        print(f"memlint: internal error: {type(exc).__name__}: {exc}{where} "
              "(please report it; MEMLINT_DEBUG=1 shows the traceback)", file=sys.stderr)
        if os.environ.get("MEMLINT_DEBUG"):
            raise
        return EXIT_ERROR

