"""One registration per op class (roofline/core/opclasses/), read from the source with ast:

- every op class classify.py can return is registered exactly once (one `register(OpClass("name",
  ...))` call in roofline/core/opclasses/, and a second registration is refused);
- the registry is the only place the per-class jobs are wired (model, stage-A fill, aten-op shape
  rule, GEMM problems for the re-run): no other module holds a table of functions keyed by op
  class, calls a `register...("<class>")`, imports a registered function or a class module, or,
  where those jobs are done (roofline/core/shapes.py, roofline/core/models/, the Top-N's shape step,
  the procedure's model steps, the re-run's problems), compares an op class to a
  class name.
"""
from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from roofline.core import classify, opclasses
from roofline.ingest.trace_tables import OpSig

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "roofline"
REG_DIR = PKG / "core" / "opclasses"
CLASSES = frozenset(classify.OP_CLASSES)
# the modules of roofline/core/opclasses/ that register classes (the rest are shared helpers)
CLASS_MODULES = ("gemm", "moe", "attn", "stream", "comm", "routing_sort", "unmodelled", "recurrent", "chunk_scan",
                 "causal_conv", "scatter_add", "inductor")
# where the four jobs are done outside the registry: path -> the functions that do them (None: all)
JOB_SITES = {"roofline/core/shapes.py": None, "roofline/core/models/__init__.py": None,
             "roofline/core/models/gemm.py": None, "roofline/core/models/moe.py": None, "roofline/core/models/attention.py": None,
             "roofline/core/models/elementwise.py": None, "roofline/ingest/topn.py": {"_shapes_of"},
             "roofline/core/procedure.py": {"check_modelable", "model_work"}, "roofline/stagec/rerun.py": {"gemm_problems"}}


def _sources_outside_the_registry():
    for p in sorted(PKG.rglob("*.py")):
        if REG_DIR not in p.parents:
            yield p.relative_to(ROOT).as_posix(), p.read_text(encoding="utf-8")


def _is_class_str(n) -> bool:
    return isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in CLASSES


def _names_a_class(n) -> bool:
    return _is_class_str(n) or (isinstance(n, (ast.Tuple, ast.List, ast.Set)) and any(map(_is_class_str, n.elts)))


def _registered_functions():
    """(module, name) of every function the registry wires."""
    return opclasses.jobs.functions()


def _job_scope(tree: ast.AST, funcs):
    if funcs is None:
        return [tree]
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in funcs]


