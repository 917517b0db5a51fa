"""CI runs the benchmark in its smoke configuration (not timed: it must run and agree)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _smoke(script: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``benchmarks/<script> --smoke ARGS`` from the repository root; it must succeed."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--smoke", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_bench_erm_smoke_runs_and_objectives_agree(tmp_path):
    out = tmp_path / "smoke.json"
    proc = _smoke("bench_erm.py", "--repeats", "1", "--output", str(out), timeout=600)
    assert out.exists()
    assert "ratio" in proc.stdout


def test_bench_first_order_smoke_runs():
    """Algorithm 3, Theorem D.4 and the interior-point solve certify the same tiny cell."""
    proc = _smoke("bench_first_order.py", timeout=120)
    last = proc.stdout.strip().splitlines()[-1]
    assert "~" not in last  # every path certified within the smoke budget (nothing projected)


def test_bench_heavy_tailed_smoke_runs(tmp_path):
    """LDOP, clipped output perturbation and paper 003's clipped gradient descent side by side
    on a tiny grid (it must run and print its table)."""
    out = tmp_path / "heavy.json"
    proc = _smoke("bench_heavy_tailed.py", "--output", str(out), timeout=600)
    assert "clipgd_pure" in proc.stdout and out.exists()


def test_bench_saddle_smoke_runs():
    """The certified saddle solve's bracket contains CVXPY's closed-form optimum."""
    proc = _smoke("bench_saddle.py")
    assert "True" in proc.stdout.strip().splitlines()[-1]


def test_bench_spellings_smoke_runs(tmp_path):
    """Natural CVXPY spellings against independent Clarabel solves: it must run, print the
    summary and write its JSON (failures to certify are measurements, not test failures)."""
    proc = _smoke("bench_spellings.py", "--out", str(tmp_path))
    assert "certified:" in proc.stdout and "of" in proc.stdout
    assert (tmp_path / "bench_spellings_smoke.json").exists()


def test_bench_aborts_smoke_runs(tmp_path):
    """The abort search on a tiny grid: it must run, print the frontier and write its JSON."""
    proc = _smoke("bench_aborts.py", "--out", str(tmp_path))
    assert "abort frontier" in proc.stdout
    assert (tmp_path / "bench_aborts_smoke.json").exists()


def test_bench_tilted_smoke_runs():
    """Tilted ERM and max-loss releases on their smooth paths next to the conic program and a
    plain release (tiny: it must run, release every time and print its table)."""
    proc = _smoke("bench_tilted.py")
    assert "releases that failed: 0" in proc.stdout
    assert "conic/smooth" in proc.stdout


def test_bench_speed_smoke_runs(tmp_path):
    """dpcvx's certified solves next to scikit-learn, scipy and CVXPY on a tiny cell of every
    loss: it prints ratios and the smooth losses take Newton's path."""
    proc = _smoke("bench_speed.py", "--out", str(tmp_path))
    assert (tmp_path / "bench_speed.json").exists()
    for loss in ("logistic", "squared", "huber", "hinge", "absolute", "pinball"):
        assert loss in proc.stdout
    assert "Newton" in proc.stdout


def test_bench_speed_release_smoke_runs(tmp_path):
    """A private release end to end next to one plain solve, on a tiny cell of each loss."""
    proc = _smoke("bench_speed.py", "--release", "--out", str(tmp_path))
    assert (tmp_path / "bench_speed_release.json").exists()
    for loss in ("logistic", "huber", "hinge", "absolute"):
        assert f"{loss} n=300" in proc.stdout


def test_bench_dask_smoke_runs():
    """The distributed solve and the in-process one certify the same tiny problem."""
    proc = _smoke("bench_dask.py")
    assert "True" in proc.stdout and "private release" in proc.stdout


def test_bench_scale_smoke_runs():
    proc = _smoke("bench_scale.py")
    assert "arrowhead IPM" in proc.stdout and "Newton" in proc.stdout


