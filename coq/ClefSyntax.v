(** * ClefSyntax: Clef decision trees, their domains, the checked invariant language,
    and their meaning.

    This file is the *specification* a reviewer has to trust: everything in it is a plain
    definition (no proofs).  It mirrors SPEC section 2 (model semantics) and the checked
    invariant form of [clefprove/dsl/checked.py].

    - An input is a function from feature index to an exact rational number ([Q]).
      Encoded values follow the Python side: [int] features are whole numbers, [bool] features
      are 0/1, [categorical] features are the index of the value in the vocabulary.
    - Thresholds, bounds and confidences are exact rationals equal to the float64 numbers of
      the model file.  [float] features range over *every* rational in [min, max]: a proof for
      all of them covers in particular every float64 input (a sound over-approximation).
    - A numeric split goes left when [x f <= threshold]; a categorical split goes left when the
      code of [x f] is in its set. *)

From Coq Require Import QArith ZArith List Bool.
Import ListNotations.
Local Open Scope Q_scope.

(** ** Inputs and trees *)

Definition input := nat -> Q.

Inductive tree : Type :=
| Leaf (action : N) (confidence : Q)
| Split (feature : nat) (threshold : Q) (left right : tree)
| CSplit (feature : nat) (codes : list Z) (left right : tree).

(** [mem_q q codes]: [q] equals one of the (whole-number) [codes]. *)
Definition mem_q (q : Q) (codes : list Z) : bool :=
  existsb (fun z => Qeq_bool q (inject_Z z)) codes.

(** The decision (action index, confidence) of a tree for an input. *)
Fixpoint eval (t : tree) (x : input) : N * Q :=
  match t with
  | Leaf a c => (a, c)
  | Split f th l r => if Qle_bool (x f) th then eval l x else eval r x
  | CSplit f cs l r => if mem_q (x f) cs then eval l x else eval r x
  end.

(** ** Domains

    One entry per feature, in feature-index order: whether its values are whole numbers,
    its closed bounds, and (for categorical and bool features) its codes. *)

Record fdom : Type := FDom {
  fd_integral : bool;
  fd_min : Q;
  fd_max : Q;
  fd_codes : option (list Z)
}.

Definition domain := list fdom.

Definition is_int (q : Q) : Prop := exists z : Z, q == inject_Z z.

Definition is_one_of (q : Q) (codes : list Z) : Prop :=
  exists z : Z, In z codes /\ q == inject_Z z.

Definition in_fdom (d : fdom) (q : Q) : Prop :=
  fd_min d <= q /\ q <= fd_max d /\
  (fd_integral d = true -> is_int q) /\
  (forall cs, fd_codes d = Some cs -> is_one_of q cs).

(** An input is in the domain when every declared feature is within its bounds, whole where
    the feature is integral, and one of its codes where it has codes.  (Clipping at run time
    maps every input into the domain, so the domain is what the decision is taken on.) *)
Definition in_domain (d : domain) (x : input) : Prop :=
  forall i fd, nth_error d i = Some fd -> in_fdom fd (x i).

(** ** Clipping

    At run time a raw input is clipped into [[min, max]] feature by feature and the tree
    decides on the clipped input ([decide]).  [clip_in_domain] (in ClefCheck.v) shows that
    clipping a well-typed input lands in the domain, so a theorem over the domain covers
    every decision taken at run time. *)

Definition clip1 (fd : fdom) (q : Q) : Q :=
  if Qle_bool q (fd_min fd) then fd_min fd
  else if Qle_bool (fd_max fd) q then fd_max fd
  else q.

Definition clip (d : domain) (x : input) : input :=
  fun i => match nth_error d i with Some fd => clip1 fd (x i) | None => x i end.

Definition decide (d : domain) (t : tree) (x : input) : N * Q := eval t (clip d x).

(** A raw input of the right types: whole numbers for integral features, codes for coded ones
    (the evaluator rejects anything else as an input error). *)
Definition well_typed (d : domain) (x : input) : Prop :=
  forall i fd, nth_error d i = Some fd ->
    (fd_integral fd = true -> is_int (x i)) /\
    (forall cs, fd_codes fd = Some cs -> is_one_of (x i) cs).

(** A well-formed domain entry (what the model loader validates). *)
Definition wf_fdom (fd : fdom) : Prop :=
  fd_min fd <= fd_max fd /\
  (fd_integral fd = true -> is_int (fd_min fd) /\ is_int (fd_max fd)) /\
  (forall cs, fd_codes fd = Some cs ->
     forall z, In z cs -> fd_min fd <= inject_Z z /\ inject_Z z <= fd_max fd).

