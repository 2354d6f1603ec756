"""What model calls cost: ini ``ragbench_prices`` and the cost of each role's tokens.

Each line of ``ragbench_prices`` prices one model in US dollars per million tokens, in
TOML: ``gpt-4o-mini = {input = 0.15, output = 0.60}`` (quote a name with dots or
slashes: ``"Qwen/Qwen2.5-7B" = {input = 0.2, output = 0.2}``). A role (generator, judge,
system) is priced by the model it called: the one model its server named, else the one
model the calls asked for, else the model the settings name for the role.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_ragbench.errors import ConfigError

PER_TOKENS = 1_000_000


@dataclass(frozen=True)
class Price:
    """US dollars per million input (prompt) and output (completion) tokens."""

    input: float
    output: float

    def cost(self, prompt_tokens: float, completion_tokens: float) -> float:
        """The dollars these tokens cost."""
        return (prompt_tokens * self.input + completion_tokens * self.output) / PER_TOKENS


def parse_prices(lines: Iterable[str]) -> dict[str, Price]:
    """``{model: Price}`` from the ini lines; a bad line is a ConfigError naming it."""
    prices: dict[str, Price] = {}
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        where = f"ini ragbench_prices line {number} ({line!r})"
        try:
            table = tomllib.loads(line)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{where}: expected 'model = {{input = 0.15, output = 0.6}}' "
                              f"($ per 1M tokens): {exc}") from None
        for model, rule in table.items():
            prices[model] = _price(rule, f"{where}: {model!r}")
    return prices


def _price(rule: Any, where: str) -> Price:
    if not isinstance(rule, dict) or set(rule) != {"input", "output"}:
        raise ConfigError(f"{where}: give exactly input and output ($ per 1M tokens)")
    values = []
    for side in ("input", "output"):
        value = rule[side]
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value) or value < 0:
            raise ConfigError(f"{where}: {side} must be a price >= 0, got {value!r}")
        values.append(float(value))
    return Price(*values)


def role_model(row: Mapping[str, Any], configured: str | None) -> str | None:
    """The one model a role's calls went to (see the module docstring), or None."""
    models = row.get("models") or {}
    served = {name for answered in models.values() for name in answered}
    if len(served) == 1:
        return next(iter(served))
    if len(models) == 1:
        return next(iter(models))
    return configured if not models else None


def price_for(model: str | None, prices: Mapping[str, Price]) -> Price | None:
    """The price of ``model``: its own line, else the line of its name after a ``/``."""
    if model is None:
        return None
    return prices.get(model) or prices.get(model.rpartition("/")[2])


def role_cost(row: Mapping[str, Any], model: str | None, price: Price) -> dict[str, Any]:
    """One usage row's cost: every call at list price, and the calls that reached the model.

    The tokens of replies served from the cache are counted in the row but not paid for;
    ``paid`` removes them in proportion to the calls served from the cache.
    """
    prompt = float(row.get("prompt_tokens") or 0)
    completion = float(row.get("completion_tokens") or 0)
    calls = int(row.get("calls") or 0)
    hits = int(row.get("cache_hits") or 0)
    listed = price.cost(prompt, completion)
    paid = listed * (calls - hits) / calls if calls else 0.0
    return {"model": model, "input_per_1m": price.input, "output_per_1m": price.output,
            "usd": listed, "paid_usd": paid}


def add_costs(usage: dict[str, dict[str, Any]], prices: Mapping[str, Price],
              configured: Mapping[str, str | None]) -> None:
    """Give each priced usage row its ``cost`` (``configured``: the settings' model by role)."""
    if not prices:
        return
    for key, row in usage.items():
        role = key.rpartition("/")[2]  # "<system>/<role>" with several systems
        model = role_model(row, configured.get(role))
        price = price_for(model, prices)
        if price is not None:
            row["cost"] = role_cost(row, model, price)


def dollars(value: float | None) -> str:
    """``$0.0123``: four decimals below a dollar, cents above."""
    if value is None:
        return "-"
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"
