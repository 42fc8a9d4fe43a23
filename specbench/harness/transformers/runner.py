"""`specbench run` on the transformers backend: measure a pair over workloads × temperatures × γ
and append records (the plan of units, seeds and run directory: `harness.plan.plan`).

Order, per workload × temperature: warm-up (written to warmup.jsonl, reported apart), then
prompt by prompt the baseline followed by the speculative runs over the γ grid (and any extra
drafters and policies), so that each paired baseline/speculative comparison is made close in
time. Each prompt's record is appended to records.jsonl the moment it exists; `resume=True` skips
units already there, so a killed run loses at most the prompt in flight. The core never prints:
progress goes through the `RunEvents` callbacks (the CLI draws rich progress bars with them).
"""

from __future__ import annotations

import resource
from collections.abc import Callable
from dataclasses import asdict, astuple
from pathlib import Path
from typing import Any

import torch

from specbench.analysis.estimators.content import answer_checks
from specbench.config import PolicySpec, RunConfig
from specbench.data import Prompt, build_context_ids, conversation_messages
from specbench.data.privacy import answer_fields, privacy_note, prompt_texts, withhold
from specbench.decoding.drafters import Drafter, ModelDrafter, NgramDrafter
from specbench.decoding.generate import (
    Generation,
    StopCheck,
    baseline_generate,
    speculative_generate,
)
from specbench.decoding.lm import CachedLM
from specbench.decoding.policies import Policy
from specbench.decoding.rounds import Rounds
from specbench.decoding.timing import Clock
from specbench.errors import SpecbenchError
from specbench.harness.env.env import pair_facts, transformers_environment, write_env
from specbench.harness.plan.plan import (
    RunEvents,
    RunOutcome,
    SilentEvents,
    Unit,
    load_prompts,
    logged_fields,
    plan_units,
    prepare_run_dir,
    request_params,
    unit_seed,
)
from specbench.harness.transformers.batch_timing import run_batch_timing, timed_pair
from specbench.record_line import UnitFinished
from specbench.records import RECORDS_FILE, RecordWriter, UnitKey
from specbench.sampling_params import SamplingParams


def make_stop_check(tokenizer: Any, stop: list[str]) -> StopCheck | None:
    """Number of tokens to keep once a stop string appears in the decoded output (the token that
    completes the stop string is kept; nothing after it)."""
    if not stop:
        return None

    def check(out: list[int]) -> int | None:
        if not any(s in tokenizer.decode(out) for s in stop):
            return None
        for k in range(1, len(out) + 1):
            if any(s in tokenizer.decode(out[:k]) for s in stop):
                return k
        return len(out)

    return check


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _merge_rounds(total: Rounds, part: Rounds) -> None:
    for name, values in asdict(part).items():
        getattr(total, name).extend(values)


def _rounded(values: Any, digits: int) -> Any:
    if isinstance(values, float):
        return round(values, digits)
    if isinstance(values, list):
        return [_rounded(v, digits) for v in values]
    return values


