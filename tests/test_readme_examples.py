"""The documentation's command examples, run at small sizes, each asserting its documented exit
code.

Every `specbench …` line of an indented example in README.md or docs/*.md must appear below,
either in RUNS (run in order, with the sizes cut down and paths moved into a temporary directory)
or in SKIPPED with the reason; a new or edited example fails
`test_every_documented_example_is_covered` until it is listed, so the examples cannot drift from
the code unnoticed (issue 15 item 10). An example shown on several pages is one entry.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specbench.cli.app import run_cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]

SMALL_RUN = "--max-prompts 1 --gammas 1,2 --workloads tiny_code --temperature 0"
# the planted regression: two workloads × two prompts at T = 0 are enough for the α drop
PLANTED = "--max-prompts 2 --gammas 2 --workloads tiny_code,tiny_prose --temperature 0"
SMALL_VERIFY = "--max-prompts 1 --gamma 1"

# documented command → (the command run here, its exit code); run in this order.
RUNS: dict[str, tuple[str, int]] = {
    "roi --alpha 0.6": ("roi --alpha 0.6", 0),
    "roi --alpha 0.6 --t-target 80 --t-draft 7": ("roi --alpha 0.6 --t-target 80 --t-draft 7", 0),
    "roi --accepted 3.2 --gamma 5 --t-target 80 --t-draft 7": (
        "roi --accepted 3.2 --gamma 5 --t-target 80 --t-draft 7",
        0,
    ),
    "roi --alpha 0.5 --alpha 0.8 --plot roi.png --csv roi.csv --json": (
        "roi --alpha 0.5 --alpha 0.8 --plot {tmp}/out/roi.png --csv {tmp}/out/roi.csv --json",
        0,
    ),
    "run configs/tiny.yaml --out reports/tiny": (
        f"run configs/tiny.yaml --out {{tmp}}/reports/tiny {SMALL_RUN}",
        0,
    ),
    "run configs/tiny.yaml --out reports/tiny --resume": (
        f"run configs/tiny.yaml --out {{tmp}}/reports/tiny --resume {SMALL_RUN}",
        0,
    ),
    "report reports/tiny": ("report {tmp}/reports/tiny", 0),
    "schedule docs/example-engine-run": ("schedule docs/example-engine-run", 0),
    # the shipped engine run's pool schedule is off everywhere: the line without speculation
    "schedule docs/example-engine-run --format vllm": (
        "schedule docs/example-engine-run --format vllm",
        0,
    ),
    # the shipped profile run: the decision at the profile (ON, γ=4) as the line and the document
    "schedule docs/example-profile-run --format vllm": (
        "schedule docs/example-profile-run --format vllm",
        0,
    ),
    "schedule docs/example-profile-run --format json": (
        "schedule docs/example-profile-run --format json",
        0,
    ),
    "run configs/tiny.yaml --adaptive --budget-forwards 3000": (
        "run configs/tiny.yaml --adaptive --budget-forwards 300 --out {tmp}/ad "
        "--max-prompts 4 --workloads tiny_code --temperature 1",
        0,
    ),
    "report reports/tiny --gpu-hour-usd 2.5 --gpus 2": (
        "report {tmp}/reports/tiny --gpu-hour-usd 2.5 --gpus 2",
        0,
    ),
    "run configs/tiny.yaml --max-prompts 4 --gammas 2,4 --out /tmp/base": (
        f"run configs/tiny.yaml --out {{tmp}}/base {PLANTED}",
        0,
    ),
    "run configs/tiny-weak-draft.yaml --max-prompts 4 --gammas 2,4 --out /tmp/weak": (
        f"run configs/tiny-weak-draft.yaml --out {{tmp}}/weak {PLANTED}",
        0,
    ),
    "compare /tmp/base /tmp/weak": ("compare {tmp}/base {tmp}/weak", 1),
    # the same run on both sides, one run per side: no regression, but the speedup row cannot see
    # a 5 % drop under the default run-to-run CV: inconclusive (exit 5)
    "compare reports/main reports/pr --strict": ("compare {tmp}/base {tmp}/base --strict", 5),
    "compare main1 main2 main3 vs pr1 pr2 pr3": (
        "compare {tmp}/base {tmp}/base {tmp}/base vs {tmp}/base {tmp}/base {tmp}/base",
        5,
    ),
    "compare reports/old-driver reports/new-driver --subject env": (
        "compare {tmp}/base {tmp}/base --subject env",
        5,
    ),
    "compare baseline/results.json reports/pr --markdown comment.md --junit junit.xml": (
        "compare {tmp}/base/results.json {tmp}/base --markdown {tmp}/ci/comment.md "
        "--junit {tmp}/ci/junit.xml",
        5,
    ),
    # A/A runs: the same run directory three times (no noise at all), into a new thresholds file
    "compare --calibrate aa1 aa2 aa3 aa4 aa5 --thresholds ci/specbench-thresholds.yaml": (
        "compare --calibrate {tmp}/base {tmp}/base {tmp}/base --thresholds {tmp}/gate.yaml",
        0,
    ),
    "compare --plan --thresholds ci/specbench-thresholds.yaml --write-plan": (
        "compare --plan --thresholds {tmp}/gate.yaml --write-plan",
        0,
    ),
    "compare --plan --thresholds ci/specbench-thresholds.yaml --gpu-hour-usd 2.5 --write-plan": (
        "compare --plan --thresholds {tmp}/gate.yaml --gpu-hour-usd 2.5 --write-plan",
        0,
    ),
    "validate ci/specbench-thresholds.yaml": ("validate {tmp}/gate.yaml", 0),
    "validate configs/*.yaml --offline": (
        "validate configs/tiny.yaml configs/tiny-openai.yaml configs/llama70b.yaml --offline",
        0,
    ),
    "validate configs/llama70b-vllm.yaml --gpu-memory 80": (
        "validate configs/llama70b-vllm.yaml --gpu-memory 80",
        0,
    ),
    "validate configs/llama70b-vllm-2node.yaml --gpu L40S --offline": (
        "validate configs/llama70b-vllm-2node.yaml --gpu L40S --offline",
        0,
    ),
    "verify configs/tiny.yaml": (f"verify configs/tiny.yaml {SMALL_VERIFY} --temperature 0", 0),
    "verify configs/tiny.yaml --temperature 0.7 --top-p 0.9 --contexts 8 --samples 2000": (
        f"verify configs/tiny.yaml --temperature 0.7 --top-p 0.9 --contexts 1 --samples 200 "
        f"{SMALL_VERIFY}",
        0,
    ),
    "verify configs/tiny.yaml --temperature 1 --lossy-epsilon 0.1": (
        f"verify configs/tiny.yaml --temperature 1 --lossy-epsilon 0.1 --contexts 1 "
        f"--samples 1000 {SMALL_VERIFY}",
        1,
    ),
}

SKIPPED: dict[str, str] = {
    "run configs/tiny.yaml": "the same command as the first `run` example, with its --out",
    "run configs/llama70b.yaml --workloads chat,code --gammas 2,4,6 --max-prompts 16": (
        "needs the 70B/8B hub models and GPUs"
    ),
    "run configs/tiny-vllm.yaml": "needs vLLM (make test-vllm)",
    "run configs/llama70b-vllm-2node.yaml": (
        "needs the 70B/8B models, 8 GPUs on two nodes and a Ray cluster"
    ),
    "run configs/tiny-load.yaml": (
        "batch_timing is run by tests/harness/test_batch_timing.py at b = 1, 2 (this config "
        "times b up to 16 over 16 prompts)"
    ),
    "run configs/tiny-vllm-load.yaml": "needs vLLM (tests/harness/test_vllm_load.py)",
    "predict-check reports/tiny-vllm-load reports/tiny-load": (
        "needs the vLLM run; the command is tested in tests/unit/test_batch_prediction.py"
    ),
    "predict-check reports/tiny-vllm-load reports/tiny-load --json": (
        "needs the vLLM run; the command is tested in tests/unit/test_batch_prediction.py"
    ),
    "run configs/tiny-openai.yaml": "needs a running OpenAI-compatible server",
    "compare --ab configs/ci-gate.yaml --base-python .venv-main/bin/python --candidate-python "
    ".venv-pr/bin/python --pairs 4 --out reports/ab": (
        "needs two Python environments; tests/cli/test_cli_compare_ab.py runs --ab with this "
        "interpreter on both sides"
    ),
    "validate configs/my-engine.yaml": (
        "a user's engine config; tests/ci/test_action.py validates against a local server"
    ),
    "run configs/tiny-openai-methods.yaml": (
        "needs four running vLLM servers; tests/harness/test_vllm_methods.py runs two methods in "
        "one run, tests/harness/test_engine_methods.py four settings against local test servers"
    ),
    "run configs/tiny-load.yaml --out reports/tiny-load": (
        "batch_timing is run by tests/harness/test_batch_timing.py at b = 1, 2"
    ),
    "run configs/tiny-vllm-load.yaml --out reports/tiny-vllm-load": (
        "needs vLLM (tests/harness/test_vllm_load.py)"
    ),
    "schedule reports/tiny-vllm-load --workload tiny_code --temperature 0 --format vllm": (
        "needs the vLLM run; `schedule` is tested in tests/unit/test_schedule_export.py"
    ),
    "run configs/tiny-vllm-schedule.yaml": (
        "needs vLLM and the tiny-vllm-load run; a schedule setting is measured by "
        "tests/harness/test_vllm_load.py"
    ),
    "schedule reports/tiny-vllm-load --workload tiny_code --temperature 0 --out "
    "reports/tiny-vllm-load/schedule.json": (
        "needs the vLLM run; `schedule` is tested in tests/unit/test_schedule_export.py"
    ),
    "run configs/tiny.yaml --adaptive": (
        "the adaptive plan is run by tests/harness/test_adaptive.py (a cut config, seconds)"
    ),
    "run configs/tiny.yaml --adaptive --out reports/tiny-ad --resume": (
        "adaptive resume is tested in tests/harness/test_adaptive.py"
    ),
    "run configs/llama70b.yaml --adaptive --budget-minutes 60": "needs the 70B/8B models and GPUs",
    "run configs/tiny-vllm.yaml --out reports/tiny-vllm": "needs vLLM (make test-vllm)",
    "run configs/tiny-vllm-profile.yaml --out /tmp/prof5": (
        "needs vLLM and 20 min; its run is shipped as docs/example-profile-run, which "
        "tests/test_example_profile_run.py reports and exports"
    ),
    "schedule reports/tiny-vllm --workload tiny_code --temperature 0": (
        "needs the vLLM run; `schedule` is tested in tests/unit/test_schedule_export.py"
    ),
    "schedule reports/tiny-vllm --temperature 0": (
        "needs the vLLM run; the pool's schedule is tested in tests/unit/test_engine_exports.py"
    ),
    "schedule reports/tiny-vllm --temperature 0 --format vllm": (
        "needs the vLLM run; the export is tested in tests/unit/test_engine_exports.py"
    ),
    "schedule reports/tiny-vllm --temperature 0 --format sglang --concurrency 4": (
        "needs the vLLM run; the export is tested in tests/unit/test_engine_exports.py"
    ),
    "schedule reports/tiny-vllm --temperature 0 --format trtllm --out trtllm.yaml": (
        "needs the vLLM run; the export is tested in tests/unit/test_engine_exports.py"
    ),
    "simulate reports/tiny-policies": "needs a configs/tiny-policies.yaml run (minutes on CPU)",
    "simulate reports/tiny-policies --policy adaptive --policy confidence:threshold=0.5": (
        "needs a configs/tiny-policies.yaml run (minutes on CPU)"
    ),
}


def documented_commands() -> dict[str, list[str]]:
    """The `specbench …` lines of the indented examples in README.md and docs/*.md, comments
    stripped, each with the pages that show it."""
    out: dict[str, list[str]] = {}
    for page in DOCS:
        for line in page.read_text(encoding="utf-8").splitlines():
            m = re.match(r"^ {4}(?:\.venv/bin/)?specbench (.+?)\s*(?:#.*)?$", line)
            if m:
                out.setdefault(" ".join(m.group(1).split()), []).append(page.name)
    return out


def thresholds_yaml() -> str:
    """The thresholds file the docs show (the fenced block under its file-name comment)."""
    for page in DOCS:
        m = re.search(
            r"```yaml\n# ci/specbench-thresholds.yaml\n(.*?)```", page.read_text("utf-8"), re.S
        )
        if m:
            return m.group(1)
    raise AssertionError("the docs' thresholds example (ci/specbench-thresholds.yaml) is gone")


def test_every_documented_example_is_covered() -> None:
    found = documented_commands()
    assert len(found) >= 15
    listed = set(RUNS) | set(SKIPPED)
    unlisted = {cmd: pages for cmd, pages in found.items() if cmd not in listed}
    assert not unlisted, f"examples to add to RUNS or SKIPPED: {unlisted}"
    assert not listed - set(found), f"listed but shown nowhere: {listed - set(found)}"


def test_readme_documents_every_exit_code() -> None:
    text = README.read_text(encoding="utf-8")
    for row in ("| 0 |", "| 1 |", "| 2 |", "| 3 |", "| 4 |", "| 5 |"):
        assert row in text, row


@pytest.mark.slow
def test_documented_examples_run_with_their_exit_codes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "specbench-thresholds.yaml").write_text(thresholds_yaml())
    for doc_cmd, (cmd, expected) in RUNS.items():
        code = run_cli(cmd.format(tmp=tmp_path).split())
        out, err = capsys.readouterr()
        assert code == expected, f"`specbench {doc_cmd}` (as `{cmd}`): exit {code}\n{err}"
        assert "Traceback" not in out + err
    assert (tmp_path / "ci" / "comment.md").stat().st_size > 0
    assert (tmp_path / "out" / "roi.png").stat().st_size > 0
