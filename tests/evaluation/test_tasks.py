"""Generated lm-eval tasks: explicit generation settings, indexed by lm-eval, hooks use our graders."""

from __future__ import annotations

import pandas as pd
import yaml

from evaluation.backends.tracking import GenerationInfoHook
from evaluation.benchmark_data import FIXTURE_DIR
from evaluation.generation_cache import GenerationStore, generation_key
from evaluation.suite import load_suite
from evaluation.tasks import functions
from evaluation.tasks.build import write_task_dir


class _FnLoader(yaml.SafeLoader):
    pass


_FnLoader.add_constructor("!function", lambda loader, node: f"!function {loader.construct_scalar(node)}")


def test_task_yaml_settings_follow_the_suite(tmp_path):
    suite = load_suite("db12")
    names = write_task_dir(suite, FIXTURE_DIR, tmp_path)
    assert sorted(names) == sorted(suite.benchmark_ids)
    for b in suite.benchmarks:
        cfg = yaml.load((tmp_path / f"{names[b.id]}.yaml").read_text(), Loader=_FnLoader)
        gen = cfg["generation_kwargs"]
        assert gen["max_gen_toks"] == b.max_gen_toks and gen["do_sample"] is False and gen["until"]
        assert cfg["num_fewshot"] == 0 and cfg["fewshot_split"] is None and cfg["training_split"] is None
        assert cfg["process_results"].endswith(f"process_{b.grader}")
        assert cfg["dataset_kwargs"]["benchmark_file"].endswith(f"{b.id}.parquet")


def test_lm_eval_indexes_and_loads_every_task(tmp_path, small_suite):
    from lm_eval.tasks import TaskManager

    suite = small_suite(8)
    names = write_task_dir(suite, FIXTURE_DIR, tmp_path)
    tm = TaskManager(include_path=str(tmp_path), include_defaults=False)
    assert set(names.values()) <= set(tm.all_tasks)
    task = tm.load([names["mmlu_pro_physics"]])["tasks"][names["mmlu_pro_physics"]] if hasattr(tm, "load") else None
    if task is not None:
        docs = list(task.eval_docs)
        assert len(docs) == len(pd.read_parquet(FIXTURE_DIR / "mmlu_pro_physics.parquet"))


def test_process_results_grade_with_the_shared_graders():
    doc = {"answer": "C", "n_options": 10, "prompt": "q"}
    assert functions.process_multiple_choice(doc, ["The answer is: (C)"])["acc"] == 1.0
    m = functions.process_multiple_choice(doc, ["no letter here"])
    assert (m["acc"], m["parsed_ok"], m["answer"]) == (0.0, 0.0, "")
    bad = functions.process_multiple_choice({"answer": "?", "n_options": 4}, ["The answer is (A)"])
    assert bad["grader_error"] == 1.0
    assert functions.process_math({"answer": "8"}, ["so \\boxed{8}"])["acc"] == 1.0
    kk = functions.process_knights_knaves({"answer": "Ann is a knight, and Bo is a knave."}, ["Ann: knight, Bo: knave"])
    assert kk["acc"] == 1.0 and functions.count_answers(["A", "", "B"]) == 2.0


def test_generation_cache_key_covers_checkpoint_task_item_and_config(tmp_path):
    base = generation_key("h1", "t", 0, "ctx", {"max_gen_toks": 8})
    assert base == generation_key("h1", "t", 0, "ctx", {"max_gen_toks": 8})
    others = [generation_key("h2", "t", 0, "ctx", {"max_gen_toks": 8}),
              generation_key("h1", "u", 0, "ctx", {"max_gen_toks": 8}),
              generation_key("h1", "t", 1, "ctx", {"max_gen_toks": 8}),
              generation_key("h1", "t", 0, "ctx", {"max_gen_toks": 9})]
    assert len({base, *others}) == 5
    store = GenerationStore(tmp_path / "g.sqlite")
    store.put_many([(base, "h1", "t", "0", "resp", 3, "stop")])
    store.close()
    got = GenerationStore(tmp_path / "g.sqlite").get_many([base, others[0]])
    assert got == {base: {"response": "resp", "n_tokens": 3, "finish_reason": "stop"}}


def test_info_hook_tells_stop_strings_from_the_token_limit():
    hook = GenerationInfoHook()
    hook.note(5, None, "abc STOP junk")
    hook.add_partial("generate_until", ("p1", {"max_gen_toks": 5}), "abc ")  # cut by a stop string
    hook.note(5, None, "abcde")
    hook.add_partial("generate_until", ("p2", {"max_gen_toks": 5}), "abcde")  # ran into the limit
    hook.note(2, "stop", "ab")
    hook.add_partial("generate_until", ("p3", {"max_gen_toks": 5}), "ab")  # EOS
    assert [hook.info[p]["finish_reason"] for p in ("p1", "p2", "p3")] == ["stop", "length", "stop"]
