"""A long-context workload generated on the fly: `dataset: {generate: long_context,
prompt_words: 3000}` in a config. Nothing is shipped; the same settings give the same prompts on
every machine (each document is drawn from `random.Random` seeded by its index and length).

Each prompt is a long operations log — dated entries about sites, machines, technicians and
readings, with a few anomalies — followed by a question that needs the whole log: name who
handled each anomaly and summarise what happened. That is the shape of long-context traffic
(RAG, log analysis, document QA): a long prefill, an answer that quotes its context (where n-gram
prompt lookup and other copy-friendly drafters shine) and reasoning over it.

Length is in words (`prompt_words`, about 1.3 tokens per word with Llama-family tokenizers, so
3000 words ≈ 4000 tokens): pick it to fit the target's context minus `max_new_tokens`. The
shipped tiny pair has a 1024-token context, far too short for this workload (prompts longer than
the context keep their most recent tokens, with a warning): use it with a model of 8k context or
more, or `prompt_words: 500` for a smoke test on the tiny pair.
"""

from __future__ import annotations

import random

from specbench.data.sources import RawRows, Row

MAX_DOCUMENTS = 1000
MAX_WORDS = 100_000

_SITES = ["Delta", "Harbor", "North Ridge", "Cedar", "Granite", "Lakeside", "Summit", "Westfield"]
_MACHINES = ["pump", "compressor", "chiller", "turbine", "conveyor", "boiler", "press", "mixer"]
_PEOPLE = [
    "Alvarez", "Okafor", "Lindqvist", "Tanaka", "Moreau", "Novak", "Haddad", "Iyer", "Brennan",
    "Kowalski", "Mensah", "Duarte", "Petrov", "Nakamura", "Oyelaran", "Schultz",
]  # fmt: skip
_ACTIONS = [
    "inspected", "recalibrated", "replaced the filter on", "lubricated", "tested the alarm of",
    "cleaned", "checked the seals of", "logged readings for",
]  # fmt: skip
_STATUS = ["nominal", "within tolerance", "stable", "as expected", "unchanged since last shift"]
_ANOMALIES = [
    ("a pressure spike", "bar", 9.0, 12.0),
    ("an overheating bearing", "°C", 95.0, 130.0),
    ("a vibration alarm", "mm/s", 11.0, 25.0),
    ("a coolant leak", "L/h", 2.0, 8.0),
    ("a voltage drop", "V", 180.0, 205.0),
]
_NORMAL = {"bar": (3.0, 6.0), "°C": (40.0, 70.0), "mm/s": (1.0, 4.5), "L/h": (0.0, 0.2), "V": (228.0, 235.0)}  # fmt: skip


def _entry(rng: random.Random, day: int, hour: int) -> str:
    site, machine = rng.choice(_SITES), rng.choice(_MACHINES)
    unit = rng.choice(list(_NORMAL))
    lo, hi = _NORMAL[unit]
    return (
        f"Day {day}, {hour:02d}:{rng.randrange(60):02d} — {rng.choice(_PEOPLE)} "
        f"{rng.choice(_ACTIONS)} {machine} {machine[0].upper()}-{rng.randrange(100, 400)} at "
        f"{site}; reading {rng.uniform(lo, hi):.1f} {unit}; status {rng.choice(_STATUS)}."
    )


def _anomaly(rng: random.Random, day: int, hour: int) -> tuple[str, str]:
    what, unit, lo, hi = rng.choice(_ANOMALIES)
    who, site, machine = rng.choice(_PEOPLE), rng.choice(_SITES), rng.choice(_MACHINES)
    tag = f"{machine} {machine[0].upper()}-{rng.randrange(100, 400)} at {site}"
    text = (
        f"Day {day}, {hour:02d}:{rng.randrange(60):02d} — ALERT: {what} on {tag} "
        f"({rng.uniform(lo, hi):.1f} {unit}). {who} isolated the unit, traced the cause and "
        f"returned it to service after {rng.randrange(1, 6)} hours."
    )
    return text, f"{what} on {tag}: {who}"


def long_context_document(index: int, words: int) -> tuple[str, str]:
    """(prompt, reference) of document `index`: a log of about `words` words and its question."""
    rng = random.Random(f"long_context:{index}:{words}")
    lines: list[str] = []
    answers: list[str] = []
    n_anomalies = 3 + index % 3
    count, day, hour = 0, 1, 6
    budget = max(words - 60, 40)
    slots = set(rng.sample(range(max(budget // 18, n_anomalies)), n_anomalies))
    i = 0
    while count < budget:
        if i in slots:
            line, answer = _anomaly(rng, day, hour)
            answers.append(answer)
        else:
            line = _entry(rng, day, hour)
        lines.append(line)
        count += len(line.split())
        i += 1
        hour += rng.randrange(1, 3)
        if hour >= 22:
            day, hour = day + 1, 6
    while len(answers) < n_anomalies:  # a short budget: the rest at the end
        line, answer = _anomaly(rng, day, hour)
        lines.append(line)
        answers.append(answer)
    prompt = (
        "Below is the operations log of a plant network. Read all of it, then answer.\n\n"
        + "\n".join(lines)
        + "\n\nQuestion: list every ALERT in the log in order, with the machine, the site and the "
        "person who handled it, then summarise in three sentences what the log says about the "
        "network's reliability."
    )
    return prompt, "; ".join(answers)


def long_context_rows(documents: int, words: int) -> RawRows:
    """The generated set as rows of the specbench record format (no `workload` field: every row
    belongs to the workload that names the generator, whatever it is called)."""
    if not 1 <= documents <= MAX_DOCUMENTS or not 1 <= words <= MAX_WORDS:
        raise ValueError("documents and words out of range")
    rows = []
    for i in range(documents):
        prompt, reference = long_context_document(i, words)
        values = {
            "id": f"long_context-{i + 1:03d}",
            "prompt": prompt,
            "reference": reference,
            "meta": {"prompt_words": len(prompt.split())},
        }
        rows.append(Row(f"document {i + 1}", values))
    return RawRows(f"generated long_context ({documents} × ~{words} words)", rows)
