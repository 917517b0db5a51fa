"""The stamped program is the same problem, compiled once and assembled without per-example
Python work (dpcvx.compilation.template, .stamp, .solvers).

The reference is a plain whole-dataset CVXPY problem (the n losses written with the data as
constants) solved by Clarabel; dpcvx's stamped program is solved by calling each solver directly.
"""

from __future__ import annotations

import time

import cvxpy as cp
import numpy as np
import pytest
from catalogue import CATALOGUE

import dpcvx
from dpcvx.compilation import template as template_mod
from dpcvx.compilation.solvers import solve_program
from dpcvx.compilation.stamp import stamp
from dpcvx.compilation.template import compile_domain, compile_template
from dpcvx.modeling import _expressions

D, N, K = 3, 7, 2


# name -> (per-example loss builder, whole-dataset builder for example i, marks)
LOSSES = {
    "hinge": (
        lambda w, p: cp.pos(1 - p["y"] * (p["x"] @ w)),
        lambda w, z, i: cp.pos(1 - z["y"][i] * (z["x"][i] @ w)),
    ),
    "logistic": (
        lambda w, p: cp.logistic(-p["y"] * (p["x"] @ w)),
        lambda w, z, i: cp.logistic(-z["y"][i] * (z["x"][i] @ w)),
    ),
    "huber": (
        lambda w, p: cp.huber(p["x"] @ w - p["t"], 0.5),
        lambda w, z, i: cp.huber(z["x"][i] @ w - z["t"][i], 0.5),
    ),
    "square": (
        lambda w, p: cp.square(p["x"] @ w - p["t"]),
        lambda w, z, i: cp.square(z["x"][i] @ w - z["t"][i]),
    ),
    "exp": (
        lambda w, p: cp.exp(p["x"] @ w - p["t"]),
        lambda w, z, i: cp.exp(z["x"][i] @ w - z["t"][i]),
    ),
    "maximum3": (
        lambda w, p: cp.maximum(p["x"] @ w, p["t"], -(p["x"] @ w) - 1),
        lambda w, z, i: cp.maximum(z["x"][i] @ w, z["t"][i], -(z["x"][i] @ w) - 1),
    ),
    "neg-plus-pos": (
        lambda w, p: cp.neg(p["x"] @ w - p["t"]) + 2 * cp.pos(p["x"] @ w - 1),
        lambda w, z, i: cp.neg(z["x"][i] @ w - z["t"][i]) + 2 * cp.pos(z["x"][i] @ w - 1),
    ),
    "affine-plus": (
        lambda w, p: cp.abs(p["x"] @ w - p["t"]) / 4 + 0.3 * (p["x"] @ w) + p["t"],
        lambda w, z, i: cp.abs(z["x"][i] @ w - z["t"][i]) / 4 + 0.3 * (z["x"][i] @ w) + z["t"][i],
    ),
    "norm2-matrix": (
        lambda w, p: cp.norm(p["A"] @ w - p["b"], 2),
        lambda w, z, i: cp.norm(z["A"][i] @ w - z["b"][i], 2),
    ),
    "norm-inf-matrix": (
        lambda w, p: cp.norm(p["A"] @ w - p["b"], "inf"),
        lambda w, z, i: cp.norm(z["A"][i] @ w - z["b"][i], "inf"),
    ),
    "norm1-distance": (
        lambda w, p: cp.norm(w - p["x"], 1),
        lambda w, z, i: cp.norm(w - z["x"][i], 1),
    ),
    "max-matrix": (
        lambda w, p: cp.max(p["A"] @ w - p["b"]),
        lambda w, z, i: cp.max(z["A"][i] @ w - z["b"][i]),
    ),
    "log-sum-exp": (
        lambda w, p: cp.log_sum_exp(cp.hstack([p["x"] @ w, -(p["x"] @ w), p["t"]])),
        lambda w, z, i: cp.log_sum_exp(cp.hstack([z["x"][i] @ w, -(z["x"][i] @ w), z["t"][i]])),
    ),
    "sum-squares": (
        lambda w, p: cp.sum_squares(p["A"] @ w - p["b"]),
        lambda w, z, i: cp.sum_squares(z["A"][i] @ w - z["b"][i]),
    ),
    "quad-over-lin": (
        lambda w, p: cp.quad_over_lin(p["A"] @ w - p["b"], 3.0),
        lambda w, z, i: cp.quad_over_lin(z["A"][i] @ w - z["b"][i], 3.0),
    ),
    "sum-maximum": (
        lambda w, p: cp.sum(cp.maximum(p["A"] @ w, -p["b"])),
        lambda w, z, i: cp.sum(cp.maximum(z["A"][i] @ w, -z["b"][i])),
    ),
    "sum-pos": (
        lambda w, p: cp.sum(cp.pos(p["A"] @ w - p["b"])),
        lambda w, z, i: cp.sum(cp.pos(z["A"][i] @ w - z["b"][i])),
    ),
    "generic-squared-hinge": (
        lambda w, p: cp.square(cp.pos(1 - p["y"] * (p["x"] @ w))),
        lambda w, z, i: cp.square(cp.pos(1 - z["y"][i] * (z["x"][i] @ w))),
    ),
    "generic-pnorm3": (
        lambda w, p: cp.pnorm(w - p["x"], 3),
        lambda w, z, i: cp.pnorm(w - z["x"][i], 3),
    ),
    "sum-abs": (
        lambda w, p: cp.sum(cp.abs(p["A"] @ w - p["b"])),
        lambda w, z, i: cp.sum(cp.abs(z["A"][i] @ w - z["b"][i])),
    ),
    "sum-square": (
        lambda w, p: cp.sum(cp.square(w - p["x"])),
        lambda w, z, i: cp.sum(cp.square(w - z["x"][i])),
    ),
    "sum-huber": (
        lambda w, p: cp.sum(cp.huber(p["A"] @ w - p["b"], 0.5)),
        lambda w, z, i: cp.sum(cp.huber(z["A"][i] @ w - z["b"][i], 0.5)),
    ),
    "sum-logistic": (
        lambda w, p: cp.sum(cp.logistic(p["A"] @ w - p["b"])),
        lambda w, z, i: cp.sum(cp.logistic(z["A"][i] @ w - z["b"][i])),
    ),
    "sum-of-scalar-abs": (
        lambda w, p: cp.sum(cp.abs(p["x"] @ w - p["t"])),
        lambda w, z, i: cp.abs(z["x"][i] @ w - z["t"][i]),
    ),
}

