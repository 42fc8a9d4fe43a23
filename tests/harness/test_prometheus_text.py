"""Reading a server's /metrics text (harness.serving.metrics.metrics, prometheus_client's parser): label
values unescaped, and a malformed line costs only itself, not the scrape."""

from __future__ import annotations

from specbench.analysis.serving.spec_counters import SpecCounters
from specbench.harness.serving.metrics.metrics import parse_prometheus, spec_counters_from_samples


def test_label_values_are_unescaped_and_timestamps_ignored() -> None:
    text = 'm{model_name="a \\"quoted\\" \\\\ name",position="0"} 3 1700000000000\n'
    assert parse_prometheus(text) == {
        "m": [({"model_name": 'a "quoted" \\ name', "position": "0"}, 3.0)]
    }


def test_a_malformed_line_does_not_lose_the_counters() -> None:
    text = (
        "vllm:spec_decode_num_drafts_total 5\n"
        "this line is not an exposition line\n"
        "vllm:spec_decode_num_draft_tokens_total 10\n"
        "vllm:spec_decode_num_accepted_tokens_total 7\n"
    )
    assert spec_counters_from_samples(parse_prometheus(text)) == SpecCounters(5, 10, 7)
