"""The policies guide's "A curriculum of your own" runs verbatim, as tests/test_readme.py runs the README's
stories: its files written into `my_project/` beside a fresh clone, its runnable block run with `bash -e` and an
empty HOME, every promised string printed. Beside it, the registration refusals a researcher meets first."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from policies import Curriculum, Param, PolicyConfigError, register_curriculum
from tests.test_readme import block_cwd, missing, run_block, runnable_blocks, story_files, user_dir

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "policies.md"


def section() -> str:
    text = GUIDE.read_text()
    return re.search(r"^## A curriculum of your own\n(.*?)(?=^## )", text, re.S | re.M)[1]


def test_the_section_holds_its_files_and_one_runnable_block() -> None:
    assert set(story_files(section())) == {"my_curricula.py", "policy/frontier.yaml", "frontier_campaign.yaml",
                                           "try_frontier.py"}
    assert len(runnable_blocks(section())) == 1


@pytest.mark.slow
def test_the_curriculum_example_runs_verbatim(tmp_path: Path) -> None:
    """The guide's block, verbatim, in a fresh directory: validate, show, list, plan (with an inline variant over
    the rule's parameter) and a propose/update loop. Costs about 15 CPU-seconds (four CLI starts and one Python
    start); proves a reader's own curriculum loads from outside the repository everywhere the guide says."""
    block, expected = runnable_blocks(section())[0]
    (tmp_path / "home").mkdir()
    clone = user_dir(tmp_path, section())
    p = run_block(block, block_cwd(block, clone), tmp_path / "home")
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"{block}\n--- exit {p.returncode}\n{out[-4000:]}"
    assert not missing(out, expected), f"missing {missing(out, expected)}\n{out[-4000:]}"
    assert "recent_frontier" in out and "curriculum: recent_frontier(unseen_priority=0.6)" in out


class _Half(Curriculum):
    signal = "none"

    def _propose(self, step: int, mask: np.ndarray, n: int) -> np.ndarray:
        return np.flatnonzero(mask)[:n]

    def update(self, step: int, prompt_ids: np.ndarray, correct: np.ndarray) -> None:
        self.check_update(prompt_ids, correct)


def test_register_curriculum_refuses_what_would_fail_later() -> None:
    with pytest.raises(PolicyConfigError, match="not a subclass"):
        register_curriculum("t_not_a_rule")(dict)
    with pytest.raises(PolicyConfigError, match=r"implement \['_propose', 'update'\]"):
        register_curriculum("t_abstract")(type("Abstract", (Curriculum,), {"signal": "none"}))
    with pytest.raises(PolicyConfigError, match="set `signal`"):
        register_curriculum("t_nosignal")(type("NoSignal", (_Half,), {"signal": ""}))
    with pytest.raises(PolicyConfigError, match=r"PARAMS \['k'\] are not policies.Param"):
        register_curriculum("t_badparams")(type("BadParams", (_Half,), {"PARAMS": {"k": 3}}))
    with pytest.raises(PolicyConfigError, match="already registered"):
        register_curriculum("mopps")(type("Mine", (_Half,), {}))
    # issue 59: signatures the trainer's calls would not bind to were found only at training time
    with pytest.raises(PolicyConfigError, match=r"_propose\(self, step\) cannot take the trainer's call"):
        register_curriculum("t_bad_propose")(type("BadPropose", (_Half,), {"_propose": lambda self, step: None}))
    with pytest.raises(PolicyConfigError, match=r"update\(self\) cannot take"):
        register_curriculum("t_bad_update")(type("BadUpdate", (_Half,), {"update": lambda self: None}))
    with pytest.raises(PolicyConfigError, match=r"__init__\(self, pool_size\) cannot take"):
        register_curriculum("t_bad_init")(type("BadInit", (_Half,), {"__init__": lambda self, pool_size: None}))


def test_a_rules_state_and_checks_are_tried_when_its_config_is_checked() -> None:
    """issue 59: a STATE naming an attribute the rule never sets failed at the first checkpoint, and a check_params
    raising a plain exception was a traceback in `campaign policies`; both are config errors at check time."""
    from policies.curricula.registry import check_curriculum

    register_curriculum("t_lost_state")(type("LostState", (_Half,), {"STATE": ("counts",), "__module__": __name__}))
    with pytest.raises(PolicyConfigError, match=r"STATE names \['counts'\], which the rule never sets"):
        check_curriculum("t_lost_state", None)

    def boom(cls, params):
        raise ValueError("low above high")

    register_curriculum("t_raising_check")(type("RaisingCheck", (_Half,), {"check_params": classmethod(boom),
                                                                           "__module__": __name__}))
    with pytest.raises(PolicyConfigError, match="its check_params raised ValueError: low above high"):
        check_curriculum("t_raising_check", None)


def test_a_registered_rule_is_built_checked_and_restored_by_name() -> None:
    from policies.curricula.registry import build_curriculum, check_curriculum

    cls = register_curriculum("t_first_n")(type("FirstN", (_Half,), {
        "PARAMS": {"skip": Param(int, 0, low=0)}, "__module__": __name__}))
    assert cls.name == "t_first_n" and check_curriculum("t_first_n", None) == {"skip": 0}
    with pytest.raises(PolicyConfigError, match=r"params.skip: got -1"):
        check_curriculum("t_first_n", {"skip": -1})
    rule = build_curriculum("t_first_n", {"skip": 2}, pool_size=6, batch_size=2, seed=3)
    assert rule.propose(0).tolist() == [0, 1] and rule.state_dict()["curriculum"] == "t_first_n"
