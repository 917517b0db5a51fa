"""A private solve of a Lipschitz extension whose form no fast rung writes does not decide
between a release and an abort from the data: where its conic program is too large to stamp,
every dataset of that size is refused alike, before any rung runs (and, for output
perturbation, before the budget is reserved). (Where a fast rung writes the extension and
misses its target on some data, the conic program is still the fallback, and above the size
limit that is an abort: the residual the docs name.)

The negative control is the behaviour before the refusal: a dataset whose every example is
C-Lipschitz released on a fast rung, and its neighbour with one steeper example aborted (the
conic program not stamped). The tests shrink ``MAX_PROGRAM_NNZ`` so that the program of a few
hundred examples counts as too large, which is what n = 1e6 does at its real value.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
import dpcvx.certification.solve as solve_module
from dpcvx.certification.solve import writes_extension

N, D, C, LAM = 300, 4, 10.0, 0.1


def _losses():
    w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
    z = x @ w
    r = z - y
    return (
        w,
        x,
        y,
        {
            # no fast rung writes their extension
            "logistic + square": cp.logistic(-cp.multiply(y, z)) + 0.1 * cp.square(z),
            "huber + square": cp.huber(r) + cp.square(r),
            "hinge + abs": cp.pos(1 - cp.multiply(y, z)) + 0.1 * cp.abs(z),
            "logistic + abs": cp.logistic(-cp.multiply(y, z)) + 0.1 * cp.abs(z),
            "abs + square": cp.abs(r) + cp.square(r),
            "logistic(r) + 0.2 r": cp.logistic(r) + 0.2 * r,  # slopes on one side of zero
            # the fast rungs write these
            "hinge": cp.pos(1 - cp.multiply(y, z)),
            "logistic": cp.logistic(-cp.multiply(y, z)),
            "logistic 0/1 labels": cp.logistic(z) - cp.multiply(y, z),
        },
    )


WRITTEN = {"hinge", "logistic", "logistic 0/1 labels"}


def _neighbours(seed: int = 3):
    """A dataset of unit rows (every loss above C-Lipschitz on the unit ball) and three
    neighbours: one label flipped, one row fifty times longer, one row of a thousand."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, D))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    Y = np.where(rng.standard_normal(N) > 0, 1.0, -1.0)
    out = [(X, Y)]
    for change in ("flip", "steep", "far"):
        Xk, Yk = X.copy(), Y.copy()
        if change == "flip":
            Yk[0] = -Yk[0]
        else:
            Xk[0] *= 50.0 if change == "steep" else 1e3
        out.append((Xk, Yk))
    return out


def _outcome(problem, mech, accountant):
    try:
        problem.solve_private(mech, epsilon=1.0, rng=0, accountant=accountant)
    except dpcvx.DpcvxError as exc:
        return type(exc).__name__, str(exc)
    return "released", ""


@pytest.mark.parametrize("name", sorted(_losses()[3]))
def test_neighbours_share_the_outcome_when_the_program_is_too_large(name, monkeypatch):
    """With the conic program over the size limit, the four neighbours end alike: released
    (a loss whose extension a fast rung writes) or refused with one message before anything
    is spent (the others). Deterministic."""
    monkeypatch.setattr(solve_module, "MAX_PROGRAM_NNZ", 100)
    outcomes = []
    for X, Y in _neighbours():
        w, x, y, losses = _losses()
        problem = dpcvx.Problem(losses[name], w, {x: X, y: Y}, [cp.norm(w) <= 1])
        accountant = dpcvx.Accountant(epsilon=1.0)
        mech = dpcvx.OutputPerturbation(lipschitz=C, regularization=LAM)
        outcome = _outcome(problem, mech, accountant)
        if outcome[0] != "released":
            assert accountant.spent.epsilon == 0.0  # refused before the budget
        outcomes.append(outcome)
    assert len(set(outcomes)) == 1, outcomes
    if name in WRITTEN:
        assert outcomes[0][0] == "released"
    else:
        assert outcomes[0][0] == "InvalidParameterError"
        assert "cannot solve the Lipschitz extension" in outcomes[0][1]
        assert "Nothing was spent" in outcomes[0][1]