def wiring_violations(rel: str, src: str, registered) -> list[str]:
    """What in ``src`` (the file ``rel``) wires an op class's job outside the registry."""
    out = []
    tree = ast.parse(src)
    for n in ast.walk(tree):
        if isinstance(n, ast.Dict):     # {"gemm": fill_gemm, "moe": fill_moe}: a dispatch table
            pairs = [(k, v) for k, v in zip(n.keys, n.values) if k is not None and _is_class_str(k)]
            if len(pairs) >= 2 and all(isinstance(v, (ast.Name, ast.Attribute, ast.Lambda)) for _, v in pairs):
                out.append(f"{rel}:{n.lineno} a table of functions keyed by op class")
        elif isinstance(n, ast.Call):   # register("gemm")(model), @register_model("attn")
            f = n.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if "register" in name.lower() and any(_is_class_str(a) for a in n.args):
                out.append(f"{rel}:{n.lineno} {name}() of an op class")
        elif isinstance(n, ast.ImportFrom) and n.module:
            names = {a.name for a in n.names}
            mod_parts = n.module.split(".")
            if n.module == "roofline.core.opclasses" and names & set(CLASS_MODULES) or \
                    mod_parts[:3] == ["roofline", "core", "opclasses"] and len(mod_parts) > 3 and mod_parts[3] in CLASS_MODULES:
                out.append(f"{rel}:{n.lineno} imports an op-class module ({n.module})")
            out += [f"{rel}:{n.lineno} imports the registered {n.module}.{a}" for a in sorted(names)
                    if (n.module, a) in registered]
            if n.module == "roofline.core.models" and names - {"Candidate", "ModelResult", "wider"}:
                out.append(f"{rel}:{n.lineno} imports a model module from roofline.core.models")
        elif isinstance(n, ast.Import):
            out += [f"{rel}:{n.lineno} imports {a.name}" for a in n.names
                    if re.match(r"roofline\.core\.(models\.|opclasses\.(%s)\b)" % "|".join(CLASS_MODULES), a.name)]
    if rel in JOB_SITES:
        for scope in _job_scope(tree, JOB_SITES[rel]):
            for n in ast.walk(scope):
                if isinstance(n, ast.Compare) and any(isinstance(o, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for o in n.ops) \
                        and any(map(_names_a_class, [n.left, *n.comparators])):
                    out.append(f"{rel}:{n.lineno} compares an op class to a class name")
    return out


def _register_calls():
    """op-class name -> how many register(OpClass("name", ...)) calls roofline/core/opclasses/ makes,
    and the calls whose name is not a literal (they would make the count unsound)."""
    counts, opaque = {}, []
    for p in sorted(REG_DIR.glob("*.py")):
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "register":
                arg = n.args[0] if n.args else None
                if isinstance(arg, ast.Call) and getattr(arg.func, "id", "") == "OpClass" and arg.args \
                        and isinstance(arg.args[0], ast.Constant):
                    counts[arg.args[0].value] = counts.get(arg.args[0].value, 0) + 1
                else:
                    opaque.append(f"{p.name}:{n.lineno}")
    return counts, opaque


def test_every_class_classify_can_return_is_registered_exactly_once():
    # what classify() can return, counted from its rule tables, not from OP_CLASSES alone
    returnable = ({c for _, c in classify.RULES} | {c for _, c in classify.OP_HINT_RULES}
                  | {c for c in classify._HINT_ALIASES.values() if c} | {"unknown"}
                  | (CLASSES - {"unknown"}))   # a hint naming any class is returned as is
    assert returnable == CLASSES
    assert set(opclasses.REGISTRY) == CLASSES
    counts, opaque = _register_calls()
    assert opaque == []
    assert counts == {c: 1 for c in CLASSES}
    assert all(opclasses.get(c).name == c for c in CLASSES)


def test_a_second_registration_is_refused():
    before = dict(opclasses.REGISTRY)
    with pytest.raises(ValueError, match="'gemm' is registered twice"):
        opclasses.register(opclasses.OpClass("gemm"))
    assert opclasses.REGISTRY == before


def test_each_class_registers_its_jobs():
    modelled = {c for c, oc in opclasses.REGISTRY.items() if oc.has("model")}
    assert modelled == {"gemm", "moe", "attn", "elementwise", "norm", "quant", "comm", "routing_sort", "recurrent",
                        "chunk_scan", "causal_conv", "scatter_add", "inductor"}
    for c in modelled:
        oc = opclasses.get(c)
        assert oc.has("fill") and oc.shape_keys and not oc.not_modelled, c
    # the memory axis of every class is HBM but for collectives, whose roof is the link
    assert {c: oc.roof for c, oc in opclasses.REGISTRY.items() if oc.roof != "hbm"} == {"comm": "interconnect"}
    for c in CLASSES - modelled:   # unknown: no job, a reason instead
        oc = opclasses.get(c)
        assert oc.not_modelled and not any(oc.has(j) for j in ("fill", "trace_shape", "gemm_problems")), c
    assert {c for c, oc in opclasses.REGISTRY.items() if oc.has("gemm_problems")} == {"gemm", "moe"}
    assert {c for c, oc in opclasses.REGISTRY.items() if oc.has("trace_shape")} == {
        "gemm", "moe", "attn", "elementwise", "norm", "quant", "routing_sort", "recurrent", "chunk_scan", "causal_conv",
        "scatter_add", "inductor"}


def test_the_lookups_answer_through_the_registration():
    lin = OpSig("aten::linear", ((8, 1, 4096), (14336, 4096), ()), ("c10::BFloat16", "c10::BFloat16", ""), ())
    assert opclasses.trace_shape("gemm", lin) == ({"M": 8, "N": 14336, "K": 4096},
                                                   {"act": "bf16", "weight": "bf16", "out": "bf16"})
    assert opclasses.trace_shape("moe", lin) is None and opclasses.trace_shape("comm", lin) is None
    gmm = OpSig("aten::_grouped_mm", ((512, 2048), (128, 2048, 1536), (128,)), ("c10::BFloat16", "c10::BFloat16", "int"), ())
    assert opclasses.trace_shape("moe", gmm) == ({"pairs": 512, "E": 128, "N": 1536, "K": 2048},
                                                  {"act": "bf16", "weight": "bf16", "out": "bf16"})
    assert opclasses.trace_shape("no-such-class", lin) is None
    ps = opclasses.gemm_problems({"op_class": "moe", "shape": {"M": 64, "E": 256, "top_k": 8, "hidden": 2048,
                                                                 "inter": 768}})
    assert [p.label for p in ps] == ["moe stage1 (gate/up)", "moe stage2 (down)"]
    g = opclasses.gemm_problems({"op_class": "moe", "shape": {"pairs": 512, "E": 128, "N": 1536, "K": 2048}})
    assert [(p.label, p.M, p.N, p.K, p.E, p.tokens) for p in g] == [("grouped", 512, 1536, 2048, 128, None)]
    assert opclasses.gemm_problems({"op_class": "attn", "shape": {}}) == []
    assert opclasses.gemm_problems({"shape": {"M": 1, "N": 1, "K": 1}}) == []


def test_nothing_outside_the_registry_wires_the_jobs():
    registered = _registered_functions()
    assert len(registered) >= 10      # the scan below knows what to look for
    bad = [v for rel, src in _sources_outside_the_registry() for v in wiring_violations(rel, src, registered)]
    assert not bad, bad
    # the job sites named above still exist (a renamed function would escape the scan)
    for rel, funcs in JOB_SITES.items():
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        names = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert funcs is None or funcs <= defined | names, (rel, funcs - defined - names)


def test_the_scan_catches_each_way_of_wiring_a_job_elsewhere():
    registered = _registered_functions()
    cases = {
        "_FILLERS = {'gemm': _fill_gemm, 'moe': _fill_moe}\n": "table of functions",
        "@register('attn')\ndef model(shape, dt):\n    pass\n": "register() of an op class",
        "from roofline.core.models.gemm import model\n": "imports the registered roofline.core.models.gemm.model",
        "from roofline.core.opclasses.moe import fill_stage_a\n": "imports an op-class module",
        "from roofline.core.opclasses import stream\n": "imports an op-class module",
        "import roofline.core.models.attention\n": "imports roofline.core.models.attention",
        "def resolve(op_class):\n    if op_class in ('elementwise', 'norm'):\n        pass\n": "compares an op class",
    }
    for src, what in cases.items():
        got = wiring_violations("roofline/core/shapes.py", src, registered)
        assert any(what in g for g in got), (src, got)
    # what is not wiring: a table of numbers keyed by class, a compare outside the job sites, the
    # registry's own lookups, a model's pure helper
    clean = ("PRIORS = {'gemm': 0.9, 'moe': 0.9}\nif op == 'attn':\n    pass\n"
             "from roofline.core.opclasses import trace_shape, Problem\nfrom roofline.core.models.gemm import gemm_counts\n")
    assert wiring_violations("roofline/core/routing.py", clean, registered) == []
    # a compare inside a job-site function is caught, the same compare in another function is not
    topn = "def _shapes_of(cls):\n    return cls == 'gemm'\n\ndef _pair(nm):\n    return nm == 'gemm'\n"
    assert len(wiring_violations("roofline/ingest/topn.py", topn, registered)) == 1


def test_dimension_keys_come_from_the_registrations():
    from roofline.core import inputs, opclasses

    for name, oc in opclasses.REGISTRY.items():
        assert oc.dim_keys <= oc.shape_keys, name        # a dimension is a shape key the class reads
    assert inputs.DIM_KEYS == opclasses.dim_keys()
    assert {"M", "N", "K", "seq_len", "elems_in"} <= inputs.DIM_KEYS and "stage" not in inputs.DIM_KEYS
    # the re-run takes exactly the classes that register GEMM problems
    assert {n for n in opclasses.REGISTRY if opclasses.rerunnable(n)} == {"gemm", "moe"}
    assert not opclasses.rerunnable(None) and not opclasses.rerunnable("no-such-class")


# ---------------------------------------------------------------- no class name outside opclasses/

def _strs(n) -> list[str]:
    """The string constants of a node: itself, or the elements of a tuple / list / set literal."""
    elts = n.elts if isinstance(n, (ast.Tuple, ast.List, ast.Set)) else [n]
    return [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def class_literals(rel: str, src: str, classes=None) -> list[str]:
    """Where ``src`` names an op class by a literal: a comparison or membership test against it
    (``kind == "attn"``, ``c in ("gemm", "moe")``), a dict key (``{"comm": 0.8}``), or a tuple / list /
    set made only of class names (``("elementwise", "norm")``, a list of classes handed on)."""
    classes = set(opclasses.REGISTRY) if classes is None else classes
    out = []
    for n in ast.walk(ast.parse(src)):
        hits = []
        if isinstance(n, ast.Compare):
            hits = [v for x in [n.left, *n.comparators] for v in _strs(x) if v in classes]
        elif isinstance(n, ast.Dict):
            hits = [k.value for k in n.keys if isinstance(k, ast.Constant) and k.value in classes]
        elif isinstance(n, (ast.Tuple, ast.List, ast.Set)):
            vals = _strs(n)
            hits = vals if vals and len(vals) == len(n.elts) and all(v in classes for v in vals) else []
        out += [f"{rel}:{n.lineno} names the op class {h!r}" for h in hits]
    return out


def test_nothing_outside_the_registry_names_an_op_class():
    # every module of the package, found by walking it (no list to forget a module in)
    scanned = list(_sources_outside_the_registry())
    assert len(scanned) >= 80 and any(rel == "roofline/core/routing.py" for rel, _ in scanned)
    bad = [v for rel, src in scanned for v in class_literals(rel, src)]
    assert not bad, bad


def test_the_literal_scan_catches_each_way_of_naming_a_class():
    cases = ["if op_class == 'attn':\n    pass\n", "x = kind in ('gemm', 'moe')\n", "T = {'comm': 0.80}\n",
             "K = ('elementwise', 'norm', 'quant')\n", "y = 'routing_sort' != c\n", "f(topn, 'weight', ['gemm'])\n"]
    for src in cases:
        assert class_literals("roofline/x.py", src), src
    # not a class: another enum's word, the shared UNKNOWN by name, a mixed list (click choices)
    clean = ("if bt == 'latency' or hc in (None, UNKNOWN):\n    pass\nC = ['dense', 'moe']\n"
             "s = {'underperforming': 1}\n")
    assert class_literals("roofline/x.py", clean) == []


def test_the_schema_enums_are_the_registry():
    """The artifact's op_class enum is the contract's closed set, and exactly the classes' seed_class
    values; its op_kind enum is every registered class (regenerate: python3 tools/schema_enums.py)."""
    from roofline.core import contract
    from roofline.core.opclasses.base import SEED_CLASSES
    from roofline.io.schema import artifact_schema

    props = artifact_schema()["$defs"]["entry"]["properties"]
    assert props["op_class"]["enum"] == list(SEED_CLASSES) == list(contract.OP_CLASSES)
    assert set(SEED_CLASSES) == {oc.seed_class for oc in opclasses.REGISTRY.values()} | {opclasses.FALLBACK}
    assert props["op_kind"]["enum"] == list(opclasses.REGISTRY)


def test_a_seed_class_outside_the_seed_enum_is_refused():
    before = dict(opclasses.REGISTRY)
    with pytest.raises(ValueError, match="not in the contract's enum"):
        opclasses.register(opclasses.OpClass("linear_attn", seed_class="comm"))
    assert opclasses.REGISTRY == before


def test_classify_reads_its_tables_from_the_registry():
    # one row per (class, rank), ordered by rank: the class files hold them, not classify.py
    rows = sorted((r, rx, oc.name) for oc in opclasses.REGISTRY.values() for r, rx in oc.name_rules)
    assert classify.RULES == [(rx, c) for _, rx, c in rows]
    assert [c for _, c in classify.RULES][:2] == ["comm", "elementwise"]      # collectives before all
    assert classify.RULES[-1][1] == "elementwise"                             # the streaming catch-all last
    assert classify.classify("x", "collective") == "comm" and classify.classify("x", "attention") == "attn"
