"""The bad-input catalogue: for every command, hostile or careless input gives exit code 2, exactly
one `error:` line on stderr and no traceback (README "Exit codes").

Each case runs the real entry point (`specbench.cli.app.run_cli`, what the console script calls) in
process; every case fails before a model loads, so the whole table takes a few seconds. A case
that crashes instead (exit 3) shows the crash-log line here, so the test names it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from specbench.cli.app import run_cli
from specbench.cli.exit_codes import EXIT_BAD_INPUT

from ..unit.test_compare import ENV, config, make_records

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny.yaml"

GOOD_CONFIG = {
    "name": "bad-input",
    "target": {"model": "tiny-target", "dtype": "float32", "device": "cpu"},
    "draft": {"model": "tiny-draft", "dtype": "float32", "device": "cpu"},
    "workloads": [{"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": 1}],
    "gammas": [1],
    "max_new_tokens": 4,
    "warmup": 0,
}

# config files: name → (text or bytes) of a config that must be refused
BAD_CONFIGS: dict[str, str | bytes] = {
    "not_utf8": b"name: caf\xe9\n",
    "invalid_yaml": "name: [unclosed\n",
    "not_mapping": "- a\n- b\n",
    "empty": "",
    "unknown_key": yaml.safe_dump({**GOOD_CONFIG, "gamas": [1]}),
    "nan_temperature": yaml.safe_dump(GOOD_CONFIG) + "sampling: {temperatures: [.nan]}\n",
    "inf_top_p": yaml.safe_dump(GOOD_CONFIG) + "sampling: {top_p: .inf}\n",
    "negative_temperature": yaml.safe_dump(GOOD_CONFIG) + "sampling: {temperatures: [-1]}\n",
    "nan_margin": yaml.safe_dump(GOOD_CONFIG) + "decision: {margin: .nan}\n",
    "huge_gamma": yaml.safe_dump({**GOOD_CONFIG, "gammas": [100000000]}),
    "huge_max_new_tokens": yaml.safe_dump({**GOOD_CONFIG, "max_new_tokens": 10**9}),
    "huge_bootstrap": yaml.safe_dump(GOOD_CONFIG) + "decision: {bootstrap: 100000000}\n",
    "huge_repeats": yaml.safe_dump({**GOOD_CONFIG, "repeats": 10**7}),
    "negative_seed": yaml.safe_dump({**GOOD_CONFIG, "seed": -1}),
    "chat_template_word": yaml.safe_dump({**GOOD_CONFIG, "chat_template": "sometimes"}),
    "dtype_yes": yaml.safe_dump(GOOD_CONFIG).replace("dtype: float32", "dtype: yes", 1),
    "workloads_string": yaml.safe_dump({**GOOD_CONFIG, "workloads": "tiny_code"}),
    "extends_missing": "extends: no-such-base.yaml\nname: x\n",
    "extends_self": "extends: extends_self.yaml\nname: x\n",
    "extends_number": "extends: 3\n",
    "nan_noise": yaml.safe_dump(GOOD_CONFIG).replace(
        "device: cpu\n", "device: cpu\n  logit_noise: .nan\n"
    ),
    "policy_gamma_huge": yaml.safe_dump(
        {**GOOD_CONFIG, "policies": [{"name": "adaptive", "max_gamma": 10**6}]}
    ),
    "huge_n": yaml.safe_dump(
        {**GOOD_CONFIG, "workloads": [{"name": "w", "dataset": {"name": "tiny_code"}, "n": 10**9}]}
    ),
}


def _write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def _run_dir(root: Path, name: str, records: list[str], cfg: str | bytes, env: str | bytes) -> Path:
    run = root / name
    _write(run / "records.jsonl", "".join(line + "\n" for line in records))
    _write(run / "config.yaml", cfg)
    _write(run / "env.json", env)
    return run


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every bad file the catalogue points at, written once."""
    r = tmp_path_factory.mktemp("bad")
    for name, content in BAD_CONFIGS.items():
        _write(r / "cfg" / f"{name}.yaml", content)
    _write(r / "cfg" / "good.yaml", yaml.safe_dump({**GOOD_CONFIG, "output_dir": str(r / "o")}))
    _write(r / "cfg" / "cycle_a.yaml", "extends: cycle_b.yaml\n")
    _write(r / "cfg" / "cycle_b.yaml", "extends: cycle_a.yaml\n")

    good = [json.dumps(rec) for rec in make_records(seed=1, n_prompts=6, n_rounds=4)]
    cfg, env = yaml.safe_dump(config()), json.dumps(ENV)
    rec0 = json.loads(good[0])
    runs = {
        "good": (good, cfg, env),
        "records_not_utf8": ([*good[:2], '{"schema": 1, "kind": "caf\xe9"}'], cfg, env),
        "records_bad_json_mid": ([*good[:2], "{not json", *good[2:]], cfg, env),
        "records_list_line": ([*good[:2], "[1, 2, 3]", *good[2:]], cfg, env),
        "records_no_schema": ([*good[:2], '{"kind": "spec"}', *good[2:]], cfg, env),
        "records_newer_schema": ([json.dumps({**rec0, "schema": 99}), *good], cfg, env),
        "records_temperature_text": ([json.dumps({**rec0, "temperature": "hot"}), *good], cfg, env),
        "records_temperature_nan": (
            [*good, json.dumps({**rec0, "temperature": float("nan")})],
            cfg,
            env,
        ),
        "records_gamma_list": ([json.dumps({**rec0, "gamma": [2]}), *good], cfg, env),
        "records_workload_null": ([json.dumps({**rec0, "workload": None}), *good], cfg, env),
        "records_rounds_text": (
            [json.dumps({**json.loads(good[-1]), "rounds": {"accepted": "many"}}), *good],
            cfg,
            env,
        ),
        "records_only_truncated": (['{"schema": 1, "kind": "base'], cfg, env),
        "config_invalid_yaml": (good, "name: [x\n", env),
        "config_not_utf8": (good, b"name: \xff\xfe\n", env),
        "config_list": (good, "- 1\n", env),
        "config_gammas_text": (good, yaml.safe_dump({**config(), "gammas": "two"}), env),
        "config_bootstrap_text": (
            good,
            yaml.safe_dump({**config(), "decision": {"bootstrap": "many"}}),
            env,
        ),
        "env_invalid_json": (good, cfg, "{device: cpu"),
        "env_list": (good, cfg, "[1, 2]"),
        "env_not_utf8": (good, cfg, b'{"device": "\xff"}'),
    }
    for name, (recs, c, e) in runs.items():
        _run_dir(r / "runs", name, recs, c, e)
    _write(
        r / "runs" / "records_not_utf8" / "records.jsonl",
        (r / "runs" / "records_not_utf8" / "records.jsonl")
        .read_bytes()
        .replace(b"\xc3\xa9", b"\xe9"),
    )
    (r / "runs" / "empty_dir").mkdir()
    _write(r / "results" / "not_json.json", "{")
    _write(r / "results" / "not_utf8.json", b"\xff\xfe")
    _write(r / "results" / "list.json", "[]")
    _write(r / "results" / "wrong_types.json", json.dumps({"schema": 1, "workloads": [{"x": 1}]}))
    _write(r / "results" / "workloads_text.json", json.dumps({"schema": 1, "workloads": "all"}))
    _write(r / "thresholds" / "not_utf8.yaml", b"significance: \xff\n")
    _write(r / "thresholds" / "nan.yaml", "alpha_drop: .nan\n")
    _write(r / "thresholds" / "unknown.yaml", "alpah_drop: 0.1\n")
    _write(r / "thresholds" / "list.yaml", "- 1\n")
    _write(r / "a_file", "x")
    _write(r / "logs" / "ok.jsonl", json.dumps({"prompt": "p", "response": "r"}) + "\n")
    _write(r / "logs" / "bad_row.jsonl", json.dumps({"prompt": "p", "response": 3}) + "\n")
    _write(r / "logs" / "no_response.jsonl", json.dumps({"prompt": "p"}) + "\n")
    _write(r / "logs" / "unknown.ext", "x")
    return r


