"""Tests of csparql.cli: what a user meets on the command line."""
