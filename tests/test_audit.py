"""dpcvx.audit: the statistics, the seeded sampling audit, the exact audit, negative controls,
the catalogue of worst-case pairs, and the audit of every mechanism against its control.

False-failure rates. A correct mechanism fails a sampled audit (bound above epsilon) with
probability at most ``alpha`` (1e-3 here) over the seeds, by construction of the simultaneous
Clopper-Pearson intervals. A control is missed when its bound falls below epsilon; the miss
probabilities quoted in each test come from the spread of the bound over seeds (measured:
e.g. LDOP's control at 150 runs has mean 1.80 and standard deviation 0.17 over 12 seeds). All
seeds are fixed, so the default run is deterministic.
"""

from __future__ import annotations

import io
import math
import sys

import numpy as np
import pytest

import dpcvx
from dpcvx import _progress
from dpcvx.audit import (
    ABORT_THRESHOLD,
    MechanismAudit,
    NegativeControl,
    _releaser,
    audit,
    audit_case,
    audit_cases,
    audit_exact,
    audit_mechanism,
    clopper_pearson,
    epsilon_lower_bound,
    exact_epsilon,
    negative_control,
    threshold_tests,
    worst_case_pair,
)
from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms.registry import REGISTRY

NAMES = tuple(entry.name for entry in REGISTRY)
#: the five paths audited by default here (the others: tests/test_contract.py, marked slow)
DEFAULT_AUDITED = (
    "output-perturbation",
    "output-pert-localize",
    "double-output-perturbation",
    "localized-double-output-perturbation",
    "em-pgm",
)


# ---------------------------------------------------------------- statistics
def test_clopper_pearson_edges_and_a_known_value():
    assert clopper_pearson(0, 10, 0.05) == (0.0, pytest.approx(0.30850, abs=1e-5))
    lo, hi = clopper_pearson(10, 10, 0.05)
    assert hi == 1.0 and lo == pytest.approx(0.69150, abs=1e-5)
    lo, hi = clopper_pearson(5, 10, 0.05)  # the textbook interval for 5/10
    assert (lo, hi) == (pytest.approx(0.18709, abs=1e-5), pytest.approx(0.81291, abs=1e-5))


def test_clopper_pearson_coverage_is_at_least_nominal():
    rng = np.random.default_rng(0)
    p, n, alpha = 0.07, 200, 0.1
    ks = rng.binomial(n, p, size=4000)
    cover = np.mean([lo <= p <= hi for lo, hi in (clopper_pearson(int(k), n, alpha) for k in ks)])
    assert cover >= 1 - alpha - 0.015  # binomial standard error of the coverage is ~0.005


def test_threshold_tests_are_bonferroni_over_four_intervals_per_threshold():
    out0 = np.array([0.0, 0.1, 0.2, 0.3, 0.9])
    out1 = np.array([0.5, 0.6, 0.7, 0.8, 0.95])
    tests = threshold_tests(out0, out1, [0.4, 0.75], alpha=0.08)
    assert len(tests) == 8
    t = next(t for t in tests if t.threshold == 0.4 and t.event == "<" and t.numerator == 0)
    assert t.counts == (4, 0) and t.runs == (5, 5)
    assert t.interval_numerator == clopper_pearson(4, 5, 0.01)  # 0.08 / (4 * 2)
    assert t.interval_denominator == clopper_pearson(0, 5, 0.01)
    assert t.bound == pytest.approx(math.log(t.interval_numerator[0] / t.interval_denominator[1]))
    assert epsilon_lower_bound(out0, out1, [0.4, 0.75], 0.08) == max(
        0.0, max(x.bound for x in tests)
    )
    assert "P0(T < 0.4)" in str(t)


def test_delta_lowers_the_bound_and_uninformative_tests_floor_at_zero():
    rng = np.random.default_rng(1)
    a, b = rng.laplace(0, 1, 3000), rng.laplace(1, 1, 3000)
    pure = epsilon_lower_bound(a, b, [0.5], 1e-3)
    approx = epsilon_lower_bound(a, b, [0.5], 1e-3, delta=0.05)
    assert 0 < approx < pure < 1.0
    assert epsilon_lower_bound(a, a, [0.5], 1e-3) == 0.0


