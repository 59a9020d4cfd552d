"""Settings: defaults, then ``.memlint.yaml`` or ``[tool.memlint]`` in ``pyproject.toml``
(the nearest one found walking up from each checked file), then command-line flags.

Keys (kebab-case in files): ``gpu``, ``batch-size``, ``input-shape``, ``inputs`` (named model
inputs' shapes, merged with ``--input``), ``mode``, ``optimizer``,
``backend`` (tf, jax, torch), ``select``, ``ignore``, ``fail-on``, ``cuda-context``,
``reserve``, ``margin`` (the verdict's room for memlint's error, percent of the peak:
``10%``; default: the backend profile's measured margin), ``entry``, ``dims`` (ONNX
symbolic dimension sizes, and the values of names a Keras script assigns where memlint
cannot know them, merged with ``--dim``), ``rules`` (per-rule options, e.g.
``rules.MEM002.activation-share``) and ``per-file-overrides`` (glob, relative to the config
file's folder -> any of the keys above).
"""

from __future__ import annotations

import fnmatch
import re
import sys
from dataclasses import field, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from memlint.catalog import load_yaml
from memlint.records import record

MODES = ("train", "infer")
BACKENDS = {"tf": "tf", "tensorflow": "tf", "jax": "jax", "torch": "torch", "pytorch": "torch"}
FAIL_LEVELS = ("info", "warning", "error")


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the file and key."""


@record(frozen=True)
class Settings:
    """Everything that changes how a file is analysed and judged."""

    gpu: Optional[str] = None
    batch_size: Optional[int] = None
    gpus: Optional[int] = None  # GPUs a distribution strategy spreads over (default: the code's)
    input_shape: Optional[tuple] = None  # without the batch dimension
    inputs: dict = field(default_factory=dict)  # model input name -> shape without the batch
    mode: Optional[str] = None
    optimizer: Optional[str] = None
    backend: Optional[str] = None  # tf, jax, torch: the memory profile (default: from code)
    select: tuple = ()  # rule code prefixes; empty = all
    ignore: tuple = ()
    fail_on: str = "warning"
    cuda_context: Optional[str] = None
    reserve: Optional[str] = None
    margin: Optional[float] = None  # the verdict's margin, a share of the peak (None: profile's)
    rules: dict = field(default_factory=dict)  # {"MEM002": {"activation-share": 0.3}}
    entry: Optional[str] = None  # NAME or NAME(literal args): the function/class to analyse
    # ONNX symbolic dimension -> size ({"seq": 128}); in a Keras script, a name it assigns
    # a value memlint cannot know -> that value ({"vocab_size": 20000})
    dims: dict = field(default_factory=dict)
    source: str = "defaults"  # the config file these came from

    def enabled(self, code: str) -> bool:
        selected = not self.select or any(code.startswith(p) for p in self.select)
        return selected and not any(code.startswith(p) for p in self.ignore)

    def rule_options(self, code: str, defaults: dict) -> dict:
        options = dict(defaults)
        options.update(self.rules.get(code, {}))
        return options


_KEYS = {f.name.replace("_", "-"): f.name for f in fields(Settings) if f.name != "source"}


def parse_shape(value: Any, where: str) -> tuple:
    """``"16,16,1"``, ``"(16, 16, 1)"`` or a list -> a tuple of positive ints (no batch)."""
    if isinstance(value, str):
        parts = [p.strip() for p in value.strip().strip("()[]").split(",") if p.strip()]
        try:
            value = [None if p.lower() == "none" else int(p) for p in parts]
        except ValueError:
            raise ConfigError(f"{where}: input shape must be comma-separated ints, "
                              f"got {value!r}") from None
    if not isinstance(value, (list, tuple)) or not value or not all(
            v is None or (isinstance(v, int) and v > 0) for v in value):
        raise ConfigError(f"{where}: input shape must be positive ints, e.g. 16,16,1")
    return tuple(value)


def parse_inputs(value: Any, where: str) -> dict:
    """Shapes of named model inputs: ``{"encoder_inputs": [20]}``, ``["encoder_inputs=20",
    "image=224,224,3"]`` (``--input``, repeatable) -> {name: shape without the batch}."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, (list, tuple)):
        pairs = {}
        for item in value:
            name, sep, shape = str(item).partition("=")
            if not sep or not name.strip():
                raise ConfigError(f"{where}: an input is NAME=SHAPE (the shape without the "
                                  f"batch, e.g. encoder_inputs=20), got {item!r}")
            pairs[name.strip()] = shape
        value = pairs
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: inputs must map model input names to shapes")
    return {str(name): parse_shape(shape, f"{where}: input {name!r}")
            for name, shape in value.items()}


