"""Build a self-contained Coq development for a model and its invariants.

For each invariant the exporter first runs the mirror of the Coq checker
(:mod:`clefprove.coq_export.mirror`):

* the mirror proves it: a theorem is written, proved by ``vm_compute`` of ``check``;
* otherwise the verifier (Z3) is asked; for a violated invariant its counterexample is
  re-checked exactly and written with a theorem that refutes the invariant by computation;
* anything else (an invariant that holds but lies beyond the checker, e.g. one needing
  integer reasoning on a multi-feature sum, an ``unknown`` verdict, a relational invariant) is
  listed as not exported, with the reason, and no proof is written for it.

Nothing is emitted that ``coqc`` would reject.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import field
from fractions import Fraction
from pathlib import Path

from clefprove.coq_export import mirror
from clefprove.coq_export.library import LIBRARY, library_text
from clefprove.coq_export.render import (
    Ctx,
    Namer,
    Names,
    comment,
    domain_term,
    formula_term,
    join_blocks,
    make_names,
    prop,
    prop_arg,
    q_term,
    relation_term,
    tree_term,
    used_features,
)
from clefprove.coq_export.terms import (
    CFormula,
    CTree,
    FConst,
    FDom,
    eval_tree,
    evalf,
    from_checked,
    in_domain,
    model_domain,
    model_tree,
    relation_of,
)
from clefprove.dsl import checked as ck
from clefprove.errors import ClefproveError
from clefprove.fileio import utf8
from clefprove.frozen import frozen
from clefprove.model.types import Feature, Model
from clefprove.status import Certificate

#: Library files, in dependency order (package data, copies of coq/*.v).

PROVED, REFUTED, SKIPPED = Certificate.PROVED, Certificate.REFUTED, Certificate.SKIPPED

#: Names derived from an invariant's identifier in Invariants.v.
SUFFIXES = (
    "_w",
    "_e",
    "_When",
    "_Ensure",
    "_When_iff",
    "_Ensure_iff",
    "_checked",
    "_cex",
    "_cex_decision",
    "_fails",
)


@frozen
class InvariantExport:
    """What the export says about one invariant."""

    name: str
    status: str  # proved | refuted | not exported
    theorem: str | None = None
    reason: str = ""
    counterexample: tuple[Fraction, ...] | None = None


@frozen
class Export:
    """The files of an export (name -> text) and what was exported."""

    files: dict[str, str]
    results: tuple[InvariantExport, ...] = field(default_factory=tuple)

    @property
    def exit_code(self) -> int:
        """0 all proved, 1 some refuted, 3 otherwise something not exported."""
        statuses = {r.status for r in self.results}
        if REFUTED in statuses:
            return 1
        if SKIPPED in statuses:
            return 3
        return 0

    def write(self, directory: str | os.PathLike[str]) -> None:
        """Write every file into *directory*.

        A new directory appears whole (written next to it, then renamed into place); in an
        existing one every file is written first and then all are renamed into place.
        """
        import shutil
        import tempfile

        out = Path(directory)
        if out.exists() and not out.is_dir():
            raise ClefproveError(f"{out}: exists and is not a directory")
        if out.is_dir():
            self._replace_files(out)
            return
        parent = out.parent if str(out.parent) else Path(".")
        if not parent.is_dir():
            raise ClefproveError(f"{out}: directory {parent} does not exist")
        try:
            tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
        except OSError as exc:
            raise ClefproveError(f"{out}: cannot create directory: {exc.strerror}") from exc
        try:
            for name, text in self.files.items():
                (tmp / name).write_bytes(utf8(text))  # UTF-8 whatever the locale; any path
            tmp.chmod(0o755)
            os.rename(tmp, out)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise ClefproveError(f"{out}: cannot write: {exc.strerror or exc}") from exc
        except BaseException:  # Ctrl-C: leave no half-written directory behind
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _replace_files(self, out: Path) -> None:
        """Write every file next to its target first, then rename them all into place, so
        that a failure while writing (a full disk, Ctrl-C) changes none of the old files."""
        import tempfile

        staged: list[tuple[str, Path]] = []
        try:
            for name, text in self.files.items():
                target = out / name
                if target.is_dir():
                    raise ClefproveError(f"{target}: is a directory, not a file")
                fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=out)
                staged.append((tmp, target))
                with os.fdopen(fd, "wb") as fh:
                    fh.write(utf8(text))
                os.chmod(tmp, 0o644)
            for tmp, target in staged:
                os.replace(tmp, target)
        except OSError as exc:
            raise ClefproveError(f"{out}: cannot write: {exc.strerror or exc}") from exc
        finally:
            for tmp, _ in staged:
                Path(tmp).unlink(missing_ok=True)


def export_coq(
    model: Model,
    invariants: Sequence[ck.CheckedInvariant] | ck.CheckedProgram,
    *,
    verify: bool = True,
    counterexamples: dict[str, Sequence[Fraction]] | None = None,
    severity: tuple[int, ...] | None = None,
) -> Export:
    """The Coq development for *model* and *invariants* (nothing is written yet).

    *counterexamples* maps invariant names to known encoded inputs (tests); otherwise, when
    *verify* is true, the verifier is asked for a counterexample of what the checker cannot
    prove.  *severity* (action indices, lowest first) is the program's when *invariants* is a
    checked program: ``monotone`` needs it.
    """
    if isinstance(invariants, ck.CheckedProgram):
        severity = invariants.severity
        invariants = invariants.invariants
    domain = model_domain(model)
    tree = model_tree(model)
    namer = Namer()
    names = make_names(model, namer)

    blocks: list[str] = [_proofs_header(model)]
    results: list[InvariantExport] = []
    for inv in invariants:
        ident = namer.name_group(inv.name, "inv", SUFFIXES)
        if inv.is_relational:
            res, block = _relational(model, domain, tree, names, inv, ident, severity, verify)
        else:
            res, block = _one(model, domain, tree, names, inv, ident, verify, counterexamples or {})
        results.append(res)
        blocks.append(block)

    files = {name: library_text(name) for name in LIBRARY}
    files["Model.v"] = _model_file(model, domain, tree, names)
    files["Invariants.v"] = join_blocks(blocks)
    files["Assumptions.v"] = _assumptions_file(results)
    files["_CoqProject"] = "-Q . Clef\n" + "".join(
        f"{n}\n" for n in (*LIBRARY, "Model.v", "Invariants.v")
    )
    files["Makefile"] = MAKEFILE
    files["README.md"] = _readme(model, results)
    return Export(files, tuple(results))


# ------------------------------------------------------------------------ per invariant


def _one(
    model: Model,
    domain: tuple[FDom, ...],
    tree: CTree,
    names: Names,
    inv: ck.CheckedInvariant,
    ident: str,
    verify: bool,
    known: dict[str, Sequence[Fraction]],
) -> tuple[InvariantExport, str]:
    head = _head(inv)
    w = from_checked(inv.when)
    e = from_checked(inv.ensure_formula)
    if mirror.check(domain, tree, w, e):
        block = _defs(ident, w, e, names) + "\n\n" + _theorem(ident, w, e, names)
        res = InvariantExport(inv.name, PROVED, theorem=ident)
        return res, f"{head}\n    Proved. *)\n\n{block}"
    if inv.name in known:
        verdict, candidates = "", [[Fraction(v) for v in known[inv.name]]]
    elif verify:
        verdict, candidates = _ask_verifier(model, inv)
    else:
        verdict, candidates = "", []
    cex = _confirmed(domain, tree, w, e, candidates)
    if cex is not None:
        thm = f"{ident}_fails"
        decision = eval_tree(tree, cex)[:2]
        refutation = _refutation(model.features, ident, thm, w, e, names, cex, decision)
        block = _defs(ident, w, e, names) + "\n\n" + refutation
        res = InvariantExport(inv.name, REFUTED, theorem=thm, counterexample=tuple(cex))
        return res, f"{head}\n    Violated: refuted below at a concrete input. *)\n\n{block}"
    reason = _why_not(w, e, verdict, verify)
    res = InvariantExport(inv.name, SKIPPED, reason=reason)
    return res, f"{head}\n    Not exported: {comment(reason)}. *)"


def _head(inv: ck.CheckedInvariant) -> str:
    where = f"{inv.file}:{inv.line}"
    head = f"(** ** Invariant [{comment(inv.name)}] ({comment(where)})"
    if inv.description:
        head += f"\n    {comment(repr(inv.description))}"
    return head


def _relational(
    model: Model,
    domain: tuple[FDom, ...],
    tree: CTree,
    names: Names,
    inv: ck.CheckedInvariant,
    ident: str,
    severity: tuple[int, ...] | None,
    verify: bool,
) -> tuple[InvariantExport, str]:
    """A relational invariant: proved when the mirror of ``rel_check`` accepts it; refuted at
    a pair of the verifier's that the mirror of ``rel_refute`` confirms; otherwise not
    exported."""
    head = _head(inv)
    assert isinstance(inv.ensure, ck.Relational)
    rel = relation_of(inv.ensure, severity)
    if rel is None:
        reason = "monotone(...) needs the severity order, which was not given to the export"
        res = InvariantExport(inv.name, SKIPPED, reason=reason)
        return res, f"{head}\n    Not exported: {reason}. *)"
    w = from_checked(inv.when)
    acts = tuple(range(len(model.actions)))
    defs = (
        f"Definition {ident}_w : formula :=\n  {formula_term(w)}.\n\n"
        f"Definition {ident}_r : relation :=\n  {relation_term(rel)}."
    )
    if not mirror.rel_check(domain, tree, w, rel, acts):
        verdict, pairs = _ask_relational(model, inv, severity) if verify else ("", [])
        for x, y in pairs:
            if mirror.rel_refute(domain, tree, w, rel, x, y):
                thm = f"{ident}_fails"
                proof = _pair_refutation(model.features, names, ident, thm, x, y)
                res = InvariantExport(inv.name, REFUTED, theorem=thm, counterexample=tuple(x))
                text = f"{head}\n    Violated: refuted below at a concrete pair. *)"
                return res, f"{text}\n\n{defs}\n\n{proof}"
        if verdict == "holds":
            reason = (
                "the verifier proves it but the Coq checker of relational invariants cannot "
                "(it does not narrow the first input's box by 'when'; float features range "
                "over the rationals)"
            )
        elif verdict == "violated":
            reason = "the verifier finds it violated but no pair was confirmed exactly"
        elif verify:
            reason = "the Coq checker cannot prove it and the verifier cannot decide it (unknown)"
        else:
            reason = "the Coq checker cannot prove it and no counterexample was asked for"
        res = InvariantExport(inv.name, SKIPPED, reason=reason)
        return res, f"{head}\n    Not exported: {comment(reason)}. *)"
    acts_term = "[" + "; ".join(f"{a}%N" for a in acts) + "]"
    block = (
        f"{defs}\n\n"
        f"(** The reflective computation: the relational checker accepts the invariant. *)\n"
        f"Lemma {ident}_checked :\n"
        f"  rel_check model_domain model_tree {ident}_w {ident}_r {acts_term} = true.\n"
        f"Proof. vm_cast_no_check (eq_refl true). Qed.\n\n"
        f"(** Any two inputs of the domain that differ as [{ident}_r] says, both meeting\n"
        f"    [{ident}_w] with their own decisions, have decisions the relation allows\n"
        f"    ([rel_valid] in ClefSyntax.v). *)\n"
        f"Theorem {ident} : rel_valid model_domain model_tree {ident}_w {ident}_r.\n"
        f"Proof. exact (rel_check_sound _ _ _ _ _ {ident}_checked). Qed."
    )
    res = InvariantExport(inv.name, PROVED, theorem=ident)
    return res, f"{head}\n    Proved. *)\n\n{block}"


def _ask_relational(
    model: Model, inv: ck.CheckedInvariant, severity: tuple[int, ...] | None
) -> tuple[str, list[tuple[list[Fraction], list[Fraction]]]]:
    """The verifier's verdict on a relational invariant and its pairs as exact inputs."""
    from clefprove.eval.inputs import encode_record
    from clefprove.verify.relational import check_relational
    from clefprove.verify.verdicts import RelationalCounterexample

    result = check_relational(model, inv, severity, counterexamples=3)
    pairs = []
    for cex in result.counterexamples:
        assert isinstance(cex, RelationalCounterexample)
        x, y = (encode_record(model, r) for r in cex.inputs)
        pairs.append(([Fraction(float(v)) for v in x], [Fraction(float(v)) for v in y]))
    return result.status, pairs