def test_bench_executors_smoke_runs():
    """LDOP's blocks on a process pool release the in-process point (the script exits 1
    otherwise)."""
    proc = _smoke("bench_executors.py", "--no-dask")
    assert "process pool" in proc.stdout and "True" in proc.stdout


def test_bench_growth_smoke_runs(tmp_path):
    """GA, IL, OP and LDOP on the kappa = 1.5, 2, 3 fixtures at two tiny n, one repeat."""
    out = tmp_path / "growth.json"
    proc = _smoke("bench_growth.py", "--output", str(out))
    assert "fitted rate exponents" in proc.stdout
    doc = json.loads(out.read_text())
    assert {e["kappa"] for e in doc["table"]} == {1.5, 2.0, 3.0}
    assert len(doc["rows"]) == 6  # 3 kappas x 2 sizes x 1 repeat
    for row in doc["rows"]:
        # the common start is feasible and the closed forms are consistent: excess >= 0
        assert row["start"]["population"] >= 0.0
        assert row["erm"]["population"] >= -1e-12
        for name in ("GA", "IL", "OP", "LDOP"):
            res = row[name]
            if res["ok"]:  # a certification failure is counted, not a crash
                assert res["population"] >= -1e-9 and res["empirical"] >= -1e-9
    # growth-adaptive and iterative localization always release
    assert all(row["GA"]["ok"] and row["IL"]["ok"] for row in doc["rows"])


def test_bench_user_level_smoke_runs(tmp_path):
    """Naive baseline, Phased-SCO/ERM and the reference deletion route on a tiny grid, both
    user models; the crossover m* is reported."""
    out = tmp_path / "user_level.json"
    proc = _smoke("bench_user_level.py", "--output", str(out))
    assert "m-gain" in proc.stdout and "crossover m*" in proc.stdout
    assert "deletion route" in proc.stdout
    doc = json.loads(out.read_text())
    modes = {r["mode"] for r in doc["m_sweep"]}
    assert modes == {"exchangeable", "duplicated"}
    for r in doc["m_sweep"]:
        assert 0.0 <= r["naive"] <= 2.0 and 0.0 <= r["phased_sco"] <= 2.0
    assert doc["deletion"]["crossover"]["printed"] > 1.0


def test_bench_datasets_smoke_runs(tmp_path):
    """dpcvx (and diffprivlib, when its environment exists) vs the non-private fit on the
    smaller shipped datasets and the heavy-tailed synthetic one: it must print the one table
    and write its JSON."""
    out = tmp_path / "datasets.json"
    proc = _smoke("bench_datasets.py", "--output", str(out))
    for name in ("breast_cancer", "iris", "diabetes", "heavy_t5", "non-private"):
        assert name in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["summary"]["iris"]["accuracy (%)"]["dpcvx OvR hinge"][0]["count"] >= 1


def test_bench_multiclass_smoke_runs():
    """The study behind ``loss="auto"``: three fixed choices, the rule and the non-private fit
    on two tiny cells; the script exits 1 if ``loss="auto"`` released anything other than the
    rule's fixed choice."""
    proc = _smoke("bench_multiclass.py")
    lines = proc.stdout.splitlines()
    assert any(line.strip().startswith("rule:") for line in lines)
    assert "multinomial" in lines[1] and "ovr hinge" in lines[2]  # K = 3 > d = 2; K <= d = 4


def test_bench_extension_smoke_keeps_copies_in_a_small_ball(capsys):
    """In-process (no interpreter start-up): on a small, active ball the extension of a
    piecewise-linear and of a smooth loss stays on the plain loss's own path."""
    from benchmarks import bench_extension

    rows = bench_extension.main(
        ["--n", "300", "--d", "4", "--loss", "hinge,logistic", "--repeat", "1", "--no-ldop"]
        + ["--radius", "0.5"]
    )
    assert [r["loss"] for r in rows] == ["hinge", "logistic"]
    assert rows[0]["extension_path"] == "arrowhead IPM"
    assert rows[1]["extension_path"] == "Newton"
    assert all(r["ball_rounds"] >= 1 for r in rows)
    assert "paths (plain / extension)" in capsys.readouterr().out