def test_exact_epsilon():
    p = np.log([0.5, 0.3, 0.2])
    q = np.log([0.4, 0.4, 0.2])
    assert exact_epsilon(p, q) == pytest.approx(math.log(0.4 / 0.3))
    assert exact_epsilon([0.0, -math.inf], np.log([0.5, 0.5])) == math.inf
    assert exact_epsilon([0.0, -math.inf], [0.0, -math.inf]) == 0.0
    with pytest.raises(InvalidParameterError, match="same points"):
        exact_epsilon([0.0], [0.0, 0.0])


def test_tests_audit_tools_reexports_the_library():
    from tests import audit_tools

    assert audit_tools.epsilon_lower_bound is epsilon_lower_bound
    assert audit_tools.clopper_pearson is clopper_pearson


# ---------------------------------------------------------------- the generic audit
def _laplace(scale):
    """A hand-written Laplace mechanism on scalar datasets (the callable path of `audit`)."""

    def release(dataset, rng):
        return dataset + rng.laplace(0.0, scale)

    return release


@pytest.mark.statistical
def test_callable_release_passes_and_an_undersized_noise_is_caught():
    """Laplace(1/epsilon) on datasets 0 and 1 (sensitivity 1) is exactly epsilon-DP: fails
    with probability <= 1e-3. Scale 1/(3 epsilon) leaks 3 epsilon; at 3000 runs its bound
    (about 2.6) is far above 1."""
    ok = audit(
        _laplace(1.0),
        (0.0, 1.0),
        epsilon=1.0,
        runs=3000,
        thresholds=[0.0, 0.5, 1.0],
        seed=3,
        progress=False,
    )
    assert ok.passed and 0.5 < ok.lower_bound <= 1.0
    bad = audit(
        _laplace(1 / 3),
        (0.0, 1.0),
        epsilon=1.0,
        runs=3000,
        thresholds=[0.0, 0.5, 1.0],
        seed=3,
        progress=False,
    )
    assert not bad.passed and bad.lower_bound > 2.0
    assert bad.best is not None and bad.best.bound == bad.lower_bound


def test_audit_is_reproducible_from_its_seed():
    kwargs = dict(epsilon=1.0, runs=400, thresholds=[0.5], progress=False)
    a = audit(_laplace(1.0), (0.0, 1.0), seed=11, **kwargs)
    b = audit(_laplace(1.0), (0.0, 1.0), seed=11, **kwargs)
    c = audit(_laplace(1.0), (0.0, 1.0), seed=12, **kwargs)
    assert a.tests == b.tests and a.lower_bound == b.lower_bound
    assert a.tests != c.tests


def test_default_thresholds_come_from_separate_pilot_releases():
    r = audit(_laplace(1.0), (0.0, 1.0), epsilon=1.0, runs=500, seed=2, progress=False)
    # up to five pilot quantiles, plus the event {the release aborted}, always tested
    assert r.pilot_runs == 100 and 2 <= len(r.thresholds) <= 6
    assert r.thresholds[-1] == ABORT_THRESHOLD
    assert r.passed and len(r.tests) == 4 * len(r.thresholds)
    assert "pilot" in str(r)


def _aborting(probabilities):
    """Laplace(1) releases that raise CertificationError with a per-dataset probability."""

    def release(dataset, rng):
        if rng.uniform() < probabilities[int(dataset)]:
            raise dpcvx.CertificationError("fixed text")
        return dataset + rng.laplace(0.0, 1.0)

    return release


@pytest.mark.statistical
def test_an_abort_is_counted_as_an_output():
    """A release that aborts on one dataset of a pair and not on the other is not private
    whatever its noise: the audit records aborts as an event of their own and catches it
    (negative control). Aborting equally often on both sides is as private as the noise
    (fails with probability <= 1e-3)."""
    bad = audit(_aborting((0.0, 0.5)), (0.0, 1.0), epsilon=1.0, runs=1000, seed=4, progress=False)
    assert not bad.passed and bad.lower_bound > 3.0
    assert bad.detail["aborts"][0] == 0 and bad.detail["aborts"][1] > 400
    assert bad.best.threshold == ABORT_THRESHOLD
    same = audit(_aborting((0.3, 0.3)), (0.0, 1.0), epsilon=1.0, runs=1000, seed=4, progress=False)
    assert same.passed


