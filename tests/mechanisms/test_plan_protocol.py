"""Every mechanism behind the typed release boundary of :mod:`dpcvx.mechanisms.base`.

For a typical plan of every mechanism: the mechanism is a ``Mechanism`` and its plan a
``Plan``; the class attributes the pipeline reads (``requirements``, ``extension``,
``enforces_lipschitz``, ``neighbors``); ``plan.events(label)`` adds up to the plan's guarantee
(exactly for one event; at most for the per-step events of an iterative mechanism) with the
detail the earlier pipeline recorded; ``plan.facts()`` holds the public facts the earlier
pipeline put in ``result.detail``; ``plan.extension_C``. Then the releases of paper 000's
Algorithms 2 and 4 in both call forms (the old one deprecated) and the blocks of
Localized Double Output Perturbation, which must not go through the deprecated form.
"""

from __future__ import annotations

import warnings
from fractions import Fraction
from types import SimpleNamespace

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.accounting.ledger import Accountant, PrivacyEvent
from dpcvx.mechanisms.base import PER_SOLVE, PLAIN, PLANNED, Mechanism, Plan, Release
from dpcvx.mechanisms.clipped_gradient import ClippedGradientDescent
from dpcvx.mechanisms.double_output_perturbation import (
    DoubleOutputPerturbation,
    OutputPertLocalize,
)
from dpcvx.mechanisms.em_pgm import ProjectedGradientExponentialMechanism
from dpcvx.mechanisms.exponential import ExponentialMechanism, LocalizedExponentialMechanism
from dpcvx.mechanisms.localized_double import LocalizedDoubleOutputPerturbation
from dpcvx.mechanisms.output_perturbation import OutputPerturbation
from dpcvx.mechanisms.tilted import TiltedOutputPerturbation
from dpcvx.modeling.domains import Domain
from dpcvx.neighbors import REPLACE_ONE

#: the numbers the earlier pipeline added to ``plan.detail`` for a perturbed certified solve
SOLVE_FACTS = {
    "sensitivity",
    "base_sensitivity",
    "accuracy",
    "noise",
    "noise_scale",
    "regularization",
}


def _box(d: int) -> Domain:
    w = cp.Variable(d)
    return Domain(w, dpcvx.domains.box(w, -np.ones(d), np.ones(d)))


def _plan(mech, *, n=200, d=2, epsilon=1.0, delta=0.0, domain=None):
    return mech.plan(
        n=n,
        d=d,
        center=np.zeros(d),
        diameter=2.0 * np.sqrt(d),
        epsilon=epsilon,
        delta=delta,
        domain=domain,
    )


