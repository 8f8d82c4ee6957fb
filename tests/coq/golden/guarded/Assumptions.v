(* Prints the axioms each theorem depends on: expect "Closed under the global context". *)
From Clef Require Import ClefSyntax ClefCheck Model Invariants.
Print Assumptions slow_legacy_tls_never_allowed.
Print Assumptions scripted_clients_face_friction.
Print Assumptions blocks_are_confident.
Print Assumptions tor_never_allowed_when_deep.
Print Assumptions weighted_risk_linear.
