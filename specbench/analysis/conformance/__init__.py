"""Engine conformance: does the engine accept as much as specbench's exact reference does?

A vllm/openai run's acceptance is compared with a transformers-backend reference run
(`conformance.reference_run`) on the same prompts and sampling. With p and q processed
identically both implement the same rejection rule (docs/theory.md §1), so acceptance must agree
up to sampling noise; a shortfall means the engine is not doing what the reference does.

Per workload × temperature × γ measured by both, paired by prompt (repeats pooled):
  τ = 1 + accepted / rounds (mean acceptance length) and the per-position conditional curve
  a_i = #(A ≥ i) / #(A ≥ i − 1), engine − reference, with a paired prompt-bootstrap 95 % interval
  (shown, not used for the decision).

The decision (docs/verify.md §conformance): one family of one-sided shortfall tests — τ and every
a_i whose denominator the two runs together reached at least 2·MIN_ROUNDS times, in every
comparison of the run — judged by one joint paired permutation test with max-T (Westfall–Young
single step). Under "engine = reference" a prompt's engine data and its reference data are
exchangeable, so swapping them (all temperatures and γ of that prompt together) leaves the joint
distribution unchanged: the maximum standardized shortfall over the family, recomputed under
random swaps, is the null distribution of the largest statistic, and its tail gives each test a
family-wise adjusted p-value. The run is flagged when some test has adjusted p ≤ 1 − ci_level
(one-sided, family-wise 5 % by default) *and* a relative shortfall above `min_effect` (pyperf's
rule: significance and a minimum effect). Max-T instead of Holm: τ and the a_i of one comparison
are strongly correlated and Holm would treat them as unrelated; max-T uses the dependence and keeps
the power Holm loses at 8 prompts, where a permutation p-value cannot go below 2⁻⁸.
Assumption: both runs measured the same repeats per prompt (the units are then exchangeable).

Reference rounds that drafted fewer than γ tokens (the end of a generation) are left out:
engines draft γ every round. The engine side needs per-request counters (concurrency 1).
Greedy runs also compare tokens: the engine's speculative output should equal the reference's
target-only greedy output (float rounding can flip near-ties; the count is reported as is).

The modules:

    units.py            per-prompt acceptance counts of the reference and of the engine run
    permutation.py      the family's one joint paired permutation test (max-T)
    decision.py         one comparison's τ and a_i, their tests, the family-wise verdict
    reference_check.py  the results.json `conformance` section: the run against its reference
"""