# name -> (mechanism, plan keywords, requirements, extension, kind of plan, facts' keys)
#: kind: "solve" (one perturbed certified solve: events carry sensitivity/noise/scale, facts
#: are detail plus SOLVE_FACTS), "one" (one event with the plan's ledger detail, facts are
#: the plan's detail), "steps" (one event per step)
CASES = {
    "OutputPerturbation": (
        lambda: OutputPerturbation(lipschitz=1.0, regularization=0.5),
        {},
        ("solver", "project"),
        PLAIN,
        "solve",
        {"mechanism", "paper", "lipschitz", "strong_convexity", "inflation"},
    ),
    "OutputPerturbation-gaussian": (
        lambda: OutputPerturbation(lipschitz=1.0, regularization=0.5),
        {"delta": 1e-6},
        ("solver", "project"),
        PLAIN,
        "solve",
        {"mechanism", "paper", "lipschitz", "strong_convexity", "inflation"},
    ),
    "OutputPertLocalize": (
        lambda: OutputPertLocalize(C=1.0, regularization=0.5),
        {},
        ("solver", "project"),
        PLANNED,
        "solve",
        {"mechanism", "paper", "C", "constants", "zeta", "localization_radius"},
    ),
    "DoubleOutputPerturbation": (
        lambda: DoubleOutputPerturbation(C=1.0, regularization=0.5),
        {},
        ("solver", "project"),
        PLANNED,
        "solve",
        {
            "mechanism",
            "paper",
            "C",
            "constants",
            "zeta",
            "localization_radius",
            "localization_sensitivity",
            "localization_noise_scale",
            "localization_accuracy",
        },
    ),
    "DoubleOutputPerturbation-moment": (
        lambda: DoubleOutputPerturbation(moment=1.0, k=4, regularization=0.5, constants="paper"),
        {},
        ("solver", "project"),
        PLANNED,
        "solve",
        {"mechanism", "C", "constants", "localization_radius", "localization_accuracy"},
    ),
    "LocalizedDoubleOutputPerturbation": (
        lambda: LocalizedDoubleOutputPerturbation(k=4, moment=1.0, blocks=3, progress=False),
        {"n": 400},
        ("solver", "project"),
        PER_SOLVE,
        "one",
        {
            "mechanism",
            "paper",
            "phases",
            "blocks",
            "block_sizes",
            "regularizations",
            "extension_C",
            "composition",
            "implied_confidence",
            "accuracies",
            "noise_scales",
            "localization_radii",
            "minimum_n",
        },
    ),
    "ClippedGradientDescent-pure": (
        lambda: ClippedGradientDescent(
            k=4, iteration_cap=7, allow_outside_theory=True, progress=False
        ),
        {"n": 1000},
        ("gradients", "smooth", "project"),
        PLAIN,
        "steps",
        {"mechanism", "paper", "rho", "steps", "step_noise", "step_scale", "tau", "T", "eta"},
    ),
    "ClippedGradientDescent-zcdp": (
        lambda: ClippedGradientDescent(
            k=4, oracle="nsme", iteration_cap=5, allow_outside_theory=True, progress=False
        ),
        {"n": 1000, "delta": 1e-6},
        ("gradients", "smooth", "project"),
        PLAIN,
        "steps",
        {"mechanism", "paper", "rho", "steps", "step_noise", "step_scale", "tau", "T", "eta"},
    ),
    "TiltedOutputPerturbation": (
        lambda: TiltedOutputPerturbation(lipschitz=1.0, regularization=0.5, tilt=0.1),
        {},
        ("tilted_solver", "project"),
        PLAIN,
        "one",
        {
            "mechanism",
            "paper",
            "tilt",
            "base_sensitivity",
            "sensitivity",
            "accuracy",
            "noise",
            "noise_scale",
            "loss_bounds",
        },
    ),
    "TiltedOutputPerturbation-gaussian": (
        lambda: TiltedOutputPerturbation(
            lipschitz=1.0, regularization=0.5, tilt=0.1, loss_bounds=(0.0, 1.0)
        ),
        {"delta": 1e-6},
        ("tilted_solver", "project"),
        PLAIN,
        "one",
        {"mechanism", "tilt", "sensitivity", "accuracy", "noise", "noise_scale"},
    ),
    "ExponentialMechanism": (
        lambda: ExponentialMechanism(lipschitz=1.0, max_points=400),
        {"domain": True},
        ("loss_values",),
        PLAIN,
        "one",
        {
            "mechanism",
            "paper",
            "lipschitz",
            "regularization",
            "spacing",
            "net_bound",
            "net_radius",
            "sensitivity",
            "coefficient",
            "center",
            "anchor",
            "base_sensitivity",
        },
    ),
    "LocalizedExponentialMechanism": (
        lambda: LocalizedExponentialMechanism(
            lipschitz=1.0, regularization=1.0, xi=1.0, max_points=400
        ),
        {"domain": True},
        ("solver", "loss_values", "project"),
        PLAIN,
        "one",
        {
            "mechanism",
            "paper",
            "accuracy",
            "localization_sensitivity",
            "noise",
            "noise_scale",
            "xi",
            "localization_radius",
            "spacing",
            "net_bound",
            "base_sensitivity",
            "stage_epsilon",
            "composition",
        },
    ),
    "ProjectedGradientExponentialMechanism": (
        lambda: ProjectedGradientExponentialMechanism(
            C=1.0, regularization=0.5, smoothness=1.0, spacing=0.2
        ),
        {"domain": True},
        ("loss_values",),
        PLAIN,
        "one",
        {
            "mechanism",
            "paper",
            "case",
            "step_size",
            "smoothing",
            "spacing",
            "net_bound",
            "sensitivity",
            "coefficient",
            "paper_spacing",
            "quadrature_nodes",
            "base_sensitivity",
        },
    ),
}