(** ** The checked invariant language *)

(** A variable of a linear term: a feature, or the decision's confidence. *)
Inductive var : Type := VF (i : nat) | VC.

Inductive formula : Type :=
| FConst (b : bool)
| FCmp (terms : list (var * Q)) (k : Q) (strict : bool)
    (** [sum (q * v) + k <= 0], or [< 0] when [strict] *)
| FIn (feature : nat) (codes : list Z)   (** the feature's code is one of [codes] *)
| FAct (actions : list N)                (** the action is one of [actions] *)
| FNot (p : formula)
| FAnd (p q : formula)
| FOr (p q : formula).

Definition var_val (x : input) (c : Q) (v : var) : Q :=
  match v with VF i => x i | VC => c end.

Fixpoint lin_val (ts : list (var * Q)) (x : input) (c : Q) : Q :=
  match ts with
  | [] => 0
  | (v, q) :: r => q * var_val x c v + lin_val r x c
  end.

(** Meaning of a formula at input [x] for the decision (action [a], confidence [c]). *)
Fixpoint sem (p : formula) (x : input) (a : N) (c : Q) : Prop :=
  match p with
  | FConst b => if b then True else False
  | FCmp ts k s => if s then lin_val ts x c + k < 0 else lin_val ts x c + k <= 0
  | FIn f cs => is_one_of (x f) cs
  | FAct acts => In a acts
  | FNot p => ~ sem p x a c
  | FAnd p q => sem p x a c /\ sem q x a c
  | FOr p q => sem p x a c \/ sem q x a c
  end.

(** The same meaning as a boolean function (what the checker computes with). *)
Fixpoint evalf (p : formula) (x : input) (a : N) (c : Q) : bool :=
  match p with
  | FConst b => b
  | FCmp ts k s =>
      if s then negb (Qle_bool 0 (lin_val ts x c + k)) else Qle_bool (lin_val ts x c + k) 0
  | FIn f cs => mem_q (x f) cs
  | FAct acts => existsb (N.eqb a) acts
  | FNot p => negb (evalf p x a c)
  | FAnd p q => evalf p x a c && evalf q x a c
  | FOr p q => evalf p x a c || evalf q x a c
  end.

(** An invariant [when w ensure e] holds at [x] for the decision [d]. *)
Definition holds (w e : formula) (x : input) (d : N * Q) : Prop :=
  sem w x (fst d) (snd d) -> sem e x (fst d) (snd d).

(** The invariant holds for the tree [t] on the whole domain [d]. *)
Definition valid (d : domain) (t : tree) (w e : formula) : Prop :=
  forall x, in_domain d x -> holds w e x (eval t x).

(** ** Relational invariants

    Two inputs that differ in one feature [f] only (SPEC section 3): [monotone f] (raising
    [f] never lowers the severity: the action's rank in the [severity] line, [ranks] giving
    the rank of each action index), [stable f delta] (moving [f] by at most [delta] never
    changes the action), [independent f] (changing [f] never changes the action); [when]
    must hold for both inputs, each with its own decision. *)

Inductive relation : Type :=
| RMonotone (f : nat) (ranks : list N)
| RStable (f : nat) (delta : Q)
| RIndependent (f : nat).

Definition rel_feature (r : relation) : nat :=
  match r with RMonotone f _ | RStable f _ | RIndependent f => f end.

Definition rank (ranks : list N) (a : N) : N := nth (N.to_nat a) ranks 0%N.

(** [x'] equals [x] on every feature but the relation's, and is related to it there. *)
Definition related (r : relation) (x x' : input) : Prop :=
  (forall i, i <> rel_feature r -> x i == x' i) /\
  match r with
  | RMonotone f _ => x f <= x' f
  | RStable f dl => x f - dl <= x' f /\ x' f <= x f + dl
  | RIndependent _ => True
  end.

(** What the relation asks of the two actions. *)
Definition rel_ok (r : relation) (a a' : N) : Prop :=
  match r with
  | RMonotone _ ranks => (rank ranks a <= rank ranks a')%N
  | _ => a = a'
  end.

(** The relational invariant [when w ensure r] holds for the tree [t] on the domain [d]. *)
Definition rel_valid (d : domain) (t : tree) (w : formula) (r : relation) : Prop :=
  forall x x', in_domain d x -> in_domain d x' -> related r x x' ->
    sem w x (fst (eval t x)) (snd (eval t x)) ->
    sem w x' (fst (eval t x')) (snd (eval t x')) ->
    rel_ok r (fst (eval t x)) (fst (eval t x')).
