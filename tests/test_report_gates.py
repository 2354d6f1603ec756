"""Saved runs, regression verdicts, aggregate gates and several systems, end to end."""

from __future__ import annotations

import json

import pytest

from tests.helpers import XDIST_MODES
from tests.project import RagbenchProject
from tests.toy_project import make_toy_project

MODE_IDS = ["plain", "n2", "no-xdist"]


@pytest.fixture
def project(pytester: pytest.Pytester) -> RagbenchProject:
    """40 toy cases; the toy kind has no item thresholds, so only the session can fail."""
    return make_toy_project(pytester, 40)


def _failures(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("FAILED ")
            and not line.startswith("FAILED test_cases/")]


def test_regression_fails_the_session_and_an_unchanged_rerun_stays_quiet(
        project: RagbenchProject) -> None:
    saved = project.runpytest("--ragbench", "--ragbench-save", "main")
    assert saved.ret == pytest.ExitCode.OK
    assert (project.path / ".ragbench" / "runs" / "0001_main.json").is_file()

    (project.path / "degrade.txt").write_text("drop every second word")
    worse = project.runpytest("--ragbench", "--ragbench-compare", "main",
                              "--ragbench-fail-on", "regression")
    assert worse.ret == pytest.ExitCode.TESTS_FAILED
    worse.assert_outcomes(passed=40)  # every item passed: the session fails on the whole
    lines = _failures(worse.stdout.str())
    assert [line.split(":")[0] for line in lines] == ["FAILED regression toy.exact_match",
                                                      "FAILED regression toy.token_f1"]
    assert "worse than baseline 0001_main: delta -" in lines[1]
    assert "95% CI [-" in lines[1] and "(Holm, randomization)" in lines[1]
    assert "(Holm, mcnemar)" in lines[0]
    compared = project.results()["comparisons"]["current_vs_baseline"]["toy"]
    assert compared["token_f1"]["worse"] and compared["token_f1"]["ci_high"] < 0

    (project.path / "degrade.txt").unlink()
    same = project.runpytest("--ragbench", "--ragbench-compare", "main",
                             "--ragbench-fail-on", "regression", "--ragbench-save", "main")
    assert same.ret == pytest.ExitCode.OK
    assert _failures(same.stdout.str()) == []
    unchanged = project.results()["comparisons"]["current_vs_baseline"]["toy"]["token_f1"]
    assert unchanged["delta"] == 0 and not unchanged["significant"]
    same.stdout.fnmatch_lines(["baseline: 0001_main (run *): 40 items paired, 0 new, 0 missing",
                               "current_vs_baseline * toy * token_f1 * randomization * 40 *"])
    assert (project.path / ".ragbench" / "runs" / "0002_main.json").is_file()


def test_without_fail_on_a_regression_is_reported_not_fatal(project: RagbenchProject) -> None:
    project.runpytest("--ragbench", "--ragbench-save", "main")
    (project.path / "degrade.txt").write_text("x")
    path = project.path / ".ragbench" / "runs" / "0001_main.json"
    result = project.runpytest("--ragbench", "--ragbench-compare", str(path))
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["current_vs_baseline * toy * token_f1 * WORSE"])


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_gate_on_the_ci_lower_bound(project: RagbenchProject, mode: tuple[str, ...]) -> None:
    project.runpytest("--ragbench", *mode)
    healthy = project.results()["metrics"]["toy"]["token_f1"]
    (project.path / "degrade.txt").write_text("x")
    project.runpytest("--ragbench", *mode)
    degraded = project.results()["metrics"]["toy"]["token_f1"]
    assert degraded["ci_high"] < healthy["ci_gate_low"] <= healthy["ci_low"]
    # A bound between the degraded interval and the healthy one's gate bound.
    bound = round((degraded["ci_high"] + healthy["ci_gate_low"]) / 2, 3)
    (project.path / "pyproject.toml").write_text(
        f'[tool.ragbench.gates]\n"toy.token_f1" = {bound}\n')

    fired = project.runpytest("--ragbench", "--ragbench-gate", "ci-lower", *mode)
    assert fired.ret == pytest.ExitCode.TESTS_FAILED
    (line,) = _failures(fired.stdout.str())
    cell = project.results()["metrics"]["toy"]["token_f1"]
    low, high, checked = cell["ci_low"], cell["ci_high"], cell["ci_gate_low"]
    assert line.startswith(f"FAILED gate toy.token_f1 >= {bound:g}: MISSED (95% CI lower bound "
                           f"{checked:.4g} ({cell['ci_gate_method']}); mean ")
    assert f"95% CI [{low:.4g}, {high:.4g}] {cell['ci_method']}, n=40)" in line

    (project.path / "degrade.txt").unlink()
    quiet = project.runpytest("--ragbench", "--ragbench-gate", "ci-lower", *mode)
    assert quiet.ret == pytest.ExitCode.OK
    assert _failures(quiet.stdout.str()) == []
    quiet.stdout.fnmatch_lines([f"gate toy.token_f1 >= {bound:g}: passed (95% CI lower bound*"])


