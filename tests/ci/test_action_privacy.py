"""The CI action on logged traffic keeps it private (docs/privacy.md, docs/ci.md): the shipped
action's steps (tests/ci/test_action.py's harness) run twice — main's baseline, then a pull
request compared with it and commented on — against OpenAI-compatible servers whose answers echo
the prompt, on logged requests carrying a canary string and private ids (tests/cli/
test_privacy.py's). Then everything a workflow uploads (both run folders, compare.md and
compare.xml in them), the comment it posts and every step's output is decoded and searched for the
canary, the raw ids and the generated answers. The same with `run-args: --keep-text` is the
control: the search finds them there, so it can fail."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.ci.test_action import engine_config, gh_stub_and_thresholds, run_action
from tests.cli.test_privacy import CANARY, answer_needles, leaks, write_logs
from tests.harness.test_openai_backend import FakeServer


def _action_twice(tmp: Path, logs: Path, run_args: str) -> tuple[list[Path], list[str]]:
    """Baseline on main, then a pull request: every file a workflow uploads or posts, and every
    step's stdout and stderr."""
    tmp.mkdir()
    thresholds = gh_stub_and_thresholds(tmp)
    base = FakeServer(0, step_s=0.002, echo_prompt=True)
    spec = FakeServer(2, step_s=0.002, echo_prompt=True)
    printed: list[str] = []
    workloads = [{"name": "logs", "dataset": {"path": str(logs)}, "n": 6}]
    # max_new_tokens: an echoed answer starts with the canary (its prompt's start)
    config = engine_config(
        tmp, base, spec, name="ci-logged", workloads=workloads, max_new_tokens=120, warmup=1
    )
    try:
        common = {
            "config": str(config),
            "specbench": f"{sys.executable} -m specbench",
            "thresholds": str(thresholds),
            "baseline": str(tmp / "baseline"),
            "run-args": run_args,
        }
        for out, pr in (("baseline", None), ("pr", 17)):
            rc, ctx = run_action({**common, "out": str(tmp / out)}, tmp, pr=pr)
            steps = ctx["steps"]
            printed += [s[k] for s in steps.values() for k in ("stdout", "stderr")]
            # every step ran; the gate's verdict on two timings of a shared CPU is not the point
            assert len(steps) == 5 and steps["compare"]["outputs"]["code"] in ("0", "1", "5")
            assert rc == int(steps["compare"]["outputs"]["code"]), steps
    finally:
        base.close()
        spec.close()
    assert steps["compare"]["outputs"]["compared"] == "true"
    assert (tmp / "gh-args").read_text().split()[:3] == ["pr", "comment", "17"]
    body = tmp / "gh-body"
    assert body.read_text() == (tmp / "pr" / "compare.md").read_text()
    files = [p for d in ("baseline", "pr") for p in sorted((tmp / d).rglob("*")) if p.is_file()]
    assert {p.name for p in files} >= {
        "records.jsonl", "results.json", "summary.csv", "report.md", "report.html", "env.json",
        "config.yaml", "compare.md", "compare.xml",
    }  # fmt: skip
    return [*files, body, tmp / "gh-args"], printed


@pytest.mark.slow
@pytest.mark.long  # four runs of the action: a minute or more (make test-long, CI runs it)
def test_the_action_uploads_and_posts_nothing_of_the_logged_traffic(tmp_path: Path) -> None:
    logs, ids = write_logs(tmp_path)
    # six requests, all measured; the last one's prompt is short, so its echoed answer repeats:
    # a degenerate answer, whose end the report quotes when the text is kept (docs/theory.md §13)
    rows = [json.loads(x) for x in logs.read_text().splitlines()[:6]]
    rows[-1]["prompt"] = f"{CANARY} a "
    logs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ids = ids[:6]

    # the control: --keep-text writes the ids and the answers (which echo the canary)
    kept_files, kept_printed = _action_twice(tmp_path / "kept", logs, "--keep-text")
    records = tmp_path / "kept" / "pr" / "records.jsonl"
    answers = answer_needles(records)
    used_ids = [i for i in ids if i in records.read_text()]
    assert len(used_ids) == 6 and len(answers) >= 6 and all(CANARY in a for a in answers)
    needles = [CANARY, *ids, *answers]
    found = leaks(kept_files, kept_printed, needles)
    for needle in (CANARY, used_ids[0], answers[0]):
        assert f"records.jsonl: {needle[:40]}" in found, (needle, found)
    # ... and the report quotes the end of the degenerate answer
    assert {"report.md: " + CANARY, "report.html: " + CANARY} <= set(found), found

    # the default: private — no upload, comment or log line holds any of it
    files, printed = _action_twice(tmp_path / "private", logs, "")
    private = [json.loads(x) for x in (tmp_path / "private" / "pr" / "records.jsonl").open()]
    assert {r["kind"] for r in private} >= {"baseline", "spec"}
    assert leaks(files, printed, needles) == []
