"""Issue 7: `seeds: {max, batch, design: sequential, ...}` in a campaign plans the first batch of seeds,
keeps the design for the interim looks, and a plain list keeps working; bad blocks name file and key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from orchestrator.engine.spec import CampaignSpec, SpecError, load_campaign
from orchestrator.session import Session, plan

REPO = Path(__file__).resolve().parents[2]


def _campaign(tree: Path, seeds) -> Path:
    data = yaml.safe_load((tree / "small.yaml").read_text())
    data["seeds"] = seeds
    out = tree / "seq.yaml"
    data["name"] = "seq"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def test_sequential_block_plans_and_submits_the_first_batch(tree: Path, tmp_path: Path) -> None:
    block = {"max": 12, "batch": 3, "design": "sequential", "equivalence_margin": 1.0, "futility_cp": 0.1}
    spec, runs = plan(_campaign(tree, block))
    d = spec.sequential_design()
    assert d.looks == (3, 6, 9, 12) and d.max_seeds == 12
    assert d.equivalence_margin == 1.0 and d.futility_cp == 0.1
    assert spec.seeds == [1, 2, 3] and spec.seed_pool() == list(range(1, 13))
    n_pol = len(yaml.safe_load((tree / "small.yaml").read_text())["policies"])
    assert sorted({r.seed for r in runs}) == [1, 2, 3] and len(runs) == n_pol * 3
    sess = Session(workdir=tmp_path / "wd")
    try:
        diff = sess.submit(spec, runs)
        assert len(diff.new) == n_pol * 3
        # the ledger keeps the design: the spec read back plans the same first batch
        back = CampaignSpec.model_validate_json(sess.ledger.campaign_spec("seq"))
        assert back.sequential_design() == d and back.seeds == [1, 2, 3]
    finally:
        sess.close()


def test_plain_seed_list_is_unchanged(tree: Path) -> None:
    spec = load_campaign(_campaign(tree, [4, 7]))
    assert spec.seeds == [4, 7] and spec.seed_design is None and spec.sequential_design() is None
    assert spec.seed_pool() == [4, 7]


@pytest.mark.parametrize("block, words", [
    ({"max": 10, "batch": 3, "design": "sequential"}, "multiple of batch"),
    ({"max": 12, "batch": 3, "design": "fixed"}, "design"),
    ({"max": 12, "batch": 3, "design": "sequential", "futility_cp": 1.5}, "futility_cp"),
    ({"max": 12, "batch": 3, "design": "sequential", "margin": 1.0}, "unknown key"),
])
def test_bad_sequential_block_names_file_and_key(tree: Path, block: dict, words: str) -> None:
    path = _campaign(tree, block)
    with pytest.raises(SpecError) as e:
        load_campaign(path)
    msg = str(e.value)
    assert str(path) in msg and "key 'seeds'" in msg and words in msg


def test_plan_cli_bad_block_exits_2(tree: Path, campaign_cli) -> None:
    path = _campaign(tree, {"max": 12, "batch": 5, "design": "sequential"})
    p = campaign_cli(["plan", str(path)], cwd=REPO)
    assert p.returncode == 2 and "seq.yaml" in p.stderr and "seeds" in p.stderr and "Traceback" not in p.stderr


def test_a_group_with_its_own_seeds_cannot_bypass_the_sequential_design(tree: Path) -> None:
    with pytest.raises(SpecError, match=r"seed_extension\.yaml: key 'sub_campaigns\.seed_extension\.groups\.0\.seeds'"):
        load_campaign(tree / "paper", ["~seeds", "+seeds={design:sequential,max:12,batch:3}"])
