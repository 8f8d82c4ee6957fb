(** * Invariants of model [edge-allow-block] 1.0.0

    Each theorem states an invariant over the named features of [Model.v] and is
    proved by computing the checker of [ClefCheck.v] ([vm_compute]); the checker is
    proved sound once ([check_sound]).  [action x] and [confidence x] are the
    model's decision for input [x]. *)

From Coq Require Import QArith ZArith List.
From Clef Require Import ClefSyntax ClefCheck Model.
Import ListNotations.
Local Open Scope Q_scope.

(** ** Invariant [slow_legacy_tls_never_allowed] (edge.inv:8)
    'Slow clients on legacy TLS are never allowed straight through.'
    Proved. *)

Definition slow_legacy_tls_never_allowed_w : formula :=
  (FAnd (FCmp [(VF 0%nat, (-1 # 1))] (300 # 1) true) (FCmp [(VF 1%nat, (1 # 1))] (-772 # 1) true)).

Definition slow_legacy_tls_never_allowed_e : formula :=
  (FNot (FAct [0%N])).

Definition slow_legacy_tls_never_allowed_When (x : input) (a : N) (c : Q) : Prop :=
  client_rtt_ms x > 300 /\ tls_version x < 772.

Definition slow_legacy_tls_never_allowed_Ensure (x : input) (a : N) (c : Q) : Prop :=
  ~ a = allow.

Lemma slow_legacy_tls_never_allowed_When_iff : forall x a c, slow_legacy_tls_never_allowed_When x a c <-> sem slow_legacy_tls_never_allowed_w x a c.
Proof. intros x a c; unfold slow_legacy_tls_never_allowed_When, slow_legacy_tls_never_allowed_w, client_rtt_ms, tls_version; clef_iff. Qed.

Lemma slow_legacy_tls_never_allowed_Ensure_iff : forall x a c, slow_legacy_tls_never_allowed_Ensure x a c <-> sem slow_legacy_tls_never_allowed_e x a c.
Proof. intros x a c; unfold slow_legacy_tls_never_allowed_Ensure, slow_legacy_tls_never_allowed_e; clef_iff. Qed.

(** The reflective computation: the checker accepts the invariant on the model.
    ([vm_cast_no_check] leaves the computation to the kernel at [Qed]; it is the
    same check as [vm_compute; reflexivity], done once instead of twice.) *)
Lemma slow_legacy_tls_never_allowed_checked : check model_domain model_tree slow_legacy_tls_never_allowed_w slow_legacy_tls_never_allowed_e = true.
Proof. vm_cast_no_check (eq_refl true). Qed.

Theorem slow_legacy_tls_never_allowed :
  forall x : input, in_domain model_domain x ->
    client_rtt_ms x > 300 /\ tls_version x < 772 ->
    ~ action x = allow.
Proof.
  intros x Hx.
  apply (readable_sound model_domain model_tree slow_legacy_tls_never_allowed_w slow_legacy_tls_never_allowed_e slow_legacy_tls_never_allowed_When slow_legacy_tls_never_allowed_Ensure slow_legacy_tls_never_allowed_When_iff slow_legacy_tls_never_allowed_Ensure_iff x Hx slow_legacy_tls_never_allowed_checked).
Qed.

(** ** Invariant [scripted_clients_face_friction] (edge.inv:13)
    Violated: refuted below at a concrete input. *)

Definition scripted_clients_face_friction_w : formula :=
  (FAnd (FIn 4%nat [3%Z; 4%Z]) (FCmp [(VF 2%nat, (-1 # 1))] (3 # 1) false)).

Definition scripted_clients_face_friction_e : formula :=
  (FAct [1%N; 2%N; 3%N]).

Definition scripted_clients_face_friction_When (x : input) (a : N) (c : Q) : Prop :=
  is_one_of (ua_family x) [ua_family_curl; ua_family_python_requests] /\ path_depth x >= 3.

Definition scripted_clients_face_friction_Ensure (x : input) (a : N) (c : Q) : Prop :=
  In a [challenge; rate_limit; block].

Lemma scripted_clients_face_friction_When_iff : forall x a c, scripted_clients_face_friction_When x a c <-> sem scripted_clients_face_friction_w x a c.
Proof. intros x a c; unfold scripted_clients_face_friction_When, scripted_clients_face_friction_w, path_depth, ua_family; clef_iff. Qed.

Lemma scripted_clients_face_friction_Ensure_iff : forall x a c, scripted_clients_face_friction_Ensure x a c <-> sem scripted_clients_face_friction_e x a c.
Proof. intros x a c; unfold scripted_clients_face_friction_Ensure, scripted_clients_face_friction_e; clef_iff. Qed.

(** A counterexample: an input of the domain that satisfies [when] and breaks
    [ensure]. *)
Definition scripted_clients_face_friction_cex : input :=
  fun i => match i with
  | 0%nat => (50 # 1)   (* client_rtt_ms = 50.0 *)
  | 1%nat => (772 # 1)   (* tls_version = 772 *)
  | 2%nat => (3 # 1)   (* path_depth = 3 *)
  | 3%nat => (0 # 1)   (* referer_entropy = 0.0 *)
  | 4%nat => (3 # 1)   (* ua_family = "curl" *)
  | 5%nat => (0 # 1)   (* is_tor = false *)
  | _ => 0
  end.

Example scripted_clients_face_friction_cex_decision : eval model_tree scripted_clients_face_friction_cex = (0%N, (2206763817411543 # 2^51)).
Proof. vm_compute; reflexivity. Qed.

Theorem scripted_clients_face_friction_fails :
  ~ (forall x : input, in_domain model_domain x ->
       is_one_of (ua_family x) [ua_family_curl; ua_family_python_requests] /\ path_depth x >= 3 -> In (action x) [challenge; rate_limit; block]).
Proof.
  apply (readable_refuted model_domain model_tree scripted_clients_face_friction_w scripted_clients_face_friction_e scripted_clients_face_friction_When scripted_clients_face_friction_Ensure scripted_clients_face_friction_When_iff scripted_clients_face_friction_Ensure_iff scripted_clients_face_friction_cex); vm_compute; reflexivity.
Qed.

(** ** Invariant [blocks_are_confident] (edge.inv:17)
    Proved. *)

Definition blocks_are_confident_w : formula :=
  (FConst true).

Definition blocks_are_confident_e : formula :=
  (FOr (FNot (FAct [3%N])) (FCmp [(VC, (-1 # 1))] (3602879701896397 # 4503599627370496) false)).

Definition blocks_are_confident_When (x : input) (a : N) (c : Q) : Prop :=
  True.

Definition blocks_are_confident_Ensure (x : input) (a : N) (c : Q) : Prop :=
  a = block -> c >= (3602879701896397 # 4503599627370496) (* 0.8 *).

Lemma blocks_are_confident_When_iff : forall x a c, blocks_are_confident_When x a c <-> sem blocks_are_confident_w x a c.
Proof. intros x a c; unfold blocks_are_confident_When, blocks_are_confident_w; clef_iff. Qed.

Lemma blocks_are_confident_Ensure_iff : forall x a c, blocks_are_confident_Ensure x a c <-> sem blocks_are_confident_e x a c.
Proof. intros x a c; unfold blocks_are_confident_Ensure, blocks_are_confident_e; clef_iff. Qed.

(** The reflective computation: the checker accepts the invariant on the model.
    ([vm_cast_no_check] leaves the computation to the kernel at [Qed]; it is the
    same check as [vm_compute; reflexivity], done once instead of twice.) *)
Lemma blocks_are_confident_checked : check model_domain model_tree blocks_are_confident_w blocks_are_confident_e = true.
Proof. vm_cast_no_check (eq_refl true). Qed.

Theorem blocks_are_confident :
  forall x : input, in_domain model_domain x ->
    action x = block -> confidence x >= (3602879701896397 # 4503599627370496) (* 0.8 *).
Proof.
  intros x Hx.
  apply (readable_sound model_domain model_tree blocks_are_confident_w blocks_are_confident_e blocks_are_confident_When blocks_are_confident_Ensure blocks_are_confident_When_iff blocks_are_confident_Ensure_iff x Hx blocks_are_confident_checked).
  exact I.
Qed.

(** ** Invariant [tor_never_allowed_when_deep] (edge.inv:20)
    Violated: refuted below at a concrete input. *)

Definition tor_never_allowed_when_deep_w : formula :=
  (FAnd (FIn 5%nat [1%Z]) (FAnd (FCmp [(VF 2%nat, (-1 # 1))] (4 # 1) false) (FCmp [(VF 2%nat, (1 # 1))] (-64 # 1) false))).

Definition tor_never_allowed_when_deep_e : formula :=
  (FAct [1%N; 2%N; 3%N]).

Definition tor_never_allowed_when_deep_When (x : input) (a : N) (c : Q) : Prop :=
  is_tor x == 1 /\ path_depth x >= 4 /\ path_depth x <= 64.

Definition tor_never_allowed_when_deep_Ensure (x : input) (a : N) (c : Q) : Prop :=
  In a [challenge; rate_limit; block].

Lemma tor_never_allowed_when_deep_When_iff : forall x a c, tor_never_allowed_when_deep_When x a c <-> sem tor_never_allowed_when_deep_w x a c.
Proof. intros x a c; unfold tor_never_allowed_when_deep_When, tor_never_allowed_when_deep_w, path_depth, is_tor; clef_iff. Qed.

Lemma tor_never_allowed_when_deep_Ensure_iff : forall x a c, tor_never_allowed_when_deep_Ensure x a c <-> sem tor_never_allowed_when_deep_e x a c.
Proof. intros x a c; unfold tor_never_allowed_when_deep_Ensure, tor_never_allowed_when_deep_e; clef_iff. Qed.

(** A counterexample: an input of the domain that satisfies [when] and breaks
    [ensure]. *)
Definition tor_never_allowed_when_deep_cex : input :=
  fun i => match i with
  | 0%nat => (50 # 1)   (* client_rtt_ms = 50.0 *)
  | 1%nat => (772 # 1)   (* tls_version = 772 *)
  | 2%nat => (4 # 1)   (* path_depth = 4 *)
  | 3%nat => (0 # 1)   (* referer_entropy = 0.0 *)
  | 4%nat => (5 # 1)   (* ua_family = "other" *)
  | 5%nat => (1 # 1)   (* is_tor = true *)
  | _ => 0
  end.

Example tor_never_allowed_when_deep_cex_decision : eval model_tree tor_never_allowed_when_deep_cex = (0%N, (2206763817411543 # 2^51)).
Proof. vm_compute; reflexivity. Qed.

Theorem tor_never_allowed_when_deep_fails :
  ~ (forall x : input, in_domain model_domain x ->
       is_tor x == 1 /\ path_depth x >= 4 /\ path_depth x <= 64 -> In (action x) [challenge; rate_limit; block]).
Proof.
  apply (readable_refuted model_domain model_tree tor_never_allowed_when_deep_w tor_never_allowed_when_deep_e tor_never_allowed_when_deep_When tor_never_allowed_when_deep_Ensure tor_never_allowed_when_deep_When_iff tor_never_allowed_when_deep_Ensure_iff tor_never_allowed_when_deep_cex); vm_compute; reflexivity.
Qed.

(** ** Invariant [weighted_risk_linear] (edge.inv:24)
    Violated: refuted below at a concrete input. *)

Definition weighted_risk_linear_w : formula :=
  (FCmp [(VF 0%nat, (-1 # 1)); (VF 2%nat, (-200 # 1))] (2000 # 1) false).

Definition weighted_risk_linear_e : formula :=
  (FNot (FAct [0%N])).

Definition weighted_risk_linear_When (x : input) (a : N) (c : Q) : Prop :=
  client_rtt_ms x + 200 * path_depth x >= 2000.

Definition weighted_risk_linear_Ensure (x : input) (a : N) (c : Q) : Prop :=
  ~ a = allow.

Lemma weighted_risk_linear_When_iff : forall x a c, weighted_risk_linear_When x a c <-> sem weighted_risk_linear_w x a c.
Proof. intros x a c; unfold weighted_risk_linear_When, weighted_risk_linear_w, client_rtt_ms, path_depth; clef_iff. Qed.

Lemma weighted_risk_linear_Ensure_iff : forall x a c, weighted_risk_linear_Ensure x a c <-> sem weighted_risk_linear_e x a c.
Proof. intros x a c; unfold weighted_risk_linear_Ensure, weighted_risk_linear_e; clef_iff. Qed.

(** A counterexample: an input of the domain that satisfies [when] and breaks
    [ensure]. *)
Definition weighted_risk_linear_cex : input :=
  fun i => match i with
  | 0%nat => (300 # 1)   (* client_rtt_ms = 300.0 *)
  | 1%nat => (772 # 1)   (* tls_version = 772 *)
  | 2%nat => (64 # 1)   (* path_depth = 64 *)
  | 3%nat => (0 # 1)   (* referer_entropy = 0.0 *)
  | 4%nat => (5 # 1)   (* ua_family = "other" *)
  | 5%nat => (0 # 1)   (* is_tor = false *)
  | _ => 0
  end.

Example weighted_risk_linear_cex_decision : eval model_tree weighted_risk_linear_cex = (0%N, (2206763817411543 # 2^51)).
Proof. vm_compute; reflexivity. Qed.

Theorem weighted_risk_linear_fails :
  ~ (forall x : input, in_domain model_domain x ->
       client_rtt_ms x + 200 * path_depth x >= 2000 -> ~ action x = allow).
Proof.
  apply (readable_refuted model_domain model_tree weighted_risk_linear_w weighted_risk_linear_e weighted_risk_linear_When weighted_risk_linear_Ensure weighted_risk_linear_When_iff weighted_risk_linear_Ensure_iff weighted_risk_linear_cex); vm_compute; reflexivity.
Qed.