def _pair_refutation(
    features: Sequence[Feature],
    names: Names,
    ident: str,
    thm: str,
    x: list[Fraction],
    y: list[Fraction],
) -> str:
    def values(v: list[Fraction]) -> str:
        rows = ";\n   ".join(
            f"{q_term(q)} (* {names.features[i]} = {comment(_shown(f, q))} *)"
            for i, (f, q) in enumerate(zip(features, v, strict=True))
        )
        return f"[{rows}]"

    return (
        f"(** A counterexample: two inputs of the domain related as [{ident}_r] says, both\n"
        f"    meeting [{ident}_w], whose actions break the relation. *)\n"
        f"Definition {ident}_x : list Q :=\n  {values(x)}.\n\n"
        f"Definition {ident}_y : list Q :=\n  {values(y)}.\n\n"
        f"Theorem {thm} : ~ rel_valid model_domain model_tree {ident}_w {ident}_r.\n"
        f"Proof.\n  apply (rel_refute_sound model_domain model_tree {ident}_w {ident}_r "
        f"{ident}_x {ident}_y); vm_compute; reflexivity.\nQed."
    )


def _why_not(w: CFormula, e: CFormula, verdict: str, verify: bool) -> str:
    if not verify:
        return "the Coq checker cannot prove it and no counterexample was given"
    if verdict == "holds":
        hint = (
            "; it probably needs integer reasoning on a sum of features, which "
            "Fourier-Motzkin over Q does not do"
            if mirror.uses_fm(w, e)
            else ""
        )
        return f"the verifier proves it but the Coq checker cannot{hint}"
    if verdict == "violated":
        return "the verifier finds it violated but no counterexample was confirmed exactly"
    return "the Coq checker cannot prove it and the verifier cannot decide it (unknown)"