G = "{root}/runs/good"
LOGS = "{root}/logs/ok.jsonl"

# (command line with {root} and {tiny} placeholders, a word the error line must contain)
CASES: list[tuple[str, str]] = [
    # --- roi ---
    ("roi", "give --alpha"),
    ("roi --alpha nan", "finite"),
    ("roi --alpha inf", "finite"),
    ("roi --alpha 1.5", "less than or equal to 1"),
    ("roi --alpha 0.5 --cost-ratio inf --json", "finite"),
    ("roi --alpha 0.5 --cost-ratio nan", "finite"),
    ("roi --alpha 0.5 --t-target nan --t-draft 1", "finite"),
    ("roi --alpha 0.5 --t-target inf --t-draft 1", "finite"),
    ("roi --alpha 0.5 --t-target 10 --t-draft -1", "> 0"),
    ("roi --alpha 0.5 --cost-ratio 1e307 --json", "at most"),  # γ·c would overflow the JSON
    ("roi --alpha 0.5 --t-target 1e300 --t-draft 1", "at most"),
    ("roi --alpha 0.5 --verify-slope -inf", "finite"),
    ("roi --alpha 0.5 --gamma-max 100000000", "1024"),
    ("roi --alpha 0.5 --gamma 5000", "1024"),
    ("roi --alpha 0.5 --gamma-max x", "--gamma-max"),
    ("roi --alpha 0.5 --gpus 0", "--gpus"),
    ("roi --alpha 0.5 --gpu-hour-usd 2", "absolute"),
    ("roi --accepted 9 --gamma 2", "--accepted"),
    ("roi --alpha 0.5 --csv {root}/runs", "is a directory"),
    ("roi --alpha 0.5 --plot {root}/a_file/x.png", "is a file"),
    ("roi --alpha 0.5 --no-such-option", "no-such-option"),
    # --- run ---
    ("run {root}/cfg/missing.yaml", "not found"),
    ("run {root}/cfg/good.yaml --resume --force", "contradict"),
    ("run {root}/cfg/good.yaml --out {root}/a_file", "is a file"),
    ("run {root}/cfg/good.yaml --max-prompts 0", "--max-prompts"),
    ("run {root}/cfg/good.yaml --max-prompts 1000000000", "100000"),
    ("run {root}/cfg/good.yaml --gammas 1,x", "--gammas"),
    ("run {root}/cfg/good.yaml --gammas 1,100000000", "gammas"),
    ("run {root}/cfg/good.yaml --temperature nan", "finite"),
    ("run {root}/cfg/good.yaml --temperature -1", "temperatures"),
    ("run {root}/cfg/good.yaml --workloads nope", "unknown workload"),
    ("run {root}/cfg/good.yaml --seed -5", "seed"),
    ("run {root}/cfg/cycle_a.yaml", "cycle"),
    ("run {root}/cfg/good.yaml --budget-forwards 100", "add --adaptive"),
    ("run {root}/cfg/good.yaml --adaptive --budget-forwards 0", "budget-forwards"),
    ("run {root}/cfg/good.yaml --adaptive --budget-forwards 99999999999999", "budget-forwards"),
    *[(f"run {{root}}/cfg/{name}.yaml", "") for name in BAD_CONFIGS],
    # --- report ---
    ("report {root}/runs/nope", "not found"),
    ("report {root}/runs/empty_dir", "records.jsonl"),
    ("report {root}/a_file", "not found"),
    ("report {root}/runs/records_not_utf8", "UTF-8"),
    ("report {root}/runs/records_bad_json_mid", "line 3"),
    ("report {root}/runs/records_list_line", "line 3"),
    ("report {root}/runs/records_no_schema", "schema"),
    ("report {root}/runs/records_newer_schema", "upgrade"),
    ("report {root}/runs/records_temperature_text", "temperature"),
    ("report {root}/runs/records_temperature_nan", "temperature"),
    ("report {root}/runs/records_gamma_list", "gamma"),
    ("report {root}/runs/records_workload_null", "workload"),
    ("report {root}/runs/records_rounds_text", "rounds.accepted"),
    ("report {root}/runs/records_only_truncated", "no complete record"),
    ("report {root}/runs/config_invalid_yaml", "config.yaml"),
    ("report {root}/runs/config_not_utf8", "UTF-8"),
    ("report {root}/runs/config_list", "config.yaml"),
    ("report {root}/runs/config_gammas_text", "gammas"),
    ("report {root}/runs/config_bootstrap_text", "decision.bootstrap"),
    ("report {root}/runs/env_invalid_json", "env.json"),
    ("report {root}/runs/env_list", "env.json"),
    ("report {root}/runs/env_not_utf8", "UTF-8"),
    # --- simulate ---
    ("simulate {root}/runs/nope", "not found"),
    ("simulate {root}/runs/records_bad_json_mid", "line 3"),
    ("simulate {root}/runs/config_invalid_yaml", "config.yaml"),
    ("simulate {root}/runs/env_list", "env.json"),
    (f"simulate {G} --policy nope", "unknown policy"),
    (f"simulate {G} --policy adaptive:window=0", "window"),
    (f"simulate {G} --policy adaptive:foo=1", "unknown option"),
    (f"simulate {G} --policy adaptive:max_gamma=100000000", "64"),
    (f"simulate {G} --policy confidence:threshold=2", "threshold"),
    (f"simulate {G} --policy adaptive:low=nan", "low"),
    (f"simulate {G} --policy adaptive:window", "key=value"),
    # --- compare ---
    ("compare {root}/runs/nope " + G, "not found"),
    (f"compare {G} {{root}}/runs/records_bad_json_mid", "line 3"),
    (f"compare {G} {{root}}/runs/records_temperature_text", "temperature"),
    (f"compare {G} {{root}}/runs/config_invalid_yaml", "config.yaml"),
    (f"compare {G} {{root}}/runs/env_invalid_json", "env.json"),
    (f"compare {G} {{root}}/results/not_json.json", "JSON"),
    (f"compare {G} {{root}}/results/not_utf8.json", "JSON"),
    (f"compare {G} {{root}}/results/list.json", "results.json"),
    (f"compare {G} {{root}}/results/wrong_types.json", "results.json"),
    (f"compare {G} {{root}}/results/workloads_text.json", "results.json"),
    (f"compare {G} {G} --thresholds {{root}}/thresholds/not_utf8.yaml", "thresholds"),
    (f"compare {G} {G} --thresholds {{root}}/thresholds/nan.yaml", "finite"),
    (f"compare {G} {G} --thresholds {{root}}/thresholds/unknown.yaml", "unknown key"),
    (f"compare {G} {G} --thresholds {{root}}/thresholds/list.yaml", "mapping"),
    (f"compare {G} {G} --significance nan", "finite"),
    (f"compare {G} {G} --alpha-drop inf", "finite"),
    (f"compare {G} {G} --markdown {{root}}/runs", "is a directory"),
    (f"compare {G} {G} --junit {{root}}/a_file/j.xml", "is a file"),
    # --- verify ---
    ("verify {root}/cfg/missing.yaml", "not found"),
    ("verify {root}/cfg/not_utf8.yaml", "UTF-8"),
    ("verify {root}/cfg/nan_temperature.yaml", "finite"),
    ("verify {tiny} --temperature nan", "finite"),
    ("verify {tiny} --top-p inf", "finite"),
    ("verify {tiny} --samples 10", "--samples"),
    ("verify {tiny} --samples 1000000000", "1000000"),
    ("verify {tiny} --contexts 100000", "--contexts"),
    ("verify {tiny} --gamma 100000", "--gamma"),
    ("verify {tiny} --significance 2", "--significance"),
    ("verify {tiny} --lossy-epsilon nan", "finite"),
    # --- accept ---
    ("accept", "--data"),
    (f"accept --data {LOGS}", "--config"),
    (f"accept --data {LOGS} --config {{tiny}} --temperature nan", "finite"),
    (f"accept --data {LOGS} --config {{tiny}} --cost-ratio inf", "finite"),
    (f"accept --data {LOGS} --config {{tiny}} --margin nan", "finite"),
    (f"accept --data {LOGS} --config {{tiny}} --gamma-max 100000000", "64"),
    (f"accept --data {LOGS} --config {{tiny}} --max-requests 0", "--max-requests"),
    (f"accept --data {LOGS} --config {{tiny}} --batch-tokens 100000000000", "--batch-tokens"),
    (f"accept --data {LOGS} --config {{tiny}} --top-p 0", "--top-p"),
    (f"accept --data {LOGS} --config {{tiny}} --report {{root}}/a_file", "is a file"),
    (f"accept --data {LOGS} --config {{root}}/cfg/invalid_yaml.yaml", "YAML"),
    (f"accept --data {LOGS} --config {{root}}/cfg/not_utf8.yaml", "UTF-8"),
    ("accept --data {root}/logs/missing.jsonl --config {tiny}", "not found"),
    ("accept --data {root}/logs/unknown.ext --config {tiny}", "format"),
    ("accept --data {root}/logs/bad_row.jsonl --config {tiny}", "line 1"),
    ("accept --data {root}/logs/no_response.jsonl --config {tiny}", "response"),
    (f"accept --data {LOGS} --config {{tiny}} --timings {{root}}/results/not_json.json", "JSON"),
    (
        f"accept --data {LOGS} --config {{tiny}} --timings {{root}}/results/wrong_types.json",
        "results.json",
    ),
]