def test_bench_rounds_smoke_certifies_every_case(tmp_path):
    """The random extension problems of the rounds' benchmark (six cases at a private
    release's target): every case certified, on the path the JSON names."""
    out = tmp_path / "rounds.json"
    proc = _smoke("bench_rounds.py", "--output", str(out))
    doc = json.loads(out.read_text())
    rows = doc["rows"]
    assert len(rows) == 6
    assert all(r["path"] != "error" and r["gap"] <= 6e-8 for r in rows)
    # each certified by the arrowhead method's rounds, the joint program not needed
    assert all(r["path"] == "arrowhead IPM" for r in rows), [r["path"] for r in rows]
    assert "accuracy" in proc.stdout and "ball" in proc.stdout and "box" in proc.stdout


def test_bench_spelling_speed_smoke_runs(tmp_path):
    """Every spelling of a group certifies the same objective (one function) and prints its
    time against the group's canonical spelling."""
    out = tmp_path / "speed.json"
    proc = _smoke("bench_spelling_speed.py", "--output", str(out))
    assert "slowest against its canonical spelling" in proc.stdout
    rows = json.loads(out.read_text())["rows"]
    for row in rows:
        first = next(
            r for r in rows if r["group"] == row["group"] and r["extension"] == row["extension"]
        )
        assert abs(row["upper"] - first["upper"]) <= 1e-7 * (1 + abs(first["upper"]))


def test_bench_public_quadratic_smoke_runs(tmp_path):
    """A ridge term in the loss and the same ridge as regularization both release (one
    objective, one plan), each with its time."""
    out = tmp_path / "quadratic.json"
    proc = _smoke("bench_public_quadratic.py", "--output", str(out), "--losses", "logistic,hinge")
    rows = json.loads(out.read_text())["rows"]
    assert {(r["loss"], r["ridge"]) for r in rows} == {
        (loss, ridge)
        for loss in ("logistic", "hinge")
        for ridge in ("regularization", "in the loss")
    }
    assert "in the loss" in proc.stdout


def test_bench_folded_smoke_runs(tmp_path):
    """Each penalty written into the loss releases under an enforced claim: on unit rows no
    example is extended (the penalty kept exact, not counted toward the claim), on the
    neighbour with one longer row that one only."""
    out = tmp_path / "folded.json"
    _smoke("bench_folded.py", "--output", str(out), "--losses", "logistic+l1,hinge+l1")
    rows = json.loads(out.read_text())["rows"]
    assert [(r["loss"], r["data"], r["extended"]) for r in rows] == [
        ("logistic+l1", "unit rows", 0),
        ("logistic+l1", "one row x3", 1),
        ("hinge+l1", "unit rows", 0),
        ("hinge+l1", "one row x3", 1),
    ]
    assert all(r["release_s"] > 0 and r["plain_s"] > 0 for r in rows)


def test_bench_penalties_smoke_runs(tmp_path):
    """Each penalty written into the loss is certified, on a fast rung, with the reference
    tools' excess over dpcvx's certified lower bound never below zero (to rounding)."""
    out = tmp_path / "penalties.json"
    proc = _smoke("bench_penalties.py", "--output", str(out))
    rows = json.loads(out.read_text())["rows"]
    assert [r["loss"] for r in rows] == [
        "logistic+l1",
        "squared+l1",
        "hinge+l1",
        "logistic+ridge",
        "logistic+group",
        "squared+linf",
        "logistic+quad_form",
        "hinge+group",
    ]
    for row in rows:
        assert row["gap"] <= 1e-8 and row["path"] != "CLARABEL", row
        if row["loss"] == "hinge+group":  # the norms are cones of the arrowhead method
            assert row["path"] == "arrowhead IPM", row
        if row["loss"] in ("logistic+group", "squared+linf", "logistic+quad_form"):
            assert row["path"] == "proximal Newton + penalty program", row
        for key in ("sklearn_excess", "cvxpy_excess"):
            assert row[key] is None or row[key] >= -1e-7, row
    assert "sklearn_s" in proc.stdout
