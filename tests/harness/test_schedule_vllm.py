"""The exported γ schedule against the installed vLLM (harness/serving/vllm/vllm_schedule.py): its
SpeculativeConfig knows `num_speculative_tokens_per_batch_size`, vLLM's own validator accepts the
ranges, and vLLM's dense batch-size lookup gives specbench's k at every batch size. No engine is
started (no flock needed)."""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench.analysis.decide.gamma_schedule import OPEN_END, gamma_at
from specbench.cli.app import app
from specbench.errors import SpecbenchError
from specbench.report.schedule.schedule_export import vllm_speculative_config
from tests.unit.test_schedule_export import RANGES, _run_dir

pytest.importorskip("vllm")


@pytest.mark.vllm
def test_installed_vllm_accepts_the_export_and_looks_it_up_the_same() -> None:
    from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

    from specbench.harness.serving.vllm.vllm_schedule import check_with_installed_vllm

    conf = json.loads(json.dumps(vllm_speculative_config(RANGES, {"method": "draft_model"})))
    ranges = conf["num_speculative_tokens_per_batch_size"]
    assert check_with_installed_vllm(ranges)
    dense = build_dynamic_sd_schedule_lookup(ranges, 256, conf["num_speculative_tokens"])
    assert [dense[b] for b in range(1, 257)] == [gamma_at(RANGES, b) for b in range(1, 257)]
    assert RANGES[-1][1] == OPEN_END
    with pytest.raises(SpecbenchError, match="refuses the schedule"):
        check_with_installed_vllm([[2, 8, 1]])  # vLLM: the first range must start at 1


@pytest.mark.vllm
def test_schedule_command_vllm_format(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    res = CliRunner().invoke(app, ["schedule", str(run), "--format", "vllm"])
    assert res.exit_code == 0, res.output
    argv = shlex.split(res.stdout)  # vllm serve MODEL --speculative-config '{…}'
    assert argv[:2] == ["vllm", "serve"]
    conf = json.loads(argv[argv.index("--speculative-config") + 1])
    assert conf["num_speculative_tokens"] == 3
    assert conf["num_speculative_tokens_per_batch_size"][0][:1] == [1]
    assert "accepted by the installed vLLM" in res.stderr


@pytest.mark.vllm
def test_recorded_vllm_keys_are_fields_of_the_installed_speculative_config() -> None:
    """The key list the exports are checked against (engine-keys.json, copied from vLLM's
    source) against the installed vLLM's own SpeculativeConfig: every key the export writes
    exists there; the recorded keys missing from it are printed, not failed (the list may be
    newer than the installed build)."""
    from vllm.config import SpeculativeConfig

    from specbench.report.schedule.schedule_export import engine_keys

    fields = {f.name for f in dataclasses.fields(SpeculativeConfig)}
    written = {"method", "model", "num_speculative_tokens", "num_speculative_tokens_per_batch_size"}
    assert written <= fields, written - fields
    missing = set(engine_keys().vllm.keys) - fields
    print("recorded keys not in the installed vLLM:", sorted(missing))


@pytest.mark.vllm
def test_recorded_engine_args_are_the_installed_vllms() -> None:
    """The engine arguments specbench passes to `vllm.LLM` and writes as `vllm serve` flags
    (engine-keys.json `vllm_engine_args`, read from vLLM 0.32.0) against the installed vLLM:
    every name an EngineArgs field, the executor values its DistributedExecutorBackend, each
    flag one of `vllm serve`'s own option strings for that field."""
    import typing

    from vllm.config.parallel import DistributedExecutorBackend
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from specbench.report.schedule.schedule_export import engine_keys

    rec = engine_keys().vllm_engine_args
    fields = {f.name for f in dataclasses.fields(EngineArgs)}
    assert set(rec.keys) <= fields, set(rec.keys) - fields
    assert set(rec.distributed_executor_backends) == set(
        typing.get_args(DistributedExecutorBackend)
    )
    parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
    options = {a.dest: a.option_strings for a in parser._actions}
    for key, flag in rec.serve_flags.items():
        assert flag in options[key], (key, options.get(key))
    # the recorded defaults (a flag at its default is left off the pasted line) are vLLM's
    defaults = {f.name: f.default for f in dataclasses.fields(EngineArgs)}
    for key, default in rec.serve_flag_defaults.items():
        assert defaults[key] == default, (key, defaults[key], default)
    # the server's own options (not EngineArgs): --headless for the other nodes of mp
    from vllm.entrypoints.launchers.cli_args import make_arg_parser

    serve = {a.dest: a.option_strings for a in make_arg_parser(FlexibleArgumentParser())._actions}
    for key, flag in rec.serve_only_flags.items():
        assert flag in serve[key], (key, serve.get(key))