def test_statistic_reduces_a_vector_release():
    def release(dataset, rng):
        return np.array([dataset, 0.0]) + rng.laplace(0.0, 1.0, size=2)

    r = audit(
        release,
        (0.0, 1.0),
        epsilon=2.0,
        runs=300,
        thresholds=[0.5],
        statistic=lambda w: w[0],
        seed=0,
        progress=False,
    )
    assert r.passed
    with pytest.raises(InvalidParameterError, match="statistic"):
        audit(release, (0.0, 1.0), epsilon=2.0, runs=5, thresholds=[0.5], progress=False)


def test_progress_is_silent_off_a_terminal_and_when_disabled(capsys, monkeypatch):
    audit(_laplace(1.0), (0.0, 1.0), epsilon=1.0, runs=50, thresholds=[0.5], progress=True)
    assert capsys.readouterr().err == ""  # pytest's stderr is not a terminal

    class Tty(io.StringIO):
        def isatty(self):
            return True

    fake = Tty()
    monkeypatch.setattr(sys, "stderr", fake)
    assert _progress.progress_enabled(True)
    assert not _progress.progress_enabled(False)
    audit(_laplace(1.0), (0.0, 1.0), epsilon=1.0, runs=50, thresholds=[0.5], progress=False)
    assert fake.getvalue() == ""
    audit(_laplace(1.0), (0.0, 1.0), epsilon=1.0, runs=50, thresholds=[0.5], progress=True)
    assert "release" in fake.getvalue()  # the bar, on a terminal


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"runs": 0}, "runs"),
        ({"runs": 2.5}, "runs"),
        ({"seed": -1}, "seed"),
        ({"seed": None}, "seed"),
        ({"alpha": 1.5}, "alpha"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"delta": 1.0}, "delta"),
        ({"thresholds": []}, "thresholds"),
        ({"thresholds": [math.nan]}, "thresholds"),
        ({"statistic": 3}, "statistic"),
    ],
)
def test_bad_input_is_refused_before_any_release(kwargs, match):
    calls = []

    def release(dataset, rng):
        calls.append(1)
        return dataset

    base = {"epsilon": 1.0, "runs": 10, "thresholds": [0.5], "progress": False}
    base.update(kwargs)
    with pytest.raises(InvalidParameterError, match=match):
        audit(release, (0.0, 1.0), **base)
    assert not calls


def test_bad_pairs_and_mechanisms():
    with pytest.raises(InvalidParameterError, match="pair"):
        audit(_laplace(1.0), (0.0,), epsilon=1.0, runs=5, thresholds=[0.0])
    with pytest.raises(InvalidParameterError, match="pair"):
        audit(_laplace(1.0), "ab", epsilon=1.0, runs=5, thresholds=[0.0])
    with pytest.raises(InvalidParameterError, match="callable"):
        audit(42, (0.0, 1.0), epsilon=1.0, runs=5, thresholds=[0.0])
    mech = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=1.0)
    with pytest.raises(InvalidParameterError, match="data source"):
        audit(mech, (0.0, 1.0), epsilon=1.0, runs=5, thresholds=[0.0])
    with pytest.raises(InvalidParameterError, match="distribution"):
        audit_exact(mech, worst_case_pair("op"), epsilon=1.0)


# ---------------------------------------------------------------- releases and controls
@pytest.mark.parametrize("name", NAMES)
def test_the_audited_release_is_the_real_release(name):
    """The audit's memoized path gives exactly what `problem.solve_private` gives for the same
    generator state: memoizing the deterministic solves changes nothing."""
    case = audit_case(name)
    problem = case.make_pair()[0]
    fast = _releaser(case.mechanism, problem, case.epsilon, 0.0)
    for seed in (0, 1):
        real = problem.solve_private(
            case.mechanism, epsilon=case.epsilon, rng=np.random.default_rng(seed)
        ).w
        np.testing.assert_array_equal(fast(np.random.default_rng(seed)), real)