DOMAINS = {
    "ball": lambda w: dpcvx.domains.l2_ball(w, 1.5, center=[0.1, 0.0, -0.1]),
    "box": lambda w: dpcvx.domains.box(w, -0.4, 0.6),
    "simplex": lambda w: dpcvx.domains.simplex(w, 1.0),
    "polytope": lambda w: dpcvx.domains.polytope(
        w, np.vstack([np.eye(D), -np.eye(D), np.ones((1, D))]), np.r_[np.ones(2 * D), 1.0]
    ),
    "ellipsoid": lambda w: dpcvx.domains.ellipsoid(w, np.diag([1.0, 2.0, 0.5])),
}


def _setup(seed: int = 0, n: int = N):
    rng = np.random.default_rng(seed)
    w = cp.Variable(D, name="w")
    params = {
        "x": cp.Parameter(D, name="x"),
        "y": cp.Parameter(name="y"),
        "t": cp.Parameter(name="t"),
        "A": cp.Parameter((K, D), name="A"),
        "b": cp.Parameter(K, name="b"),
    }
    data = {
        "x": rng.normal(size=(n, D)),
        "y": rng.choice([-1.0, 1.0], size=n),
        "t": rng.normal(size=n),
        "A": rng.normal(size=(n, K, D)),
        "b": rng.normal(size=(n, K)),
    }
    return w, params, data