class Session:
    """Loaded models and settings shared by every unit of a run."""

    def __init__(
        self,
        cfg: RunConfig,
        target: Any,
        drafts: dict[str, Any],
        vocab_size: int,
        eos_ids: frozenset[int],
    ) -> None:
        """`drafts` maps each drafter label of the config to its LoadedModel (None for n-gram)."""
        self.cfg = cfg
        self.target_loaded = target
        self.drafts_loaded = drafts
        self.tokenizer = target.tokenizer
        self.device = target.device
        # the draft models' input devices too: a device_map may place a draft apart (Clock)
        self.clock = Clock(target.device, *(m.device for m in drafts.values() if m is not None))
        self.target_lm = CachedLM(target.model, vocab_size)
        # every call of the target's forward (prefill, decode step, verify) is counted, so a
        # plan's cost can be stated in target forwards (benchmarks/bench_adaptive.py)
        self.target_forwards = 0
        target.model.register_forward_pre_hook(self._count_target_forward)
        self.draft_specs = {d.label: d for d in cfg.drafters}
        self.draft_lms = {
            label: CachedLM(m.model, vocab_size) for label, m in drafts.items() if m is not None
        }
        self.eos_ids = eos_ids
        self.stop = make_stop_check(self.tokenizer, cfg.stop)
        max_pos = getattr(target.model.config, "max_position_embeddings", None)
        self.max_context = None if max_pos is None else max(1, int(max_pos) - cfg.max_new_tokens)

    def _count_target_forward(self, module: Any, args: Any) -> None:
        self.target_forwards += 1

    def params(self, temperature: float, top_p: float | None = None) -> SamplingParams:
        s = self.cfg.sampling
        return SamplingParams(
            temperature=temperature, top_k=s.top_k, top_p=s.top_p if top_p is None else top_p
        )

    def drafter(
        self, label: str, params: SamplingParams, generator: torch.Generator, policy: Policy
    ) -> Drafter:
        spec = self.draft_specs[label]
        if spec.method == "ngram":
            return NgramDrafter(spec.prompt_lookup_min, spec.prompt_lookup_max, self.clock)
        lm = self.draft_lms[label]
        noise_gen = torch.Generator(device=lm.device).manual_seed(generator.initial_seed() + 1)
        return ModelDrafter(
            lm, params, self.clock, generator, self.eos_ids, spec.logit_noise, noise_gen,
            min_confidence=policy.min_confidence,
        )  # fmt: skip

    def run_prompt(
        self,
        prompt: Prompt,
        temperature: float,
        gamma: int,
        seed: int,
        drafter: str = "",
        policy: PolicySpec | None = None,
    ) -> tuple[dict[str, Any], list[str]]:
        """Generate every turn of a prompt; return the record body and any truncation warnings.

        gamma 0 = the target-only baseline; otherwise speculative with `drafter` (default: the
        config's primary draft) under `policy` (default: fixed γ).
        """
        # a logged request (dataset.sampling: logged) is generated as it was sampled, by the
        # baseline and every speculative setting alike (the comparison stays paired)
        req = request_params(self.cfg, prompt, temperature)
        temperature, top_p, max_new = req.temperature, req.top_p, req.max_tokens
        params = self.params(temperature, top_p)
        label = drafter or self.cfg.draft.label
        pol = Policy(policy or PolicySpec(name="fixed", gamma=max(gamma, 1)), temperature)
        generator = torch.Generator(device=self.device).manual_seed(seed)
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        answers: list[str] = []
        gens: list[Generation] = []
        prompt_tokens: list[int] = []
        notes: list[str] = []
        rounds = Rounds()
        for turn in range(len(prompt.turns)):
            messages = conversation_messages(prompt, answers, turn)
            ids, truncated = build_context_ids(
                self.tokenizer, messages, self.cfg.chat_template, self.max_context, prompt.tools
            )
            if truncated:
                notes.append(f"prompt {prompt.id} turn {turn} truncated to {len(ids)} tokens")
            prompt_tokens.append(len(ids))
            with torch.inference_mode():
                if gamma == 0:
                    gen = baseline_generate(
                        self.target_lm, ids, params, max_new, self.clock,
                        self.eos_ids, self.stop, generator,
                    )  # fmt: skip
                else:
                    gen = speculative_generate(
                        self.target_lm, self.drafter(label, params, generator, pol), ids,
                        pol.controller(),
                        params, max_new, self.clock, self.eos_ids, self.stop,
                        generator,
                    )  # fmt: skip
            gens.append(gen)
            if gen.rounds is not None:
                _merge_rounds(rounds, gen.rounds)
            answers.append(self.tokenizer.decode(gen.output_ids, skip_special_tokens=True))
        new_tokens = sum(g.new_tokens for g in gens)
        wall_ms = sum(g.wall_ms for g in gens)
        ttft_ms = [g.ttft_ms for g in gens]
        decode_ms = wall_ms - sum(ttft_ms)
        body: dict[str, Any] = {
            "turns": len(prompt.turns),
            "prompt_tokens": prompt_tokens,
            "new_tokens": new_tokens,
            "new_tokens_per_turn": [g.new_tokens for g in gens],
            "stop_reason": [g.stop_reason for g in gens],
            "ttft_ms": _rounded(ttft_ms, 4),
            "wall_ms": round(wall_ms, 4),
            "decode_ms": round(decode_ms, 4),
            "tokens_per_s": new_tokens / (wall_ms / 1000.0) if wall_ms > 0 else None,
            # TPOT: decode time over the tokens after each turn's first (docs/theory.md §6).
            "tpot_ms": decode_ms / (new_tokens - len(gens)) if new_tokens > len(gens) else None,
            "peak_memory_mb": round(_peak_memory_mb(self.device), 1),
            **answer_fields(prompt, answers, [g.output_ids for g in gens]),  # or a digest
            # is it real text? repetition, empty, early EOS, length limit (docs/theory.md §13)
            "content": [
                answer_checks(g.output_ids, a, g.stop_reason, g.target_mean_logprob).model_dump()
                for g, a in zip(gens, answers, strict=True)
            ],
        }
        if gamma == 0:
            body["step_ms"] = _rounded([s for g in gens for s in g.step_ms], 4)
            body["forward_ms"] = _rounded([s for g in gens for s in g.forward_ms], 4)
        else:
            body["draft_prefill_ms"] = _rounded([g.draft_prefill_ms for g in gens], 4)
            r = asdict(rounds)
            for key in ("beta", "draft_top_prob"):
                r[key] = _rounded(r[key], 6)
            for key in ("draft_ms", "verify_ms", "overhead_ms"):
                r[key] = _rounded(r[key], 4)
            body["rounds"] = r
        body.update(logged_fields(prompt, req))  # a logged request: how it was sampled
        return body, notes


