"""Boxes of the input domain and measures on them (below the DSL: no formulas here)."""
