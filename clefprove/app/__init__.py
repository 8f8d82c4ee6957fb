"""The application layer: the pre-deploy gate and the decision service, built on the verifier.

``gate`` (``clefprove gate``), ``service`` (the decision service of SPEC §6, a Starlette app),
``served`` (the immutable served model), ``admission`` (the gate run in a worker process),
``store`` (admitted models), ``metrics`` (Prometheus).  It imports neither ``report/`` nor
``cli/``; only ``clefprove serve`` loads the web parts.
"""