def _confirmed(
    domain: tuple[FDom, ...],
    tree: CTree,
    w: CFormula,
    e: CFormula,
    candidates: Sequence[list[Fraction]],
) -> list[Fraction] | None:
    """The first candidate that is in the domain, satisfies *w* and breaks *e* (exactly)."""
    for x in candidates:
        if len(x) != len(domain) or not in_domain(domain, x):
            continue
        a, c, _ = eval_tree(tree, x)
        if evalf(w, x, a, c) and not evalf(e, x, a, c):
            return x
    return None


def _ask_verifier(model: Model, inv: ck.CheckedInvariant) -> tuple[str, list[list[Fraction]]]:
    """The verifier's verdict and its counterexamples as exact encoded inputs."""
    from clefprove.eval.inputs import encode_record
    from clefprove.verify.api import check_invariant
    from clefprove.verify.verdicts import Counterexample

    result = check_invariant(model, inv, counterexamples=3)
    out = []
    for cex in result.counterexamples:
        assert isinstance(cex, Counterexample)  # a non-relational invariant's
        x = encode_record(model, cex.input)
        out.append([Fraction(float(v)) for v in x])
    return result.status, out


# ----------------------------------------------------------------------------- text


def _proofs_header(model: Model) -> str:
    return (
        f"(** * Invariants of model [{comment(model.name)}] {comment(model.version)}\n\n"
        "    Each theorem states an invariant over the named features of [Model.v] and is\n"
        "    proved by computing the checker of [ClefCheck.v] ([vm_compute]); the checker is\n"
        "    proved sound once ([check_sound]).  [action x] and [confidence x] are the\n"
        "    model's decision for input [x]. *)\n\n"
        "From Coq Require Import QArith ZArith List.\n"
        "From Clef Require Import ClefSyntax ClefCheck Model.\n"
        "Import ListNotations.\n"
        "Local Open Scope Q_scope."
    )