def parse_dims(value: Any, where: str) -> dict:
    """``--dim`` sizes (ONNX dimensions, or names of a Keras script): ``{"seq": 128}``,
    ``["seq=128", "N=8"]`` or ``"seq=128,N=8"``."""
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        pairs = {}
        for item in value:
            name, sep, size = str(item).partition("=")
            if not sep or not name.strip():
                raise ConfigError(f"{where}: a dimension is NAME=SIZE, got {item!r}")
            pairs[name.strip()] = size.strip()
        value = pairs
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: dims must map dimension names to sizes")
    out = {}
    for name, size in value.items():
        try:
            size = int(size)
        except (TypeError, ValueError):
            size = 0
        if size <= 0 or isinstance(size, bool):
            raise ConfigError(f"{where}: dimension {name!r} must be a positive int")
        out[str(name)] = size
    return out


def parse_margin(value: Any, where: str) -> float:
    """``"10%"``, ``"10"`` or ``10`` (percent of the peak, 0 to 100) -> 0.1."""
    text = str(value).strip()
    number = text[:-1].strip() if text.endswith("%") else text
    try:
        percent = float(number)
    except ValueError:
        percent = -1.0
    if isinstance(value, bool) or not 0 <= percent <= 100:
        raise ConfigError(f"{where}: margin must be a percentage of the peak from 0 to 100 "
                          f"(10%), got {value!r}")
    return percent / 100


def _coerce(key: str, value: Any, where: str) -> Any:
    if key in ("batch_size", "gpus"):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            name = key.replace("_", "-")
            raise ConfigError(f"{where}: {name} must be a positive int, got {value!r}")
    elif key == "input_shape":
        value = parse_shape(value, where)
    elif key == "inputs":
        value = parse_inputs(value, where)
    elif key == "mode":
        value = {"inference": "infer", "training": "train"}.get(value, value)
        if value not in MODES:
            raise ConfigError(f"{where}: mode must be train or infer, got {value!r}")
    elif key == "backend":
        value = BACKENDS.get(str(value).lower())
        if value is None:
            raise ConfigError(f"{where}: backend must be tf, jax or torch")
    elif key == "fail_on":
        if value not in FAIL_LEVELS:
            raise ConfigError(f"{where}: fail-on must be one of {', '.join(FAIL_LEVELS)}")
    elif key in ("select", "ignore"):
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: {key} must be a list of rule codes")
        value = tuple(str(v).upper() for v in value)
    elif key == "rules":
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: rules must map rule codes to option tables")
        value = {str(k).upper(): dict(v or {}) for k, v in value.items()}
    elif key == "entry":
        from memlint.frontends.keras.entry import EntryError, parse_entry
        value = str(value)
        try:
            parse_entry(value)
        except EntryError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    elif key == "dims":
        value = parse_dims(value, where)
    elif key == "margin":
        value = parse_margin(value, where)
    elif key in ("gpu", "optimizer", "cuda_context", "reserve"):
        value = str(value)
    return value


def settings_from_table(table: dict, where: str, base: Settings = Settings()) -> Settings:
    """``base`` updated with a config table (kebab-case or snake_case keys)."""
    changes = {}
    for raw_key, value in table.items():
        key = _KEYS.get(str(raw_key).replace("_", "-"))
        if key is None:
            if raw_key in ("per-file-overrides", "per_file_overrides"):
                continue
            raise ConfigError(f"{where}: unknown setting {raw_key!r} "
                              f"(known: {', '.join(sorted(_KEYS))}, per-file-overrides)")
        changes[key] = _coerce(key, value, f"{where}: {raw_key}")
    if "dims" in changes:
        changes["dims"] = {**base.dims, **changes["dims"]}
    if "inputs" in changes:
        changes["inputs"] = {**base.inputs, **changes["inputs"]}
    if "rules" in changes:
        merged = {code: dict(opts) for code, opts in base.rules.items()}
        for code, opts in changes["rules"].items():
            merged.setdefault(code, {}).update(opts)
        changes["rules"] = merged
    return replace(base, **changes)


