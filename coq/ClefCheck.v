(** * ClefCheck: a checker for invariants of Clef trees, proved sound once.

    [check d t w e = true] implies that [when w ensure e] holds for every input of the domain
    [d] (theorem [check_sound]).  A model's proof is then a computation ([vm_compute]) of
    [check], not a proof script that grows with the tree.

    The checker walks the tree carrying a box (per feature: lower and upper bounds with
    strictness, integrality, and an optional list of admissible codes).  At each leaf the
    action and confidence are known, so [w /\ ~ e] becomes a formula over features; it is put
    in disjunctive normal form and each conjunction is shown empty inside the box:
    single-feature atoms tighten the box (rounding bounds of integral features); sums over
    integral features are rounded (a Chvatal-Gomory cut of each); the rest is refuted by
    Fourier-Motzkin elimination over Q.  Everything that the checker derives is
    implied by what holds at the input, so soundness needs no completeness argument: the
    checker may fail to prove a true invariant (then no theorem is emitted), never the
    converse. *)

From Coq Require Import QArith Qround ZArith List Bool Lqa Lia.
From Clef Require Import ClefSyntax.
Import ListNotations.
Local Open Scope Q_scope.

Definition Qltb (x y : Q) : bool := negb (Qle_bool y x).

Lemma Qltb_iff : forall x y, Qltb x y = true <-> x < y.
Proof.
  intros x y; unfold Qltb; rewrite negb_true_iff; split; intro H.
  - apply Qnot_le_lt; intro H'; apply Qle_bool_iff in H'; congruence.
  - destruct (Qle_bool y x) eqn:E; auto; apply Qle_bool_iff in E; exfalso;
      apply (Qlt_not_le x y); auto.
Qed.

Lemma Qltb_false : forall x y, Qltb x y = false -> y <= x.
Proof.
  intros x y H; unfold Qltb in H; apply negb_false_iff in H; apply Qle_bool_iff; auto.
Qed.

Lemma Qle_bool_false : forall x y, Qle_bool x y = false -> y < x.
Proof.
  intros x y H; apply Qnot_le_lt; intro H'; apply Qle_bool_iff in H'; congruence.
Qed.

(** ** Formulas: boolean and propositional meanings agree *)

Lemma mem_q_iff : forall q cs, mem_q q cs = true <-> is_one_of q cs.
Proof.
  intros q cs; unfold mem_q, is_one_of; rewrite existsb_exists; split.
  - intros [z [Hin Heq]]; exists z; split; auto; apply Qeq_bool_iff; auto.
  - intros [z [Hin Heq]]; exists z; split; auto; apply Qeq_bool_iff; auto.
Qed.

Lemma evalf_sem : forall p x a c, evalf p x a c = true <-> sem p x a c.
Proof.
  induction p; intros x a c; simpl.
  - destruct b; split; auto; discriminate.
  - destruct strict.
    + rewrite negb_true_iff; split; intro H.
      * apply Qle_bool_false; auto.
      * destruct (Qle_bool 0 (lin_val terms x c + k)) eqn:E; auto.
        apply Qle_bool_iff in E; lra.
    + apply Qle_bool_iff.
  - apply mem_q_iff.
  - rewrite existsb_exists; split.
    + intros [b [Hin Heq]]; apply N.eqb_eq in Heq; subst; auto.
    + intros Hin; exists a; split; auto; apply N.eqb_refl.
  - rewrite negb_true_iff, <- IHp; split; intro H.
    + rewrite H; discriminate.
    + destruct (evalf p x a c); auto; exfalso; auto.
  - rewrite andb_true_iff, IHp1, IHp2; tauto.
  - rewrite orb_true_iff, IHp1, IHp2; tauto.
Qed.

(** ** Boxes *)

Record fbox : Type := FBox {
  b_int : bool;
  b_lo : Q; b_los : bool;   (* lower bound, strict? *)
  b_hi : Q; b_his : bool;   (* upper bound, strict? *)
  b_codes : option (list Z)
}.

Definition lo_ok (l : Q) (s : bool) (q : Q) : Prop := if s then l < q else l <= q.
Definition hi_ok (h : Q) (s : bool) (q : Q) : Prop := if s then q < h else q <= h.

Definition in_fbox (b : fbox) (q : Q) : Prop :=
  lo_ok (b_lo b) (b_los b) q /\ hi_ok (b_hi b) (b_his b) q /\
  (b_int b = true -> is_int q) /\
  (forall cs, b_codes b = Some cs -> is_one_of q cs).

Definition box := list fbox.

Definition in_box (bx : box) (x : input) : Prop :=
  forall i b, nth_error bx i = Some b -> in_fbox b (x i).

Definition dom_box (d : domain) : box :=
  map (fun fd => FBox (fd_integral fd) (fd_min fd) false (fd_max fd) false (fd_codes fd)) d.

Lemma dom_box_sound : forall d x, in_domain d x -> in_box (dom_box d) x.
Proof.
  intros d x H i b Hb; unfold dom_box in Hb; rewrite nth_error_map in Hb.
  destruct (nth_error d i) as [fd|] eqn:E; simpl in Hb; [|discriminate].
  injection Hb as <-; destruct (H i fd E) as [H1 [H2 [H3 H4]]].
  repeat split; simpl; auto.
Qed.

Lemma in_box_cons : forall b bx x,
  in_box (b :: bx) x <-> in_fbox b (x O) /\ in_box bx (fun i => x (S i)).
Proof.
  intros b bx x; split.
  - intros H; split.
    + apply (H O); reflexivity.
    + intros i b' Hi; apply (H (S i)); auto.
  - intros [H0 H1] [|i] b' Hi; simpl in Hi.
    + injection Hi as <-; auto.
    + apply H1; auto.
Qed.

(** Bounds tightened by rounding for integral features. *)
Record bnds : Type := Bnds { lo : Q; los : bool; hi : Q; his : bool }.

Definition tight (b : fbox) : bnds :=
  if b_int b then
    Bnds (inject_Z (if b_los b then (Qfloor (b_lo b) + 1)%Z else Qceiling (b_lo b))) false
         (inject_Z (if b_his b then (Qceiling (b_hi b) - 1)%Z else Qfloor (b_hi b))) false
  else Bnds (b_lo b) (b_los b) (b_hi b) (b_his b).

Definition in_bnds (bd : bnds) (q : Q) : Prop :=
  lo_ok (lo bd) (los bd) q /\ hi_ok (hi bd) (his bd) q.

Lemma tight_sound : forall b q, in_fbox b q -> in_bnds (tight b) q.
Proof.
  intros b q [Hl [Hh [Hi _]]]; unfold tight.
  destruct (b_int b) eqn:Eint; [|split; auto].
  destruct (Hi eq_refl) as [z Hz].
  unfold lo_ok, hi_ok in *; split; simpl.
  - destruct (b_los b); rewrite Hz in Hl |- *.
    + rewrite <- Zle_Qle.
      assert (Qfloor (b_lo b) < z)%Z; [|lia].
      rewrite Zlt_Qlt; apply Qle_lt_trans with (b_lo b); [apply Qfloor_le | auto].
    + rewrite <- Zle_Qle; rewrite <- (Qceiling_Z z); apply Qceiling_resp_le; auto.
  - destruct (b_his b); rewrite Hz in Hh |- *.
    + rewrite <- Zle_Qle.
      assert (z < Qceiling (b_hi b))%Z; [|lia].
      rewrite Zlt_Qlt; apply Qlt_le_trans with (b_hi b); [auto | apply Qle_ceiling].
    + rewrite <- Zle_Qle; rewrite <- (Qfloor_Z z); apply Qfloor_resp_le; auto.
Qed.

Definition in_bnds_b (bd : bnds) (q : Q) : bool :=
  (if los bd then Qltb (lo bd) q else Qle_bool (lo bd) q) &&
  (if his bd then Qltb q (hi bd) else Qle_bool q (hi bd)).

Lemma in_bnds_b_true : forall bd q, in_bnds bd q -> in_bnds_b bd q = true.
Proof.
  intros [l ls h hs] q [H1 H2]; unfold in_bnds_b, lo_ok, hi_ok in *; simpl in *.
  apply andb_true_iff; split.
  - destruct ls; [apply Qltb_iff | apply Qle_bool_iff]; auto.
  - destruct hs; [apply Qltb_iff | apply Qle_bool_iff]; auto.
Qed.

Lemma in_bnds_compat : forall bd q q', q == q' -> in_bnds bd q -> in_bnds bd q'.
Proof.
  intros [l ls h hs] q q' E [H1 H2]; unfold in_bnds, lo_ok, hi_ok in *; simpl in *.
  split; [destruct ls | destruct hs]; rewrite <- E; auto.
Qed.

Definition bnds_empty (bd : bnds) : bool :=
  if los bd || his bd then Qle_bool (hi bd) (lo bd) else Qltb (hi bd) (lo bd).

Lemma bnds_empty_sound : forall bd q, in_bnds bd q -> bnds_empty bd = false.
Proof.
  intros [l ls h hs] q [H1 H2]; unfold bnds_empty, lo_ok, hi_ok in *; simpl in *.
  destruct ls, hs; simpl.
  1-3: destruct (Qle_bool h l) eqn:E; auto; apply Qle_bool_iff in E; lra.
  destruct (Qltb h l) eqn:E; auto; apply Qltb_iff in E; lra.
