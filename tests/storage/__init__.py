"""Tests of csparql.storage: the storage contract, Delta access, failures of the machine and of stored data, vacuum."""
