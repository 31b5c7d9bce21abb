"""The optimizer: pure rewrites of a ``QueryPlan``. See ``optimizer.RULES`` for the order they run in."""

from csparql.optimizer.optimizer import RULES, optimize
from csparql.optimizer.statistics import NO_STATISTICS, SourceStatistics

__all__ = ["RULES", "optimize", "SourceStatistics", "NO_STATISTICS"]
