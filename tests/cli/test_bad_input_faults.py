"""The bad-input catalogue, continued (issue 32): faults of the user's environment, records a
command cannot analyse, error advice that works, and `run --force` that loses nothing.

Every case is a real fault on a real file: /dev/full (no space left), /sys (permission denied,
even for root), the file-size limit (RLIMIT_FSIZE, which Python turns into EFBIG), a path that
is a directory where a file is written. Each gives one `error:` line naming the path and exit 2
— never exit 3, "internal error, please report it".
"""

from __future__ import annotations

import hashlib
import json
import re
import resource
import shutil
from pathlib import Path

import pytest
import yaml

from specbench.analysis.documents.results_read import RESULTS_SCHEMA
from specbench.cli.app import run_cli
from specbench.config import POLICY_NAMES
from specbench.records import TRANSFORMERS_ROUNDS

from ..unit.test_compare import ENV, config, make_records
from .test_bad_input import check_bad_input, root  # noqa: F401  (root: the catalogue's files)

G = "{root}/runs/good"
HAS_DEV_FULL = Path("/dev/full").exists()
HAS_SYS = Path("/sys/kernel").is_dir()

# (command line with {root}, a word the one error line must contain)
ENV_FAULTS: list[tuple[str, str]] = [
    *(
        [
            ("roi --alpha 0.5 --csv /dev/full", "/dev/full: no space left"),
            ("roi --alpha 0.5 --plot /dev/full", "/dev/full: no space left"),
            (f"compare {G} {G} --markdown /dev/full", "/dev/full: no space left"),
            (f"compare {G} {G} --junit /dev/full", "/dev/full: no space left"),
        ]
        if HAS_DEV_FULL
        else []
    ),
    *(
        [
            ("roi --alpha 0.5 --csv /sys/specbench-test.csv", "permission denied"),
            ("run {root}/cfg/good.yaml --out /sys/specbench-run", "/sys/specbench-run"),
            ("report {root}/runs/good --gpus 1 --gpu-hour-usd 2", ""),  # the control: writable
        ]
        if HAS_SYS
        else []
    ),
    ("schema --out {root}/a_file", "already exists"),
    ("report {root}/runs/results_is_dir", "results.json: is a directory"),
    ("simulate {root}/runs/simulation_is_dir", "simulation.json: is a directory"),
]


def _copy_run(root_dir: Path, name: str) -> Path:
    run = root_dir / "runs" / name
    if not run.exists():
        shutil.copytree(root_dir / "runs" / "good", run)
    return run


@pytest.fixture(scope="module")
def fault_root(root: Path) -> Path:  # noqa: F811
    (_copy_run(root, "results_is_dir") / "results.json").mkdir(exist_ok=True)
    (_copy_run(root, "simulation_is_dir") / "simulation.json").mkdir(exist_ok=True)
    return root


@pytest.mark.parametrize(("case", "needle"), ENV_FAULTS, ids=[c for c, _ in ENV_FAULTS])
def test_environment_fault_is_one_line_exit_2(
    fault_root: Path, case: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = case.format(root=fault_root).split()
    if case.startswith("report {root}/runs/good"):  # the control case: it succeeds
        assert run_cli(argv) == 0, capsys.readouterr().err
        return
    check_bad_input(argv, capsys, needle)


def test_file_size_limit_is_one_line_exit_2(
    fault_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A report whose files pass the file-size limit (`ulimit -f`): EFBIG, one line, exit 2."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    run = _copy_run(fault_root, "fsize")
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, hard))
    try:
        code = run_cli(["report", str(run)])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    err = capsys.readouterr().err
    assert code == 2, err
    assert "file too large" in err and str(run) in err and len(err.strip().splitlines()) == 1


# --- records a command cannot analyse: the line and the field, never a KeyError --------------

