"""Validate the decision at a deployment profile end to end on vLLM (issue 34 item 5): the line
`specbench schedule RUN --format vllm` prints for RUN's profile is started as a server, as is,
beside a server without speculation (OFF) and one per other fixed γ RUN measured; all of them are
measured under RUN's own profile (its mix, load, SLO, blocks), OFF and the others alternated in
time block by block; then each candidate's predicted gain (RUN's decision at the profile) is set
beside its measured gain (the validation run's decision at the same profile), with both
intervals and the error predicted / measured − 1 (docs/serving.md, "The exported configuration,
measured under the profile").

    PYTHONPATH=$PWD python scripts/validate_export_vllm.py RUN [--out DIR] [--blocks B]
        [--target PATH] [--draft PATH] [--python /path/to/vllm/venv/bin/python] [--reuse]
        [--restart-each-block]

RUN is a run directory with a deployment profile (`profile:` in its config; backend vllm). The
validation run is RUN's stored configuration with only the backend changed: `backend: openai`,
one endpoint per server, `engine.interleave: true` (every block sends OFF's and each server's
batches in alternating order: a drift of the machine falls on every server alike, docs/theory.md
§22), `repeats` = B blocks (default RUN's). So the profile, the seeds, the mix draws and the
arrival times are RUN's. All servers run at once (VLLM_CPU_KVCACHE_SPACE=1: a 1 GiB KV cache
each), each in a process group of its own killed whole at the end; only the one being measured
is sent requests. With `--restart-each-block` every server is stopped and started afresh before
each block (as `engine.interleave` restarts every engine in-process), so the interval over blocks
includes how much a server's start moves its speed; without it each server is started once and
the interval is the one for those starts. The run is one run directory either way: after each
block's last batch is recorded the run is interrupted (Ctrl-C: records kept), the servers are
restarted on the same ports and the run is resumed (`--resume`, the same configuration).

What each server is:
- export: the exported line, unchanged but for `vllm serve` → `python -m
  vllm.entrypoints.openai.api_server --model` where the `vllm` console script cannot start, and
  the appended `--host/--port`. When the decision is not ON the export is the server without
  speculation, i.e. OFF itself (said so; its gain is 1 by construction).
- off: the same line without `--speculative-config`.
- each other fixed γ among RUN's candidates: the export's speculative config with that
  `num_speculative_tokens` (the best fixed γ is among them: the validation's own decision says
  which is best under the profile).

`--target` / `--draft` replace the model paths RUN stored where they are not on this machine.
Writes DIR/validation.json and prints a Markdown table. `--reuse` analyses DIR again without
starting anything. Needs vLLM in `--python`'s environment and about 3 GiB of memory a server.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's specbench (its records reader)
START_S = 900  # all servers up: each takes 1-2 min on two cores, and they start together


def _specbench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "specbench", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _vllm_script_works(python: str) -> bool:
    script = Path(python).with_name("vllm")
    if not script.exists():
        return False
    probe = subprocess.run([str(script), "--version"], capture_output=True, check=False)
    return probe.returncode == 0


def _server_argv(line: str, python: str, port: int) -> list[str]:
    argv = shlex.split(line)
    if argv[:2] != ["vllm", "serve"]:
        raise SystemExit(f"error: the export is not a `vllm serve` line: {line}")
    if _vllm_script_works(python):
        head = [str(Path(python).with_name("vllm")), "serve", argv[2]]
    else:
        head = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", argv[2]]
    return [*head, *argv[3:], "--host", "127.0.0.1", "--port", str(port)]


def _conf(line: str) -> dict[str, Any] | None:
    argv = shlex.split(line)
    if "--speculative-config" not in argv:
        return None
    return dict(json.loads(argv[argv.index("--speculative-config") + 1]))


def _with_conf(line: str, conf: dict[str, Any] | None) -> str:
    """The line with its --speculative-config replaced (None: removed)."""
    argv = shlex.split(line)
    if "--speculative-config" in argv:
        i = argv.index("--speculative-config")
        del argv[i : i + 2]
    if conf is not None:
        argv += ["--speculative-config", json.dumps(conf, separators=(", ", ": "))]
    return shlex.join(argv)


@contextlib.contextmanager
def _servers(
    lines: dict[str, str], python: str, logs: Path, ports: dict[str, int], start: int = 0
) -> Iterator[dict[str, str]]:
    """Start every server at once on its port (`start`: which start, named in the logs); {name:
    url} once all answer /v1/models."""
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    procs: dict[str, tuple[subprocess.Popen[bytes], str, Path]] = {}
    try:
        for name, line in lines.items():
            port = ports[name]
            argv = _server_argv(line, python, port)
            log = logs / f"{name.replace(' ', '_').replace('=', '')}-start{start}.log"
            print(f"starting {name} (start {start}): {shlex.join(argv)}", file=sys.stderr)
            with log.open("w") as fh:
                proc = subprocess.Popen(
                    argv, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True
                )
            procs[name] = (proc, f"http://127.0.0.1:{port}", log)
        deadline = time.monotonic() + START_S
        waiting = dict(procs)
        while waiting:
            for name, (proc, url, log) in list(waiting.items()):
                if proc.poll() is not None:
                    raise SystemExit(f"error: server {name} exited: {log.read_text()[-2000:]}")
                with contextlib.suppress(OSError):
                    urllib.request.urlopen(url + "/v1/models", timeout=2).read()
                    del waiting[name]
            if waiting and time.monotonic() > deadline:
                raise SystemExit(f"error: no server {sorted(waiting)} after {START_S} s ({logs})")
            time.sleep(2)
        yield {name: url for name, (_, url, _) in procs.items()}
    finally:
        for proc, _, _ in procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc, _, _ in procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=30)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)


def _source(run: Path, out: Path, target: str | None, draft: str | None) -> Path:
    """RUN, or a copy whose env.json names models that exist on this machine."""
    if not (target or draft):
        return run
    copy = out.with_name(out.name + "-source")
    shutil.copytree(run, copy, dirs_exist_ok=True)
    env = json.loads((copy / "env.json").read_text())
    if target:
        env.setdefault("engine_args", {})["model"] = target
    confs = env.get("speculative_config")
    for conf in confs if isinstance(confs, list) else [confs] if confs else []:
        if draft and conf.get("model"):
            conf["model"] = draft
    (copy / "env.json").write_text(json.dumps(env, indent=1))
    return copy


def _validation_config(run: Path, endpoints: list[dict[str, Any]], blocks: int) -> dict[str, Any]:
    """RUN's stored configuration with the backend changed to the servers (module docstring)."""
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    for key in ("speculative", "draft", "extra_drafters", "policies", "batch_timing"):
        cfg.pop(key, None)
    cfg["name"] = f"{cfg['name']}-validate"
    cfg["backend"] = "openai"
    cfg["repeats"] = blocks
    cfg["engine"] = {"interleave": True}
    cfg["server"] = {
        "endpoints": endpoints,
        "timeout_s": 120,
        "retries": 2,
        "prompt_format": "tokens",  # the same token ids the in-process engine was given
        "extra_body": {"return_token_ids": True},
    }
    cfg.pop("output_dir", None)
    return cfg


