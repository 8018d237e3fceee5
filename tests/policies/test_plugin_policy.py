"""A new policy = one class in the researcher's own module + one YAML that names the module under `plugins:`."""

import sys
from pathlib import Path

import pytest
import torch

from policies import PolicyConfigError, StepBatch, load_policy

HERE = Path(__file__).parent


def _batch() -> StepBatch:
    g = torch.arange(4).repeat_interleave(5)  # 4 groups x 5 rollouts
    lengths = torch.tensor([5, 3, 8, 1, 6, 2, 2, 9, 4, 7, 3, 3, 3, 3, 3, 9, 8, 7, 6, 5])
    L = 10
    mask = (torch.arange(L)[None, :] < lengths[:, None]).float()
    return StepBatch(advantages=torch.randn(20, L) * mask, rewards=(torch.arange(20) % 2).float(), response_mask=mask,
                     old_log_probs=torch.zeros(20, L), group=g, domain=torch.zeros(20, dtype=torch.long))


def test_yaml_plugins_key_imports_the_class_and_runs_it(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE / "plugin_example"))
    f = tmp_path / "shortest.yaml"
    f.write_text("name: shortest\nmechanism: select\nplugins: [shortest_plugin]\n"
                 "scorer: {name: response_length}\nactuator: {name: topk_fraction, params: {fraction: 0.4, largest: "
                 "false, scope: per_group}}\n")
    res = load_policy(f).apply(_batch(), step=0)
    kept = (res.weights.sum(-1) > 0).reshape(4, 5)
    # two shortest per group, ties to the earlier row: computed by hand from the lengths above
    assert kept.nonzero().tolist() == [[0, 1], [0, 3], [1, 0], [1, 1], [2, 0], [2, 1], [3, 3], [3, 4]]
    assert res.diagnostics["kept_frac"] == pytest.approx(0.4)
    sys.modules.pop("shortest_plugin", None)


def test_unimportable_plugin_is_a_loud_config_error(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("name: bad\nmechanism: select\nplugins: [no_such_module_xyz]\n"
                 "scorer: {name: response_length}\nactuator: {name: topk_fraction}\n")
    with pytest.raises(PolicyConfigError, match=r"bad.yaml.*plugins.*no_such_module_xyz"):
        load_policy(f)


def test_importing_a_plugin_writes_nothing_into_the_users_folder(tmp_path, monkeypatch):
    """Even where Python may write bytecode, a plugin's folder gains no `__pycache__`: it is the user's (a shared
    filesystem every node imports from), and `policies validate` promises to write nothing."""
    from policies.plugins import import_plugins

    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    (tmp_path / "plug").mkdir()
    (tmp_path / "plug" / "quiet_plugin_xyz.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "plug"))
    try:
        import_plugins({"plugins": ["quiet_plugin_xyz"]}, "p.yaml")
        assert sys.modules["quiet_plugin_xyz"].VALUE == 1
        assert sorted(p.name for p in (tmp_path / "plug").iterdir()) == ["quiet_plugin_xyz.py"]
        assert sys.dont_write_bytecode is False  # restored
    finally:
        sys.modules.pop("quiet_plugin_xyz", None)