def _defs(ident: str, w: CFormula, e: CFormula, names: Names) -> str:
    gen = Ctx("a", "c")
    lines = [
        f"Definition {ident}_w : formula :=\n  {formula_term(w)}.",
        f"Definition {ident}_e : formula :=\n  {formula_term(e)}.",
        f"Definition {ident}_When (x : input) (a : N) (c : Q) : Prop :=\n  {prop(w, names, gen)}.",
        f"Definition {ident}_Ensure (x : input) (a : N) (c : Q) : Prop :=\n"
        f"  {prop(e, names, gen)}.",
        _iff_lemma(f"{ident}_When", f"{ident}_w", w, names),
        _iff_lemma(f"{ident}_Ensure", f"{ident}_e", e, names),
    ]
    return "\n\n".join(lines)


def _iff_lemma(readable: str, formula: str, p: CFormula, names: Names) -> str:
    feats = sorted(used_features(p))
    unfold = ", ".join([readable, formula, *(names.features[i] for i in feats)])
    return (
        f"Lemma {readable}_iff : forall x a c, {readable} x a c <-> sem {formula} x a c.\n"
        f"Proof. intros x a c; unfold {unfold}; clef_iff. Qed."
    )


def _statement(w: CFormula, e: CFormula, names: Names) -> str:
    ctx = Ctx("action x", "confidence x")
    parts = ["forall x : input, in_domain model_domain x ->"]
    if w != FConst(True):
        parts.append(f"  {prop_arg(w, names, ctx)} ->")
    parts.append(f"  {prop(e, names, ctx)}")
    return "\n  ".join(parts)