def test_negative_control_recalibrates_every_noise_and_is_charged_epsilon():
    mech = dpcvx.DoubleOutputPerturbation(C=1.0, regularization=1.0)
    control = negative_control(mech, 4.0)
    kw = dict(n=10, d=1, center=np.zeros(1), diameter=2.0, epsilon=1.0, delta=0.0)
    plan, loud = mech.plan(**kw), control.plan(**kw)
    assert loud.noise.scale == pytest.approx(plan.noise.scale / 4)
    assert loud.localization_noise.scale == pytest.approx(plan.localization_noise.scale / 4)
    assert loud.radius == plan.radius and loud.accuracy == plan.accuracy
    problem = worst_case_pair("dop")[0]
    res = problem.solve_private(control, epsilon=1.0, rng=0)
    assert res.ledger.total().epsilon == pytest.approx(1.0)  # charged epsilon, not 4 epsilon

    ldop = audit_case("ldop").mechanism
    kw40 = dict(kw, n=40)
    for p, q in zip(ldop.plan(**kw40).phases, negative_control(ldop, 10).plan(**kw40).phases):
        assert q.block.noise.scale == pytest.approx(p.block.noise.scale / 10)
    em = audit_case("em").mechanism
    em_plan = negative_control(em, 3).plan(**kw)
    assert em_plan.guarantee.epsilon == 3.0
    gauss = negative_control(dpcvx.OutputPerturbation(lipschitz=1.0, regularization=1.0), 2)
    g = gauss.plan(**dict(kw, delta=1e-5)).noise
    assert g.kind == "gaussian" and g.epsilon == 2.0


def test_negative_control_bad_input():
    mech = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=1.0)
    with pytest.raises(InvalidParameterError, match="exceed 1"):
        negative_control(mech, 1.0)
    with pytest.raises(InvalidParameterError, match="mechanism"):
        negative_control(object(), 2.0)

    class Noiseless:
        def plan(self, **kwargs):
            return object()  # no NoiseSpec inside

        def release(self, *args):
            raise AssertionError

    with pytest.raises(InvalidParameterError, match="no noise"):
        negative_control(Noiseless(), 2.0).plan(n=1)
    assert isinstance(negative_control(mech, 2.0), NegativeControl)
    assert "factor=2" in repr(negative_control(mech, 2.0))


# ---------------------------------------------------------------- the catalogue
def test_catalogue_names_aliases_and_pairs():
    assert tuple(audit_cases()) == NAMES
    assert audit_case("OutputPerturbation").name == "output-perturbation"
    assert audit_case("LDOP").name == "localized-double-output-perturbation"
    assert audit_case("double_output_perturbation").name == "double-output-perturbation"
    with pytest.raises(InvalidParameterError) as info:
        audit_case("laplace")
    for name in NAMES:
        assert name in str(info.value)
    p0, p1 = worst_case_pair("op")
    assert isinstance(p0, dpcvx.Problem) and p0.n == p1.n == 10
    s0 = p0.solve(regularization=1.0, center=np.zeros(1))
    s1 = p1.solve(regularization=1.0, center=np.zeros(1))
    assert abs(s0.w[0] - s1.w[0]) == pytest.approx(0.2, abs=1e-6)  # 2L/(lam n): worst case
    with pytest.raises(InvalidParameterError, match="method"):
        audit_mechanism("op", method="bogus")
    with pytest.raises(InvalidParameterError, match="exact"):
        audit_mechanism("op", method="exact")


#: releases per dataset in the default run (the catalogue's own defaults are larger)
DEFAULT_RUNS = {
    "output-perturbation": 2000,
    "output-pert-localize": 2000,
    "double-output-perturbation": 1000,
    "localized-double-output-perturbation": 150,
    "em-pgm": None,
}


@pytest.mark.statistical
@pytest.mark.parametrize("name", DEFAULT_AUDITED)
def test_every_mechanism_passes_and_its_negative_control_is_caught(name):
    """Each mechanism on its worst-case pair: bound <= epsilon (false failure <= 1e-3 by
    construction; EM-PGM is exact, no false failure), and its negative control's bound
    > epsilon. Seeded bounds of the controls and their margins over 1 (in standard deviations
    of the bound over seeds): output perturbation and OutputPert-Localize 1.47 (about 5 sd),
    Double-OutputPert 1.34 (about 3 sd, miss rate ~1e-3), LDOP 1.69 (about 4 sd), EM-PGM
    exact 2.58."""
    report = audit_mechanism(name, runs=DEFAULT_RUNS[name], seed=0, progress=False)
    assert isinstance(report, MechanismAudit)
    assert report.mechanism.lower_bound <= report.mechanism.epsilon
    assert report.control.lower_bound > report.control.epsilon
    assert report.ok and report.passed and report.caught
    text = str(report)
    assert text.startswith(f"audit of {name}") and text.rstrip().splitlines()[-1][:2] == "OK"
    if name == "em-pgm":
        assert report.mechanism.method == "exact"
        assert report.mechanism.lower_bound == pytest.approx(0.8235, abs=1e-3)