MISSING_FIELDS = [("spec", "rounds"), ("baseline", "peak_memory_mb"), ("spec", "peak_memory_mb")]
MISSING_FIELDS += [("spec", f"rounds.{name}") for name in TRANSFORMERS_ROUNDS]


def _without(rec: dict[str, object], field: str) -> dict[str, object]:
    rec = json.loads(json.dumps(rec))
    if field.startswith("rounds."):
        rounds = rec["rounds"]
        assert isinstance(rounds, dict)
        del rounds[field.removeprefix("rounds.")]
    else:
        del rec[field]
    return rec


@pytest.mark.parametrize(
    ("kind", "field"), MISSING_FIELDS, ids=[f"{k}-{f}" for k, f in MISSING_FIELDS]
)
@pytest.mark.parametrize("command", ["report", "simulate", "compare"])
def test_record_without_a_needed_field_names_line_and_field(
    tmp_path: Path, kind: str, field: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    recs = make_records(seed=3, n_prompts=4, n_rounds=3)
    line = next(i for i, r in enumerate(recs) if r["kind"] == kind)
    recs[line] = _without(recs[line], field)
    for name, rs in (("good", make_records(seed=3, n_prompts=4, n_rounds=3)), ("bad", recs)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))
        (tmp_path / name / "config.yaml").write_text(yaml.safe_dump(config()))
        (tmp_path / name / "env.json").write_text(json.dumps(ENV))
    argv = [
        command,
        *([str(tmp_path / "good")] if command == "compare" else []),
        str(tmp_path / "bad"),
    ]
    msg = check_bad_input(argv, capsys, f"line {line + 1}")
    assert f"'{field}'" in msg


# --- advice that works: the command an error suggests, run, succeeds ---------------------------