@record
class ConfigFile:
    """One configuration file: its folder, main table and per-file overrides."""

    path: Path
    table: dict
    overrides: dict


def _read_config(directory: Path) -> Optional[ConfigFile]:
    yaml_path = directory / ".memlint.yaml"
    if yaml_path.is_file():
        import yaml  # only a folder with a .memlint.yaml needs the YAML parser

        try:
            data = load_yaml(yaml_path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{yaml_path}: invalid YAML: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{yaml_path}: expected a mapping of settings")
        return ConfigFile(yaml_path, data, _overrides(data, yaml_path))
    toml_path = directory / "pyproject.toml"
    if toml_path.is_file():
        try:
            text = toml_path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{toml_path}: invalid TOML: {exc}") from None
        if not _may_configure_memlint(text):  # no TOML parser needed
            return None
        tomllib = _toml_parser()
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{toml_path}: invalid TOML: {exc}") from None
        table = data.get("tool", {}).get("memlint")
        if isinstance(table, dict):
            return ConfigFile(toml_path, table, _overrides(table, toml_path))
    return None


@lru_cache(maxsize=1)
def _toml_patterns() -> tuple:
    """``[tool.memlint...]`` / ``tool.memlint...``, ``tool = {...}``, ``[tool]``, ``memlint``
    keys (compiled only when a pyproject.toml names memlint at all)."""
    return tuple(re.compile(pattern, re.MULTILINE) for pattern in (
        r"""^[ \t]*\[?[ \t]*["']?tool["']?[ \t]*\.[ \t]*["']?memlint\b""",
        r"""^[ \t]*["']?tool["']?[ \t]*=""",
        r"""^[ \t]*\[[ \t]*["']?tool["']?[ \t]*\]""",
        r"""^[ \t]*["']?memlint["']?[ \t]*[.=]"""))


def _may_configure_memlint(text: str) -> bool:
    """Whether a pyproject.toml may hold memlint's settings: a ``[tool.memlint...]`` table or
    a ``tool.memlint...`` key, or a ``memlint`` key in a file with a ``[tool]`` table (files
    that only name the package memlint are not parsed)."""
    if "memlint" not in text:
        return False
    tool_memlint, tool_inline, tool_table, memlint_key = _toml_patterns()
    return bool(tool_memlint.search(text) or tool_inline.search(text) or
                (tool_table.search(text) and memlint_key.search(text)))


def _toml_parser():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    return tomllib


def _overrides(table: dict, path: Path) -> dict:
    value = table.get("per-file-overrides", table.get("per_file_overrides", {}))
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: per-file-overrides must map globs to settings")
    return value


_CACHE: dict = {}


def find_config(start: Path) -> Optional[ConfigFile]:
    """The nearest config file in ``start`` or its parents (stops at a ``.git`` folder)."""
    directory = start if start.is_dir() else start.parent
    directory = directory.resolve()
    for candidate in (directory, *directory.parents):
        if candidate not in _CACHE:
            _CACHE[candidate] = _read_config(candidate)
        if _CACHE[candidate] is not None:
            return _CACHE[candidate]
        if (candidate / ".git").exists():
            return None
    return None


def settings_for(path: Path, cli: dict) -> Settings:
    """Settings for one checked file: config file, its per-file overrides, then CLI flags."""
    settings = Settings()
    config = find_config(path)
    if config is not None:
        settings = settings_from_table(config.table, str(config.path), settings)
        settings = replace(settings, source=str(config.path))
        try:
            relative = path.resolve().relative_to(config.path.parent).as_posix()
        except ValueError:
            relative = path.as_posix()
        for pattern, table in config.overrides.items():
            if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(path.name, pattern):
                settings = settings_from_table(table or {}, f"{config.path} [{pattern}]",
                                               settings)
    flags = {k: v for k, v in cli.items() if v is not None and v != ()}
    return settings_from_table(flags, "command line", settings) if flags else settings
