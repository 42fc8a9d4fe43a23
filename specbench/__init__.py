"""specbench: does speculative decoding pay for your model pair, hardware and traffic?"""

__version__ = "0.1.0"