def _build(name):
    make, kwargs, *_ = CASES[name]
    mech = make()
    kwargs = dict(kwargs)
    d = kwargs.get("d", 2)
    if kwargs.pop("domain", False):
        kwargs["domain"] = _box(d)
    return mech, _plan(mech, **kwargs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_mechanism_and_plan_satisfy_the_protocols(name):
    _, _, requirements, extension, _, _ = CASES[name]
    mech, plan = _build(name)
    assert isinstance(mech, Mechanism)
    assert isinstance(plan, Plan)
    assert type(mech).requirements == requirements
    assert type(mech).extension == extension
    assert type(mech).enforces_lipschitz is (type(mech) is OutputPerturbation)
    assert type(mech).neighbors == REPLACE_ONE
    for attribute in ("composite", "uses_extension", "context_requirements"):
        assert not hasattr(mech, attribute)  # the old flags are gone


@pytest.mark.parametrize("name", sorted(CASES))
def test_events_add_up_to_the_guarantee(name):
    _, _, _, _, kind, _ = CASES[name]
    mech, plan = _build(name)
    g = plan.guarantee
    events = plan.events("x")
    assert isinstance(events, tuple) and events
    assert all(isinstance(e, PrivacyEvent) for e in events)
    assert all(e.neighbors == g.neighbors == REPLACE_ONE for e in events)
    # the ledger accepts them as one release within exactly the guarantee
    Accountant(g.epsilon, g.delta).reserve_all(events)
    if kind == "steps":
        T = plan.facts()["steps"]
        assert len(events) == T
        assert [e.label for e in events] == [f"x step {t}/{T}" for t in range(1, T + 1)]
        assert sum(Fraction(e.delta) for e in events) <= Fraction(g.delta)
        if g.delta == 0:
            assert all(e.kind == "pure" for e in events)
            assert sum(Fraction(e.epsilon) for e in events) <= Fraction(g.epsilon)
        else:  # zCDP steps compose through rho
            assert all(e.kind == "zcdp" for e in events)
            assert sum(Fraction(e.rho) for e in events) <= Fraction(plan.rho)
        # the fields of the plan's own steps, relabelled
        assert [e.epsilon for e in events] == [s["epsilon"] for s in plan.steps]
        return
    (event,) = events
    assert event.label == "x"
    assert (event.epsilon, event.delta) == (g.epsilon, g.delta)
    if g.delta == 0:
        assert event.kind == "pure" and event.noise_multiplier is None
    else:
        assert event.kind == "gaussian"
        assert event.noise_multiplier == plan.noise.noise_multiplier
    if kind == "solve":
        assert dict(event.detail) == {
            "sensitivity": plan.sensitivity.value,
            "noise": plan.noise.kind,
            "scale": plan.noise.scale,
        }
    else:
        assert dict(event.detail) == dict(plan.ledger_detail)


@pytest.mark.parametrize("name", sorted(CASES))
def test_facts_are_what_the_pipeline_exposed(name):
    _, _, _, _, kind, keys = CASES[name]
    mech, plan = _build(name)
    facts = plan.facts()
    assert keys <= set(facts), keys - set(facts)
    if kind == "solve":
        assert set(facts) == set(plan.detail) | SOLVE_FACTS
        assert {k: facts[k] for k in plan.detail} == dict(plan.detail)
        assert facts["sensitivity"] == plan.sensitivity.value
        assert facts["base_sensitivity"] == plan.base_sensitivity
        assert facts["accuracy"] == plan.accuracy
        assert facts["noise"] == plan.noise.kind
        assert facts["noise_scale"] == plan.noise.scale
        assert facts["regularization"] == plan.regularization
    else:
        assert dict(facts) == dict(plan.detail)
    with pytest.raises(TypeError):
        facts["mechanism"] = "changed"  # type: ignore[index]


@pytest.mark.parametrize("name", sorted(CASES))
def test_extension_C_is_the_plan_s(name):
    mech, plan = _build(name)
    if type(mech).extension == PLANNED:
        assert plan.extension_C == plan.facts()["C"] > 0
        if mech.C is not None:
            assert plan.extension_C == mech.C == mech.extension_C  # kept for compatibility
    else:
        assert plan.extension_C is None


def test_clipped_plan_keeps_its_steps_and_events_is_a_method():
    _, plan = _build("ClippedGradientDescent-pure")
    assert callable(plan.events)
    assert len(plan.steps) == plan.facts()["steps"]
    assert all(step["label"].startswith("step ") for step in plan.steps)


# ---------------------------------------------------------------- releases
def _fake_solve(calls):
    def solve(lam, w0, alpha, localize=None, candidate=None):
        calls.append((lam, alpha, localize is not None))
        return SimpleNamespace(w=np.asarray(w0, float).copy(), gap=0.0)

    return solve


def _project(point, localize=None, xi=None):
    return np.clip(np.asarray(point, float), -1.0, 1.0)


def _context(calls):
    return SimpleNamespace(
        n=400,
        d=2,
        domain=SimpleNamespace(kind="box"),
        solver=lambda indices=None, C=None: _fake_solve(calls),
        project=_project,
    )


@pytest.mark.parametrize("name", ["OutputPertLocalize", "DoubleOutputPerturbation"])
def test_release_with_a_context_and_the_deprecated_form(name):
    mech, plan = _build(name)
    stages = 2 if name == "DoubleOutputPerturbation" else 1
    calls: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        out = mech.release(plan, _context(calls), np.random.default_rng(0))
    assert isinstance(out, Release) and len(out.certificates) == stages
    assert dict(out.facts) == {} and len(calls) == stages
    w, certificates, facts = out  # unpacks as before
    assert w.shape == (2,) and np.all(np.abs(w) <= 1.0)
    assert certificates[0].domain == "box"
    with pytest.warns(DeprecationWarning, match="deprecated"):
        old = mech.release(plan, _fake_solve([]), _project, np.random.default_rng(0))
    assert isinstance(old, tuple) and len(old) == 2
    assert np.array_equal(old[0], w)  # same maths, same draws
    assert old[1][0].domain == "declared"


def test_localized_blocks_do_not_use_the_deprecated_release():
    mech, plan = _build("LocalizedDoubleOutputPerturbation")
    calls: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        out = mech.release(plan, _context(calls), np.random.default_rng(0))
    assert isinstance(out, Release)
    phases = plan.facts()["phases"]
    assert len(out.certificates) == 2 * plan.blocks * phases
    assert set(out.facts) == {"block_outputs", "aggregated_indices"}
