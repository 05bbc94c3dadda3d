"""Configuration: thresholds, selection and fail level from forensics.toml, pyproject or the command line."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from forensics.playbooks.base import Playbook


class ConfigError(ValueError):
    """A configuration problem the user must fix (exit status 2)."""


@dataclass
class Config:
    """Resolved settings for one analysis."""

    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    # playbook id -> threshold name -> value
    thresholds: dict[str, dict[str, float]] = field(default_factory=dict)
    fail_on: str | None = None
    source: str | None = None  # which file the settings came from


def find_config(start: Path) -> Path | None:
    """`forensics.toml`, or a pyproject.toml with [tool.forensics], in `start` or its parents."""
    start = start.resolve()
    for folder in [start, *start.parents]:
        candidate = folder / "forensics.toml"
        if candidate.is_file():
            return candidate
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            try:
                if "forensics" in tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}):
                    return pyproject
            except (tomllib.TOMLDecodeError, OSError):
                continue
    return None


def load_config(path: Path | None) -> Config:
    """Read settings from a forensics.toml (top level) or a pyproject.toml ([tool.forensics])."""
    if path is None:
        return Config()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc}") from exc
    if path.name == "pyproject.toml":
        data = data.get("tool", {}).get("forensics", {})
    cfg = Config(source=str(path))
    cfg.select = list(data.get("select", []))
    cfg.ignore = list(data.get("ignore", []))
    cfg.fail_on = data.get("fail-on", data.get("fail_on"))
    for pid, values in data.get("thresholds", {}).items():
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: [thresholds.{pid}] must be a table of name = number")
        cfg.thresholds[pid] = {k: float(v) for k, v in values.items()}
    return cfg


def parse_set(items: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """`--set cuda-oom.fragmentation_share=0.3` options into {id: {name: value}}."""
    out: dict[str, dict[str, float]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        pid, dot, name = key.strip().rpartition(".")
        if not sep or not dot:
            raise ConfigError(f"--set {item!r}: expected PLAYBOOK.THRESHOLD=VALUE")
        try:
            out.setdefault(pid, {})[name] = float(value)
        except ValueError:
            raise ConfigError(f"--set {item!r}: {value!r} is not a number") from None
    return out


def resolve_thresholds(pb: Playbook, overrides: dict[str, dict[str, float]]) -> dict[str, float]:
    """The playbook's threshold values: defaults, then overrides; an unknown name is an error."""
    values = {name: t.default for name, t in pb.thresholds.items()}
    for name, value in overrides.get(pb.id, {}).items():
        if name not in values:
            known = ", ".join(sorted(values)) or "none"
            raise ConfigError(f"{pb.id} has no threshold {name!r} (known: {known})")
        values[name] = value
    return values


def selected(pb: Playbook, select: list[str], ignore: list[str]) -> bool:
    """Whether a playbook runs, selecting by id or category (as ruff selects by code or prefix)."""
    keys = {pb.id, pb.category}
    if select and not keys & set(select):
        return False
    return not keys & set(ignore)
