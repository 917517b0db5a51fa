"""The ``dpcvx`` command line: every command end to end in a subprocess (``python -m dpcvx``)
in a smoke configuration, ``--help``, unknown names and exit codes (0 success, 2 usage error,
1 failure); the remaining error paths in-process through :func:`dpcvx.cli.main`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dpcvx import cli

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str, cwd: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dpcvx", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
    )


def _no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout


# ---------------------------------------------------------------- subprocess, end to end
def test_help_lists_the_commands():
    proc = run("--help")
    assert proc.returncode == 0, proc.stderr
    for word in ("demo", "bench", "audit", "Exit status"):
        assert word in proc.stdout


def test_demo_end_to_end_saves_the_plot_in_the_current_directory(tmp_path):
    proc = run(
        "demo",
        "--seed",
        "0",
        "--epsilon",
        "2",
        "--epsilons",
        "0.5,5",
        "--repeats",
        "1",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert "guarantee: 2-DP (pure" in out and "SEEDED" in out
    assert "certified by dpcvx" in out  # the release's certificate
    assert "non-private certified solve (same lam): certified" in out
    assert "(automatic)" in out and "majority class (baseline)" in out
    assert "private (epsilon = 2)" in out and "non-private" in out and "test acc" in out
    plot = tmp_path / cli.DEMO_PLOT
    assert f"plot saved to {plot}" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    _no_traceback(proc)


def test_demo_curve_uses_the_automatic_rule_and_is_monotone_when_seeded(tmp_path):
    # seeded: the r-th fit of every epsilon shares its seed, so the medians compare epsilons
    proc = run(
        "demo",
        "--seed",
        "0",
        "--repeats",
        "3",
        "--epsilons",
        "0.1,1,10",
        "--plot",
        "c.png",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert "(automatic)" in out
    lines = out[out.index("epsilon     risk accuracy") :].splitlines()[1:4]
    risks = [float(line.split()[1]) for line in lines]
    assert risks == sorted(risks, reverse=True), lines
    majority = float(out.split("majority class (baseline)")[1].split()[0])
    assert 0.6 < majority < 0.65  # breast cancer's test split


def test_bench_one_benchmark_smoke_prints_its_table():
    proc = run("bench", "first_order", "--smoke")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "== bench_first_order --smoke" in proc.stdout
    assert "alg3/ipm" in proc.stdout  # the benchmark's own table


def test_audit_end_to_end_passes_and_catches_the_control():
    proc = run("audit", "output-perturbation", "--runs", "1500", "--seed", "0", "--no-progress")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "audit of output-perturbation" in proc.stdout
    assert "negative control" in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1].startswith("OK")
    assert proc.stderr == ""  # no progress bar off a terminal


def test_unknown_mechanism_lists_the_valid_ones_with_exit_2():
    proc = run("audit", "laplace")
    assert proc.returncode == 2
    assert "Unknown mechanism 'laplace'" in proc.stderr
    for name in ("output-perturbation", "ldop", "em-pgm"):
        assert name in proc.stderr
    _no_traceback(proc)


def test_an_audit_without_power_fails_with_exit_1():
    """30 runs cannot catch the control: the command says so and exits 1 (seeded: always)."""
    proc = run("audit", "op", "--runs", "30")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED: the audit missed the negative control" in proc.stdout
    _no_traceback(proc)


# ---------------------------------------------------------------- in-process
def test_no_command_prints_help_and_exits_2(capsys):
    assert cli.main([]) == 2
    assert "usage: dpcvx" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["demo", "--epsilon", "-1"],
        ["demo", "--epsilons", "1,x"],
        ["demo", "--repeats", "0"],
        ["audit", "op", "--runs", "0"],
        ["audit", "op", "--seed", "-3"],
        ["audit", "op", "--method", "bogus"],
        ["frobnicate"],
    ],
)
def test_argparse_usage_errors_exit_2(args, capsys):
    assert cli.main(args) == 2
    assert "error" in capsys.readouterr().err


def test_help_of_every_command_exits_0(capsys):
    for command in ("demo", "bench", "audit"):
        assert cli.main([command, "--help"]) == 0
        out = capsys.readouterr().out
        assert f"usage: dpcvx {command}" in out and "example" in out


def test_demo_bad_plot_paths_exit_2(capsys, tmp_path):
    assert cli.main(["demo", "--plot", str(tmp_path / "missing" / "x.png")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert cli.main(["demo", "--plot", str(tmp_path / "x.jpg2")]) == 2
    assert ".png" in capsys.readouterr().err


def test_audit_list_and_missing_name(capsys):
    assert cli.main(["audit", "--list"]) == 0
    out = capsys.readouterr().out
    for name in (
        "output-perturbation",
        "output-pert-localize",
        "double-output-perturbation",
        "localized-double-output-perturbation",
        "em-pgm",
        "all",
    ):
        assert name in out
    assert cli.main(["audit"]) == 2
    assert "give a MECHANISM" in capsys.readouterr().err
    assert cli.main(["audit", "op", "--method", "exact"]) == 2
    assert "exact" in capsys.readouterr().err
    assert cli.main(["audit", "op", "--", "x"]) == 2


def test_audit_exact_in_process(capsys):
    assert cli.main(["audit", "em-pgm", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "exact epsilon of the pair 0.8235" in out


def test_bench_list_unknown_names_and_the_real_folder(capsys):
    assert cli.main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("bench_erm", "bench_extension", "bench_heavy_tailed", "bench_first_order"):
        assert name in out
    assert cli.main(["bench", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown benchmark 'nope'" in err and "bench_erm" in err and "heavy_tailed" in err
    assert cli.main(["bench", "--", "--repeats", "1"]) == 2  # extra args need one NAME


def _fake_benchmarks(folder: Path) -> Path:
    folder.mkdir()
    (folder / "bench_table.py").write_text(
        '"""A fake benchmark that prints a table."""\n'
        "import sys\n"
        "print('col_a col_b')\n"
        "print('ratio', ' '.join(sys.argv[1:]))\n"
    )
    (folder / "bench_broken.py").write_text(
        '"""A benchmark that fails (with --smoke)."""\n'
        "import sys\n"
        "if '--smoke' in sys.argv:\n"
        "    sys.exit(3)\n"
    )
    return folder


def test_bench_discovers_scripts_passes_arguments_and_reports_failures(capfd, tmp_path):
    folder = _fake_benchmarks(tmp_path / "benchmarks")
    assert cli.main(["bench", "--dir", str(folder), "--list"]) == 0
    out = capfd.readouterr().out
    assert "bench_table" in out and "A fake benchmark" in out and "no smoke" in out
    assert cli.main(["bench", "table", "--dir", str(folder), "--", "--rows", "3"]) == 0
    out = capfd.readouterr().out
    assert "== bench_table --rows 3" in out and "ratio --rows 3" in out
    # no --smoke option and no registered smoke arguments: a usage error for one benchmark
    assert cli.main(["bench", "table", "--dir", str(folder), "--smoke"]) == 2
    assert "no smoke configuration" in capfd.readouterr().err
    # the suite skips it, runs the others, and exits 1 because one failed
    assert cli.main(["bench", "--dir", str(folder), "--smoke"]) == 1
    captured = capfd.readouterr()
    assert "bench_table: skipped" in captured.out and "exit 3" in captured.out
    assert "failed: bench_broken" in captured.err


def test_bench_runs_from_an_installed_package_and_says_so_when_the_scripts_are_missing(
    capsys, monkeypatch, tmp_path
):
    """Installed from a wheel: no benchmarks/ next to the package; the scripts ship inside it
    (dpcvx._benchmarks). Without them either, the command says what to do."""
    fake = tmp_path / "site-packages" / "dpcvx" / "cli.py"
    monkeypatch.setattr(cli, "__file__", str(fake))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["bench", "--list"]) == 0  # found as dpcvx._benchmarks
    assert "bench_speed" in capsys.readouterr().out
    monkeypatch.setattr(cli, "_installed_benchmarks", lambda: None)
    assert cli.main(["bench", "--smoke"]) == 1
    err = capsys.readouterr().err
    assert "no benchmark scripts were found" in err and "--dir" in err
    assert cli.main(["bench", "--dir", str(tmp_path / "nowhere")]) == 2


def test_dpcvx_cli_failures_exit_1(capsys, monkeypatch):
    """A dpcvx failure that is not a usage error (here a CertificationError) exits 1."""
    import dpcvx

    def broken(args):
        raise dpcvx.CertificationError("could not certify (test)")

    monkeypatch.setattr(cli, "_demo", broken)
    assert cli.main(["demo"]) == 1
    assert "failed: could not certify (test)" in capsys.readouterr().err
