"""Box geometry: leaf boxes of a tree, float64 tightening and exact float bounds.

Below the DSL and the solver: it knows models and numbers, not invariants.
"""
