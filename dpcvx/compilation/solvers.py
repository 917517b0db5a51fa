"""Call an interior-point (or first-order) solver directly on a stamped program.

Clarabel (default) and SCS take the quadratic objective as it is; ECOS gets it as a rotated
second-order-cone epigraph. The solver's status is recorded in the stats but never trusted: the
certificate is computed by dpcvx from the returned points.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from dpcvx.compilation.stamp import StampedProgram
from dpcvx.errors import InvalidParameterError, SolverError

__all__ = ["SOLVERS", "RawSolution", "check_solver", "solve_program"]

SOLVERS = ("CLARABEL", "ECOS", "SCS")


@dataclass(frozen=True, slots=True, kw_only=True)
class RawSolution:
    """A solver's primal point ``x`` and dual ``z`` (Clarabel's sign convention:
    ``P x + q + A^T z = 0``), with its own report in ``stats``."""

    x: np.ndarray
    z: np.ndarray
    stats: dict[str, Any] = field(default_factory=dict)


def check_solver(solver: str | None) -> str:
    name = "CLARABEL" if solver is None else str(solver).upper()
    if name not in SOLVERS:
        raise InvalidParameterError(
            f"The `solver` parameter must be one of {', '.join(SOLVERS)} (or None for CLARABEL). "
            f"Got {solver!r}."
        )
    return name


def solve_program(
    prog: StampedProgram, solver: str | None = None, *, tight: bool = False
) -> RawSolution:
    """Solve ``prog`` with ``solver``; ``tight`` asks for the solver's strictest tolerances."""
    name = check_solver(solver)
    start = time.perf_counter()
    try:
        if name == "CLARABEL":
            out = _clarabel(prog, tight)
        elif name == "SCS":
            out = _scs(prog, tight)
        else:
            out = _ecos(prog, tight)
    except SolverError:
        raise
    except Exception as exc:  # a crash inside a solver is reported, never hidden
        raise SolverError(f"{name} failed on the stamped program: {exc!r}") from exc
    x, z, stats = out
    if x is None or not np.all(np.isfinite(x)):
        raise SolverError(f"{name} returned no finite primal point (status {stats.get('status')}).")
    stats.update(
        solver=name,
        tight=tight,
        seconds=time.perf_counter() - start,
        n_variables=prog.A.shape[1],
        n_constraints=prog.A.shape[0],
        nnz=prog.A.nnz,
    )
    z = np.zeros(prog.A.shape[0]) if z is None else np.nan_to_num(np.asarray(z, float))
    return RawSolution(x=np.asarray(x, float), z=z, stats=stats)


def _clarabel(
    prog: StampedProgram, tight: bool
) -> tuple[np.ndarray | None, np.ndarray | None, dict[str, Any]]:
    import clarabel

    cones = []
    c = prog.cones
    if c.zero:
        cones.append(clarabel.ZeroConeT(c.zero))
    if c.nonneg:
        cones.append(clarabel.NonnegativeConeT(c.nonneg))
    cones += [clarabel.SecondOrderConeT(q) for q in c.soc]
    cones += [clarabel.ExponentialConeT() for _ in range(c.exp)]
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    if tight:
        settings.tol_gap_abs = 1e-12
        settings.tol_gap_rel = 1e-12
        settings.tol_feas = 1e-12
        settings.tol_ktratio = 1e-10
        settings.max_iter = 500
    solver = clarabel.DefaultSolver(
        sp.triu(prog.P, format="csc"), prog.q, prog.A, prog.b, cones, settings
    )
    sol = solver.solve()
    stats = {
        "status": str(sol.status),
        "iterations": int(sol.iterations),
        "solver_objective": float(sol.obj_val) + prog.q0,
    }
    return np.asarray(sol.x), np.asarray(sol.z), stats


