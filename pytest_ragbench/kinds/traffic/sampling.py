"""``--ragbench-sample N``: which traffic items the judge scores (stratified by window).

Chosen once the session's items are known, with a fixed seed, from every traffic item of
the session: each xdist worker collects the same items and draws the same sample.
"""

from __future__ import annotations

import pytest

from pytest_ragbench.config.settings import get_config

SEED = 0  # the same traffic always gives the same sample
SAMPLED: pytest.StashKey[frozenset[str]] = pytest.StashKey()


def on_collected(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The traffic kind's ``on_collected``: with ``--ragbench-sample N``, draw the sample."""
    n = get_config(config).sample
    if n:
        choose(config, items, n)


def choose(config: pytest.Config, items: list[pytest.Item], n: int) -> None:
    """Keep the node ids of the sample in ``config.stash``."""
    from pytest_ragbench.stats.traffic import stratified_sample

    traffic = [item for item in items if getattr(getattr(item, "item_kind", None), "name",
                                                 None) == "traffic"]
    windows = [item.case.window for item in traffic]  # type: ignore[attr-defined]
    chosen = stratified_sample(windows, n, SEED)
    config.stash[SAMPLED] = frozenset(traffic[i].nodeid for i in chosen)


def is_sampled(config: pytest.Config | None, nodeid: str) -> bool:
    """True when the item is judged: in the sample, or every item without ``--ragbench-sample``."""
    if config is None:
        return True
    sample = config.stash.get(SAMPLED, None)
    return sample is None or nodeid in sample