def _theorem(ident: str, w: CFormula, e: CFormula, names: Names) -> str:
    args = (
        f"model_domain model_tree {ident}_w {ident}_e {ident}_When {ident}_Ensure "
        f"{ident}_When_iff {ident}_Ensure_iff x Hx {ident}_checked"
    )
    tail = "" if w != FConst(True) else "\n  exact I."
    return (
        f"(** The reflective computation: the checker accepts the invariant on the model.\n"
        f"    ([vm_cast_no_check] leaves the computation to the kernel at [Qed]; it is the\n"
        f"    same check as [vm_compute; reflexivity], done once instead of twice.) *)\n"
        f"Lemma {ident}_checked : check model_domain model_tree {ident}_w {ident}_e = true.\n"
        f"Proof. vm_cast_no_check (eq_refl true). Qed.\n\n"
        f"Theorem {ident} :\n  {_statement(w, e, names)}.\n"
        f"Proof.\n  intros x Hx.\n  apply (readable_sound {args}).{tail}\nQed."
    )


def _shown(feature: Feature, v: Fraction) -> str:
    """The value as the user writes it in an input record."""
    value = feature.decode(float(v))
    return json.dumps(value, allow_nan=False) if not isinstance(value, float) else repr(value)


def _refutation(
    features: Sequence[Feature],
    ident: str,
    thm: str,
    w: CFormula,
    e: CFormula,
    names: Names,
    cex: list[Fraction],
    decision: tuple[int, Fraction],
) -> str:
    ctx = Ctx("action x", "confidence x")
    cases = "\n".join(
        f"  | {i}%nat => {q_term(v)}   (* {names.features[i]} = {comment(_shown(f, v))} *)"
        for i, (f, v) in enumerate(zip(features, cex, strict=True))
    )
    body = f"fun i => match i with\n{cases}\n  | _ => 0\n  end"
    hyp = f"{prop_arg(w, names, ctx)} -> " if w != FConst(True) else ""
    if w != FConst(True):
        lemma = "readable_refuted"
        args = (
            f"model_domain model_tree {ident}_w {ident}_e {ident}_When {ident}_Ensure "
            f"{ident}_When_iff {ident}_Ensure_iff {ident}_cex"
        )
    else:
        lemma = "readable_refuted_always"
        args = f"model_domain model_tree {ident}_e {ident}_Ensure {ident}_Ensure_iff {ident}_cex"
    return (
        f"(** A counterexample: an input of the domain that satisfies [when] and breaks\n"
        f"    [ensure]. *)\n"
        f"Definition {ident}_cex : input :=\n  {body}.\n\n"
        f"Example {ident}_cex_decision : eval model_tree {ident}_cex = "
        f"({decision[0]}%N, {q_term(decision[1])}).\nProof. vm_compute; reflexivity. Qed.\n\n"
        f"Theorem {thm} :\n  ~ (forall x : input, in_domain model_domain x ->\n"
        f"       {hyp}{prop(e, names, ctx)}).\n"
        f"Proof.\n  apply ({lemma} {args}); vm_compute; reflexivity.\nQed."
    )