def test_mean_gate_is_looser_than_the_ci_lower_gate(project: RagbenchProject) -> None:
    project.runpytest("--ragbench")
    cell = project.results()["metrics"]["toy"]["token_f1"]
    bound = round((cell["ci_low"] + cell["mean"]) / 2, 4)
    assert cell["ci_low"] < bound < cell["mean"]
    (project.path / "pyproject.toml").write_text(
        f'[tool.ragbench.gates]\n"toy.token_f1[category=lookup]" = 0.0\n'
        f'"toy.token_f1" = {bound}\n')
    assert project.runpytest("--ragbench").ret == pytest.ExitCode.OK
    on_bound = project.runpytest("--ragbench", "--ragbench-gate", "ci-lower")
    assert on_bound.ret == pytest.ExitCode.TESTS_FAILED
    gates = {g["gate"]: g["passed"] for g in project.results()["gates"]}
    assert gates == {"toy.token_f1": False, "toy.token_f1[category=lookup]": True}


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_several_systems_are_compared_pairwise(pytester: pytest.Pytester,
                                               mode: tuple[str, ...]) -> None:
    project = make_toy_project(pytester, 30)
    result = project.runpytest("--ragbench", "--ragbench-systems", "exact,terse,halves", *mode)
    result.assert_outcomes(passed=90)
    data = project.results()
    assert list(data["comparisons"]) == ["exact_vs_terse", "exact_vs_halves", "terse_vs_halves"]
    exact_vs_halves = data["comparisons"]["exact_vs_halves"]["toy"]["token_f1"]
    per_system = data["metrics"]["toy"]["token_f1"]["systems"]
    assert exact_vs_halves["delta"] == pytest.approx(
        per_system["exact"]["mean"] - per_system["halves"]["mean"])
    assert exact_vs_halves["n"] == 30 and exact_vs_halves["better"]
    p_values = [c["toy"][m]["p_holm"] >= c["toy"][m]["p_value"]
                for c in data["comparisons"].values() for m in c["toy"]]
    assert all(p_values)
    power = data["power_analysis"]["toy"]
    assert set(power) == {"n", "alpha", "family", "test", "by_test", "d=0.2", "d=0.3", "d=0.5"}
    assert (power["n"], power["test"]) == (30, "randomization")
    assert power["alpha"] == pytest.approx(0.05 / power["family"])
    result.stdout.fnmatch_lines([
        "kind * system * metric * n * unscored * mean *",
        "toy * exact * token_f1 * 30 *",
        "paired comparisons (A - B; p Holm-corrected over * comparisons, alpha 0.05; "
        "CIs 95% each, unadjusted):",
        "exact_vs_terse * toy * exact_match * mcnemar * 30 *",
        "exact_vs_halves * toy * token_f1 * randomization * 30 * +0.* better",
        "power (test used, Holm alpha / m) * test * n * alpha * d=0.2 * d=0.3 * d=0.5",
        "toy * mcnemar (*% discordant) * 30 * * *% * *% * *%",
        "toy * randomization (as paired t) * 30 * * *% * *% * *%",
    ])


def test_usage_errors_name_the_problem(project: RagbenchProject) -> None:
    bad_name = project.runpytest("--ragbench", "--ragbench-save", "../x")
    assert bad_name.ret == pytest.ExitCode.USAGE_ERROR
    bad_name.stderr.fnmatch_lines(["*--ragbench-save '../x': use letters*"])
    missing = project.runpytest("--ragbench", "--ragbench-compare", "nightly")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*--ragbench-compare 'nightly': no such file and no saved run*"])
    (project.path / "pyproject.toml").write_text('[tool.ragbench.gates]\n"accuracy" = 1\n')
    bad_gate = project.runpytest("--ragbench")
    assert bad_gate.ret == pytest.ExitCode.USAGE_ERROR
    bad_gate.stderr.fnmatch_lines(["*[[]tool.ragbench.gates[]] 'accuracy': expected*"])
    assert not (project.path / ".ragbench").exists()


def test_saved_run_holds_the_whole_document(project: RagbenchProject) -> None:
    project.runpytest("--ragbench", "--ragbench-save", "nightly")
    saved = json.loads((project.path / ".ragbench/runs/0001_nightly.json").read_text())
    assert saved["metrics"] == project.results()["metrics"]
    assert len(saved["items"]) == 40