def _metrics_in_block(records: Path, block: int, names: Collection[str] | None = None) -> int:
    """Batches recorded in `block` (of the settings `names` only: "off" for γ = 0)."""
    from specbench.records import iter_records

    if not records.is_file():
        return 0
    return sum(
        r.get("kind") == "engine_metrics"
        and int(r.get("repeat", 0)) == block
        and (names is None or ("off" if not r.get("gamma") else r.get("setting")) in names)
        for r in iter_records(records)
    )


def _run_block_by_block(
    cfg_path: Path, out: Path, blocks: int, per_block: int, restart: Any
) -> list[int]:
    """`specbench run` of the validation config, interrupted after each block's `per_block`
    batches are recorded and resumed once `restart()` has started the servers afresh; the
    records of the next block already written when a run was interrupted, per restart (0 when
    the interruption came in time: a request takes far longer than the 20 ms poll)."""
    from specbench.records import RECORDS_FILE

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    early: list[int] = []
    for block in range(blocks):
        cmd = [sys.executable, "-m", "specbench", "run", str(cfg_path), "--out", str(out)]
        if block:
            cmd.append("--resume")
        records = out / RECORDS_FILE
        offset = records.stat().st_size if records.is_file() else 0
        seen = _metrics_in_block(records, block)  # before the run writes again
        proc = subprocess.Popen(cmd, env=env)
        last = block == blocks - 1
        while proc.poll() is None and not last:
            # only the lines added since the last look: the whole file takes longer to parse
            # than a request takes to complete
            with contextlib.suppress(FileNotFoundError), records.open("rb") as fh:
                fh.seek(offset)
                chunk = fh.read()
                whole = chunk[: chunk.rfind(b"\n") + 1]
                offset += len(whole)
                for line in whole.splitlines():
                    r = json.loads(line)
                    seen += r.get("kind") == "engine_metrics" and r.get("repeat", 0) == block
            if seen >= per_block:
                proc.send_signal(signal.SIGINT)  # the run keeps its records (exit 130)
                break
            time.sleep(0.02)
        rc = proc.wait()
        if rc not in (0, 1, 130):
            raise SystemExit(f"error: specbench run exited {rc} in block {block}")
        if last:
            break
        if _metrics_in_block(records, block) < per_block:
            raise SystemExit(f"error: block {block} ended with fewer than {per_block} batches")
        early.append(_requests_in_block(records, block + 1))
        restart(block + 1)
    return early


