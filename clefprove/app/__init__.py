"""The application layer: the pre-deploy gate's users, above ``incremental/``.

``service`` (the decision service of SPEC §6, a Starlette app), ``served`` (the immutable
served model), ``admission`` (the gate run in a worker process), ``store`` (admitted models),
``metrics`` (Prometheus).  Nothing below this package imports it, and it imports neither
``report/`` nor ``cli/``; only ``clefprove serve`` loads the web parts.
"""