def test_the_check_catches_a_refusal_that_is_not_made(monkeypatch):
    """Negative control: with the refusal switched off (every loss taken as one whose
    extension a fast rung writes), the light dataset releases on the fast rung and its steep
    neighbour aborts after the budget is spent: the comparison above tells them apart."""
    monkeypatch.setattr(solve_module, "MAX_PROGRAM_NNZ", 100)
    monkeypatch.setattr(solve_module, "writes_extension", lambda *a, **k: True)
    outcomes = []
    for X, Y in _neighbours()[::2]:
        w, x, y, losses = _losses()
        problem = dpcvx.Problem(losses["logistic + square"], w, {x: X, y: Y}, [cp.norm(w) <= 1])
        mech = dpcvx.OutputPerturbation(lipschitz=C, regularization=LAM)
        outcomes.append(_outcome(problem, mech, dpcvx.Accountant(epsilon=1.0))[0])
    assert outcomes == ["released", "CertificationError"]


def test_the_solve_itself_refuses_every_dataset_alike(monkeypatch):
    """A mechanism without the pre-budget check reaches the solve: the refusal comes first
    there too, the same for a dataset and its steep neighbour (whose universe cut leaves other
    examples), and before the smooth rung runs on the light one."""
    monkeypatch.setattr(solve_module, "MAX_PROGRAM_NNZ", 100)
    texts = []
    for X, Y in _neighbours():
        w, x, y, losses = _losses()
        problem = dpcvx.Problem(losses["logistic + square"], w, {x: X, y: Y}, [cp.norm(w) <= 1])
        solve = problem.release_context(extension=C, solver=None).solver()
        with pytest.raises(dpcvx.CertificationError) as info:
            solve(LAM, np.zeros(D), 1e-6)
        texts.append(str(info.value))
    assert len(set(texts)) == 1 and "no path without a conic program" in texts[0]


def test_without_the_limit_light_data_takes_a_fast_rung_and_steep_data_the_program(
    solve_paths,
):
    """The refusal only acts over the size limit: below it, the light dataset of a loss of
    smooth and piecewise terms releases on the proximal Newton rung (every example certified
    C-Lipschitz, so ``f_C = f``) and its steep neighbour on the conic program."""
    paths = []
    for X, Y in _neighbours()[::2]:  # the dataset and its steep neighbour
        w, x, y, losses = _losses()
        problem = dpcvx.Problem(losses["logistic + abs"], w, {x: X, y: Y}, [cp.norm(w) <= 1])
        mech = dpcvx.OutputPerturbation(lipschitz=C, regularization=LAM)
        start = len(solve_paths)
        result = problem.solve_private(mech, epsilon=1.0, rng=0)
        assert np.all(np.isfinite(result.w))
        paths.append(solve_paths[start:])
    assert paths[0] == [solve_module.MIXED]
    assert paths[1] and paths[1][0] not in (solve_module.MIXED, solve_module.ARROWHEAD)


def test_the_mixed_rung_certifies_the_extension_of_light_data():
    """Under an extension with every example C-Lipschitz, the proximal Newton rung's
    certificate is the extension's, and it brackets the plain solve's optimum (``f_C = f``
    there)."""
    X, Y = _neighbours()[0]
    w, x, y, losses = _losses()
    problem = dpcvx.Problem(losses["abs + square"], w, {x: X, y: 0.3 * Y}, [cp.norm(w) <= 1])
    decl = problem._decl
    template, block = problem._compiled(C)
    cert = solve_module.certified_solve(
        decl, template, block, lam=LAM, w0=np.zeros(D), accuracy=1e-9, extension=C
    )
    assert cert.solver_stats["solver"] == solve_module.MIXED
    plain = problem.solve(regularization=LAM, accuracy=1e-10)
    assert cert.lower <= plain.upper + 1e-12 and plain.lower <= cert.upper + 1e-12


@pytest.mark.parametrize("name", ["hinge", "logistic", "logistic 0/1 labels", "hinge + abs"])
def test_writes_extension_is_the_loss_s_form(name):
    """The decision reads the loss's form only (on public probe data): the same on a dataset
    and on its neighbours with a row a thousand times longer and one of norm 1e160 (whose
    squared norm overflows: on the data itself the logistic extension's knots would meet and
    its model be refused), true for the losses whose extension a fast rung writes."""
    answers = set()
    X0, Y0 = _neighbours()[0]
    huge = X0.copy()
    huge[0] *= 1e160
    for X, Y in [*_neighbours()[::3], (huge, Y0)]:
        w, x, y, losses = _losses()
        problem = dpcvx.Problem(losses[name], w, {x: X, y: Y}, [cp.norm(w) <= 1])
        answers.add(writes_extension(problem._decl, lam=LAM, C=C, w_domain=None))
    assert answers == {name in WRITTEN}


