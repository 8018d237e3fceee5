"""The one registry idiom (wtcommon/registry.py, issue 37): every table refuses a second implementation under a
taken name and an unknown name the same way, in its own error class, and a plugin registers from any module."""

from __future__ import annotations

import pytest

from wtcommon.registry import Registry


class _Err(ValueError):
    pass


class Alpha:
    pass


class Beta:
    pass


def test_a_taken_name_refuses_another_implementation_but_not_the_same_one_again() -> None:
    t: Registry[type] = Registry("widget", _Err)
    t["alpha"] = Alpha
    t["alpha"] = Alpha  # its module imported twice: the same class, no conflict
    with pytest.raises(_Err, match=r"widget 'alpha' is already registered by .*Alpha; choose another name"):
        t["alpha"] = Beta
    with pytest.raises(_Err, match="already registered"):
        t.update({"alpha": Beta})  # every write path applies the rule
    with pytest.raises(_Err, match="already registered"):
        t.update(alpha=Beta)
    assert t["alpha"] is Alpha and dict(t) == {"alpha": Alpha}  # a refused write changed nothing


def test_an_unknown_name_is_refused_with_the_close_and_the_known_names() -> None:
    t: Registry[type] = Registry("widget", _Err)
    t.update(alpha=Alpha, beta=Beta)
    assert t.lookup("beta") is Beta
    with pytest.raises(_Err, match=r"^cfg.name: unknown widget 'alpah'; did you mean \['alpha'\]\? known: "
                                   r"\['alpha', 'beta'\]$"):
        t.lookup("alpah", where="cfg.name")
    with pytest.raises(_Err, match=r"unknown widget 3 known: \['alpha', 'beta', 'gamma'\]"):
        t.lookup(3, also=["gamma"])
    with pytest.raises(_Err, match="non-empty string"):
        t[""] = Alpha


def test_entries_that_wrap_an_implementation_compare_by_it() -> None:
    t: Registry[tuple] = Registry("pair", _Err, implementation=lambda e: e[1])
    t["a"] = ("first", Alpha)
    t["a"] = ("second record", Alpha)  # the same implementation: allowed
    with pytest.raises(_Err):
        t["a"] = ("first", Beta)


def test_every_shipped_table_is_one_registry_with_its_own_error() -> None:
    import policies.loader  # noqa: F401  (importing registers the shipped scorers and actuators)
    from evaluation.graders.registry import REGISTRY, GraderError
    from policies.curricula.registry import CURRICULA
    from policies.errors import PolicyConfigError
    from policies.registry import ACTUATORS, SCORERS, lookup
    from training.backend import TrainingConfigError
    from training.registry import BACKENDS

    tables = [(SCORERS, PolicyConfigError), (ACTUATORS, PolicyConfigError), (CURRICULA, PolicyConfigError),
              (BACKENDS, TrainingConfigError), (REGISTRY, GraderError)]
    for table, err in tables:
        assert isinstance(table, Registry) and table.error is err
    with pytest.raises(PolicyConfigError, match="unknown registry kind 'scorers'"):
        lookup("scorers", "group_solve_rate", "p")  # a typo in the kind is refused, not read as an actuator
    with pytest.raises(PolicyConfigError, match=r"unknown actuator 'gfpoo'; did you mean \['gfpo'\]"):
        lookup("actuator", "gfpoo", "p")


def test_a_plugin_backend_registers_from_its_own_module_and_cannot_take_a_shipped_name() -> None:
    from training.backend import TrainingBackend, TrainingConfigError
    from training.noop import NoopBackend
    from training.registry import BACKENDS, get_backend, register_backend

    @register_backend("wt_test_plugin")
    class Plugin(NoopBackend):
        pass

    try:
        assert isinstance(get_backend("wt_test_plugin"), Plugin)
        get_backend("noop")
        with pytest.raises(TrainingConfigError, match="training backend 'noop' is already registered"):
            register_backend("noop")(type("Other", (TrainingBackend,), {}))
        with pytest.raises(TrainingConfigError, match=r"unknown training backend 'lcal'; did you mean \['local'\]"):
            get_backend("lcal")
    finally:
        dict.pop(BACKENDS, "wt_test_plugin")
