"""`specbench verify`: the statistics of the lossless checks (`verify.lossless_tests`) and what
the checks found, as plain values (`verify.verify_results`). No torch.
"""