def measure_unit(session: Session, unit: Unit, temp: float) -> tuple[dict[str, Any], list[str]]:
    """Run one unit: its record (kind "failed" when it raised, e.g. out of memory) and any
    truncation notes."""
    cfg, k = session.cfg, unit.key
    seed = unit_seed(cfg.seed, *astuple(k)[1:])
    head: dict[str, Any] = {
        "kind": k.kind,
        "unit_kind": k.kind,
        "workload": k.workload,
        "temperature": k.temperature,
        "top_p": cfg.sampling.top_p,
        "top_k": cfg.sampling.top_k,
        "gamma": k.gamma,
        "drafter": k.drafter,
        "policy": k.policy,
        "prompt_id": k.prompt_id,
        "repeat": k.repeat,
        "seed": seed,
    }
    if unit.plan_step is not None:
        head["plan_step"] = unit.plan_step
    try:
        st = unit.setting
        body, notes = session.run_prompt(unit.prompt, temp, k.gamma, seed, st.drafter, st.policy)
        return {**head, "status": "ok", **body}, notes
    except (KeyboardInterrupt, SpecbenchError):
        raise
    except Exception as exc:  # a failed prompt is recorded and the run goes on
        if session.device.type == "cuda":
            torch.cuda.empty_cache()
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        if unit.prompt.private_key is not None:  # a private prompt's text stays out of records
            msg = withhold(msg, prompt_texts(unit.prompt))
        failed = {
            **head,
            "kind": "failed",
            "status": "failed",
            "error": f"{type(exc).__name__}: {msg}"[:300],
        }
        return failed, []


