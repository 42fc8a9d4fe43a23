"""specbench's own exact speculative decoding (torch): sampling and the acceptance rules, the cached LM, drafters, policies, decoding loops, teacher forcing."""
