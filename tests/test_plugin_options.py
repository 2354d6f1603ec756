"""Path-valued flags given as ``--flag DIR`` mislead pytest's rootdir: the plugin says so."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def test_a_spaced_cache_dir_warns_and_the_equals_form_does_not(
        pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory) -> None:
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\naddopts = '-p no:cacheprovider'\n")
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    cache = tmp_path_factory.mktemp("cache_outside_the_project")

    spaced = pytester.runpytest_subprocess("--ragbench-cache", str(cache))
    out = spaced.stdout.str()
    assert f"write --ragbench-cache={cache} (with '=')" in out
    assert "and ini file (None)" in out  # the misreading: pyproject.toml was missed

    inside = pytester.mkdir("cache_inside")  # harmless: pytest finds the same ini file
    assert "with '='" not in pytester.runpytest_subprocess("--ragbench-cache",
                                                           str(inside)).stdout.str()

    joined = pytester.runpytest_subprocess(f"--ragbench-cache={cache}", "test_x.py")
    joined.assert_outcomes(passed=1)
    assert "with '='" not in joined.stdout.str()
    assert f"rootdir: {pytester.path}" in joined.stdout.str()