def _problem(loss_name, domain_name, seed=0, n=N):
    w, params, data = _setup(seed, n)
    loss = LOSSES[loss_name][0](w, params)
    used = {
        params[k]: v for k, v in data.items() if params[k].id in {q.id for q in loss.parameters()}
    }
    return dpcvx.Problem(loss, w, data=used, domain=DOMAINS[domain_name](w)), data


def _stamped(problem, lam, w0):
    decl = problem.declaration
    tpl = compile_template(decl)
    block = compile_domain(decl)
    theta = tpl.theta(decl.derived_values(), decl.n)
    return tpl, block, stamp(tpl, block, theta, d=decl.d, lam=lam, w0=w0)


def _value(prog, x):
    return float(0.5 * x @ (prog.P @ x) + prog.q @ x + prog.q0)


def _reference(loss_name, domain_name, data, lam, w0, n=N):
    w = cp.Variable(D)
    whole = sum(LOSSES[loss_name][1](w, data, i) for i in range(n)) / n
    prob = cp.Problem(
        cp.Minimize(whole + lam / 2 * cp.sum_squares(w - w0)), DOMAINS[domain_name](w)
    )
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert prob.status == cp.OPTIMAL
    return prob.value, w.value


def _cases():
    out = []
    for name, spec in LOSSES.items():
        marks = list(spec[2:])
        domains = ["ball", "polytope"] if name not in ("hinge", "logistic") else list(DOMAINS)
        for dom in domains:
            for lam in (0.0, 0.5):
                out.append(pytest.param(name, dom, lam, marks=marks, id=f"{name}-{dom}-lam{lam:g}"))
    return out


@pytest.mark.parametrize("loss_name, domain_name, lam", _cases())
def test_stamped_program_has_the_plain_cvxpy_optimum(loss_name, domain_name, lam):
    problem, data = _problem(loss_name, domain_name)
    w0 = np.array([0.3, -0.2, 0.1])
    _, _, prog = _stamped(problem, lam, w0)
    raw = solve_program(prog, "CLARABEL", tight=True)
    ref_value, ref_w = _reference(loss_name, domain_name, data, lam, w0)
    assert _value(prog, raw.x) == pytest.approx(ref_value, abs=1e-7 * (1 + abs(ref_value)))
    if lam > 0:
        np.testing.assert_allclose(raw.x[:D], ref_w, atol=1e-5)


@pytest.mark.parametrize("solver", ["CLARABEL", "ECOS", "SCS"])
@pytest.mark.parametrize(
    "loss_name", ["logistic", "norm2-matrix", "maximum3", "huber", "log-sum-exp"]
)
def test_every_solver_solves_the_stamped_program(loss_name, solver):
    """Same program through each solver's own interface (ECOS gets the quadratic as an SOC,
    exponential cones reordered)."""
    for domain_name, lam in (("box", 0.5), ("simplex", 0.0)):
        if loss_name not in ("hinge", "logistic") and domain_name == "simplex":
            domain_name = "ball"
        problem, data = _problem(loss_name, domain_name, seed=1)
        w0 = np.array([-0.1, 0.2, 0.0])
        _, _, prog = _stamped(problem, lam, w0)
        raw = solve_program(prog, solver, tight=True)
        ref_value, _ = _reference(loss_name, domain_name, data, lam, w0)
        assert _value(prog, raw.x) == pytest.approx(ref_value, abs=1e-6 * (1 + abs(ref_value)))
        assert raw.stats["solver"] == solver
        assert raw.z.shape == (prog.A.shape[0],)


