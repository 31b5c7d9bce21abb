"""Tests of csparql.spark: the compiler's property paths and entailment regimes on a real SparkSession."""
