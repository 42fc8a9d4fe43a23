"""Logged traffic stays private (docs/privacy.md): `run`, `report`, `compare` and `accept` on
logged requests whose prompts carry a canary string and whose ids are private, then every file
they wrote and everything they printed is decoded and searched for the canary, the raw ids, the
answers the model generated and their token ids. The same run with `--keep-text` is the control:
the search finds the ids and answers there, so it can fail."""

from __future__ import annotations

import base64
import contextlib
import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from specbench.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
CANARY = "zq7-canary-Xv41"
runner = CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"})


def write_logs(folder: Path) -> tuple[Path, list[str]]:
    """The shipped logged traffic with the canary in every prompt and response and private ids."""
    rows = [
        json.loads(line)
        for line in (ROOT / "datasets/logged/tiny_traffic.jsonl").read_text().splitlines()
    ]
    ids = []
    for i, row in enumerate(rows):
        row["id"] = f"user-7731-session-{i:03d}"
        row["prompt"] = f"{CANARY} {row['prompt']}"
        row["response"] = f"{row['response']} {CANARY}"
        ids.append(row["id"])
    path = folder / "logs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, ids


def write_config(folder: Path, logs: Path, **over: Any) -> Path:
    cfg = {
        "name": "private",
        "target": {"model": "tiny-target", "dtype": "float32", "device": "cpu"},
        "draft": {"model": "tiny-draft", "dtype": "float32", "device": "cpu"},
        "workloads": [{"name": "logs", "dataset": {"path": str(logs)}, "n": 3}],
        "sampling": {"temperatures": [0.0]},  # greedy: the private run's answers are the control's
        "gammas": [2],
        "max_new_tokens": 12,
        "warmup": 1,
        "decision": {"bootstrap": 200},
        "output_dir": str(folder / "out"),
    }
    cfg.update(over)
    path = folder / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _strings(node: Any) -> list[str]:
    """Every string in a decoded JSON document: its keys and values, escapes undone."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for k, v in node.items() for s in [k, *_strings(v)]]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return []


def texts_of(path: Path) -> list[str]:
    """A file as the strings that could hold a leak: its bytes as UTF-8, JSON values unescaped
    (a multi-line answer is found in a JSON file, where its newlines are written `\\n`), HTML
    unescaped, and base64 payloads (embedded images, data URIs) decoded."""
    raw = path.read_bytes()
    text = raw.decode("utf-8", errors="replace")
    out = [text, html.unescape(text)]
    for chunk in [*text.splitlines(), text]:  # JSONL lines, then the file as one document
        with contextlib.suppress(ValueError):
            doc = json.loads(chunk)
            out += [json.dumps(doc, ensure_ascii=False), "\x00".join(_strings(doc))]
    for blob in re.findall(r"base64,([A-Za-z0-9+/=]{16,})", text):
        out.append(base64.b64decode(blob + "==").decode("utf-8", errors="replace"))
    return out


def leaks(outputs: list[Path], printed: list[str], needles: list[str]) -> list[str]:
    """'<file>: <needle>' for every needle found in any output file or printed text."""
    found = []
    for path in outputs:
        for t in texts_of(path):
            found += [f"{path.name}: {n[:40]}" for n in needles if n in t]
    for i, t in enumerate(printed):
        found += [f"printed #{i}: {n[:40]}" for n in needles if n in t]
    return sorted(set(found))


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return runner.invoke(app, list(args), env=env)


def answer_needles(records: Path) -> list[str]:
    """The answers (stripped, 8 characters or more) and token-id runs of a --keep-text run."""
    needles = []
    for line in records.read_text().splitlines():
        rec = json.loads(line)
        needles += [a.strip() for a in rec.get("answers") or [] if len(a.strip()) >= 8]
        needles += [json.dumps(ids)[1:-1] for ids in rec.get("output_ids") or [] if len(ids) >= 4]
    return sorted(set(needles))


@pytest.mark.slow  # four runs of the tiny pair and an accept: a minute quiet, 5 under load
@pytest.mark.long  # make test-long (CI runs it): make test was 13 min 47 s with it
def test_nothing_of_the_logged_traffic_reaches_an_output(tmp_path: Path) -> None:
    logs, ids = write_logs(tmp_path)
    printed: list[str] = []

    # the control: the same run with --keep-text writes the ids, answers and token ids
    kept_dir = tmp_path / "kept"
    kept_dir.mkdir()
    res = invoke("run", str(write_config(kept_dir, logs)), "--keep-text")
    assert res.exit_code == 0, res.output
    kept = kept_dir / "out"
    answers = answer_needles(kept / "records.jsonl")
    used_ids = [i for i in ids if i in (kept / "records.jsonl").read_text()]
    assert len(used_ids) == 3 and answers
    needles = [CANARY, *ids, *answers]
    assert leaks(sorted(kept.rglob("*.*")), [], [*used_ids, *answers[:3]])

    # the default: private
    priv_dir = tmp_path / "private"
    priv_dir.mkdir()
    config = write_config(priv_dir, logs)
    res = invoke("run", str(config))
    assert res.exit_code == 0, res.output
    printed.append(res.output)
    out = priv_dir / "out"
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert {r["kind"] for r in records} == {"baseline", "spec"} and len(records) == 6
    for r in records:  # what a private record keeps: the checks' results and a digest
        assert "answers" not in r and "output_ids" not in r
        assert re.fullmatch(r"h[0-9a-f]{16}", r["prompt_id"]) and r["answer_digest"]
        assert len(r["content"]) == r["turns"] and r["new_tokens"] > 0
    env = json.loads((out / "env.json").read_text())
    assert env["privacy"]["private_workloads"] == ["logs"]
    fingerprint = env["tokenizers"]["target"]  # the tokenizer is named by its fingerprint
    assert fingerprint.startswith("sha256:") and env["tokenizers"]["draft"] == fingerprint

    # a resumed private run finds its units under the same hashed ids: nothing measured twice
    lines = (out / "records.jsonl").read_text().splitlines(keepends=True)
    (out / "records.jsonl").write_text("".join(lines[:3]))
    res = invoke("run", str(config), "--resume")
    assert res.exit_code == 0, res.output
    printed.append(res.output)
    again = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    units = {(r["kind"], r["gamma"], r["prompt_id"]) for r in again}
    assert units == {(r["kind"], r["gamma"], r["prompt_id"]) for r in records} and len(again) == 6
    # ... and refuses another salt (the ids would not match: every prompt measured again)
    res = invoke("run", str(config), "--resume", env={"SPECBENCH_ID_SALT": "another"})
    assert res.exit_code == 2 and "SPECBENCH_ID_SALT" in res.output, res.output

    res = invoke("report", str(out))
    assert res.exit_code == 0, res.output
    printed.append(res.output)
    md, junit = tmp_path / "cmp.md", tmp_path / "cmp.xml"
    res = invoke("compare", str(out), str(out), "--markdown", str(md), "--junit", str(junit))
    assert res.exit_code in (0, 5), res.output  # a run compared with itself is inconclusive
    printed.append(res.output)
    acc = tmp_path / "acc"
    res = invoke(
        "accept", "--config", str(config), "--data", str(logs), "--bucket-by", "workload",
        "--report", str(acc), "--json",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    printed.append(res.output)
    pair = json.loads((acc / "accept.json").read_text())["pair"]
    assert pair["tokenizers"] == {"target": fingerprint, "draft": fingerprint}

    outputs = [p for p in [*out.rglob("*"), *acc.rglob("*"), md, junit] if p.is_file()]
    assert {p.name for p in outputs} >= {
        "records.jsonl", "warmup.jsonl", "results.json", "summary.csv", "report.md",
        "report.html", "env.json", "config.yaml", "accept.json", "cmp.md", "cmp.xml",
    }  # fmt: skip
    assert leaks(outputs, printed, needles) == []