def check_bad_input(argv: list[str], capsys: pytest.CaptureFixture[str], needle: str = "") -> str:
    """Exit code 2, exactly one non-empty stderr line, starting `error:`, and no traceback."""
    code = run_cli(argv)
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == EXIT_BAD_INPUT, f"exit {code} for {argv}: {err!r}"
    assert len(lines) == 1, f"{argv}: stderr has {len(lines)} lines: {err!r}"
    assert lines[0].startswith("error: "), lines[0]
    assert "Traceback" not in out + err
    assert needle.lower() in lines[0].lower(), f"{needle!r} not in {lines[0]!r}"
    return lines[0]


def test_catalogue_is_large_and_covers_every_command() -> None:
    commands = {case.split()[0] for case, _ in CASES}
    assert commands == {"roi", "run", "report", "accept", "simulate", "compare", "verify"}
    assert len(CASES) >= 60
    assert len({case for case, _ in CASES}) == len(CASES), "duplicate cases"


@pytest.mark.parametrize(("case", "needle"), CASES, ids=[c for c, _ in CASES])
def test_bad_input(root: Path, case: str, needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = case.format(root=root, tiny=TINY).split()
    check_bad_input(argv, capsys, needle)


def test_good_run_dir_of_the_catalogue_reports(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The control: the catalogue's good run directory is accepted, so each bad case fails for the
    damage planted in it and not for something else."""
    assert run_cli(["simulate", str(root / "runs" / "good"), "--json"]) in (0, 2)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    # a run compared with itself under default thresholds cannot have seen a regression: the
    # gate says inconclusive (exit 5), never a blind pass (docs/compare.md)
    assert run_cli(["compare", str(root / "runs" / "good"), str(root / "runs" / "good")]) == 5


def test_internal_error_exits_3_naming_a_log(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """An unexpected exception is never exit code 1 (a verdict): exit 3, one line naming the log
    file, and the log holds the traceback."""
    import specbench.analysis.arithmetic.roi as roi_model

    def boom(*_: object, **__: object) -> None:
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(roi_model, "scenario", boom)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    code = run_cli(["roi", "--alpha", "0.5"])
    _, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 3
    assert len(lines) == 1 and lines[0].startswith("error: internal error (ZeroDivisionError)")
    logs = list(tmp_path.glob("specbench-crash-*.log"))
    assert len(logs) == 1 and str(logs[0]) in lines[0]
    text = logs[0].read_text()
    assert "Traceback" in text and "planted" in text


def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["nope"], ["roi", "--alpha"], ["report"], ["compare", "a"]):
        check_bad_input(argv, capsys)


def test_help_states_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["run", "--help"], ["compare", "--help"]):
        assert run_cli(argv) == 0
        out = " ".join(capsys.readouterr().out.split())
        for code in ("0 success", "1 a verdict", "2 bad input", "3 internal error", "4 run"):
            assert code in out, (argv, code)