def _requests_in_block(records: Path, block: int) -> int:
    from specbench.records import iter_records

    return sum(
        r.get("kind") in ("baseline", "spec") and int(r.get("repeat", 0)) == block
        for r in iter_records(records)
    )


def _candidates(decision: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["setting"]: c for c in decision["candidates"]}


def _tpot_means(run: Path, load: str) -> dict[str, float]:
    """{setting label: mean TPOT (ms)} of the requests that arrived in the steady window of the
    profile's mix batches at `load` (steady and drain phases; docs/theory.md §21; buffered
    streams left out): how much
    faster a token is, the quantity behind every SLO-goodput gain, steadier than a gain whose SLO
    sits between the two latency distributions. OFF (γ = 0, whatever its label) is "off"."""
    from specbench.records import RECORDS_FILE, iter_records

    sums: dict[str, list[float]] = {}
    for r in iter_records(run / RECORDS_FILE):
        if r.get("kind") not in ("baseline", "spec") or r.get("load") != load or not r.get("mix"):
            continue
        tpot = r.get("tpot_ms")
        if r.get("phase") not in ("steady", "drain") or tpot is None or r.get("buffered"):
            continue  # a buffered stream's TPOT was not measured (docs/serving.md)
        name = "off" if not r.get("gamma") else str(r.get("setting"))
        sums.setdefault(name, []).append(float(tpot))
    return {k: sum(v) / len(v) for k, v in sums.items()}


def _buffered_share(run: Path, load: str, name: str) -> float | None:
    """The share of a setting's steady-window requests at `load` whose streams arrived
    buffered (TTFT and TPOT not measured; docs/serving.md "Buffered streams")."""
    from specbench.records import RECORDS_FILE, iter_records

    flags = [
        bool(r.get("buffered"))
        for r in iter_records(run / RECORDS_FILE)
        if r.get("kind") in ("baseline", "spec") and r.get("load") == load and r.get("mix")
        and r.get("phase") in ("steady", "drain")
        and ("off" if not r.get("gamma") else str(r.get("setting"))) == name
    ]  # fmt: skip
    return sum(flags) / len(flags) if flags else None


def _pair(xs: list[float | None]) -> str:
    return " → ".join("–" if x is None else f"{x:.3f}" for x in xs)