def execute(
    session: Session,
    out_dir: Path,
    plan: list[tuple[str, float, list[Unit]]],
    done: set[UnitKey],
    events: RunEvents | None = None,
    stop_after: Callable[[int], bool] | None = None,
) -> RunOutcome:
    """Run every unit not in `done`; append each record as soon as it exists.

    A unit that raises (e.g. out of memory) is recorded with kind "failed" and the run goes on;
    KeyboardInterrupt propagates after the records written so far are safely on disk.
    `stop_after(n_written)` lets tests interrupt a run deterministically.
    """
    ev = events or SilentEvents()
    outcome = RunOutcome(out_dir)
    todo_total = sum(1 for _, _, units in plan for u in units if not u.warmup)
    ev.planned(
        todo_total, sum(1 for _, _, us in plan for u in us if not u.warmup and u.key in done)
    )
    with (
        RecordWriter(out_dir / RECORDS_FILE) as writer,
        RecordWriter(out_dir / "warmup.jsonl") as warm_writer,
    ):
        for workload, temp, units in plan:
            pending = [u for u in units if not u.warmup and u.key not in done]
            if not pending:
                outcome.skipped += sum(1 for u in units if not u.warmup)
                continue
            for unit in units:
                if not unit.warmup and unit.key in done:
                    outcome.skipped += 1
                    continue
                label = unit.setting.label
                if unit.warmup:
                    label = f"warm-up {label}"
                ev.unit_started(workload, temp, label, unit.key.prompt_id)
                record, notes = measure_unit(session, unit, temp)
                outcome.warnings.extend(notes)
                if record["status"] == "failed":
                    outcome.failures.append(record)
                if unit.warmup:
                    warm_writer.write({**record, "kind": f"warmup_{unit.key.kind}"})
                    continue
                writer.write(record)
                outcome.written += 1
                ev.unit_finished(UnitFinished.of(record))
                if stop_after is not None and stop_after(outcome.written):
                    raise KeyboardInterrupt
    return outcome


def load_session(cfg: RunConfig) -> Session:
    """Load target and draft, check that they share a vocabulary."""
    from specbench.models import check_pair_compatible, eos_token_ids, load_model

    if cfg.cpu_threads is not None:
        torch.set_num_threads(cfg.cpu_threads)
    target = load_model(cfg.target)
    drafts = {d.label: load_model(d) if d.method == "model" else None for d in cfg.drafters}
    vocab, eos = len(target.tokenizer), frozenset(eos_token_ids(target))
    for draft in drafts.values():
        if draft is not None:
            info = check_pair_compatible(target, draft)
            vocab, eos = info.real_vocab_size, frozenset(info.eos_token_ids)
    return Session(cfg, target, drafts, vocab, eos)


def run(
    cfg: RunConfig,
    out_dir: Path,
    *,
    resume: bool = False,
    force: bool = False,
    base_dir: Path | None = None,
    events: RunEvents | None = None,
    session: Session | None = None,
    stop_after: Callable[[int], bool] | None = None,
) -> RunOutcome:
    """Validate inputs, load the pair (unless a session is given), and measure every unit."""
    prompts, session, done = start_run(cfg, out_dir, resume, force, base_dir, session)
    plan = plan_units(cfg, prompts)
    outcome = execute(session, out_dir, plan, done, events, stop_after)
    if cfg.batch_timing is not None:  # batched forwards for the batch-size prediction (§18)
        run_batch_timing(cfg, timed_pair(session), prompts, out_dir)
    return outcome


def start_run(
    cfg: RunConfig,
    out_dir: Path,
    resume: bool,
    force: bool,
    base_dir: Path | None,
    session: Session | None,
) -> tuple[dict[str, list[Prompt]], Session, set[UnitKey]]:
    """Load the prompts and the pair, prepare DIR and write env.json: what every plan starts
    with. Returns the prompts, the session and the units already complete."""
    prompts = load_prompts(cfg, base_dir)
    session = session or load_session(cfg)
    done = prepare_run_dir(cfg, out_dir, resume, force, prompts)
    target, drafts = session.target_loaded, session.drafts_loaded
    env = transformers_environment(cfg, session.device, target.dtype, *pair_facts(target, drafts))
    write_env(out_dir, {**env, "privacy": privacy_note(prompts)})  # what the files keep
    return prompts, session, done
