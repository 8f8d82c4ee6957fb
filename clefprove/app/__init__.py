"""The application layer: the pre-deploy gate and the decision service, built on the verifier."""
