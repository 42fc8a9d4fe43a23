"""Compare two runs (or two sets of runs): which metrics moved, and is it a regression?

Pure (numpy/scipy); `specbench compare BASE NEW` loads the sides and renders the rows. The
statistics, their error rates and the measured run-to-run noise are written down in
docs/compare.md; in short:

- Rows come in three classes. **Acceptance** (α, τ) is a within-run statistic: at T = 0 on the
  same prompts it is deterministic and compared exactly (no test); at T > 0 it is tested with a
  bootstrap over prompts (paired when both sides ran the same prompts). **Speedup** (pooled decode
  throughput with speculation ÷ without, measured side by side in one run: the report's speedup,
  docs/theory.md §9) is tested on the log scale with its
  standard error inflated by a run-to-run component, se² = se²_prompts + σ_r²·(1/k_base + 1/k_new)
  (σ_r measured on this project's CPU runs, `Thresholds.run_to_run_cv`), or with runs as the unit
  (Welch t on per-run log speedups) when both sides give several runs. **Absolute timing**
  (ITL and tokens/s, pooled over prompts as in the report) moves with the machine: it is
  informational unless both sides give several runs (Welch t over runs) or the environment
  change is the subject (`subject="env"`: the same model as speedup with
  `Thresholds.timing_run_to_run_cv`).
- Every tested row's p-value is Holm-adjusted over all tested rows of the comparison, so the
  probability of any false "regressed" when nothing changed stays at `significance` (family-wise).
- A regression is significant (adjusted p < significance) AND worse than the minimum effect.
- Environment differences are listed and never disqualify a row; for engine runs (vllm, openai)
  the environment is the server's as env.json records it.
- Failed records and settings the base measured but the new run did not are listed always and
  fail the comparison under `strict`.
- A cell whose verdict sets degenerate prompts aside is compared over its non-degenerate
  prompts, a prompt set aside on either side set aside on both (`prompt_sets.py`).

The modules, in the order data flows through them:

    metrics.py           statuses, the judged metrics, `Thresholds`
    samples.py           per-prompt samples of a run's metrics; stored summaries
    sides.py             a side from records or results.json; several runs merged
    prompt_sets.py       one prompt set per cell: the prompts either side's verdict set aside
                         (degenerate, docs/theory.md §13), set aside on both
    environment.py       identity (refuse) and environment (list) differences
    difference_tests.py  the test of one row's change
    rows.py              the rows of one workload × temperature
    verdict.py           Holm over every tested row, status and power per row; `compare`
"""
