"""W3C query evaluation tests the conformance harness does not run, each with its reason.

Keys are test names as ``conformance.w3c`` builds them: ``suite/folder/local-name`` of the manifest entry.
``test_totals.py`` checks that every key names a real test and every reason is given.
"""

EXCLUDED: dict[str, str] = {
}