def _model_file(model: Model, domain: tuple[FDom, ...], tree: CTree, names: Names) -> str:
    feats = []
    for i, (f, n) in enumerate(zip(model.features, names.features, strict=True)):
        feats.append(
            f"Definition {n} (x : input) : Q := x {i}%nat.   "
            f"(* {comment(f.name)}: {f.type.value} in {comment(f.describe_domain())} *)"
        )
    acts = [
        f"Definition {n} : N := {i}%N.   (* {comment(a)} *)"
        for i, (a, n) in enumerate(zip(model.actions, names.actions, strict=True))
    ]
    codes = [
        f"Definition {n} : Z := {z}%Z.   (* {comment(model.features[f].values[z])} *)"
        for (f, z), n in names.codes.items()
    ]
    blocks = [
        f"(** * Model [{comment(model.name)}] {comment(model.version)}\n\n"
        f"    sha256 {model.sha256}; {model.n_nodes} nodes, {model.n_leaves} leaves.\n"
        "    Generated by clefprove export-coq.  Inputs are encoded as in clefprove: int\n"
        "    features are whole numbers, bool features 0/1, categorical features the index\n"
        "    of the value.  Thresholds and confidences are the exact values of the float64\n"
        "    numbers of the model file. *)",
        "From Coq Require Import QArith ZArith List.\n"
        "From Clef Require Import ClefSyntax.\nImport ListNotations.\nLocal Open Scope Q_scope.",
        "(** ** Features *)\n" + "\n".join(feats),
        "(** ** Actions *)\n" + "\n".join(acts),
    ]
    if codes:
        blocks.append("(** ** Categorical values *)\n" + "\n".join(codes))
    blocks.append(
        "(** ** Domain: integral?, min, max, codes, per feature *)\n"
        f"Definition model_domain : domain :=\n  {domain_term(domain, names)}."
    )
    blocks.append(f"(** ** Tree *)\nDefinition model_tree : tree :=\n{tree_term(tree)}.")
    blocks.append(
        "(** ** Decision *)\n"
        "Definition action (x : input) : N := fst (eval model_tree x).\n"
        "Definition confidence (x : input) : Q := snd (eval model_tree x)."
    )
    return join_blocks(blocks)


def _assumptions_file(results: Sequence[InvariantExport]) -> str:
    lines = [
        '(* Prints the axioms each theorem depends on: expect "Closed under the global'
        ' context". *)',
        "From Clef Require Import ClefSyntax ClefCheck Model Invariants.",
    ]
    lines += [f"Print Assumptions {r.theorem}." for r in results if r.theorem]
    return "\n".join(lines) + "\n"


def _readme(model: Model, results: Sequence[InvariantExport]) -> str:
    rows = "\n".join(
        f"| `{r.name}` | {r.status} | {('`' + r.theorem + '`') if r.theorem else ''} | {r.reason} |"
        for r in results
    )
    return (
        f"# Coq export of model `{model.name}` {model.version}\n\n"
        f"sha256 `{model.sha256}`\n\n"
        "Check with `make` (needs `coqc`, Coq 8.16 or later); `make assumptions` prints the\n"
        "axioms of every theorem (expect `Closed under the global context`).\n\n"
        "- `ClefSyntax.v`: trees, domains, the invariant language and their meaning (the\n"
        "  specification to read);\n"
        "- `ClefCheck.v`: the checker and its soundness proof (`check_sound`);\n"
        "- `Model.v`: this model as Coq terms, named features and actions;\n"
        "- `Invariants.v`: one theorem per invariant.\n\n"
        "| invariant | status | theorem | note |\n|---|---|---|---|\n" + rows + "\n"
    )


MAKEFILE = """\
COQC ?= coqc
FLAGS := -Q . Clef

all: Invariants.vo

ClefSyntax.vo: ClefSyntax.v
\t$(COQC) $(FLAGS) $<
ClefCheck.vo: ClefCheck.v ClefSyntax.vo
\t$(COQC) $(FLAGS) $<
Model.vo: Model.v ClefSyntax.vo
\t$(COQC) $(FLAGS) $<
Invariants.vo: Invariants.v Model.vo ClefCheck.vo
\t$(COQC) $(FLAGS) $<

assumptions: Invariants.vo
\t$(COQC) $(FLAGS) Assumptions.v

clean:
\trm -f *.vo *.vok *.vos *.glob .*.aux

.PHONY: all assumptions clean
"""
