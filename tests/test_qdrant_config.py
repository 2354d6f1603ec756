"""The Qdrant flags and ini keys: resolved paths, masked URLs, usage errors."""

from __future__ import annotations

import pytest

from pytest_ragbench.config.settings import get_config


def test_flags_resolve_and_the_report_never_sees_a_password(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure("--ragbench-qdrant-path=stores/qd",
                                     "--ragbench-collection=dbpedia", "--ragbench-max-docs=500")
    settings = get_config(config)
    assert settings.qdrant_path == str(pytester.path / "stores" / "qd")
    assert (settings.collection, settings.max_docs, settings.qdrant_url) == ("dbpedia", 500, None)
    assert (settings.timeout_s, settings.retries) == (60.0, 4)
    assert get_config(pytester.parseconfigure("--ragbench-qdrant-path=:memory:")).qdrant_path \
        == ":memory:"

    pytester.makeini("[pytest]\nragbench_qdrant_url = https://bench:s3cret@qdrant.example:6333\n"
                     "ragbench_max_docs = 100\n")
    settings = get_config(pytester.parseconfigure())
    assert settings.qdrant_url == "https://bench:s3cret@qdrant.example:6333"
    public = settings.public_dict()
    assert public["qdrant_url"] == "https://bench:***@qdrant.example:6333"
    assert public["max_docs"] == 100 and "s3cret" not in repr(public)


@pytest.mark.parametrize(("args", "message"), [
    (("--ragbench-qdrant-url=http://localhost:6333", "--ragbench-qdrant-path=:memory:"),
     "give --ragbench-qdrant-url or --ragbench-qdrant-path, not both"),
    (("--ragbench-max-docs=0",), "--ragbench-max-docs must be at least 1, got 0"),
    (("--ragbench-max-docs=many",), "--ragbench-max-docs must be an integer, got 'many'"),
])
def test_bad_values_are_usage_errors(pytester: pytest.Pytester, args: tuple[str, ...],
                                     message: str) -> None:
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: ragbench: {message}"])
