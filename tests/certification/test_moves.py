"""The moves of far arguments next to the domain (``certification/_moves.py``): the arrowhead
method's model and the conic program put a moved argument at its target to rounding of the
target's size, not of the label's, so a label of 1e17 in an absolute loss (whose rounding
there, 16, exceeds the margin of 1 that keeps a moved argument on its side of the kink) is
certified to the private targets on both paths. Controls: without the arrowhead model's move,
or with the shift ``target - V`` added to the offset as before, the same solves miss."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
import dpcvx.certification._moves as moves_module
import dpcvx.certification.solve as solve_module
from dpcvx.certification.arrowhead import piecewise_model, recentered_pieces

N, D, LAM, TARGET = 60, 3, 0.05, 3e-7


def _problem(label, loss=cp.abs):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    Y = 0.3 * X @ rng.normal(size=D) + 0.3 * rng.normal(size=N)
    Y[0] = label
    w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
    return dpcvx.Problem(loss(x @ w - y), w, {x: X, y: Y}, [cp.norm(w, 2) <= 1])


@pytest.mark.parametrize("label", [1e17, -1e17, 1e40, -1e99])
def test_the_arrowhead_model_puts_a_far_argument_at_its_target(label):
    """The absolute loss's far example: both pieces (``E``, ``-E``) move; at the ball's center
    the winner sits at its spread plus one and the loser below it, to the rounding of those
    small numbers (the ball is centred: ``a^T c`` is zero)."""
    problem = _problem(label)
    model = piecewise_model(problem.declaration)
    moved = recentered_pieces(model, np.zeros(D), 1.0)
    (term,) = moved.terms
    (before,) = model.terms
    values = np.array([b[0] for b in term.b])  # example 0's pieces at the center
    norm = float(np.linalg.norm(term.base[0]))
    winner = int(np.argmax(values))
    assert values[winner] == pytest.approx(norm + 1.0, rel=1e-15, abs=1e-15)
    assert values[1 - winner] <= values[winner] - 2 * norm - 1.0 + 1e-15
    # the other examples keep their pieces
    for b_new, b_old in zip(term.b, before.b):
        np.testing.assert_array_equal(b_new[1:], b_old[1:])


@pytest.mark.parametrize("label", [1e17, -1e30])
def test_a_far_label_is_certified_on_the_arrowhead_path(label):
    sol = _problem(label).solve(regularization=LAM, accuracy=TARGET)
    assert sol.gap <= TARGET
    assert sol.solver_stats["solver"] == solve_module.ARROWHEAD


def test_negative_control_the_unmoved_arrowhead_model_misses(monkeypatch):
    """Without the move the arrowhead method runs on values of 1e17 and misses (5e-3 was its
    gap); the conic rungs, whose program still moves the argument, then certify."""
    monkeypatch.setattr(solve_module, "recentered_pieces", lambda model, center, radius: model)
    sol = _problem(1e17).solve(regularization=LAM, accuracy=TARGET)
    attempts = sol.solver_stats["attempts"]
    assert attempts[0]["solver"] == solve_module.ARROWHEAD and attempts[0]["gap"] > TARGET


def test_negative_control_the_shift_rounds_at_the_label(monkeypatch):
    """The conic program alone (the arrowhead path withheld): with the move's offset computed
    as ``b + (target - V)``, which rounds at the label's size, every conic rung misses at a
    label of 1e17; with the offset from the target, the first certifies."""
    monkeypatch.setattr(solve_module, "pieces_rung_applies", lambda *args, **kwargs: False)
    sol = _problem(1e17).solve(regularization=LAM, accuracy=TARGET)
    assert sol.gap <= TARGET and sol.solver_stats["refinement_step"] == 0

    def shifted(b, off, jc, target):
        with np.errstate(invalid="ignore"):
            return np.where(np.isnan(target), b, b + (target - (off + jc)))

    monkeypatch.setattr(solve_module, "moved_offsets", shifted)
    with pytest.raises(dpcvx.CertificationError):
        _problem(1e17).solve(regularization=LAM, accuracy=TARGET)


def test_moved_offsets_drop_the_rounding_of_a_huge_offset():
    """Where the program's offset differs from the declaration's by their rounding (an ulp
    of 1e17 is 16), the move lands on its target; a larger difference is kept; unmoved
    offsets are untouched (NaN targets)."""
    b = np.array([1e17 + 16.0, 5.0, -3.0, 1e5 + 1e3])
    off = np.array([1e17, 5.0, -3.0, 1e5])
    jc = np.array([0.25, 0.0, 1.0, 0.5])
    target = np.array([2.0, np.nan, -4.0, 1.0])
    out = moves_module.moved_offsets(b, off, jc, target)
    np.testing.assert_array_equal(out, [1.75, 5.0, -5.0, 1e3 + 0.5])


@pytest.mark.parametrize("label", [-1e30, 1e99])
def test_a_stamped_offset_that_rounds_apart_from_the_jets_still_lands(label):
    """``huber(3 (y - x^T w) + 0.1, 1) + |x^T w - y|``: the program stamps the Huber
    argument's offset another way than its jet, an ulp of the label apart (5.6e14 at a label
    of -1e30); kept, it put the moved argument off its target and the solves missed (a gap
    of 2.4; a review's case)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    Y = X @ np.array([0.3, -0.2, 0.1]) + 0.1 * rng.normal(size=40)
    Y[0] = label
    w, x, y = cp.Variable(3), cp.Parameter(3), cp.Parameter()
    loss = cp.huber(3 * (y - x @ w) + 0.1, 1.0) + cp.abs(x @ w - y)
    problem = dpcvx.Problem(loss, w, {x: X, y: Y}, [cp.norm(w, 2) <= 1])
    assert problem.solve(regularization=LAM, accuracy=TARGET).gap <= TARGET


#: a late phase's block of localized double output perturbation (a review's dataset: a
#: logistic loss with an affine term, an off-centre ball, four examples)
_BLOCK_X = np.array(
    [
        [0.04254473, 0.57005294, 0.03187478, 1.07053099],
        [0.76187121, -1.15917971, 0.03232611, 0.63505738],
        [0.81346299, -0.87321486, 0.09615722, -0.3636597],
        [0.49906963, -1.68656887, -0.77225367, -0.42073966],
    ]
)
_BLOCK_Y = -np.array([0.6535886, -1.60651028, -0.17391669, -0.27279056])
_BLOCK_CENTER = np.array([0.65061463, 1.83680973, -0.2147896, 0.85087246])
_BLOCK_W0 = np.array([0.74460275, 1.70566668, -0.13233693, 0.80235074])


def _strongly_regularized():
    """The block's extension problem (on the conic path: its affine term keeps every slope
    above zero; the tests below also fix ``parallel_affine`` to False)."""
    w, x, y = cp.Variable(4), cp.Parameter(4), cp.Parameter()
    loss = cp.logistic(x @ w - y) + 0.2 * (x @ w - y)
    problem = dpcvx.Problem(
        loss, w, {x: _BLOCK_X, y: _BLOCK_Y}, [cp.norm(w - _BLOCK_CENTER, 2) <= 1]
    )
    return problem.lipschitz_extension(1.0)


def test_a_strongly_regularized_block_is_certified_on_scaled_variables(monkeypatch):
    """The block's extension solve at lam = 2.7e5 to 3e-8 (its release's target): the conic
    solvers see ``w = w0 + u / sqrt(lam)`` and certify it far below the target."""
    monkeypatch.setattr(solve_module, "parallel_affine", lambda decl: False)
    sol = _strongly_regularized().solve(
        regularization=270101.919408819, center=_BLOCK_W0, accuracy=3e-8
    )
    assert sol.gap <= 3e-8


def test_the_block_certifies_as_written():
    """Its loss, ``logistic(r) + 0.2 r``, is one atom plus an affine term along its direction
    that keeps every slope above zero, so its extension is not on Newton's path
    (``parallel_affine`` is false for that form): as written it takes the conic program,
    which certifies it below the target."""
    sol = _strongly_regularized().solve(
        regularization=270101.919408819, center=_BLOCK_W0, accuracy=3e-8
    )
    assert sol.solver_stats["solver"] not in solve_module.SMOOTH_METHODS and sol.gap <= 3e-8


def test_negative_control_on_w_itself_the_block_misses(monkeypatch):
    """Control: on ``w`` itself every conic rung misses (3.6e-8 and more against 3e-8), and
    the release of localized double output perturbation on that dataset aborted."""
    monkeypatch.setattr(solve_module, "SCALED_LAM", float("inf"))
    monkeypatch.setattr(solve_module, "parallel_affine", lambda decl: False)
    with pytest.raises(dpcvx.CertificationError):
        _strongly_regularized().solve(
            regularization=270101.919408819, center=_BLOCK_W0, accuracy=3e-8
        )