def test_tilted_erm_refuses_every_dataset_alike(monkeypatch):
    """Tilted output perturbation over the size limit: the light dataset and its steep
    neighbour are refused alike before anything is spent; without that check (the
    mechanism's preflight removed) the solve itself refuses them alike, before its smooth
    path runs."""
    monkeypatch.setattr(solve_module, "MAX_PROGRAM_NNZ", 100)
    for preflight in (True, False):
        if not preflight:
            monkeypatch.delattr(dpcvx.TiltedOutputPerturbation, "preflight")
        outcomes = []
        for X, Y in _neighbours()[::2]:
            w, x, y, losses = _losses()
            loss = losses["logistic + square"]
            problem = dpcvx.Problem(loss, w, {x: X, y: Y}, [cp.norm(w) <= 1])
            mech = dpcvx.TiltedOutputPerturbation(lipschitz=C, regularization=LAM, tilt=1.0)
            accountant = dpcvx.Accountant(epsilon=1.0)
            outcomes.append(_outcome(problem, mech, accountant))
            assert (accountant.spent.epsilon == 0.0) == preflight
        kind = "InvalidParameterError" if preflight else "CertificationError"
        assert len(set(outcomes)) == 1 and outcomes[0][0] == kind, outcomes


@pytest.mark.parametrize("limit", [100, None])
def test_a_one_sided_piecewise_loss_ends_alike_on_rows_of_any_length(limit, monkeypatch):
    """``cp.pos(x @ w) + x @ w`` rises along ``x`` with slopes ``||x||`` and ``2 ||x||``: a row
    of norm 8 has both beyond C = 3 on one side, and its extension's relaxation is unbounded.
    Whether the arrowhead rung writes the extension is decided from that form (it does not),
    so over the size limit the rows of norm one and their neighbour with the long row are
    refused alike (before: released, and aborted), and below it both release."""
    if limit is not None:
        monkeypatch.setattr(solve_module, "MAX_PROGRAM_NNZ", limit)
    X = _neighbours()[0][0]
    outcomes = []
    for scale in (1.0, 8.0):
        data = X.copy()
        data[0] *= scale
        w, x = cp.Variable(D), cp.Parameter(D)
        problem = dpcvx.Problem(cp.pos(x @ w) + x @ w, w, {x: data}, [cp.norm(w) <= 1])
        mech = dpcvx.OutputPerturbation(lipschitz=3.0, regularization=LAM)
        outcomes.append(_outcome(problem, mech, dpcvx.Accountant(epsilon=1.0))[0])
    expected = "released" if limit is None else "InvalidParameterError"
    assert outcomes == [expected, expected]


@pytest.mark.parametrize("name", ["logistic", "logistic + square", "hinge"])
def test_double_output_perturbation_refuses_before_either_stage(name, monkeypatch):
    """Double output perturbation's second stage solves over W intersected with a public
    ball, which the smooth rung does not take: for a smooth loss past the size limit that
    solve is refused whenever it is reached, and whether it is reached depends on the first
    stage's point and noise (its candidate check). Both stages are asked before the budget
    is reserved, so every dataset is refused alike, nothing spent; a hinge loss, whose
    localized extension the arrowhead rung writes, releases. OutputPertLocalize (the first
    stage alone) refuses only the loss no rung extends over W."""
    monkeypatch.setattr(solve_module, "MAX_PROGRAM_NNZ", 100)
    for mech in (
        dpcvx.DoubleOutputPerturbation(C=C, regularization=LAM),
        dpcvx.OutputPertLocalize(C=C, regularization=LAM),
    ):
        outcomes = []
        for X, Y in _neighbours()[::2]:
            w, x, y, losses = _losses()
            problem = dpcvx.Problem(losses[name], w, {x: X, y: Y}, [cp.norm(w) <= 1])
            accountant = dpcvx.Accountant(epsilon=1.0)
            outcome = _outcome(problem, mech, accountant)
            if outcome[0] != "released":
                assert outcome[0] == "InvalidParameterError" and accountant.spent.epsilon == 0
            outcomes.append(outcome)
        assert len(set(outcomes)) == 1, outcomes
        written_over_w = name != "logistic + square"
        double = isinstance(mech, dpcvx.DoubleOutputPerturbation)
        expected = name == "hinge" or (not double and written_over_w)
        assert (outcomes[0][0] == "released") == expected, (mech, outcomes)
