"""Path-valued flags given as ``--flag DIR`` mislead pytest's rootdir: the plugin stops the run."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def test_a_spaced_cache_dir_is_a_usage_error_and_the_equals_form_is_not(
        pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory) -> None:
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\naddopts = '-p no:cacheprovider'\n")
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    cache = tmp_path_factory.mktemp("cache_outside_the_project")

    spaced = pytester.runpytest_subprocess("--ragbench-cache", str(cache))
    assert spaced.ret == pytest.ExitCode.USAGE_ERROR
    err = spaced.stderr.str()
    assert f"write --ragbench-cache={cache} (with '=')" in err
    # the misreading, and what pytest would have chosen: pyproject.toml was missed
    assert f"and ini file None instead of rootdir {pytester.path} and ini file " \
           f"{pytester.path / 'pyproject.toml'}" in err

    inside = pytester.mkdir("cache_inside")  # harmless: pytest finds the same ini file
    harmless = pytester.runpytest_subprocess("--ragbench-cache", str(inside))
    harmless.assert_outcomes(passed=1)
    assert "with '='" not in harmless.stdout.str() + harmless.stderr.str()

    joined = pytester.runpytest_subprocess(f"--ragbench-cache={cache}", "test_x.py")
    joined.assert_outcomes(passed=1)
    assert "with '='" not in joined.stdout.str()
    assert f"rootdir: {pytester.path}" in joined.stdout.str()