# ---------------------------------------------------------------- slow, with power
@pytest.mark.slow
@pytest.mark.statistical
def test_output_perturbation_audit_has_power():
    """20000 runs: the bound approaches the pair's true epsilon 1/1.05 = 0.952 (it exceeds
    0.8 unless the estimate is ~6 standard errors low) and stays below 1 (false failure
    <= 1e-3)."""
    r = audit_mechanism("op", runs=20_000, seed=5, progress=False)
    assert 0.8 <= r.mechanism.lower_bound <= 1.0
    assert r.control.lower_bound > 1.5  # the control's true epsilon is 1.90


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.parametrize(
    "name", ["double-output-perturbation", "localized-double-output-perturbation"]
)
def test_catalogue_defaults_pass_and_catch(name):
    """The catalogue's default run counts (what `dpcvx audit NAME` uses): false failure
    <= 1e-3; the controls are caught with margins beyond 5 standard deviations."""
    assert audit_mechanism(name, seed=7, progress=False).ok


@pytest.mark.slow
@pytest.mark.statistical
def test_em_pgm_sampled_audit_agrees_with_the_exact_one():
    """The sampled audit of EM-PGM (1000 runs, 2 thresholds): below the exact 0.82 except
    with probability <= 1e-3, and the 4x control (exact 2.58; 2.18 at the threshold -0.95)
    is caught unless its bound is ~5 standard errors low."""
    r = audit_mechanism("em", method="sampled", seed=1, progress=False)
    assert r.mechanism.method == "sampled" and r.mechanism.lower_bound <= 0.8235
    assert r.caught


# ---------------------------------------------------------------- adversarial solves
def test_adversarial_solves_move_each_point_away_by_the_certified_slack():
    """On the output-perturbation pair (F(w) = mean(x) w + w^2 / 2 on [-1, 1], exactly
    quadratic), the audit's solver returns each dataset's point moved away from the other's
    by about sqrt(2 alpha / lam), and the moved point is still alpha-accurate by the closed
    form F(w) - F* = (w - w*)^2 / 2 (independent of dpcvx's certificate)."""
    from dpcvx.audit import _releasers

    case = audit_case("op")
    pair = case.make_pair()
    mech = case.mechanism
    runs = _releasers(mech, pair, 1.0, 0.0, adversarial=True)
    plan = mech.plan(n=10, d=1, center=np.zeros(1), diameter=2.0, epsilon=1.0, delta=0.0)
    lam, w0, alpha = plan.regularization, plan.center, plan.accuracy
    moved = []
    for run, sign in zip(runs, (-1.0, 1.0)):  # dataset 0 (last x = +1) has w* = -0.1
        ctx = run.source.release_context(extension=1.0, solver=None)
        cert = ctx.solver()(lam, w0, alpha)
        w_star = sign * 0.1
        assert (cert.w[0] - w_star) ** 2 / 2 <= alpha  # still alpha-accurate, exactly
        assert cert.gap <= alpha
        assert sign * (cert.w[0] - w_star) >= 0.9 * math.sqrt(2 * alpha / lam)
        moved.append(cert.w[0])
    assert moved[1] - moved[0] >= 0.2 + 1.8 * math.sqrt(2 * alpha / lam)
    # without adversarial solves the points are the near-exact minimizers
    plain = _releasers(mech, pair, 1.0, 0.0, adversarial=False)
    ctx = plain[0].source.release_context(extension=1.0, solver=None)
    assert abs(ctx.solver()(lam, w0, alpha).w[0] + 0.1) <= math.sqrt(2 * alpha / lam) / 10
