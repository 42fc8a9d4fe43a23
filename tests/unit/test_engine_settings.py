"""Engine settings as method × γ × endpoint (config, labels, checks), the prompt-set checks and
the generated long-context workload. Pure: no model, no process."""

from __future__ import annotations

from typing import Any

import pytest

from specbench.analysis.compare.samples import setting_name as compare_name
from specbench.analysis.decide.engine_ranking import primary_keys, setting_name
from specbench.config import EndpointSpec, parse_config, speculative_label, speculative_specs
from specbench.data import Prompt
from specbench.data.loader import load_workload
from specbench.data.long_context import long_context_document
from specbench.errors import SpecbenchError
from specbench.harness.serving.load.prompt_checks import check_concurrency, prompt_warnings
from specbench.harness.serving.openai.endpoints import check_endpoints, endpoint_label

BASE: dict[str, Any] = {
    "backend": "vllm",
    "target": {"model": "tiny-target"},
    "draft": {"model": "tiny-draft"},
    "workloads": [{"name": "w", "dataset": {"name": "tiny_code"}}],
}


def test_speculative_list_takes_each_method_with_its_grid() -> None:
    cfg = parse_config(
        {
            **BASE,
            "speculative": [
                {"method": "eagle3", "model": "e", "num_speculative_tokens": [2, 6]},
                {"method": "ngram", "num_speculative_tokens": 4},
                {"method": "draft_model", "label": "1b", "num_speculative_tokens": [4]},
            ],
        }
    )
    specs = speculative_specs(cfg.speculative)
    assert [speculative_label(s) for s in specs] == ["eagle3", "ngram", "1b"]
    assert [s.num_speculative_tokens for s in specs] == [[2, 6], [4], [4]]
    assert cfg.gammas == [2, 4, 6]  # every method's γ
    single = parse_config({**BASE, "speculative": {"method": "ngram", "num_speculative_tokens": 3}})
    assert [s.method for s in speculative_specs(single.speculative)] == ["ngram"]
    assert single.gammas == [3]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ([{"method": "draft_model"}, {"method": "draft_model"}], "two entries are named"),
        ([{"method": "none"}], "method none is the baseline"),
        ([{"methd": "ngram"}], "unknown key 'speculative.0.methd'; did you mean 'method'"),
    ],
)
def test_speculative_list_mistakes_are_one_line(spec: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(SpecbenchError, match=message):
        parse_config({**BASE, "speculative": spec}, "c")


def test_endpoint_labels_and_checks() -> None:
    ep = EndpointSpec
    assert endpoint_label(ep(url="u", gamma=4, method="eagle3")) == "eagle3 γ=4"
    assert endpoint_label(ep(url="u", gamma=4)) == "server γ=4"  # as runs before methods
    assert endpoint_label(ep(url="u", gamma=4, label="big draft")) == "big draft"
    assert endpoint_label(ep(url="u", gamma=0, method="none")) == ""
    good = [
        ep(url="a", gamma=4, method="eagle3"),
        ep(url="b", gamma=4, method="draft_model"),
        ep(url="c", gamma=0, method="none"),
    ]
    check_endpoints(good)  # two methods at one γ are two settings
    for eps, message in [
        (good[:2], "no server without speculation"),
        ([*good, ep(url="d", gamma=0)], "keep one baseline"),
        ([*good, ep(url="d", gamma=4, method="eagle3")], "two servers are labelled 'eagle3 γ=4'"),
        ([*good, ep(url="d", gamma=0, method="ngram")], "method ngram but gamma 0"),
    ]:
        with pytest.raises(SpecbenchError, match=message):
            check_endpoints(eps)


def test_setting_names_and_the_primary_method() -> None:
    assert setting_name(("ngram", "fixed", 4), []) == "ngram γ=4"
    assert setting_name(("eagle3 γ=4", "fixed", 4), []) == "eagle3 γ=4"
    assert setting_name(("x", "fixed", 4), [{"setting": "named"}]) == "named"
    assert compare_name("speedup[ngram/fixed]@4") == compare_name("speedup[ngram γ=4/fixed]@4")
    keys = {("a", "fixed", 2): [], ("b", "fixed", 4): []}
    assert primary_keys(keys) == (list(keys), None)  # no γ shared: every setting
    shared = {
        ("ngram", "fixed", 4): [],
        ("draft_model", "fixed", 2): [],
        ("draft_model", "fixed", 4): [],
    }
    assert primary_keys(shared) == (list(shared)[1:], "draft_model")  # the method with most γ

    # servers: each setting its own label, grouped by the method the records state
    def recs(method: str) -> list[dict[str, Any]]:
        return [{"method": method}]

    served = {
        ("draft_model γ=2", "fixed", 2): recs("draft_model"),
        ("ngram γ=4", "fixed", 4): recs("ngram"),
        ("draft_model γ=4", "fixed", 4): recs("draft_model"),
    }
    keys_shown, method = primary_keys(served)
    assert method == "draft_model" and [k[0] for k in keys_shown] == [
        "draft_model γ=2",
        "draft_model γ=4",
    ]


def _prompts(n: int) -> list[Prompt]:
    return [Prompt(f"p{i}", "w", ["x"]) for i in range(n)]


def test_prompt_checks_warn_on_n_and_refuse_unreachable_concurrency() -> None:
    cfg = parse_config(
        {
            **BASE,
            "workloads": [
                {"name": "a", "dataset": {"name": "tiny_code"}, "n": 64},
                {"name": "b", "dataset": {"name": "tiny_code"}},
            ],
            "concurrency": [1, 12],
        }
    )
    prompts = {"a": _prompts(8), "b": _prompts(16)}
    notes = prompt_warnings(cfg, prompts)
    assert any("'a' asks for 64 prompts, its dataset has 8" in w for w in notes)
    assert any("workload 'a' has 8 prompts: concurrency 12 cannot be reached" in w for w in notes)
    check_concurrency(cfg, prompts)  # b reaches 12
    with pytest.raises(SpecbenchError, match="concurrency 12: no workload has more than 8"):
        check_concurrency(cfg, {"a": _prompts(8), "b": _prompts(8)})


@pytest.mark.parametrize("words", [250, 3000])
def test_long_context_is_deterministic_and_takes_a_length(words: int) -> None:
    prompt, reference = long_context_document(3, words)
    assert long_context_document(3, words) == (prompt, reference)
    assert long_context_document(4, words)[0] != prompt
    assert 0.9 * words <= len(prompt.split()) <= 1.1 * words + 60
    alerts = prompt.count("ALERT:")
    assert alerts == 3 + 3 % 3 and reference.count(";") == alerts - 1
    for answer in reference.split("; "):  # each alert's machine and handler are in the log
        tag, who = answer.rsplit(": ", 1)
        assert tag.split(" on ", 1)[1] in prompt and who in prompt


def test_long_context_workload_loads_from_a_config() -> None:
    cfg = parse_config(
        {
            **BASE,
            "workloads": [
                {
                    "name": "long",
                    "dataset": {"generate": "long_context", "prompt_words": 400, "documents": 5},
                    "n": 3,
                }
            ],
        }
    )
    prompts = load_workload(cfg.workloads[0], cfg.seed)
    assert len(prompts) == 3 and all(p.workload == "long" for p in prompts)
    assert all(len(p.turns[0].split()) >= 360 for p in prompts)
    with pytest.raises(SpecbenchError, match="exactly one of"):
        parse_config(
            {
                **BASE,
                "workloads": [{"name": "x", "dataset": {"name": "c", "generate": "long_context"}}],
            }
        )


def test_interleave_starts_every_engine_per_repeat_in_alternating_order() -> None:
    from specbench.harness.serving.drive.driver import engine_starts
    from specbench.setting import Setting

    settings = [Setting(0, ""), Setting(2, "m"), Setting(4, "m")]
    once = parse_config({**BASE, "repeats": 3})
    assert engine_starts(once, settings) == [(s, None) for s in settings]
    cfg = parse_config({**BASE, "repeats": 3, "engine": {"interleave": True}})
    order = [(s.gamma, rep) for s, rep in engine_starts(cfg, settings)]
    assert order == [(0, 0), (2, 0), (4, 0), (4, 1), (2, 1), (0, 1), (0, 2), (2, 2), (4, 2)]


@pytest.mark.parametrize("change", [{"repeats": 1}, {"backend": "transformers", "repeats": 4}])
def test_interleave_needs_repeats_and_an_engine_backend(change: dict[str, Any]) -> None:
    with pytest.raises(SpecbenchError, match=r"engine\.interleave needs"):
        parse_config({**BASE, "engine": {"interleave": True}, **change})