def _est(e: dict[str, Any] | None) -> str:
    if not e or e.get("value") is None:
        return "–"
    ends = ["–" if x is None else f"{x:.2f}" for x in (e.get("ci95") or [None, None])]
    return f"{e['value']:.2f}× [{ends[0]}, {ends[1]}]"  # "–": no finite end


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "validate-export")
    ap.add_argument("--blocks", type=int, default=None)
    ap.add_argument("--target")
    ap.add_argument("--draft")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--reuse", action="store_true", help="analyse DIR's measurements again")
    ap.add_argument(
        "--restart-each-block",
        action="store_true",
        help="stop and start every server afresh before each block",
    )
    a = ap.parse_args()
    if a.out.exists() and not a.reuse:
        raise SystemExit(f"error: {a.out} exists: choose another --out (or --reuse it)")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    run = _source(a.run, a.out, a.target, a.draft)
    as_json = _specbench("schedule", str(run), "--format", "json")
    if as_json.returncode != 0:
        raise SystemExit(f"error: specbench schedule {a.run}: {as_json.stderr.strip()}")
    doc = json.loads(as_json.stdout)
    if doc.get("kind") != "profile_decision":
        raise SystemExit(f"error: {a.run} has no deployment profile (`profile:` in its config)")
    predicted = doc["decision"]
    exported = _specbench("schedule", str(run), "--format", "vllm")
    if exported.returncode != 0:
        raise SystemExit(f"error: specbench schedule {a.run} --format vllm: {exported.stderr}")
    line = exported.stdout.strip()
    stored = yaml.safe_load((run / "config.yaml").read_text())
    blocks = int(a.blocks or stored["repeats"])
    # the speculative config of the servers: the export's; not ON, the run's own (its first)
    confs = json.loads((run / "env.json").read_text()).get("speculative_config") or [{}]
    base = _conf(line) or dict(confs[0] if isinstance(confs, list) else confs)
    method = str(base.get("method") or "draft_model")
    plain = _with_conf(line, None)
    export_gamma = int((_conf(line) or {}).get("num_speculative_tokens") or 0)
    # name → (server line, γ); the names are the validation run's setting labels
    servers: dict[str, tuple[str, int]] = {"off": (plain, 0)}
    for c in predicted["candidates"]:
        if c.get("schedule"):
            continue  # a γ schedule by batch size: vLLM 0.32 serves one γ (docs/schedule.md)
        g = int(c["gamma"])
        conf = {**base, "num_speculative_tokens": g}
        conf.pop("num_speculative_tokens_per_batch_size", None)
        servers[c["setting"]] = (line if g == export_gamma else _with_conf(plain, conf), g)
    logs = a.out.with_name(a.out.name + "-logs")
    logs.mkdir(parents=True, exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    early: list[int] | None = None
    if not a.reuse:
        lines = {n: s for n, (s, _) in servers.items()}
        ports = {n: _free_port() for n in servers}
        endpoints = [
            {"url": f"http://127.0.0.1:{ports[n]}", "gamma": g, "label": n if g else None,
             "method": method if g else "none"}
            for n, (_, g) in servers.items()
        ]  # fmt: skip
        cfg_path = logs / "validate.yaml"
        cfg_path.write_text(
            yaml.safe_dump(_validation_config(run, endpoints, blocks), allow_unicode=True)
        )
        if a.restart_each_block:
            with contextlib.ExitStack() as stack:

                def restart(start: int) -> None:
                    stack.close()  # the servers of the block before, stopped
                    stack.enter_context(_servers(lines, a.python, logs, ports, start))

                restart(0)
                per_block = _metrics_in_block(run / "records.jsonl", 0, servers)
                early = _run_block_by_block(cfg_path, a.out, blocks, per_block, restart)
        else:
            with _servers(lines, a.python, logs, ports):
                res = _specbench("run", str(cfg_path), "--out", str(a.out))
                print(res.stdout[-3000:], res.stderr[-3000:], file=sys.stderr)
                if res.returncode not in (0, 1):
                    raise SystemExit(f"error: specbench run exited {res.returncode}")
    rep = _specbench("report", str(a.out))
    if rep.returncode not in (0, 1):
        raise SystemExit(f"error: specbench report {a.out}: {rep.stderr.strip()}")
    measured = json.loads((a.out / "results.json").read_text())["profile_decision"]
    pred_by, meas_by = _candidates(predicted), _candidates(measured)
    load = next(iter(predicted["loads"]))  # the profile's (first) load point, e.g. rate=3
    tpot_pred, tpot_meas = _tpot_means(run, load), _tpot_means(a.out, load)
    rows = []
    for name, (_, g) in servers.items():
        if not g:
            continue
        p, m = pred_by[name]["gain"], (meas_by.get(name) or {}).get("gain") or {}
        pv, mv = p.get("value"), m.get("value")
        rows.append(
            {
                "server": name,
                "exported": g == export_gamma,
                "gamma": g,
                "predicted_gain": p,
                "measured_gain": m or None,
                "prediction_error": None if not pv or not mv else pv / mv - 1,
                "predicted_in_measured_interval": (
                    None if pv is None or not m.get("ci95") or None in m["ci95"]
                    else m["ci95"][0] <= pv <= m["ci95"][1]
                ),
                "acceptance": [pred_by[name].get("acceptance"), (meas_by.get(name) or {}).get("acceptance")],
                "break_even_alpha": [
                    pred_by[name].get("break_even_alpha"),
                    (meas_by.get(name) or {}).get("break_even_alpha"),
                ],
                "buffered_streams": [_buffered_share(run, load, name), _buffered_share(a.out, load, name)],
                # mean TPOT over OFF's, in-process (predicted) and as servers (measured)
                "tpot_ratio_predicted": tpot_pred[name] / tpot_pred["off"],
                "tpot_ratio_measured": tpot_meas[name] / tpot_meas["off"],
            }
        )  # fmt: skip
    out = {
        "command": "PYTHONPATH=$PWD python scripts/validate_export_vllm.py "
        + shlex.join(sys.argv[1:]),
        "started": started,
        "source_run": str(a.run),
        "exported_line": line,
        "exported_note": exported.stderr.strip().splitlines(),
        "predicted": {k: predicted.get(k) for k in ("verdict", "chosen", "blocks", "reason")},
        "measured": {k: measured.get(k) for k in ("verdict", "chosen", "blocks", "reason")},
        "objective": predicted.get("objective"),
        "servers_started": "afresh before each block" if a.restart_each_block else "once",
        # per restart: requests of the next block recorded before the servers were restarted
        "next_block_requests_before_restart": early,
        "rows": rows,
    }
    (a.out / "validation.json").write_text(json.dumps(out, indent=1, ensure_ascii=False))
    print(f"exported (specbench schedule {a.run} --format vllm): {line}")
    print(
        f"predicted: {predicted['verdict'].upper()} {predicted.get('chosen') or ''} "
        f"({predicted['blocks']} blocks in-process); measured as servers: "
        f"{measured['verdict'].upper()} {measured.get('chosen') or ''} ({measured['blocks']} "
        f"blocks, OFF alternated with every server; servers started "
        f"{'afresh before each block' if a.restart_each_block else 'once'})"
    )
    print(
        f"| server | γ | predicted gain over OFF | measured gain over OFF | error (predicted / "
        f"measured − 1) | mean TPOT ÷ OFF's at {load} | acceptance | break-even α | buffered "
        "streams |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    off_buf = [_buffered_share(run, load, "off"), _buffered_share(a.out, load, "off")]
    for r in rows:
        err = "–" if r["prediction_error"] is None else f"{r['prediction_error']:+.1%}"
        mark = " (export)" if r["exported"] else ""
        print(
            f"| {r['server']}{mark} | {r['gamma']} | {_est(r['predicted_gain'])} | "
            f"{_est(r['measured_gain'])} | {err} | {r['tpot_ratio_predicted']:.3f} → "
            f"{r['tpot_ratio_measured']:.3f} | {_pair(r['acceptance'])} | "
            f"{_pair(r['break_even_alpha'])} | {_pair(r['buffered_streams'])} |"
        )
    print(f"(each pair: the source run in-process → the servers; OFF's buffered: {_pair(off_buf)})")


if __name__ == "__main__":
    main()
