"""What every generator shares: the accounting of a run and the writing of case files."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragbench.errors import RagbenchError

CASE_SUFFIXES = (".yaml", ".yml", ".jsonl", ".json")


class GenerateError(RagbenchError):
    """A source that cannot be read or a request that cannot be met."""


@dataclass
class Accounting:
    """Cases kept and rejected per type (with the reasons), verification, model calls, time."""

    kept: Counter[str] = field(default_factory=Counter)
    rejected: dict[str, Counter[str]] = field(default_factory=dict)
    exact: int = 0  # cases whose answer was computed, not written by a model
    verified: int = 0  # exact cases whose answer a second computation confirmed
    model_calls: int = 0
    cached_calls: int = 0  # model calls answered from the response cache
    difficulty: Counter[str] = field(default_factory=Counter)  # kept, "type/level"
    started: float = field(default_factory=time.monotonic)
    seconds: float = 0.0

    def keep(self, case_type: str) -> None:
        """Count one kept case of ``case_type``."""
        self.kept[case_type] += 1

    def reject(self, case_type: str, reason: str) -> None:
        """Count one candidate of ``case_type`` dropped for ``reason``."""
        self.rejected.setdefault(case_type, Counter())[reason] += 1

    def finish(self) -> Accounting:
        """Stop the clock."""
        self.seconds = time.monotonic() - self.started
        return self

    @property
    def verified_share(self) -> float | None:
        """Verified exact cases over exact cases (None when there were none)."""
        return self.verified / self.exact if self.exact else None

    def table(self) -> str:
        """The end-of-run table: kept and rejected per type, reasons, verification, calls, time."""
        types = sorted(set(self.kept) | set(self.rejected))
        width = max([len("type"), *map(len, types)])
        lines = [f"{'type':<{width}}  {'kept':>5}  {'rejected':>8}  reasons"]
        for name in types:
            reasons = self.rejected.get(name, Counter())
            listed = ", ".join(f"{why} {count}" for why, count in reasons.most_common())
            lines.append(f"{name:<{width}}  {self.kept[name]:>5}  {sum(reasons.values()):>8}"
                         f"  {listed or '-'}")
        total_rejected = sum(sum(c.values()) for c in self.rejected.values())
        lines.append(f"{'total':<{width}}  {sum(self.kept.values()):>5}  {total_rejected:>8}")
        share = self.verified_share
        shown = "n/a (no exact cases)" if share is None else f"{100 * share:.1f}%"
        lines.append(f"exact cases verified: {self.verified}/{self.exact} ({shown})")
        if self.difficulty:
            lines.append("kept by difficulty: " + ", ".join(
                f"{name} {count}" for name, count in sorted(self.difficulty.items())))
        cached = f" ({self.cached_calls} from the cache)" if self.cached_calls else ""
        lines.append(f"model calls: {self.model_calls}{cached}; time: {self.seconds:.1f} s")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (``--report``)."""
        return {"kept": dict(self.kept),
                "rejected": {k: dict(v) for k, v in self.rejected.items()},
                "exact": self.exact, "verified": self.verified,
                "model_calls": self.model_calls, "cached_calls": self.cached_calls,
                "kept_by_difficulty": dict(self.difficulty),
                "seconds": round(self.seconds, 3)}


@dataclass
class Generated:
    """A generator's cases (plain mappings, as written to the case file) and its accounting."""

    cases: list[dict[str, Any]]
    accounting: Accounting
    rejections: list[dict[str, Any]] = field(default_factory=list)  # each with its reason


def draft(case: dict[str, Any], provenance: dict[str, Any]) -> dict[str, Any]:
    """The case as a draft with its provenance (after its own fields, for reading)."""
    return {**case, "review": "draft", "provenance": provenance}


def write_cases(path: Path, cases: list[dict[str, Any]], header: str = "") -> None:
    """Write ``cases`` as YAML (``.yaml``/``.yml``) or JSON lines (``.jsonl``/``.json``)."""
    if path.suffix not in CASE_SUFFIXES:
        raise GenerateError(f"{path}: the output must end in one of "
                            f"{', '.join(CASE_SUFFIXES)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix in (".yaml", ".yml"):
        import yaml

        comments = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
        body = yaml.safe_dump({"cases": cases}, sort_keys=False, allow_unicode=True,
                              width=100)
        path.write_text(comments + body, encoding="utf-8")
    else:
        path.write_text("".join(json.dumps(case, ensure_ascii=False) + "\n" for case in cases),
                        encoding="utf-8")
