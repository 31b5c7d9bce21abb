"""The optimizer: pure rewrites of a ``QueryPlan``. See ``optimizer.RULES`` for the order they run in."""

from csparql.core.optimizer.optimizer import RULES, optimize
from csparql.core.optimizer.statistics import NO_STATISTICS, SourceStatistics

__all__ = ["RULES", "optimize", "SourceStatistics", "NO_STATISTICS"]