def _scs(
    prog: StampedProgram, tight: bool
) -> tuple[np.ndarray | None, np.ndarray | None, dict[str, Any]]:
    import scs

    c = prog.cones
    cone = {"z": c.zero, "l": c.nonneg, "q": list(c.soc), "ep": c.exp}
    eps = 1e-10 if tight else 1e-7
    solver = scs.SCS(
        {"P": sp.triu(prog.P, format="csc"), "A": prog.A, "b": prog.b, "c": prog.q},
        cone,
        eps_abs=eps,
        eps_rel=eps,
        max_iters=200_000 if tight else 50_000,
        verbose=False,
    )
    sol = solver.solve()
    info = sol["info"]
    stats = {
        "status": info.get("status"),
        "iterations": int(info.get("iter", -1)),
        "solver_objective": float(info.get("pobj", np.nan)) + prog.q0,
    }
    return sol["x"], sol["y"], stats


def _ecos(
    prog: StampedProgram, tight: bool
) -> tuple[np.ndarray | None, np.ndarray | None, dict[str, Any]]:
    import ecos

    d, n_var = prog.d, prog.A.shape[1]
    lam = float(prog.P.diagonal()[:d].max()) if prog.P.nnz else 0.0
    c = prog.cones
    A = prog.A.tocsr()
    eq = slice(0, c.zero)
    # ECOS orders each exponential cone (x, z, y) where Clarabel/SCS use (x, y, z)
    G = A[c.zero :]
    h = prog.b[c.zero :]
    exp_start = c.nonneg + sum(c.soc)
    perm = np.arange(G.shape[0])
    if c.exp:
        base = exp_start + 3 * np.arange(c.exp)
        perm[base + 1], perm[base + 2] = base + 2, base + 1
    G = G[perm]
    h = h[perm]
    q = prog.q.copy()
    if lam > 0:
        # q already holds -lam * w0 on w; the quadratic (lam/2)||w||^2 becomes (lam/2) t with
        # ||(2 w, t - 1)|| <= t + 1
        t_col = n_var
        rows = [0, *range(1, d + 1), d + 1]
        cols = [t_col, *range(d), t_col]
        vals = [-1.0] + [-2.0] * d + [-1.0]
        G_soc = sp.csr_matrix((vals, (rows, cols)), shape=(d + 2, n_var + 1))
        h_soc = np.concatenate([[1.0], np.zeros(d), [-1.0]])
        G = sp.hstack([G, sp.csr_matrix((G.shape[0], 1))]).tocsr()
        # insert the new SOC right after the existing SOC rows (before the exp cones)
        G = sp.vstack([G[:exp_start], G_soc, G[exp_start:]]).tocsc()
        h = np.concatenate([h[:exp_start], h_soc, h[exp_start:]])
        q = np.concatenate([q, [lam / 2]])
        A_eq = sp.hstack([A[eq], sp.csr_matrix((c.zero, 1))]).tocsc()
        socs = list(c.soc) + [d + 2]
    else:
        A_eq = A[eq].tocsc()
        socs = list(c.soc)
    dims = {"l": c.nonneg, "q": socs, "e": c.exp}
    kwargs: dict[str, Any] = {"verbose": False}
    if tight:
        kwargs.update(abstol=1e-11, reltol=1e-11, feastol=1e-11, max_iters=300)
    if c.zero:
        sol = ecos.solve(q, G.tocsc(), h, dims, A_eq, prog.b[eq], **kwargs)
    else:
        sol = ecos.solve(q, G.tocsc(), h, dims, **kwargs)
    x = np.asarray(sol["x"])[:n_var]
    z = np.zeros(prog.A.shape[0])
    z[eq] = np.asarray(sol["y"]) if c.zero else 0.0
    zz = np.asarray(sol["z"])
    if lam > 0:
        zz = np.concatenate([zz[:exp_start], zz[exp_start + d + 2 :]])
    inv = np.empty_like(perm)
    inv[perm] = np.arange(len(perm))
    z[c.zero :] = zz[inv]
    info = sol["info"]
    stats = {
        "status": info.get("infostring"),
        "iterations": int(info.get("iter", -1)),
        "solver_objective": float(info.get("pcost", np.nan)) + prog.q0,
    }
    return x, z, stats
