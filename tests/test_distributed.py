"""DaskProblem: rows partitioned over a cluster's workers, Newton's method on reduced sums and
dpcvx's certificate as sums over partitions. Checked against the in-process Problem on the same
data (the certificate must bracket the same optimum), with the arrays never computed on the
client, and private releases that enforce their Lipschitz claim."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.errors import InvalidParameterError, ModelingError

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

N, D, CHUNK, LAM = 3000, 5, 700, 1e-2


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    )
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def _arrays(seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D)) * scale
    Y = np.sign(X @ rng.normal(size=D) + 0.5 * rng.normal(size=N))
    return X, Y


def _declare(kind):
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    loss = {
        "logistic": cp.logistic(-y * (x @ w)),
        "huber": cp.huber(x @ w - y, 0.5),
        "squared": cp.square(x @ w - y),
        "squared hinge": cp.square(cp.pos(1 - y * (x @ w))),
        "cubed hinge": cp.power(cp.pos(1 - y * (x @ w)), 3),
        "one-sided huber": cp.huber(cp.pos(1 - y * (x @ w)), 0.5),
    }[kind]
    return loss, w, x, y


DOMAINS = {
    "inactive ball": lambda w: [cp.norm(w, 2) <= 10],
    "active ball": lambda w: [cp.norm(w, 2) <= 0.05],
    "active box": lambda w: [w >= -0.02, w <= 0.03],
}


@pytest.mark.parametrize("domain", sorted(DOMAINS))
@pytest.mark.parametrize(
    "kind", ["logistic", "huber", "squared", "squared hinge", "cubed hinge", "one-sided huber"]
)
def test_the_distributed_certificate_brackets_the_in_process_optimum(client, kind, domain):
    X, Y = _arrays()
    loss, w, x, y = _declare(kind)
    dom = DOMAINS[domain](w)
    local = dpcvx.Problem(loss, w, {x: X, y: Y}, dom).solve(regularization=LAM, accuracy=1e-10)
    problem = dpcvx.DaskProblem(
        loss,
        w,
        {x: da.from_array(X, chunks=(CHUNK, D)), y: da.from_array(Y, chunks=CHUNK)},
        dom,
        client=client,
    )
    assert problem.partitions == 5 and problem.n == N and problem.d == D
    sol = problem.solve(regularization=LAM, accuracy=1e-9)
    assert sol.gap <= 1e-9
    assert sol.lower <= local.upper + 1e-12 and local.lower <= sol.upper + 1e-12
    assert sol.solver_stats["partitions"] == 5


def test_the_client_never_computes_the_data(client, monkeypatch):
    """Every step sends w and receives sums: computing an array on the client (or converting
    it to numpy) during a solve fails this test."""
    X, Y = _arrays(1)
    loss, w, x, y = _declare("logistic")
    dX = da.from_array(X, chunks=(CHUNK, D))
    dY = da.from_array(Y, chunks=CHUNK)
    problem = dpcvx.DaskProblem(loss, w, {x: dX, y: dY}, [cp.norm(w) <= 10], client=client)

    def refuse(*args, **kwargs):
        raise AssertionError("the data was computed on the client")

    monkeypatch.setattr(da.Array, "compute", refuse)
    monkeypatch.setattr(da.Array, "__array__", refuse)
    sol = problem.solve(regularization=LAM, accuracy=1e-9)
    assert sol.gap <= 1e-9


def test_a_private_release_solves_on_the_extension_of_its_claim(client):
    """Output perturbation with lipschitz=C: the release solves on the C-extension (steep rows
    included) and its noise is calibrated to C; the same certified point as the in-process
    extension solve brackets."""
    X, Y = _arrays(2, scale=0.8)
    loss, w, x, y = _declare("logistic")
    dom = [cp.norm(w) <= 10]
    data = {x: da.from_array(X, chunks=(CHUNK, D)), y: da.from_array(Y, chunks=CHUNK)}
    problem = dpcvx.DaskProblem(loss, w, data, dom, client=client)
    C = 1.0
    mech = dpcvx.OutputPerturbation(lipschitz=C, regularization=LAM)
    result = problem.solve_private(mech, epsilon=1.0, rng=3)
    assert result.detail["extension_C"] == C
    (event,) = result.ledger.events
    assert event.epsilon == 1.0
    assert result.detail["sensitivity"] >= 2 * C / (LAM * N)
    cert = problem._solve(LAM, np.zeros(D), 1e-10, C, private=True)
    local = (
        dpcvx.Problem(loss, w, {x: X, y: Y}, dom)
        .lipschitz_extension(C)
        .solve(regularization=LAM, accuracy=1e-10)
    )
    assert cert.lower <= local.upper + 1e-12 and local.lower <= cert.upper + 1e-12
    assert np.linalg.norm(result.w) <= 10 * (1 + 1e-12)


def test_mechanisms_it_cannot_serve_are_refused_and_nothing_is_spent(client):
    X, Y = _arrays(3)
    loss, w, x, y = _declare("logistic")
    data = {x: da.from_array(X, chunks=(CHUNK, D)), y: da.from_array(Y, chunks=CHUNK)}
    problem = dpcvx.DaskProblem(loss, w, data, [cp.norm(w) <= 10], client=client)
    accountant = dpcvx.Accountant(5.0)
    refused = [
        dpcvx.LocalizedDoubleOutputPerturbation(k=4, moment=1.0, second_moment=1.0),
        dpcvx.DoubleOutputPerturbation(C=1.0, regularization=LAM),
        dpcvx.PhasedUserERM(lipschitz=1.0, items_per_user=2),
        dpcvx.OutputPerturbation(lipschitz=1.0, regularization=LAM, strong_convexity=0.1),
    ]
    for mech in refused:
        with pytest.raises(InvalidParameterError):
            problem.solve_private(mech, epsilon=1.0, accountant=accountant)
    assert accountant.ledger.events == ()
    # a multi-atom loss: no extension to enforce a claim with
    two = dpcvx.DaskProblem(
        cp.logistic(-y * (x @ w)) + cp.square(x @ w), w, data, [cp.norm(w) <= 10], client=client
    )
    with pytest.raises(InvalidParameterError):
        two.solve_private(
            dpcvx.OutputPerturbation(lipschitz=1.0, regularization=LAM),
            epsilon=1.0,
            accountant=accountant,
        )
    assert accountant.ledger.events == ()


def test_bad_input_is_refused_at_declaration():
    X, Y = _arrays(4)
    loss, w, x, y = _declare("logistic")
    with pytest.raises(InvalidParameterError):
        dpcvx.DaskProblem(loss, w, {x: X, y: da.from_array(Y)}, [cp.norm(w) <= 1])
    with pytest.raises(InvalidParameterError):  # rows differ
        dpcvx.DaskProblem(
            loss, w, {x: da.from_array(X), y: da.from_array(Y[:-1])}, [cp.norm(w) <= 1]
        )
    with pytest.raises(InvalidParameterError):  # wrong trailing shape
        dpcvx.DaskProblem(loss, w, {x: da.from_array(X[:, :3]), y: da.from_array(Y)}, [])
    data = {x: da.from_array(X), y: da.from_array(Y)}
    with pytest.raises(ModelingError):  # a piecewise-linear loss has no Newton path here
        dpcvx.DaskProblem(cp.pos(1 - y * (x @ w)), w, data, [cp.norm(w) <= 1])
    with pytest.raises(ModelingError):  # an l1 ball
        dpcvx.DaskProblem(loss, w, data, [cp.norm(w, 1) <= 1])


def test_row_chunks_are_aligned():
    """Arrays chunked differently are rechunked to the first one's row partitions."""
    X, Y = _arrays(5)
    loss, w, x, y = _declare("logistic")
    problem = dpcvx.DaskProblem(
        loss,
        w,
        {x: da.from_array(X, chunks=(1000, D)), y: da.from_array(Y, chunks=700)},
        [cp.norm(w) <= 1],
    )
    assert problem.partitions == 3