@pytest.fixture(scope="module")
def grid_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """Valid runs whose γ grid stops at 1 and at 2 (below every default policy's max_gamma 8)."""
    out = {}
    for gamma in (1, 2):
        run = tmp_path_factory.mktemp(f"grid{gamma}")
        recs = make_records(seed=5, n_prompts=5, n_rounds=4, gammas=(gamma,))
        (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
        (run / "config.yaml").write_text(yaml.safe_dump({**config(), "gammas": [gamma]}))
        (run / "env.json").write_text(json.dumps(ENV))
        out[gamma] = run
    return out


@pytest.mark.parametrize("gamma", [1, 2])
def test_simulate_default_policies_fit_a_short_grid(
    grid_runs: dict[int, Path], gamma: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default policy set (and a policy named without options) replays on a γ grid below
    its default bounds, each bound fitted to the trace; one that cannot fit is named, not run."""
    assert run_cli(["simulate", str(grid_runs[gamma]), "--json"]) == 0, capsys.readouterr().err
    document = json.loads(capsys.readouterr().out)
    entries = document["simulations"]
    assert (
        document["provenance"]["records"]["sha256"]
        == hashlib.sha256((grid_runs[gamma] / "records.jsonl").read_bytes()).hexdigest()
    )
    assert document["provenance"]["policies"] == list(POLICY_NAMES)
    assert entries and all(e["trace_gamma"] == gamma for e in entries)
    for entry in entries:
        assert all(row["gamma"] <= gamma for row in entry["policies"])
        names = {row["policy"] for row in entry["policies"]}
        assert len(names) + len(entry["not_replayed"]) == 5, entry
    assert run_cli(["simulate", str(grid_runs[gamma]), "--policy", "adaptive", "--json"]) == 0


# (policy with a bound beyond the trace, γ grid): the error's suggested --policy must then work
ADVICE = [
    ("adaptive:max_gamma=8", 2),
    ("heuristic:max_gamma=3", 2),
    ("confidence:max_gamma=4", 2),
    ("confidence:max_gamma=3", 1),
    ("fixed:gamma=4", 2),
    ("fixed:gamma=2", 1),
    ("temperature:gamma=6", 2),
]


@pytest.mark.parametrize(("policy", "gamma"), ADVICE, ids=[f"{p}@{g}" for p, g in ADVICE])
def test_simulate_advice_when_followed_succeeds(
    grid_runs: dict[int, Path], policy: str, gamma: int, capsys: pytest.CaptureFixture[str]
) -> None:
    run = str(grid_runs[gamma])
    msg = check_bad_input(["simulate", run, "--policy", policy], capsys, "--policy")
    suggested = re.search(r"--policy (\S+)", msg)
    assert suggested is not None, msg
    assert run_cli(["simulate", run, "--policy", suggested.group(1), "--json"]) == 0, (
        msg,
        capsys.readouterr().err,
    )
    rows = json.loads(capsys.readouterr().out)["simulations"][0]["policies"]
    assert [r["policy"] for r in rows] == [policy.split(":")[0]] and rows[0]["gamma"] <= gamma


# --- refused up front, in the user's words -----------------------------------------------------


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


TINY_OPENAI = Path(__file__).resolve().parents[2] / "configs" / "tiny-openai.yaml"
UP_FRONT: list[tuple[str, str]] = [
    (f"verify {TINY_OPENAI}", "verify needs the models' weights"),
    ("run {root}/cfg/good.yaml --adaptive --budget-minutes 0", "--budget-minutes must be > 0"),
    ("accept --data http://127.0.0.1:{port}/x.jsonl --config {tiny}", "cannot reach"),
]


@pytest.mark.parametrize(("case", "needle"), UP_FRONT, ids=[c for c, _ in UP_FRONT])
def test_refused_up_front(
    fault_root: Path, case: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tiny = Path(__file__).resolve().parents[2] / "configs" / "tiny.yaml"
    out = fault_root / "o"
    shutil.rmtree(out, ignore_errors=True)
    argv = case.format(root=fault_root, tiny=tiny, port=closed_port()).split()
    check_bad_input(argv, capsys, needle)
    assert not out.exists(), "a refused run made its directory"


def test_force_against_a_server_that_is_down_removes_nothing(
    fault_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`run --force` sets the old run aside and puts it back when the new run cannot start."""
    run = tmp_path / "run"
    shutil.copytree(fault_root / "runs" / "good", run)
    (run / "report.md").write_text("the old report\n")
    before = {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file()}
    cfg = yaml.safe_load(TINY_OPENAI.read_text())
    cfg["server"]["endpoints"] = [
        {"url": f"http://127.0.0.1:{closed_port()}", "gamma": 4, "label": "γ=4"},
        {"url": f"http://127.0.0.1:{closed_port()}", "gamma": 0},
    ]
    path = tmp_path / "down.yaml"
    path.write_text(yaml.safe_dump(cfg))
    check_bad_input(["run", str(path), "--out", str(run), "--force"], capsys, "cannot reach")
    assert {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


@pytest.mark.slow
def test_file_size_limit_mid_run_exits_4_and_resume_loses_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """records.jsonl passes the file-size limit mid-run: exit 4, one line naming the file and
    saying the records are kept; `--resume` then measures each unit exactly once."""
    from .test_bad_input import GOOD_CONFIG

    cfg = {
        **GOOD_CONFIG,
        "workloads": [{"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": 3}],
        "gammas": [1, 2],
        "output_dir": str(tmp_path / "run"),
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4000, hard))  # about two records of the tiny pair
    try:
        code = run_cli(["run", str(path)])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    records = tmp_path / "run" / "records.jsonl"
    assert code == 4, err
    assert len(err) == 1 and f"{records}: file too large" in err[0] and "--resume" in err[0]
    kept = [json.loads(x) for x in records.read_bytes().split(b"\n")[:-1] if x.endswith(b"}")]
    assert 1 <= len(kept) < 9
    assert run_cli(["run", str(path), "--resume"]) == 0, capsys.readouterr().err
    recs = [json.loads(x) for x in records.read_text().splitlines()]
    units = [(r["kind"], r["gamma"], r["prompt_id"]) for r in recs]
    assert len(units) == len(set(units)) == 9  # 3 prompts × (baseline, γ=1, γ=2), none twice
    assert recs[: len(kept)] == kept  # what the stopped run wrote is kept as it was


# --- half-valid input: refused with the line, or (accept --skip-bad-rows) skipped and counted -----

HALF_VALID_ROWS: dict[str, str] = {
    "invalid_json": "{not json",
    "not_object": "[1, 2]",
    "surrogate": '{"prompt": "bad \\ud800 text", "response": "r"}',
    "surrogate_response": '{"prompt": "p", "response": "an \\udfff answer"}',
    "robot_role": json.dumps(
        {"messages": [{"role": "robot", "content": "x"}, {"role": "assistant", "content": "y"}]}
    ),
    "empty_role": json.dumps({"messages": [{"role": "", "content": "x"}], "response": "y"}),
}
GOOD_ROW = json.dumps({"prompt": "def add(a, b):", "response": "    return a + b"})


@pytest.fixture(scope="module")
def half_valid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Per bad row: a log with it on line 2, and a prompt set (for `run`) with it on line 2."""
    d = tmp_path_factory.mktemp("half")
    for name, row in HALF_VALID_ROWS.items():
        (d / f"{name}.jsonl").write_text(f"{GOOD_ROW}\n{row}\n{GOOD_ROW}\n")
        prompt_row = row.replace('"response": "r"', '"id": "x"').replace('"prompt": "p", ', "")
        set_row = {"id": "a", "prompt": "def f():"}
        (d / f"set_{name}.jsonl").write_text(f"{json.dumps(set_row)}\n{prompt_row}\n")
        cfg = {
            "name": "half",
            "target": {"model": "tiny-target", "dtype": "float32", "device": "cpu"},
            "draft": {"model": "tiny-draft", "dtype": "float32", "device": "cpu"},
            "workloads": [{"name": "w", "dataset": {"path": str(d / f"set_{name}.jsonl")}}],
            "gammas": [1],
            "max_new_tokens": 4,
            "warmup": 0,
            "output_dir": str(d / f"out_{name}"),
        }
        (d / f"{name}.yaml").write_text(yaml.safe_dump(cfg))
    return d


NEEDLES = {
    "invalid_json": "invalid JSON",
    "not_object": "JSON object",
    "surrogate": "surrogate",
    "surrogate_response": "surrogate",
    "robot_role": "role 'robot'",
    "empty_role": "role",
}


@pytest.mark.parametrize("name", list(HALF_VALID_ROWS))
@pytest.mark.parametrize("command", ["accept", "run"])
def test_half_valid_row_is_refused_naming_its_line(
    half_valid: Path, name: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tiny = Path(__file__).resolve().parents[2] / "configs" / "tiny.yaml"
    if command == "accept":
        argv = ["accept", "--data", str(half_valid / f"{name}.jsonl"), "--config", str(tiny)]
    else:
        argv = ["run", str(half_valid / f"{name}.yaml")]
    msg = check_bad_input(argv, capsys, NEEDLES[name])
    assert "line 2" in msg or "row 2" in msg, msg


@pytest.mark.slow
def test_skip_bad_rows_skips_and_counts_every_class(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`accept --skip-bad-rows` over a log holding every class above: each bad line is skipped
    and listed with its line and reason, the good rows are measured."""
    rows = [GOOD_ROW]
    for row in HALF_VALID_ROWS.values():
        rows += [row, GOOD_ROW]
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(rows) + "\n")
    tiny = Path(__file__).resolve().parents[2] / "configs" / "tiny.yaml"
    argv = ["accept", "--data", str(log), "--config", str(tiny), "--skip-bad-rows"]
    assert run_cli([*argv, "--report", str(tmp_path / "rep")]) == 0, capsys.readouterr().err
    data = json.loads((tmp_path / "rep" / "accept.json").read_text())["data"]
    skipped = data["skipped_rows"]
    assert [s["row"] for s in skipped] == [f"line {2 * i + 2}" for i in range(len(HALF_VALID_ROWS))]
    for s, name in zip(skipped, HALF_VALID_ROWS, strict=True):
        assert NEEDLES[name].lower() in s["reason"].lower(), (name, s)
    assert data["requests"] == len(HALF_VALID_ROWS) + 1


# --- provenance: another pair's timings, a results.json of another schema --------------------


@pytest.fixture(scope="module")
def results_variants(fault_root: Path) -> Path:
    """The catalogue's good run reported (a real results.json), and copies of it damaged."""
    run = _copy_run(fault_root, "reported")
    assert run_cli(["report", str(run)]) == 0
    doc = json.loads((run / "results.json").read_text())
    d = fault_root / "results"

    def put(name: str, **changes: object) -> None:
        new = json.loads(json.dumps(doc))
        for dotted, value in changes.items():
            *parents, key = dotted.split("__")
            node = new
            for part in parents:
                node = node[int(part)] if isinstance(node, list) else node[part]
            node[key] = value
        (d / f"{name}.json").write_text(json.dumps(new))

    put("other_target", run__target="other-org/other-model")
    put("other_draft", run__draft="other-draft")
    put("schema_newer", schema=RESULTS_SCHEMA + 1)  # written by a newer specbench
    put("schema_1", schema=1)
    put("temperature_text", workloads__0__temperature="hot")
    for name, digit in (("tokenizer_a", "a"), ("tokenizer_b", "b")):  # two vocabularies
        put(name, env__tokenizers={"target": "sha256:" + digit * 64, "draft": None})
    return d


TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny.yaml"
R = "{root}/results"
PROVENANCE: list[tuple[str, str]] = [
    (f"accept --data {{logs}} --config {TINY} --timings {R}/other_target.json", "another pair"),
    (f"accept --data {{logs}} --config {TINY} --timings {R}/other_draft.json", "draft other-draft"),
    (
        f"accept --data {{logs}} --config {TINY} --timings {R}/schema_newer.json",
        "upgrade specbench",
    ),
    (f"accept --data {{logs}} --config {TINY} --timings {R}/schema_1.json", "specbench report"),
    (
        f"accept --data {{logs}} --config {TINY} --timings {R}/temperature_text.json",
        "field 'workloads.0.temperature'",
    ),
    (f"compare {G} {R}/schema_newer.json", "upgrade specbench"),
    (f"compare {G} {R}/schema_1.json", "older than this specbench"),
    (f"compare {G} {R}/temperature_text.json", "field 'workloads.0.temperature'"),
    (f"compare {G} {R}/other_target.json", "not comparable"),
    (f"accept --data {{logs}} --config {TINY} --timings {R}/tokenizer_a.json", "another tokenizer"),
    (f"compare {R}/tokenizer_a.json {R}/tokenizer_b.json", "target tokenizer: sha256:aaaa"),
]


@pytest.mark.parametrize(("case", "needle"), PROVENANCE, ids=[c for c, _ in PROVENANCE])
def test_mismatched_or_unknown_results_are_refused(
    fault_root: Path,
    results_variants: Path,
    case: str,
    needle: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs = fault_root / "logs" / "ok.jsonl"
    msg = check_bad_input(case.format(root=fault_root, logs=logs).split(), capsys, needle)
    assert "validation error" not in msg and "type=" not in msg  # not pydantic's dump


def test_the_same_tokenizer_passes_and_an_unrecorded_one_is_not_compared(
    results_variants: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from specbench.harness.accept.timings_check import tokenizer_differences

    a = results_variants / "tokenizer_a.json"
    assert tokenizer_differences(a, {"target": "sha256:" + "a" * 64, "draft": "sha256:0"}) == []
    assert tokenizer_differences(a, {"target": "sha256:" + "c" * 64, "draft": None}) == [
        "target tokenizer sha256:aaaaaaaaaaaa there, sha256:cccccccccccc here"
    ]
    other = results_variants / "other_draft.json"  # a run that recorded no fingerprint
    assert tokenizer_differences(other, {"target": "sha256:" + "c" * 64, "draft": None}) == []
    # compare: the same fingerprint on both sides is comparable (a run with itself: exit 5)
    assert run_cli(["compare", str(a), str(a)]) == 5, capsys.readouterr().err


def test_timings_of_the_same_pair_pass_the_check(results_variants: Path) -> None:
    from specbench.config import ModelSpec
    from specbench.harness.accept.timings_check import pair_differences
    from specbench.models.tinypair import tiny_model_dir

    run = results_variants.parent / "runs" / "reported"
    same = pair_differences(
        run / "results.json", ModelSpec(model="tiny-target"), ModelSpec(model="tiny-draft")
    )
    assert same == []
    by_path = pair_differences(
        run / "results.json",
        ModelSpec(model=str(tiny_model_dir("target"))),
        ModelSpec(model="tiny-draft"),
    )
    assert by_path == []  # the shipped name and its folder are one model
    other = pair_differences(
        results_variants / "other_target.json",
        ModelSpec(model="tiny-target"),
        ModelSpec(model="tiny-draft"),
    )
    assert other == ["target other-org/other-model there, tiny-target here"]


@pytest.mark.slow
def test_force_uses_another_pairs_timings_and_says_so(
    fault_root: Path, results_variants: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["accept", "--data", str(fault_root / "logs" / "ok.jsonl"), "--config", str(TINY)]
    argv += ["--timings", str(results_variants / "other_target.json"), "--force"]
    assert run_cli([*argv, "--report", str(tmp_path / "rep")]) == 0, capsys.readouterr().err
    doc = json.loads((tmp_path / "rep" / "accept.json").read_text())
    assert any("timings of another pair used (--force)" in w for w in doc["warnings"])
    assert "timings of another pair used (--force)" in (tmp_path / "rep" / "report.md").read_text()


# --- repeats measured once; one path per error line --------------------------------------------

REPEATS = [
    ({"sampling": {"temperatures": [0.0, 0.0]}}, "temperatures", [0.0]),
    ({"sampling": {"temperatures": [1.0, 0.0, 1, -0.0]}}, "temperatures", [1.0, 0.0]),
    ({"gammas": [2, 2, 1]}, "gammas", [1, 2]),
]


@pytest.mark.parametrize(("over", "key", "expected"), REPEATS, ids=[str(o) for o, _, _ in REPEATS])
def test_repeated_temperatures_and_gammas_are_measured_once(
    over: dict[str, object], key: str, expected: list[float]
) -> None:
    from specbench.config import deep_merge, parse_config, read_yaml

    cfg = parse_config(deep_merge(read_yaml(TINY), over), "x")
    got = cfg.sampling.temperatures if key == "temperatures" else cfg.gammas
    assert got == expected
    from specbench.harness.plan.plan import plan_units

    prompts = {w.name: [] for w in cfg.workloads}
    cells = [(w, t) for w, t, _ in plan_units(cfg, prompts)]  # type: ignore[arg-type]
    assert len(cells) == len(set(cells))


def test_engine_gamma_grid_repeats_are_measured_once() -> None:
    from specbench.config import deep_merge, parse_config, read_yaml

    vllm = TINY.parent / "tiny-vllm.yaml"
    cfg = parse_config(
        deep_merge(read_yaml(vllm), {"speculative": {"num_speculative_tokens": [2, 2, 4]}}), "x"
    )
    assert cfg.gammas == [2, 4]


def test_validate_names_the_config_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\ngamas: [1]\n")
    msg = check_bad_input(["validate", str(path)], capsys)
    assert msg.count(str(path)) == 1, msg
