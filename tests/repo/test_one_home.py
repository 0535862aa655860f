"""Facts that had several homes have one: the paper's objective list and setting (`analysis/paper.py`), the
atomic temp-file-and-rename write (`records/disk.atomic_file`), one function per teacher-key name.

The presets under conf/experiment/ name the lists again for Hydra's sweeper; they are held equal to the home
here, and the home to the paper's own tables (results/paper/*.csv).
"""

from __future__ import annotations

import ast
import csv

import yaml
from helpers import ROOT

from distill_sweep.analysis import paper

PACKAGE = ROOT / "distill_sweep"


def _sweep_objectives(preset: str) -> list[str]:
    text = (ROOT / "conf" / "experiment" / f"{preset}.yaml").read_text()
    return str(yaml.safe_load(text)["hydra"]["sweeper"]["params"]["objective"]).split(",")


def _paper_objectives(table: str, **where: str) -> list[str]:
    """The objective column of one of the paper's tables, each once, in its order."""
    (path,) = (ROOT / "results" / "paper").glob(f"table{table}_*.csv")
    with path.open() as f:
        rows = [r for r in csv.DictReader(f) if all(r[k] == v for k, v in where.items())]
    return list(dict.fromkeys(r["objective"] for r in rows))


def test_the_paper_objective_list_is_the_papers_and_the_presets_name_it() -> None:
    assert list(paper.OBJECTIVE_ORDER) == _paper_objectives("1")
    assert list(paper.TABLE2_OBJECTIVES) == _paper_objectives("2", system="ours")
    assert _sweep_objectives("paper_table1") == list(paper.OBJECTIVE_ORDER)
    assert _sweep_objectives("paper_table2") == list(paper.TABLE2_OBJECTIVES)
    # Tables 3 and 4 take a subset; the presets' order is the launch order, so only the set is the paper's
    assert sorted(_sweep_objectives("paper_table3")) == sorted(_paper_objectives("3"))
    assert sorted(_sweep_objectives("paper_table4")) == sorted(_paper_objectives("4"))


def test_the_paper_init_layers_are_its_table_3() -> None:
    # the paper's Table 3 rows, 12-layer teacher into 3 layers: skip 4,8,12 / mixed 1,8,12 / bottom 1,2,3
    assert paper.PAPER_INIT_LAYERS == {"skip": "4,8,12", "mixed": "1,8,12", "bottom": "1,2,3"}
    assert (paper.PAPER_TEACHER_LAYERS, paper.PAPER_STUDENT_LAYERS) == (12, 3)


def _literal_lists(tree: ast.AST) -> list[tuple[int, list[str]]]:
    """(line, the strings) of every tuple/list/set display and every comma-separated string in a module."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            found.append((node.lineno, [e.value for e in node.elts
                                        if isinstance(e, ast.Constant) and isinstance(e.value, str)]))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "," in node.value:
            found.append((node.lineno, node.value.split(",")))
    return found


def test_no_module_spells_out_the_paper_objective_list_again() -> None:
    """Most of the paper's nine objectives written out together outside analysis/paper.py is a second home (a
    bench's chosen handful, like bench/pack.py's five, is not)."""
    home = PACKAGE / "analysis" / "paper.py"
    names = set(paper.OBJECTIVE_ORDER)
    copies = [f"{path.relative_to(ROOT)}:{line}"
              for path in sorted(PACKAGE.rglob("*.py")) if path != home
              for line, strings in _literal_lists(ast.parse(path.read_text()))
              if len(names & {s.strip() for s in strings}) >= 7]
    assert not copies, f"the paper's objective list written out again (read analysis/paper.py): {copies}"


def test_one_home_for_temp_file_and_rename_writes() -> None:
    """Only records/disk.atomic_file makes a temp file to rename over a file, and fsyncs it: every atomic write
    (records, checkpoints, predictions, pack files, vocabularies) goes through it."""
    home = PACKAGE / "records" / "disk.py"
    others = [str(path.relative_to(ROOT)) for path in sorted(PACKAGE.rglob("*.py")) if path != home
              if any(call in path.read_text() for call in ("mkstemp(", "os.fsync("))]
    assert not others, f"a temp-file-and-rename write of its own (use records/disk.atomic_file): {others}"


def test_teacher_key_names_one_function() -> None:
    """The encoder's fine-tuned teacher key (job/teacher_keys.finetuned_teacher_key) and the decoder's trained
    teacher key (teachers/decoder.teacher_key) are different functions in different layers: different names."""
    defined = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in sorted(PACKAGE.rglob("*.py"))
               for node in ast.parse(path.read_text()).body
               if isinstance(node, ast.FunctionDef) and node.name == "teacher_key"]
    assert len(defined) == 1, defined