Qed.

Definition fbox_empty (b : fbox) : bool :=
  let bd := tight b in
  bnds_empty bd ||
  match b_codes b with
  | Some cs => negb (existsb (fun z => in_bnds_b bd (inject_Z z)) cs)
  | None => false
  end.

Lemma fbox_empty_sound : forall b q, in_fbox b q -> fbox_empty b = false.
Proof.
  intros b q H; unfold fbox_empty.
  pose proof (tight_sound b q H) as Ht.
  rewrite (bnds_empty_sound _ _ Ht); simpl.
  destruct H as [_ [_ [_ Hc]]].
  destruct (b_codes b) as [cs|]; auto.
  destruct (Hc cs eq_refl) as [z [Hin Hz]].
  apply negb_false_iff, existsb_exists; exists z; split; auto.
  apply in_bnds_b_true; apply in_bnds_compat with q; auto.
Qed.

Definition box_empty (bx : box) : bool := existsb fbox_empty bx.

Lemma box_empty_sound : forall bx x, in_box bx x -> box_empty bx = false.
Proof.
  intros bx x H; unfold box_empty.
  destruct (existsb fbox_empty bx) eqn:E; auto.
  apply existsb_exists in E; destruct E as [b [Hin He]].
  apply In_nth_error in Hin; destruct Hin as [i Hi].
  rewrite (fbox_empty_sound b (x i) (H i b Hi)) in He; discriminate.
Qed.

(** ** Refining a box *)

Fixpoint upd (bx : box) (i : nat) (g : fbox -> fbox) : box :=
  match bx, i with
  | [], _ => []
  | b :: r, O => g b :: r
  | b :: r, S j => b :: upd r j g
  end.

Lemma upd_sound : forall bx i g x, in_box bx x ->
  (forall b, nth_error bx i = Some b -> in_fbox (g b) (x i)) -> in_box (upd bx i g) x.
Proof.
  induction bx as [|b r IH]; intros i g x H Hg; destruct i as [|j]; simpl; auto.
  - apply in_box_cons in H; destruct H as [H0 H1]; apply in_box_cons.
    split; [apply Hg; reflexivity | auto].
  - apply in_box_cons in H; destruct H as [H0 H1]; apply in_box_cons.
    split; [auto | apply (IH j g (fun k => x (S k))); auto].
Qed.

Definition with_hi (b : fbox) (t : Q) (s : bool) : fbox :=
  FBox (b_int b) (b_lo b) (b_los b) t s (b_codes b).
Definition with_lo (b : fbox) (t : Q) (s : bool) : fbox :=
  FBox (b_int b) t s (b_hi b) (b_his b) (b_codes b).
Definition with_codes (b : fbox) (cs : option (list Z)) : fbox :=
  FBox (b_int b) (b_lo b) (b_los b) (b_hi b) (b_his b) cs.

(** Add the upper bound [q <= t] ([q < t] when [s]); keep whichever bound is tighter. *)
Definition cut_hi (t : Q) (s : bool) (b : fbox) : fbox :=
  if Qltb t (b_hi b) || (Qeq_bool t (b_hi b) && s) then with_hi b t s else b.

Definition cut_lo (t : Q) (s : bool) (b : fbox) : fbox :=
  if Qltb (b_lo b) t || (Qeq_bool t (b_lo b) && s) then with_lo b t s else b.

Lemma cut_hi_sound : forall t s b q, in_fbox b q -> hi_ok t s q -> in_fbox (cut_hi t s b) q.
Proof.
  intros t s b q H Ht; unfold cut_hi.
  destruct (_ || _); auto.
  destruct H as [H1 [H2 [H3 H4]]]; repeat split; auto.
Qed.

Lemma cut_lo_sound : forall t s b q, in_fbox b q -> lo_ok t s q -> in_fbox (cut_lo t s b) q.
Proof.
  intros t s b q H Ht; unfold cut_lo.
  destruct (_ || _); auto.
  destruct H as [H1 [H2 [H3 H4]]]; repeat split; auto.
Qed.

Definition mem_z (z : Z) (cs : list Z) : bool := existsb (Z.eqb z) cs.

Definition keep_codes (cs : list Z) (b : fbox) : fbox :=
  with_codes b (Some match b_codes b with
                     | None => cs
                     | Some l => filter (fun z => mem_z z cs) l
                     end).

Definition drop_codes (cs : list Z) (b : fbox) : fbox :=
  with_codes b (option_map (filter (fun z => negb (mem_z z cs))) (b_codes b)).

Lemma keep_codes_sound : forall cs b q,
  in_fbox b q -> mem_q q cs = true -> in_fbox (keep_codes cs b) q.
Proof.
  intros cs b q [H1 [H2 [H3 H4]]] Hm; apply mem_q_iff in Hm.
  repeat split; auto; simpl; intros cs' E; injection E as <-.
  destruct (b_codes b) as [l|] eqn:El; auto.
  destruct (H4 l eq_refl) as [z1 [Hz1 E1]]; destruct Hm as [z2 [Hz2 E2]].
  assert (z1 = z2) as <-.
  { apply inject_Z_injective; rewrite <- E1, <- E2; reflexivity. }
  exists z1; split; auto; apply filter_In; split; auto.
  apply existsb_exists; exists z1; split; auto; apply Z.eqb_refl.
Qed.

Lemma drop_codes_sound : forall cs b q,
  in_fbox b q -> mem_q q cs = false -> in_fbox (drop_codes cs b) q.