@pytest.mark.parametrize(
    "loss_name", ["hinge", "norm2-matrix", "log-sum-exp", "sum-maximum", "generic-squared-hinge"]
)
def test_block_structure(loss_name):
    """Columns are [w, domain auxiliaries, aux_1, ..., aux_n]; every row touches the
    auxiliaries of at most one example, and each example has the same number of rows; the
    quadratic is (lam/2)||w - w0||^2 on w only."""
    problem, _ = _problem(loss_name, "polytope", n=9)
    lam, w0 = 0.7, np.array([0.5, -1.0, 2.0])
    tpl, block, prog = _stamped(problem, lam, w0)
    n = 9
    k = tpl.n_aux
    a0 = block.n_cols - int(np.sum(block.w_cols >= 0))
    assert prog.A.shape == (prog.cones.rows, D + a0 + n * k)
    assert prog.b.shape == (prog.cones.rows,)
    assert prog.cones.rows == block.cones.rows + n * tpl.cones.rows
    A = prog.A.tocsr()
    rows_per_example = np.zeros(n, dtype=int)
    for r in range(A.shape[0]):
        cols = A.indices[A.indptr[r] : A.indptr[r + 1]]
        aux = cols[cols >= D + a0]
        examples = set(((aux - D - a0) // k).tolist())
        assert len(examples) <= 1, (r, examples)
        for e in examples:
            rows_per_example[e] += 1
    assert len(set(rows_per_example.tolist())) == 1
    P = prog.P.toarray()
    np.testing.assert_array_equal(P[:D, :D], lam * np.eye(D))
    assert np.count_nonzero(P) == D


def test_theta_flattens_matrix_parameters_in_fortran_order():
    problem, data = _problem("norm2-matrix", "ball")
    decl = problem.declaration
    tpl = compile_template(decl)
    theta = tpl.theta(decl.derived_values(), decl.n)
    assert theta.shape[0] == N
    np.testing.assert_array_equal(theta[:, 0], 1.0)
    blocks = []
    for _, offset, shape in tpl.param_layout:
        size = int(np.prod(shape)) if shape else 1
        blocks.append(theta[:, 1 + offset : 1 + offset + size])
    flat_A = np.stack([a.flatten(order="F") for a in data["A"]])
    # the matrix data appears (possibly negated or as part of a derived parameter) verbatim
    assert any(np.allclose(b, flat_A) or np.allclose(b, -flat_A) for b in blocks)


# ------------------------------------------------------------------------------ compile once


def test_compile_template_runs_once_per_problem(monkeypatch):
    import dpcvx.compilation.template as template_mod
    import dpcvx.problem as problem_mod

    calls = {"checked": 0, "compiled": 0, "domain": 0}
    real_c, real_f = template_mod.canonical_template, template_mod.finish_template
    real_d = problem_mod.compile_domain

    def count_c(decl, extension=None):
        calls["checked"] += 1
        return real_c(decl, extension)

    def count_f(canonical):
        calls["compiled"] += 1
        return real_f(canonical)

    def count_d(decl):
        calls["domain"] += 1
        return real_d(decl)

    monkeypatch.setattr(template_mod, "canonical_template", count_c)
    monkeypatch.setattr(template_mod, "finish_template", count_f)
    monkeypatch.setattr(problem_mod, "compile_domain", count_d)
    ref = next(r for r in CATALOGUE if r.name == "logistic/l2_ball(d=3,r=1)")
    problem, _, _ = ref.problem()
    problem.solve(regularization=0.1)
    # Newton's path needs neither a template nor the domain's block (the domain's compile was
    # 6 ms of 19 for the squared loss at n = 1e5, d = 20)
    assert calls == {"checked": 0, "compiled": 0, "domain": 0}
    problem.solve(regularization=0.5, center=np.ones(3), solver="ECOS")
    problem.solve(regularization=0.0, solver="SCS")
    problem.solve(regularization=0.2, accuracy=1e-6)
    assert calls == {"checked": 1, "compiled": 1, "domain": 1}  # the conic solves', once
    mech = dpcvx.OutputPerturbation(lipschitz=3.0, regularization=0.1)
    problem.solve_private(mech, epsilon=1.0, rng=0)
    problem.solve_private(mech, epsilon=1.0, rng=1)
    # the L-Lipschitz extension's template that enforces the claim: checked once, before
    # anything is spent, whatever the data (never a data-dependent step); compiled only by
    # a solve that reaches the conic program (Newton's path certifies these)
    assert calls == {"checked": 2, "compiled": 1, "domain": 1}
    assert not problem._templates[3.0].compiled


def test_a_release_refuses_a_loss_it_cannot_compile_before_spending_anything(monkeypatch):
    """The check of a release's template (canonicalization: its cones) runs before the
    budget is reserved, though the compile is left to the first conic solve: a loss the check
    rejects (here every loss, by a patched check; for real, one whose atoms need
    semidefinite cones) is refused with nothing spent."""
    import dpcvx.compilation.template as template_mod

    def reject(decl, extension=None):
        raise dpcvx.ModelingError("The loss uses an atom that needs semidefinite cones.")

    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(50, 3)), rng.normal(size=50)
    w, x, y = cp.Variable(3), cp.Parameter(3), cp.Parameter()
    problem = dpcvx.Problem(cp.abs(x @ w - y), w, {x: X, y: Y}, [cp.norm(w) <= 1])
    monkeypatch.setattr(template_mod, "canonical_template", reject)
    acct = dpcvx.Accountant(1.0)
    with pytest.raises(dpcvx.ModelingError, match="semidefinite"):
        problem.solve_private(
            dpcvx.OutputPerturbation(lipschitz=1.0, regularization=0.1),
            epsilon=1.0,
            accountant=acct,
        )
    assert acct.spent.epsilon == 0.0
    monkeypatch.undo()  # the same release, checked for real, goes through
    problem.solve_private(
        dpcvx.OutputPerturbation(lipschitz=1.0, regularization=0.1), epsilon=1.0, accountant=acct
    )
    assert acct.spent.epsilon == 1.0


def test_a_large_template_is_compiled_when_it_is_checked(monkeypatch):
    """A compile whose maps are large (here a 40 x 40 data matrix per example: 3.7 million
    entries) runs before the budget is reserved: a compile that runs out of memory is refused
    with nothing spent, whatever the data, not met only by the datasets whose solves reach the
    conic rung. A small one waits for its first use."""
    import dpcvx.compilation.template as template_mod

    rng = np.random.default_rng(0)
    m = d = 40
    w, A, b = cp.Variable(d), cp.Parameter((m, d)), cp.Parameter(m)
    data = {A: rng.normal(size=(20, m, d)) / m, b: 0.1 * rng.normal(size=(20, m))}
    problem = dpcvx.Problem(cp.sum(cp.logistic(A @ w - b)), w, data, [cp.norm(w) <= 1])
    assert template_mod.canonical_template(problem.declaration).probe_entries > (
        template_mod.LAZY_ENTRIES
    )

    def out_of_memory(canonical):
        raise MemoryError("a template too large for the machine")

    monkeypatch.setattr(template_mod, "finish_template", out_of_memory)
    acct = dpcvx.Accountant(1.0)
    with pytest.raises(MemoryError):
        problem.solve_private(
            dpcvx.OutputPerturbation(lipschitz=5.0, regularization=0.1),
            epsilon=1.0,
            accountant=acct,
        )
    assert acct.spent.epsilon == 0.0
    monkeypatch.undo()
    # a plain solve that needs the large template compiles it on its first use, once
    lazy, _ = problem._lazy(None)
    assert lazy() is lazy() and lazy.compiled
    # a small one (a logistic loss at d = 3) is only checked
    ref = next(r for r in CATALOGUE if r.name == "logistic/l2_ball(d=3,r=1)")
    small, _, _ = ref.problem()
    lazy, _ = small._lazy(3.0)
    assert not lazy.check().compiled


def _count_problem_inits(monkeypatch):
    counter = {"n": 0}
    real = cp.Problem.__init__

    def counting(self, *args, **kwargs):
        counter["n"] += 1
        real(self, *args, **kwargs)

    monkeypatch.setattr(cp.Problem, "__init__", counting)
    return counter


def _hinge_problem(n, seed=0):
    rng = np.random.default_rng(seed)
    w = cp.Variable(5)
    x, y = cp.Parameter(5), cp.Parameter()
    X = rng.normal(size=(n, 5))
    Y = np.sign(X @ rng.normal(size=5) + 0.3 * rng.normal(size=n))
    return dpcvx.Problem(
        cp.pos(1 - y * (x @ w)), w, data={x: X, y: Y}, domain=dpcvx.domains.l2_ball(w, 1.0)
    )


def test_compilation_work_does_not_grow_with_n(monkeypatch):
    """compile_template builds the same small number of CVXPY problems (CVXPY's reductions
    create a few internally) for n = 5 and n = 20000: it compiles one example, not the
    dataset."""
    counts = []
    for n in (5, 20000):
        problem = _hinge_problem(n)
        counter = _count_problem_inits(monkeypatch)
        compile_template(problem.declaration)
        compile_domain(problem.declaration)
        counts.append(counter["n"])
        monkeypatch.undo()
    assert counts[0] == counts[1] <= 10


def test_stamp_is_vectorized(monkeypatch):
    """Stamping 20000 examples builds no CVXPY problem at all and finishes quickly."""
    problem = _hinge_problem(20000)
    decl = problem.declaration
    tpl = compile_template(decl)
    block = compile_domain(decl)
    theta = tpl.theta(decl.derived_values(), decl.n)
    counter = _count_problem_inits(monkeypatch)
    start = time.perf_counter()
    prog = stamp(tpl, block, theta, d=decl.d, lam=0.1, w0=np.zeros(decl.d))
    elapsed = time.perf_counter() - start
    assert counter["n"] == 0
    assert prog.n == 20000
    assert prog.A.shape[0] == block.cones.rows + 20000 * tpl.cones.rows
    assert elapsed < 10.0  # about 0.2 s measured; a per-example loop would take minutes


def test_whole_solve_has_no_per_example_python_work(monkeypatch):
    """For structured losses neither evaluation nor compilation falls back to per-example
    calls of an atom's numeric (the only per-example loop in the evaluator), and a full
    certified solve builds no CVXPY problem beyond the one-example template."""

    def forbidden(expr, vals, n):
        if n > 1 and any(v.shape[0] > 1 for v in vals):
            raise AssertionError(f"per-example fallback used for {type(expr).__name__}")
        return real(expr, vals, n)

    real = _expressions._per_example
    monkeypatch.setattr(_expressions, "_per_example", forbidden)
    for ref in CATALOGUE:
        if ref.loss.generic or ref.method != "clarabel":
            continue
        if ref.domain.name.split("(")[0] not in ("l2_ball", "box"):
            continue
        problem, _, _ = ref.problem()
        problem.solve(regularization=ref.regularization, center=ref.center)
    counts = []
    for n in (20, 3000):
        problem = _hinge_problem(n)
        counter = _count_problem_inits(monkeypatch)
        problem.solve(regularization=0.1)
        counts.append(counter["n"])
    assert counts[0] == counts[1] <= 10


def test_template_shapes_are_consistent():
    problem, _ = _problem("norm2-matrix", "ball")
    decl = problem.declaration
    tpl = compile_template(decl)
    assert tpl.A_map.shape[0] == tpl.b_map.shape[0] == tpl.c_map.shape[0] == len(tpl.c0_map)
    assert tpl.A_map.shape[1] == tpl.A_rows.size == tpl.A_cols.size
    assert tpl.b_map.shape[1] == tpl.cones.rows
    assert isinstance(tpl.cones, template_mod.ConeLayout)
