"""noveld: streaming Bayesian-nonparametric document clustering with novelty detection."""

__version__ = "0.1.0"
