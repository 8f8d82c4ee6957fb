"""An independent whole-ensemble Z3 encoding with the library's float arithmetic, shared by the
single-input and the two-copy (relational) oracles, and the time budget they answer within.

Float64 inputs, every tree's leaf selected by its path, the leaf values added tree after tree
in float32 or float64 (IEEE, round to nearest even, z3's FP theory), and the margin decision
rule (which needs no exp).  Z3's floating-point theory is occasionally very slow on a random
example; each oracle call has one wall-clock budget for all its queries and answers ``None``
(the example is skipped) once it is spent, so that one hard example cannot swing the suite's
time by many minutes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import z3
from hypothesis import event

from tests.verify.gen import WholeTreeZ3

# seconds for all the queries of one oracle call (one hypothesis example)
EXAMPLE_BUDGET_S = 10.0


@dataclass
class Budget:
    """One example's wall-clock budget, spent by the queries that :meth:`check` runs."""

    seconds: float = EXAMPLE_BUDGET_S
    deadline: float = field(init=False)

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.seconds

    def check(self, solver: z3.Solver) -> bool | None:
        """sat -> True, unsat -> False, unknown or the budget spent -> None."""
        left_ms = int((self.deadline - time.monotonic()) * 1000)
        r = z3.unknown
        if left_ms > 0:
            solver.set("timeout", left_ms)
            r = solver.check()
        if r == z3.unknown:
            # shown by pytest --hypothesis-show-statistics: how many examples were skipped
            event("z3 reference: no answer within the example's budget")
            return None
        return r == z3.sat


def z3_ensemble(model):
    """(domain constraints, per-action decision formulas, the WholeTreeZ3 of tree 0) of the
    whole ensemble."""
    c = model.combine
    sort = z3.Float32() if str(c.arithmetic) == "float32" else z3.Float64()
    rne = z3.RNE()
    refs = [WholeTreeZ3(model.tree(t)) for t in range(model.n_trees)]
    scores = [z3.FPVal(b, sort) for b in c.base]
    row = 0
    for t, ref in enumerate(refs):
        leaves = [n for n in model.tree(t).iter_nodes() if n.is_leaf]
        for k in range(c.outputs):
            value = None
            for n in reversed(leaves):
                v = z3.FPVal(float(model.values[row + leaves.index(n), k]), sort)
                cond = z3.And(ref.path(n.index)) if ref.path(n.index) else z3.BoolVal(True)
                value = v if value is None else z3.If(cond, v, value)
            scores[k] = z3.fpAdd(rne, scores[k], value)
        row += len(leaves)
    if c.divisor != 1:
        scores = [z3.fpDiv(rne, s, z3.FPVal(c.divisor, sort)) for s in scores]
    if c.outputs == 1:
        zero = z3.FPVal(0.0, sort)
        decisions = [z3.Not(z3.fpGEQ(scores[0], zero)), z3.fpGEQ(scores[0], zero)]
    else:
        decisions = [
            z3.And(
                [z3.fpGT(scores[a], scores[j]) for j in range(a)]
                + [z3.fpGEQ(scores[a], scores[j]) for j in range(a + 1, c.outputs)]
            )
            for a in range(c.outputs)
        ]
    return refs[0].base, decisions, refs[0]