Proof.
  intros cs b q [H1 [H2 [H3 H4]]] Hm.
  repeat split; auto; simpl; intros cs' E.
  destruct (b_codes b) as [l|] eqn:El; simpl in E; [|discriminate].
  injection E as <-.
  destruct (H4 l eq_refl) as [z [Hz E1]].
  exists z; split; auto; apply filter_In; split; auto.
  apply negb_true_iff; destruct (mem_z z cs) eqn:Ez; auto.
  unfold mem_z in Ez; apply existsb_exists in Ez; destruct Ez as [z' [Hz' Ez']].
  apply Z.eqb_eq in Ez'; subst z'.
  assert (mem_q q cs = true) by (apply mem_q_iff; exists z; auto); congruence.
Qed.

(** ** Literals and disjunctive normal form at a leaf *)

Inductive lit : Type :=
| LLin (ts : list (nat * Q)) (k : Q) (strict : bool)   (* sum (q * x i) + k <= 0 (< 0) *)
| LIn (f : nat) (cs : list Z) (pos : bool).           (* mem_q (x f) cs = pos *)

Fixpoint linf (ts : list (nat * Q)) (x : input) : Q :=
  match ts with
  | [] => 0
  | (i, q) :: r => q * x i + linf r x
  end.

Definition lin_holds (ts : list (nat * Q)) (k : Q) (s : bool) (x : input) : Prop :=
  if s then linf ts x + k < 0 else linf ts x + k <= 0.

Definition lit_holds (l : lit) (x : input) : Prop :=
  match l with
  | LLin ts k s => lin_holds ts k s x
  | LIn f cs pos => mem_q (x f) cs = pos
  end.

Fixpoint feat_terms (ts : list (var * Q)) : list (nat * Q) :=
  match ts with
  | [] => []
  | (VF i, q) :: r => (i, q) :: feat_terms r
  | (VC, _) :: r => feat_terms r
  end.

Fixpoint conf_coef (ts : list (var * Q)) : Q :=
  match ts with
  | [] => 0
  | (VF _, _) :: r => conf_coef r
  | (VC, q) :: r => q + conf_coef r
  end.

Lemma lin_split : forall ts x c, lin_val ts x c == linf (feat_terms ts) x + conf_coef ts * c.
Proof.
  induction ts as [|[[i|] q] r IH]; intros x c; simpl.
  - ring.
  - rewrite IH; ring.
  - rewrite IH; ring.
Qed.

Definition neg_terms (ts : list (nat * Q)) : list (nat * Q) :=
  map (fun p => (fst p, - snd p)) ts.

Lemma linf_neg : forall ts x, linf (neg_terms ts) x == - linf ts x.
Proof.
  induction ts as [|[i q] r IH]; intros x; simpl.
  - reflexivity.
  - unfold neg_terms in IH; rewrite IH; ring.
Qed.

Definition cmp_lit (pos : bool) (ts : list (var * Q)) (k : Q) (s : bool) (c : Q) : lit :=
  let k' := Qred (k + conf_coef ts * c) in
  if pos then LLin (feat_terms ts) k' s
  else LLin (neg_terms (feat_terms ts)) (Qred (- k')) (negb s).

Definition product (l1 l2 : list (list lit)) : list (list lit) :=
  flat_map (fun t1 => map (fun t2 => t1 ++ t2) l2) l1.

Fixpoint dnf (pos : bool) (p : formula) (a : N) (c : Q) : list (list lit) :=
  match p with
  | FConst b => if Bool.eqb b pos then [[]] else []
  | FCmp ts k s => [[cmp_lit pos ts k s c]]
  | FIn f cs => [[LIn f cs pos]]
  | FAct acts => if Bool.eqb (existsb (N.eqb a) acts) pos then [[]] else []
  | FNot q => dnf (negb pos) q a c
  | FAnd p q =>
      if pos then product (dnf true p a c) (dnf true q a c)
      else dnf false p a c ++ dnf false q a c
  | FOr p q =>
      if pos then dnf true p a c ++ dnf true q a c
      else product (dnf false p a c) (dnf false q a c)
  end.

Definition term_holds (t : list lit) (x : input) : Prop := forall l, In l t -> lit_holds l x.

Lemma product_sound : forall l1 l2 t1 t2 x,
  In t1 l1 -> In t2 l2 -> term_holds t1 x -> term_holds t2 x ->
  exists t, In t (product l1 l2) /\ term_holds t x.
Proof.
  intros l1 l2 t1 t2 x H1 H2 T1 T2; exists (t1 ++ t2); split.
  - apply in_flat_map; exists t1; split; auto; apply in_map; auto.
  - intros l Hl; apply in_app_or in Hl; destruct Hl; auto.
Qed.

Lemma dnf_sound : forall p pos x a c, evalf p x a c = pos ->
  exists t, In t (dnf pos p a c) /\ term_holds t x.
Proof.
  induction p; intros pos x a c H; simpl in *.
  - subst; exists []; rewrite eqb_reflx; split; [left; auto | intros l []].
  - exists [cmp_lit pos terms k strict c]; split; [left; auto|].
    intros l [<-|[]]; unfold cmp_lit, lit_holds, lin_holds.
    pose proof (lin_split terms x c) as E.
    destruct pos, strict; cbv beta iota zeta delta [negb]; rewrite ?Qred_correct, ?linf_neg.
    + apply negb_true_iff, Qle_bool_false in H; lra.
    + apply Qle_bool_iff in H; lra.
    + apply negb_false_iff, Qle_bool_iff in H; lra.
    + apply Qle_bool_false in H; lra.
  - exists [LIn feature codes pos]; split; [left; auto|].
    intros l [<-|[]]; simpl; auto.
  - subst; rewrite eqb_reflx; exists []; split; [left; auto | intros l []].
  - apply IHp; subst; rewrite negb_involutive; auto.
  - destruct pos.
    + apply andb_true_iff in H; destruct H as [H1 H2].
      destruct (IHp1 true x a c H1) as [t1 [I1 T1]].
      destruct (IHp2 true x a c H2) as [t2 [I2 T2]].
      eapply product_sound; eauto.
    + apply andb_false_iff in H; destruct H as [H|H].
      * destruct (IHp1 false x a c H) as [t [I T]]; exists t; split; auto.
        apply in_or_app; auto.
      * destruct (IHp2 false x a c H) as [t [I T]]; exists t; split; auto.
        apply in_or_app; auto.
  - destruct pos.
    + apply orb_true_iff in H; destruct H as [H|H].
      * destruct (IHp1 true x a c H) as [t [I T]]; exists t; split; auto.
        apply in_or_app; auto.
      * destruct (IHp2 true x a c H) as [t [I T]]; exists t; split; auto.
        apply in_or_app; auto.
    + apply orb_false_iff in H; destruct H as [H1 H2].
      destruct (IHp1 false x a c H1) as [t1 [I1 T1]].
      destruct (IHp2 false x a c H2) as [t2 [I2 T2]].
      eapply product_sound; eauto.
Qed.

(** ** Fourier-Motzkin elimination over Q

    A constraint is [dot v x + k <= 0] ([< 0] when strict), with [v] a dense coefficient
    list indexed by feature.  Every derived constraint is a positive combination of two
    satisfied ones, hence satisfied: a derived constraint [0 + k <= 0] with [k > 0] (or
    [0 + k < 0] with [k >= 0]) shows that nothing satisfies the original system. *)

Record cstr : Type := Cstr { c_v : list Q; c_k : Q; c_s : bool }.

Fixpoint dot (v : list Q) (x : input) : Q :=
  match v with
  | [] => 0
  | a :: r => a * x O + dot r (fun i => x (S i))
  end.

Definition csat (x : input) (c : cstr) : Prop :=
  if c_s c then dot (c_v c) x + c_k c < 0 else dot (c_v c) x + c_k c <= 0.

Fixpoint vadd (u v : list Q) : list Q :=
  match u, v with
  | [], _ => v
  | _, [] => u
  | a :: u', b :: v' => Qred (a + b) :: vadd u' v'
  end.

Definition vscale (a : Q) (v : list Q) : list Q := map (fun b => Qred (a * b)) v.

Fixpoint unitv (i : nat) (a : Q) : list Q :=
  match i with O => [a] | S j => 0 :: unitv j a end.

Definition dense (ts : list (nat * Q)) : list Q :=
  fold_right (fun p acc => vadd (unitv (fst p) (snd p)) acc) [] ts.

Lemma dot_vadd : forall u v x, dot (vadd u v) x == dot u x + dot v x.
Proof.
  induction u as [|a u IH]; intros [|b v] x; cbn [dot vadd]; try ring.
  rewrite IH, Qred_correct; ring.
Qed.

Lemma dot_vscale : forall a v x, dot (vscale a v) x == a * dot v x.
Proof.
  intros a; induction v as [|b v IH]; intros x; cbn [dot vscale map]; try ring.
  unfold vscale in IH; rewrite IH, Qred_correct; ring.
Qed.

Lemma dot_unitv : forall i a x, dot (unitv i a) x == a * x i.
Proof.
  induction i as [|i IH]; intros a x; simpl.
  - ring.
  - rewrite IH; ring.
Qed.

Lemma dot_dense : forall ts x, dot (dense ts) x == linf ts x.
Proof.
  induction ts as [|[i q] r IH]; intros x; simpl.
  - reflexivity.
  - unfold dense in IH; rewrite dot_vadd, dot_unitv, IH; reflexivity.
Qed.

Definition comb (l : Q) (c1 : cstr) (m : Q) (c2 : cstr) : cstr :=
  Cstr (vadd (vscale l (c_v c1)) (vscale m (c_v c2)))
       (Qred (l * c_k c1 + m * c_k c2)) (c_s c1 || c_s c2).

Lemma mul_pos_le : forall l e, 0 < l -> e <= 0 -> l * e <= 0.
Proof. intros; nra. Qed.
Lemma mul_pos_lt : forall l e, 0 < l -> e < 0 -> l * e < 0.
Proof. intros; nra. Qed.

Lemma comb_sound : forall x l c1 m c2, 0 < l -> 0 < m -> csat x c1 -> csat x c2 ->
  csat x (comb l c1 m c2).
Proof.
  intros x l [v1 k1 s1] m [v2 k2 s2] Hl Hm H1 H2; unfold csat, comb in *;
    cbn [c_v c_k c_s] in *.
  assert (E : dot (vadd (vscale l v1) (vscale m v2)) x + Qred (l * k1 + m * k2)
              == l * (dot v1 x + k1) + m * (dot v2 x + k2)).
  { rewrite dot_vadd, !dot_vscale, Qred_correct; ring. }
  set (e1 := dot v1 x + k1) in *; set (e2 := dot v2 x + k2) in *.
  destruct s1, s2; cbn [orb] in *; rewrite E.
  - pose proof (mul_pos_lt l e1 Hl H1); pose proof (mul_pos_lt m e2 Hm H2); lra.
  - pose proof (mul_pos_lt l e1 Hl H1); pose proof (mul_pos_le m e2 Hm H2); lra.
  - pose proof (mul_pos_le l e1 Hl H1); pose proof (mul_pos_lt m e2 Hm H2); lra.
  - pose proof (mul_pos_le l e1 Hl H1); pose proof (mul_pos_le m e2 Hm H2); lra.
Qed.

Definition coef (k : nat) (c : cstr) : Q := nth k (c_v c) 0.

(** Largest number of constraints Fourier-Motzkin may hold at once; beyond, give up. *)
Definition fm_cap : N := 4096.

Definition elim (k : nat) (cs : list cstr) : option (list cstr) :=
  let ps := filter (fun c => Qltb 0 (coef k c)) cs in
  let ns := filter (fun c => Qltb (coef k c) 0) cs in
  let zs := filter (fun c => Qeq_bool (coef k c) 0) cs in
  if N.leb (N.of_nat (length zs) + N.of_nat (length ps) * N.of_nat (length ns)) fm_cap then
    Some (zs ++ flat_map (fun p => map (fun n => comb (- coef k n) p (coef k p) n) ns) ps)
  else None.

Lemma elim_sound : forall x k cs cs', (forall c, In c cs -> csat x c) ->
  elim k cs = Some cs' -> forall c, In c cs' -> csat x c.
Proof.
  intros x k cs cs' H E c Hc; unfold elim in E.
  destruct (N.leb _ _); [|discriminate].
  injection E as <-.
  apply in_app_or in Hc; destruct Hc as [Hc|Hc].
  - apply filter_In in Hc; destruct Hc; auto.
  - apply in_flat_map in Hc; destruct Hc as [p [Hp Hc]].
    apply in_map_iff in Hc; destruct Hc as [n [<- Hn]].
    apply filter_In in Hp; destruct Hp as [Hp Pp]; apply Qltb_iff in Pp.
    apply filter_In in Hn; destruct Hn as [Hn Pn]; apply Qltb_iff in Pn.
    apply comb_sound; auto; lra.
Qed.

Definition triv (c : cstr) : bool :=
  forallb (fun a => Qeq_bool a 0) (c_v c) &&
  (if c_s c then Qle_bool 0 (c_k c) else Qltb 0 (c_k c)).

Lemma dot_zero : forall v x, forallb (fun a => Qeq_bool a 0) v = true -> dot v x == 0.
Proof.
  induction v as [|a v IH]; intros x H; simpl in *.
  - reflexivity.
  - apply andb_true_iff in H; destruct H as [H1 H2]; apply Qeq_bool_iff in H1.
    rewrite H1, IH; auto; ring.
Qed.

Lemma triv_sound : forall x c, csat x c -> triv c = false.
Proof.
  intros x [v k s] H; unfold triv, csat in *; simpl in *.
  destruct (forallb _ v) eqn:Ez; auto; simpl.
  pose proof (dot_zero v x Ez) as Z0.
  destruct s.
  - destruct (Qle_bool 0 k) eqn:E; auto; apply Qle_bool_iff in E; lra.
  - destruct (Qltb 0 k) eqn:E; auto; apply Qltb_iff in E; lra.
Qed.

Fixpoint fm_loop (fuel k : nat) (cs : list cstr) : bool :=
  existsb triv cs ||
  match fuel with
  | O => false
  | S f => match elim k cs with Some cs' => fm_loop f (S k) cs' | None => false end
  end.

Lemma fm_loop_sound : forall fuel k cs x, (forall c, In c cs -> csat x c) ->
  fm_loop fuel k cs = false.
Proof.
  induction fuel as [|f IH]; intros k cs x H; simpl.
  - destruct (existsb triv cs) eqn:E; auto.
    apply existsb_exists in E; destruct E as [c [Hc Ht]].
    rewrite (triv_sound x c (H c Hc)) in Ht; discriminate.
  - destruct (existsb triv cs) eqn:E; simpl.
    + apply existsb_exists in E; destruct E as [c [Hc Ht]].
      rewrite (triv_sound x c (H c Hc)) in Ht; discriminate.
    + destruct (elim k cs) as [cs'|] eqn:Ee; auto.
      apply IH with x; intros c Hc; eapply elim_sound; eauto.
Qed.

Definition fm_check (cs : list cstr) : bool :=
  fm_loop (fold_right (fun c m => Nat.max (length (c_v c)) m) O cs) O cs.

Lemma fm_check_sound : forall cs x, (forall c, In c cs -> csat x c) -> fm_check cs = false.
Proof. intros cs x H; apply fm_loop_sound with x; auto. Qed.

(** ** Deciding one conjunction inside a box *)

Definition mlit := (list (nat * Q) * Q * bool)%type.

Definition mlit_holds (m : mlit) (x : input) : Prop :=
  let '(ts, k, s) := m in lin_holds ts k s x.

Definition single (ts : list (nat * Q)) : option (nat * Q) :=
  match ts with [(i, q)] => Some (i, q) | _ => None end.

Lemma single_eq : forall ts i q, single ts = Some (i, q) -> ts = [(i, q)].
Proof.
  intros [|[i' q'] [|p r]] i q H; simpl in H; try discriminate.
  injection H as <- <-; reflexivity.
Qed.

(** Integer rounding of a literal over integral features (a Chvatal-Gomory cut of one
    constraint): scale [sum (q * x) + k <= 0] so that the coefficients are coprime whole
    numbers; the sum is then a whole number, so its bound can be rounded down. *)

Definition all_int (bx : box) (ts : list (nat * Q)) : bool :=
  forallb (fun p => match nth_error bx (fst p) with Some b => b_int b | None => false end) ts.

Definition whole (q : Q) : bool := Qeq_bool q (inject_Z (Qfloor q)).

Definition lcm_den (ts : list (nat * Q)) : Z :=
  fold_right (fun p acc => Z.lcm (Z.pos (Qden (Qred (snd p)))) acc) 1%Z ts.

Definition gcd_num (ts : list (nat * Q)) (l : Z) : Z :=
  fold_right
    (fun p acc => Z.gcd (Qnum (Qred (snd p)) * (l / Z.pos (Qden (Qred (snd p)))))%Z acc)
    0%Z ts.

Definition int_round (bx : box) (m : mlit) : mlit :=
  let '(ts, k, s) := m in
  let l := lcm_den ts in
  let g := gcd_num ts l in
  if Z.ltb 0 g && all_int bx ts then
    let mul := Qmake l (Z.to_pos g) in
    let ts' := map (fun p => (fst p, Qred (mul * snd p))) ts in
    if forallb (fun p => whole (snd p)) ts' && Qltb 0 mul then
      let r := Qred (- (mul * k)) in
      (ts', - inject_Z (if s then (Qceiling r - 1)%Z else Qfloor r), false)
    else m
  else m.

Lemma linf_scale : forall ts x mul,
  linf (map (fun p => (fst p, Qred (mul * snd p))) ts) x == mul * linf ts x.
Proof.
  induction ts as [|[i q] r IH]; intros x mul; cbn [linf map fst snd].
  - ring.
  - rewrite IH, Qred_correct; ring.
Qed.

Lemma linf_int : forall ts bx x, in_box bx x -> all_int bx ts = true ->
  forallb (fun p => whole (snd p)) ts = true -> is_int (linf ts x).
Proof.
  induction ts as [|[i q] r IH]; intros bx x Hb Ha Hw; cbn [linf].
  - exists 0%Z; reflexivity.
  - unfold all_int in Ha; cbn [forallb fst] in Ha; cbn [forallb snd] in Hw.
    apply andb_true_iff in Ha; destruct Ha as [Hi Ha].
    apply andb_true_iff in Hw; destruct Hw as [Hq Hw].
    destruct (nth_error bx i) as [b|] eqn:E; [|discriminate].
    destruct (Hb i b E) as [_ [_ [Hint _]]].
    destruct (Hint Hi) as [z1 Hz1].
    destruct (IH bx x Hb Ha Hw) as [z2 Hz2].
    unfold whole in Hq; apply Qeq_bool_iff in Hq.
    exists (Qfloor q * z1 + z2)%Z.
    rewrite inject_Z_plus, inject_Z_mult, <- Hq, <- Hz1, <- Hz2; reflexivity.
Qed.

Lemma all_int_map : forall bx ts (f : nat * Q -> nat * Q), (forall p, fst (f p) = fst p) ->
  all_int bx (map f ts) = all_int bx ts.
Proof.
  intros bx ts f Hf; unfold all_int; induction ts as [|p r IH]; cbn [map forallb]; auto.
  rewrite Hf, IH; reflexivity.
Qed.

Lemma int_round_sound : forall bx m x, in_box bx x -> mlit_holds m x ->
  mlit_holds (int_round bx m) x.
Proof.
  intros bx [[ts k] s] x Hb Hm; unfold int_round.
  destruct (Z.ltb 0 _ && all_int bx ts) eqn:E1; [|auto].
  destruct (forallb _ _ && Qltb 0 _) eqn:E2; [|auto].
  apply andb_true_iff in E1; destruct E1 as [_ Hall].
  apply andb_true_iff in E2; destruct E2 as [Hwhole Hpos]; apply Qltb_iff in Hpos.
  set (mul := Qmake (lcm_den ts) (Z.to_pos (gcd_num ts (lcm_den ts)))) in *.
  pose proof (linf_scale ts x mul) as HS.
  assert (Hall' : all_int bx (map (fun p => (fst p, Qred (mul * snd p))) ts) = true).
  { rewrite all_int_map; auto. }
  destruct (linf_int _ bx x Hb Hall' Hwhole) as [z Hz].
  unfold mlit_holds, lin_holds in *; cbn [fst snd] in *.
  set (S := linf (map (fun p => (fst p, Qred (mul * snd p))) ts) x) in *.
  set (r := Qred (- (mul * k))).
  assert (Hr : r == - (mul * k)) by apply Qred_correct.
  destruct s.
  + assert (Hlt : S < r).
    { rewrite Hr, HS; pose proof (mul_pos_lt mul (linf ts x + k) Hpos Hm); lra. }
    rewrite Hz in Hlt |- *.
    assert (z < Qceiling r)%Z.
    { rewrite Zlt_Qlt; apply Qlt_le_trans with r; [auto | apply Qle_ceiling]. }
    assert (inject_Z z <= inject_Z (Qceiling r - 1)) by (rewrite <- Zle_Qle; lia).
    lra.
  + assert (Hle : S <= r).
    { rewrite Hr, HS; pose proof (mul_pos_le mul (linf ts x + k) Hpos Hm); lra. }
    rewrite Hz in Hle |- *.
    assert (inject_Z z <= inject_Z (Qfloor r)).
    { rewrite <- Zle_Qle, <- (Qfloor_Z z); apply Qfloor_resp_le; auto. }
    lra.
Qed.

Definition apply_lit (st : box * list mlit) (l : lit) : box * list mlit :=
  let (bx, ms) := st in
  match l with
  | LIn f cs true => (upd bx f (keep_codes cs), ms)
  | LIn f cs false => (upd bx f (drop_codes cs), ms)
  | LLin [] k s =>
      (* a constant: true adds nothing, false is left to [fm_check] (found at once) *)
      if (if s then Qltb k 0 else Qle_bool k 0) then (bx, ms) else (bx, ([], k, s) :: ms)
  | LLin ts k s =>
      match single ts with
      | Some (i, q) =>
          if Qltb 0 q then (upd bx i (cut_hi (Qred (- k / q)) s), ms)
          else if Qltb q 0 then (upd bx i (cut_lo (Qred (k / - q)) s), ms)
          else (bx, int_round bx (ts, k, s) :: ms)
      | None => (bx, int_round bx (ts, k, s) :: ms)
      end
  end.

Definition st_ok (st : box * list mlit) (x : input) : Prop :=
  in_box (fst st) x /\ forall m, In m (snd st) -> mlit_holds m x.

Lemma apply_lit_sound : forall st l x, st_ok st x -> lit_holds l x -> st_ok (apply_lit st l) x.
Proof.
  intros [bx ms] l x [Hb Hm] Hl; simpl in Hb, Hm.
  destruct l as [ts k s | f cs [|]]; cbn [lit_holds] in Hl; cbn [apply_lit].
  - destruct ts as [|p ts'].
    { destruct (if s then Qltb k 0 else Qle_bool k 0).
      - split; auto.
      - split; auto; simpl; intros m [<-|Hm']; auto. }
    destruct (single (p :: ts')) as [[i q]|] eqn:Es.
    + apply single_eq in Es; rewrite Es in Hl |- *.
      unfold lin_holds in Hl; cbn [linf] in Hl.
      destruct (Qltb 0 q) eqn:Ep; [|destruct (Qltb q 0) eqn:En].
      * apply Qltb_iff in Ep; split; auto; cbn [fst snd].
        apply upd_sound; auto; intros b Hbi; apply cut_hi_sound; [apply (Hb i b Hbi)|].
        unfold hi_ok; destruct s; rewrite Qred_correct.
        -- apply Qlt_shift_div_l; auto; lra.
        -- apply Qle_shift_div_l; auto; lra.
      * apply Qltb_iff in En; split; auto; cbn [fst snd].
        apply upd_sound; auto; intros b Hbi; apply cut_lo_sound; [apply (Hb i b Hbi)|].
        unfold lo_ok; destruct s; rewrite Qred_correct.
        -- apply Qlt_shift_div_r; [lra|]; lra.
        -- apply Qle_shift_div_r; [lra|]; lra.
      * split; auto; cbn [fst snd]; intros m [<-|Hm']; [apply int_round_sound|]; auto.
    + split; auto; cbn [fst snd]; intros m [<-|Hm']; [apply int_round_sound|]; auto.
  - split; auto; simpl; apply upd_sound; auto; intros b Hbi.
    apply keep_codes_sound; auto; apply (Hb f b Hbi).
  - split; auto; simpl; apply upd_sound; auto; intros b Hbi.
    apply drop_codes_sound; auto; apply (Hb f b Hbi).
Qed.

Definition apply_lits (bx : box) (t : list lit) : box * list mlit :=
  fold_left apply_lit t (bx, []).

Lemma apply_lits_sound : forall t st x, st_ok st x -> term_holds t x ->
  st_ok (fold_left apply_lit t st) x.
Proof.
  induction t as [|l t IH]; intros st x H Ht; simpl; auto.
  apply IH; [apply apply_lit_sound; auto; apply Ht; left; auto|].
  intros l' Hl'; apply Ht; right; auto.
Qed.

Definition mlit_cstr (m : mlit) : cstr := let '(ts, k, s) := m in Cstr (dense ts) k s.

(** The features of the multi-feature literals, each once. *)
Fixpoint uniq (l acc : list nat) : list nat :=
  match l with
  | [] => acc
  | i :: r => if existsb (Nat.eqb i) acc then uniq r acc else uniq r (i :: acc)
  end.

Definition ms_vars (ms : list mlit) : list nat :=
  uniq (flat_map (fun m => map fst (fst (fst m))) ms) [].

(** The (tightened) bounds of feature [i] as two constraints. *)
Definition bound_cs (bx : box) (i : nat) : list cstr :=
  match nth_error bx i with
  | Some b =>
      let bd := tight b in
      [Cstr (unitv i (-1)) (lo bd) (los bd); Cstr (unitv i 1) (- hi bd) (his bd)]
  | None => []
  end.

Lemma bound_cs_sound : forall bx i x c, in_box bx x -> In c (bound_cs bx i) -> csat x c.
Proof.
  intros bx i x c H Hc; unfold bound_cs in Hc.
  destruct (nth_error bx i) as [b|] eqn:E; [|destruct Hc].
  pose proof (tight_sound _ _ (H i b E)) as [Hl Hh].
  destruct Hc as [<-|[<-|[]]]; unfold csat; cbn [c_s c_v c_k].
  - unfold lo_ok in Hl; destruct (los (tight b)); rewrite dot_unitv; lra.
  - unfold hi_ok in Hh; destruct (his (tight b)); rewrite dot_unitv; lra.
Qed.

(** [term_infeasible bx t = true]: no input of the box satisfies every literal of [t].
    Fourier-Motzkin gets the bounds of the features it has to eliminate, no others (the
    others' bounds cannot contradict: the box is not empty). *)
Definition term_infeasible (bx : box) (t : list lit) : bool :=
  let (bx', ms) := apply_lits bx t in
  box_empty bx' ||
  match ms with
  | [] => false
  | _ => fm_check (flat_map (bound_cs bx') (ms_vars ms) ++ map mlit_cstr ms)
  end.

Lemma term_infeasible_sound : forall bx t x, in_box bx x -> term_holds t x ->
  term_infeasible bx t = false.
Proof.
  intros bx t x Hb Ht; unfold term_infeasible, apply_lits.
  pose proof (apply_lits_sound t (bx, []) x) as H.
  destruct (fold_left apply_lit t (bx, [])) as [bx' ms].
  destruct H as [Hb' Hm]; [split; auto; intros m []| auto |]; simpl in Hb', Hm.
  rewrite (box_empty_sound bx' x Hb'); simpl.
  destruct ms as [|m ms']; auto.
  apply fm_check_sound with x; intros c Hc; apply in_app_or in Hc; destruct Hc as [Hc|Hc].
  - apply in_flat_map in Hc; destruct Hc as [i [_ Hc]]; apply bound_cs_sound with bx' i; auto.
  - apply in_map_iff in Hc; destruct Hc as [[[ts k] s] [<- Hin]].
    pose proof (Hm _ Hin) as Hh; unfold mlit_holds, lin_holds in Hh; unfold csat.
    cbn [mlit_cstr c_s c_v c_k]; destruct s; rewrite dot_dense; auto.
Qed.

(** ** The checker *)

Definition leaf_ok (bx : box) (w e : formula) (a : N) (c : Q) : bool :=
  forallb (term_infeasible bx) (dnf true (FAnd w (FNot e)) a c).

Lemma leaf_ok_sound : forall bx w e a c x, in_box bx x -> leaf_ok bx w e a c = true ->
  evalf w x a c = true -> evalf e x a c = true.
Proof.
  intros bx w e a c x Hb Hok Hw.
  destruct (evalf e x a c) eqn:He; auto.
  assert (Hf : evalf (FAnd w (FNot e)) x a c = true) by (simpl; rewrite Hw, He; auto).
  destruct (dnf_sound _ _ _ _ _ Hf) as [t [Hin Ht]].
  unfold leaf_ok in Hok; rewrite forallb_forall in Hok.
  pose proof (Hok t Hin) as Hi.
  rewrite (term_infeasible_sound bx t x Hb Ht) in Hi; discriminate.
Qed.

(** The box of the child an input goes to contains it (the four ways a walk narrows). *)
Lemma in_box_left : forall bx f th x, in_box bx x -> Qle_bool (x f) th = true ->
  in_box (upd bx f (cut_hi th false)) x.
Proof.
  intros bx f th x Hb E; apply upd_sound; auto; intros b Hbi.
  apply cut_hi_sound; [apply (Hb f b Hbi) | apply Qle_bool_iff; auto].
Qed.

Lemma in_box_right : forall bx f th x, in_box bx x -> Qle_bool (x f) th = false ->
  in_box (upd bx f (cut_lo th true)) x.
Proof.
  intros bx f th x Hb E; apply upd_sound; auto; intros b Hbi.
  apply cut_lo_sound; [apply (Hb f b Hbi) | apply Qle_bool_false; auto].
Qed.

Lemma in_box_keep : forall bx f cs x, in_box bx x -> mem_q (x f) cs = true ->
  in_box (upd bx f (keep_codes cs)) x.
Proof.
  intros bx f cs x Hb E; apply upd_sound; auto; intros b Hbi.
  apply keep_codes_sound; auto; apply (Hb f b Hbi).
Qed.

Lemma in_box_drop : forall bx f cs x, in_box bx x -> mem_q (x f) cs = false ->
  in_box (upd bx f (drop_codes cs)) x.
Proof.
  intros bx f cs x Hb E; apply upd_sound; auto; intros b Hbi.
  apply drop_codes_sound; auto; apply (Hb f b Hbi).
Qed.

Fixpoint check_tree (w e : formula) (bx : box) (t : tree) : bool :=
  match t with
  | Leaf a c => leaf_ok bx w e a c
  | Split f th l r =>
      check_tree w e (upd bx f (cut_hi th false)) l &&
      check_tree w e (upd bx f (cut_lo th true)) r
  | CSplit f cs l r =>
      check_tree w e (upd bx f (keep_codes cs)) l &&
      check_tree w e (upd bx f (drop_codes cs)) r
  end.

Lemma check_tree_sound : forall w e t bx x, in_box bx x -> check_tree w e bx t = true ->
  evalf w x (fst (eval t x)) (snd (eval t x)) = true ->
  evalf e x (fst (eval t x)) (snd (eval t x)) = true.
Proof.
  intros w e; induction t as [a c|f th l IHl r IHr|f cs l IHl r IHr]; intros bx x Hb H;
    simpl in H.
  - apply leaf_ok_sound with bx; auto.
  - apply andb_true_iff in H; destruct H as [Hl Hr]; simpl.
    destruct (Qle_bool (x f) th) eqn:E.
    + apply IHl with (upd bx f (cut_hi th false)); auto; apply in_box_left; auto.
    + apply IHr with (upd bx f (cut_lo th true)); auto; apply in_box_right; auto.
  - apply andb_true_iff in H; destruct H as [Hl Hr]; simpl.
    destruct (mem_q (x f) cs) eqn:E.
    + apply IHl with (upd bx f (keep_codes cs)); auto; apply in_box_keep; auto.
    + apply IHr with (upd bx f (drop_codes cs)); auto; apply in_box_drop; auto.
Qed.

Definition check (d : domain) (t : tree) (w e : formula) : bool :=
  check_tree w e (dom_box d) t.

(** The soundness theorem, proved once for every model and invariant. *)
Theorem check_sound : forall d t w e, check d t w e = true -> valid d t w e.
Proof.
  intros d t w e H x Hx; unfold holds; rewrite <- !evalf_sem.
  apply check_tree_sound with (dom_box d); auto; apply dom_box_sound; auto.
Qed.

(** ** Clipping lands in the domain *)

Lemma clip1_sound : forall fd q, wf_fdom fd ->
  (fd_integral fd = true -> is_int q) ->
  (forall cs, fd_codes fd = Some cs -> is_one_of q cs) ->
  in_fdom fd (clip1 fd q).
Proof.
  intros fd q [Hmm [Hint Hcodes]] Hi Hc; unfold clip1, in_fdom.
  destruct (Qle_bool q (fd_min fd)) eqn:E1; [|destruct (Qle_bool (fd_max fd) q) eqn:E2].
  - apply Qle_bool_iff in E1; split; [apply Qle_refl|]; split; [auto|]; split.
    + intros H; apply Hint; auto.
    + intros cs Hcs; destruct (Hc cs Hcs) as [z [Hz Eq]]; exists z; split; auto.
      destruct (Hcodes cs Hcs z Hz) as [Hlo _]; rewrite <- Eq in *; lra.
  - apply Qle_bool_iff in E2; split; [auto|]; split; [apply Qle_refl|]; split.
    + intros H; apply Hint; auto.
    + intros cs Hcs; destruct (Hc cs Hcs) as [z [Hz Eq]]; exists z; split; auto.
      destruct (Hcodes cs Hcs z Hz) as [_ Hhi]; rewrite <- Eq in *; lra.
  - apply Qle_bool_false in E1; apply Qle_bool_false in E2.
    repeat split; auto; lra.
Qed.

Theorem clip_in_domain : forall d x,
  (forall i fd, nth_error d i = Some fd -> wf_fdom fd) ->
  well_typed d x -> in_domain d (clip d x).
Proof.
  intros d x Hwf Hx i fd Hi; unfold clip; rewrite Hi.
  destruct (Hx i fd Hi) as [H1 H2]; apply clip1_sound; auto; apply (Hwf i fd Hi).
Qed.

(** So a proved invariant holds for every decision taken at run time, on the clipped input. *)
Corollary valid_at_run_time : forall d t w e,
  valid d t w e ->
  (forall i fd, nth_error d i = Some fd -> wf_fdom fd) ->
  forall x, well_typed d x -> holds w e (clip d x) (decide d t x).
Proof.
  intros d t w e Hv Hwf x Hx; apply Hv, clip_in_domain; auto.
Qed.

(** ** Readable statements

    An export states each invariant over named features as a proposition [W x a c] (for
    [when]) and [E x a c] (for [ensure]) and proves once per formula that it means the same
    as [sem]; [readable_sound] then turns [check] into the readable theorem. *)

Theorem readable_sound : forall d t w e (W E : input -> N -> Q -> Prop),
  (forall x a c, W x a c <-> sem w x a c) ->
  (forall x a c, E x a c <-> sem e x a c) ->
  forall x, in_domain d x -> check d t w e = true ->
  W x (fst (eval t x)) (snd (eval t x)) -> E x (fst (eval t x)) (snd (eval t x)).
Proof.
  intros d t w e W E HW HE x Hx Hc Hw.
  apply HE; apply (check_sound d t w e Hc x Hx); apply HW; auto.
Qed.

(** Decidable membership in the domain, for concrete counterexamples. *)
Definition in_fdom_b (fd : fdom) (q : Q) : bool :=
  Qle_bool (fd_min fd) q && Qle_bool q (fd_max fd) &&
  (if fd_integral fd then Qeq_bool q (inject_Z (Qfloor q)) else true) &&
  match fd_codes fd with Some cs => mem_q q cs | None => true end.

Fixpoint in_domain_b (d : domain) (x : input) : bool :=
  match d with
  | [] => true
  | fd :: r => in_fdom_b fd (x O) && in_domain_b r (fun i => x (S i))
  end.

Lemma in_domain_b_sound : forall d x, in_domain_b d x = true -> in_domain d x.
Proof.
  induction d as [|fd r IH]; intros x H [|i] fd' Hi; simpl in *; try discriminate.
  - injection Hi as <-.
    apply andb_true_iff in H; destruct H as [H _]; unfold in_fdom_b in H.
    apply andb_true_iff in H; destruct H as [H H4].
    apply andb_true_iff in H; destruct H as [H H3].
    apply andb_true_iff in H; destruct H as [H1 H2].
    apply Qle_bool_iff in H1; apply Qle_bool_iff in H2.
    repeat split; auto.
    + intros Hint; rewrite Hint in H3; apply Qeq_bool_iff in H3; exists (Qfloor (x O)); auto.
    + intros cs Hcs; rewrite Hcs in H4; apply mem_q_iff; auto.
  - apply andb_true_iff in H; destruct H as [_ H].
    apply (IH (fun j => x (S j)) H i fd' Hi).
Qed.

(** A concrete input of the domain that satisfies [w] and breaks [e] refutes the readable
    statement of the invariant. *)
Theorem readable_refuted : forall d t w e (W E : input -> N -> Q -> Prop),
  (forall x a c, W x a c <-> sem w x a c) ->
  (forall x a c, E x a c <-> sem e x a c) ->
  forall x, in_domain_b d x = true ->
  evalf w x (fst (eval t x)) (snd (eval t x)) = true ->
  evalf e x (fst (eval t x)) (snd (eval t x)) = false ->
  ~ (forall y, in_domain d y ->
       W y (fst (eval t y)) (snd (eval t y)) -> E y (fst (eval t y)) (snd (eval t y))).
Proof.
  intros d t w e W E HW HE x Hd Hw He H.
  assert (Hs : sem e x (fst (eval t x)) (snd (eval t x))).
  { apply HE, H; [apply in_domain_b_sound; auto | apply HW, evalf_sem; auto]. }
  apply evalf_sem in Hs; congruence.
Qed.

(** The same for an invariant without [when]. *)
Theorem readable_refuted_always : forall d t e (E : input -> N -> Q -> Prop),
  (forall x a c, E x a c <-> sem e x a c) ->
  forall x, in_domain_b d x = true ->
  evalf e x (fst (eval t x)) (snd (eval t x)) = false ->
  ~ (forall y, in_domain d y -> E y (fst (eval t y)) (snd (eval t y))).
Proof.
  intros d t e E HE x Hd He H.
  assert (Hs : sem e x (fst (eval t x)) (snd (eval t x))).
  { apply HE, H; apply in_domain_b_sound; auto. }
  apply evalf_sem in Hs; congruence.
Qed.

(** ** Tactics for the readable-statement lemmas

    [clef_iff] proves [R <-> sem f x a c] for a readable proposition [R] that has the
    connective structure of the formula [f] ([FOr (FNot p) q] read as an implication): it
    follows [f] constructor by constructor, and proves each comparison with [lra]. *)

Lemma sem_and_iff : forall p q x a c (A B : Prop),
  (A <-> sem p x a c) -> (B <-> sem q x a c) -> (A /\ B <-> sem (FAnd p q) x a c).
Proof. intros; simpl; tauto. Qed.
Lemma sem_or_iff : forall p q x a c (A B : Prop),
  (A <-> sem p x a c) -> (B <-> sem q x a c) -> (A \/ B <-> sem (FOr p q) x a c).
Proof. intros; simpl; tauto. Qed.
Lemma sem_not_iff : forall p x a c (A : Prop),
  (A <-> sem p x a c) -> (~ A <-> sem (FNot p) x a c).
Proof. intros; simpl; tauto. Qed.

(** [p implies q] is [FOr (FNot p) q]; reading it as [->] needs [sem p] decidable, which
    [evalf_sem] gives. *)
Lemma sem_imp_iff : forall p q x a c (A B : Prop),
  (A <-> sem p x a c) -> (B <-> sem q x a c) -> ((A -> B) <-> sem (FOr (FNot p) q) x a c).
Proof.
  intros p q x a c A B HA HB; simpl; split.
  - intros H; destruct (evalf p x a c) eqn:E.
    + right; apply HB, H, HA, evalf_sem; auto.
    + left; intros Hp; apply evalf_sem in Hp; congruence.
  - intros [H|H] Ha; [exfalso; apply H, HA; auto | apply HB; auto].
Qed.

Lemma In_single : forall (a b : N), a = b <-> In a [b].
Proof. intros a b; simpl; split; [intros ->; auto | intros [->|[]]; auto]. Qed.
Lemma is_one_of_single : forall q z, q == inject_Z z <-> is_one_of q [z].
Proof.
  intros q z; unfold is_one_of; split.
  - intros H; exists z; simpl; auto.
  - intros [z' [[<-|[]] H]]; auto.
Qed.

Ltac clef_atom :=
  cbn [sem];
  first
    [ reflexivity
    | apply In_single
    | apply is_one_of_single
    | (cbn [lin_val var_val]; split; intro; lra) ].

Ltac clef_iff :=
  lazymatch goal with
  | |- (_ -> _) <-> sem (FOr (FNot _) _) _ _ _ => apply sem_imp_iff; clef_iff
  | |- _ <-> sem (FAnd _ _) _ _ _ => apply sem_and_iff; clef_iff
  | |- _ <-> sem (FOr _ _) _ _ _ => apply sem_or_iff; clef_iff
  | |- _ <-> sem (FNot _) _ _ _ => apply sem_not_iff; clef_iff
  | |- _ => clef_atom
  end.

(** ** Relational invariants, checked by two walks

    [rel_check] walks the tree with the box of each leaf that an input [x] can reach
    ([rel_walk]).  At a leaf of action [a], every input [x'] related to an [x] of that box lies
    in the box relaxed on the relation's feature ([relax_box]: monotone keeps the lower bound
    and takes the domain's upper one, stable widens both bounds by [delta], independent takes
    the domain's bounds), and a second walk from that box ([check_pruned]: the walk of [check]
    that skips a subtree whose box is empty on the feature its split narrowed) shows that every decision there which meets
    [when] is one the relation allows after [a].  A leaf where [when] cannot hold at [x]
    (with the leaf's decision, in its box: [leaf_ok] of [when => false]) is skipped; [when]
    at [x] narrows nothing else (leaving out a hypothesis can only make the check fail,
    never wrong). *)

(** Whether the box [bx] is empty on feature [f] (the one a split just narrowed: the rest of
    the box was not empty, or the walk would not have come here).  The walks below test it
    with [if], not [||] or [&&]: [vm_compute] evaluates a function's arguments first, and
    would walk the subtree it prunes. *)
Definition feat_empty (bx : box) (f : nat) : bool :=
  match nth_error bx f with Some b => fbox_empty b | None => false end.

Lemma feat_empty_sound : forall bx f x, in_box bx x -> feat_empty bx f = false.
Proof.
  intros bx f x H; unfold feat_empty.
  destruct (nth_error bx f) as [b|] eqn:E; auto.
  apply fbox_empty_sound with (x f); apply H; auto.
Qed.

Fixpoint check_pruned (w e : formula) (bx : box) (t : tree) : bool :=
  match t with
  | Leaf a c => leaf_ok bx w e a c
  | Split f th l r =>
      let bl := upd bx f (cut_hi th false) in
      let br := upd bx f (cut_lo th true) in
      if (if feat_empty bl f then true else check_pruned w e bl l)
      then (if feat_empty br f then true else check_pruned w e br r) else false
  | CSplit f cs l r =>
      let bl := upd bx f (keep_codes cs) in
      let br := upd bx f (drop_codes cs) in
      if (if feat_empty bl f then true else check_pruned w e bl l)
      then (if feat_empty br f then true else check_pruned w e br r) else false
  end.

Lemma check_pruned_sound : forall w e t bx x, in_box bx x -> check_pruned w e bx t = true ->
  evalf w x (fst (eval t x)) (snd (eval t x)) = true ->
  evalf e x (fst (eval t x)) (snd (eval t x)) = true.
Proof.
  intros w e; induction t as [a c|f th l IHl r IHr|f cs l IHl r IHr]; intros bx x Hb H;
    simpl in H.
  - apply leaf_ok_sound with bx; auto.
  - apply andb_true_iff in H; destruct H as [Hl Hr]; simpl.
    destruct (Qle_bool (x f) th) eqn:E.
    + pose proof (in_box_left bx f th x Hb E) as Hb'.
      rewrite (feat_empty_sound _ f x Hb') in Hl; simpl in Hl.
      apply IHl with (upd bx f (cut_hi th false)); auto.
    + pose proof (in_box_right bx f th x Hb E) as Hb'.
      rewrite (feat_empty_sound _ f x Hb') in Hr; simpl in Hr.
      apply IHr with (upd bx f (cut_lo th true)); auto.
  - apply andb_true_iff in H; destruct H as [Hl Hr]; simpl.
    destruct (mem_q (x f) cs) eqn:E.
    + pose proof (in_box_keep bx f cs x Hb E) as Hb'.
      rewrite (feat_empty_sound _ f x Hb') in Hl; simpl in Hl.
      apply IHl with (upd bx f (keep_codes cs)); auto.
    + pose proof (in_box_drop bx f cs x Hb E) as Hb'.
      rewrite (feat_empty_sound _ f x Hb') in Hr; simpl in Hr.
      apply IHr with (upd bx f (drop_codes cs)); auto.
Qed.

Lemma nth_error_upd : forall bx i g j,
  nth_error (upd bx i g) j = if Nat.eqb i j then option_map g (nth_error bx j) else nth_error bx j.
Proof.
  induction bx as [|b r IH]; intros i g j.
  - simpl; destruct (Nat.eqb i j); destruct j; reflexivity.
  - destruct i as [|i]; destruct j as [|j]; simpl; auto.
Qed.

Lemma in_fbox_compat : forall b q q', q == q' -> in_fbox b q -> in_fbox b q'.
Proof.
  intros b q q' E [H1 [H2 [H3 H4]]]; unfold lo_ok, hi_ok in *.
  repeat split; unfold lo_ok, hi_ok.
  - destruct (b_los b); lra.
  - destruct (b_his b); lra.
  - intros Hi; destruct (H3 Hi) as [z Hz]; exists z.
    apply Qeq_trans with q; [apply Qeq_sym|]; auto.
  - intros cs Hc; destruct (H4 cs Hc) as [z [Hz Ez]]; exists z; split; auto.
    apply Qeq_trans with q; [apply Qeq_sym|]; auto.
Qed.

(** The box of the related inputs [x'] on the relation's feature, from the box [b] of [x] there
    and the domain's box [df] of that feature (stable: [b]'s bounds rounded to whole numbers
    first for an integral feature, so that the widened box holds no more whole numbers than
    the related ones). *)
Definition relax_fbox (r : relation) (df b : fbox) : fbox :=
  match r with
  | RMonotone _ _ => FBox (b_int df) (b_lo b) (b_los b) (b_hi df) (b_his df) (b_codes df)
  | RStable _ dl =>
      let tb := tight b in
      cut_lo (b_lo df) (b_los df) (cut_hi (b_hi df) (b_his df)
        (FBox (b_int df) (lo tb - dl) (los tb) (hi tb + dl) (his tb) (b_codes df)))
  | RIndependent _ => df
  end.

Definition relax_box (r : relation) (df : fbox) (bx : box) : box :=
  upd bx (rel_feature r) (relax_fbox r df).

Lemma relax_box_sound : forall r df bx x x', in_box bx x -> in_fbox df (x' (rel_feature r)) ->
  related r x x' -> in_box (relax_box r df bx) x'.
Proof.
  intros r df bx x x' Hb Hdf [Hoff Hon] j b Hj.
  unfold relax_box in Hj; rewrite nth_error_upd in Hj.
  destruct (Nat.eqb (rel_feature r) j) eqn:E.
  - apply Nat.eqb_eq in E; subst j.
    destruct (nth_error bx (rel_feature r)) as [b0|] eqn:Eb; simpl in Hj; [|discriminate].
    injection Hj as <-.
    pose proof (Hb _ _ Eb) as H0.
    destruct Hdf as [D1 [D2 [D3 D4]]]; destruct H0 as [B1 [B2 [B3 B4]]].
    destruct r as [f ranks|f dl|f]; simpl in *.
    + repeat split; simpl; auto; unfold lo_ok in *; destruct (b_los b0); lra.
    + assert (T : in_bnds (tight b0) (x f)) by (apply tight_sound; repeat split; auto).
      destruct T as [T1 T2].
      apply cut_lo_sound; [apply cut_hi_sound|]; auto.
      repeat split; simpl; auto; unfold lo_ok, hi_ok in *;
        [destruct (los (tight b0)) | destruct (his (tight b0))]; lra.
    + repeat split; auto.
  - apply Nat.eqb_neq in E.
    apply in_fbox_compat with (x j); [apply Hoff; auto | apply Hb; auto].
Qed.

Definition rel_okb (r : relation) (a a' : N) : bool :=
  match r with
  | RMonotone _ ranks => N.leb (rank ranks a) (rank ranks a')
  | _ => N.eqb a a'
  end.

Lemma rel_okb_sound : forall r a a', rel_okb r a a' = true -> rel_ok r a a'.
Proof.
  intros [f ranks|f dl|f] a a' H; simpl in *; [apply N.leb_le | apply N.eqb_eq | apply N.eqb_eq];
    auto.
Qed.

Fixpoint rel_walk (w : formula) (r : relation) (df : fbox) (acts : list N) (t0 : tree)
    (bx : box) (t : tree) : bool :=
  match t with
  | Leaf a c =>
      let bx' := relax_box r df bx in
      if feat_empty bx' (rel_feature r) then true
      else if leaf_ok bx w (FConst false) a c then true
      else check_pruned w (FAct (filter (rel_okb r a) acts)) bx' t0
  | Split f th l rt =>
      let bl := upd bx f (cut_hi th false) in
      let br := upd bx f (cut_lo th true) in
      if (if feat_empty bl f then true else rel_walk w r df acts t0 bl l)
      then (if feat_empty br f then true else rel_walk w r df acts t0 br rt) else false
  | CSplit f cs l rt =>
      let bl := upd bx f (keep_codes cs) in
      let br := upd bx f (drop_codes cs) in
      if (if feat_empty bl f then true else rel_walk w r df acts t0 bl l)
      then (if feat_empty br f then true else rel_walk w r df acts t0 br rt) else false
  end.

Lemma rel_walk_sound : forall w r df acts t0 t bx x, in_box bx x ->
  rel_walk w r df acts t0 bx t = true ->
  evalf w x (fst (eval t x)) (snd (eval t x)) = true ->
  forall x', in_fbox df (x' (rel_feature r)) -> related r x x' ->
  evalf w x' (fst (eval t0 x')) (snd (eval t0 x')) = true ->
  rel_ok r (fst (eval t x)) (fst (eval t0 x')).
Proof.
  intros w r df acts t0; induction t as [a c|f th l IHl rt IHr|f cs l IHl rt IHr];
    intros bx x Hb H Hwx x' Hdf Hrel Hw; simpl in H.
  - simpl.
    pose proof (relax_box_sound r df bx x x' Hb Hdf Hrel) as Hb'.
    rewrite (feat_empty_sound _ (rel_feature r) x' Hb') in H; simpl in H.
    destruct (leaf_ok bx w (FConst false) a c) eqn:Ew.
    { simpl in Hwx; pose proof (leaf_ok_sound _ _ _ _ _ _ Hb Ew Hwx) as F; discriminate. }
    pose proof (check_pruned_sound _ _ t0 _ x' Hb' H Hw) as He.
    simpl in He; apply existsb_exists in He; destruct He as [b [Hin Eb]].
    apply N.eqb_eq in Eb; subst b; apply filter_In in Hin; destruct Hin as [_ Hok].
    apply rel_okb_sound; auto.
  - apply andb_true_iff in H; destruct H as [Hl Hr]; simpl.
    destruct (Qle_bool (x f) th) eqn:E.
    + pose proof (in_box_left bx f th x Hb E) as Hb'.
      rewrite (feat_empty_sound _ f x Hb') in Hl; simpl in Hl.
      simpl in Hwx; rewrite E in Hwx.
      apply IHl with (upd bx f (cut_hi th false)); auto.
    + pose proof (in_box_right bx f th x Hb E) as Hb'.
      rewrite (feat_empty_sound _ f x Hb') in Hr; simpl in Hr.
      simpl in Hwx; rewrite E in Hwx.
      apply IHr with (upd bx f (cut_lo th true)); auto.
  - apply andb_true_iff in H; destruct H as [Hl Hr]; simpl.
    destruct (mem_q (x f) cs) eqn:E.
    + pose proof (in_box_keep bx f cs x Hb E) as Hb'.
      rewrite (feat_empty_sound _ f x Hb') in Hl; simpl in Hl.
      simpl in Hwx; rewrite E in Hwx.
      apply IHl with (upd bx f (keep_codes cs)); auto.
    + pose proof (in_box_drop bx f cs x Hb E) as Hb'.
      rewrite (feat_empty_sound _ f x Hb') in Hr; simpl in Hr.
      simpl in Hwx; rewrite E in Hwx.
      apply IHr with (upd bx f (drop_codes cs)); auto.
Qed.

(** The domain's box of feature [i] (a placeholder beyond the domain: [rel_check] asks that
    the relation's feature is one of the domain's). *)
Definition dom_fbox (d : domain) (i : nat) : fbox :=
  nth i (dom_box d) (FBox false 0 false 0 false None).

Definition rel_check (d : domain) (t : tree) (w : formula) (r : relation) (acts : list N)
    : bool :=
  Nat.ltb (rel_feature r) (length d) &&
  rel_walk w r (dom_fbox d (rel_feature r)) acts t (dom_box d) t.

(** The soundness theorem of relational invariants, proved once. *)
Theorem rel_check_sound : forall d t w r acts, rel_check d t w r acts = true -> rel_valid d t w r.
Proof.
  intros d t w r acts H x x' Hx Hx' Hrel Hw Hw'.
  unfold rel_check in H; apply andb_true_iff in H; destruct H as [Hlt H].
  apply Nat.ltb_lt in Hlt.
  apply (rel_walk_sound w r _ acts t t (dom_box d) x (dom_box_sound d x Hx) H); auto.
  - apply evalf_sem; auto.
  - apply (dom_box_sound d x' Hx'); unfold dom_fbox; apply nth_error_nth'.
    unfold dom_box; rewrite map_length; auto.
  - apply evalf_sem; auto.
Qed.

(** ** Refuting a relational invariant at a concrete pair of inputs

    The inputs are lists of values ([input_of]: the value of feature [i] is the [i]-th, 0
    beyond the list); [rel_refute] computes that both are in the domain, related, meet
    [when] with their own decisions, and that the two actions break the relation. *)

Definition input_of (l : list Q) : input := fun i => nth i l 0.

Fixpoint same_off (f i : nat) (l l' : list Q) : bool :=
  match l, l' with
  | [], [] => true
  | q :: r, q' :: r' => (if Nat.eqb i f then true else Qeq_bool q q') && same_off f (S i) r r'
  | _, _ => false
  end.

Lemma same_off_sound : forall l l' f i, same_off f i l l' = true ->
  forall j, (i + j)%nat <> f -> nth j l 0 == nth j l' 0.
Proof.
  induction l as [|q r IH]; intros l' f i H j Hj; destruct l' as [|q' r'];
    simpl in H; try discriminate.
  - destruct j; apply Qeq_refl.
  - apply andb_true_iff in H; destruct H as [H1 H2].
    destruct j as [|j]; simpl.
    + destruct (Nat.eqb i f) eqn:E.
      * apply Nat.eqb_eq in E; lia.
      * apply Qeq_bool_iff; auto.
    + apply (IH r' f (S i) H2 j); lia.
Qed.

Definition related_b (r : relation) (l l' : list Q) : bool :=
  same_off (rel_feature r) 0 l l' &&
  match r with
  | RMonotone f _ => Qle_bool (nth f l 0) (nth f l' 0)
  | RStable f dl => Qle_bool (nth f l 0 - dl) (nth f l' 0) && Qle_bool (nth f l' 0) (nth f l 0 + dl)
  | RIndependent _ => true
  end.

Lemma related_b_sound : forall r l l', related_b r l l' = true ->
  related r (input_of l) (input_of l').
Proof.
  intros r l l' H; unfold related_b in H; apply andb_true_iff in H; destruct H as [H1 H2].
  split.
  - intros i Hi; unfold input_of; apply (same_off_sound l l' (rel_feature r) 0 H1 i); simpl; auto.
  - destruct r as [f ranks|f dl|f]; simpl in *; unfold input_of.
    + apply Qle_bool_iff; auto.
    + apply andb_true_iff in H2; destruct H2; split; apply Qle_bool_iff; auto.
    + auto.
Qed.

Lemma rel_okb_complete : forall r a a', rel_ok r a a' -> rel_okb r a a' = true.
Proof.
  intros [f ranks|f dl|f] a a' H; simpl in *; [apply N.leb_le | apply N.eqb_eq | apply N.eqb_eq];
    auto.
Qed.

Definition rel_refute (d : domain) (t : tree) (w : formula) (r : relation) (l l' : list Q)
    : bool :=
  let x := input_of l in
  let x' := input_of l' in
  in_domain_b d x && in_domain_b d x' && related_b r l l' &&
  evalf w x (fst (eval t x)) (snd (eval t x)) &&
  evalf w x' (fst (eval t x')) (snd (eval t x')) &&
  negb (rel_okb r (fst (eval t x)) (fst (eval t x'))).

Theorem rel_refute_sound : forall d t w r l l', rel_refute d t w r l l' = true ->
  ~ rel_valid d t w r.
Proof.
  intros d t w r l l' H V; unfold rel_refute in H.
  apply andb_true_iff in H; destruct H as [H Hok].
  apply andb_true_iff in H; destruct H as [H Hw'].
  apply andb_true_iff in H; destruct H as [H Hw].
  apply andb_true_iff in H; destruct H as [H Hrel].
  apply andb_true_iff in H; destruct H as [Hx Hx'].
  pose proof (V _ _ (in_domain_b_sound _ _ Hx) (in_domain_b_sound _ _ Hx')
    (related_b_sound _ _ _ Hrel) (proj1 (evalf_sem _ _ _ _) Hw)
    (proj1 (evalf_sem _ _ _ _) Hw')) as Ok.
  apply rel_okb_complete in Ok; rewrite Ok in Hok; discriminate.
Qed.
